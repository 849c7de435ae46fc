"""Two MPI ranks on a host with two GPUs: each rank takes a GPU of its own, on the bounce and cufile paths,
and a path one rank's host cannot run is skipped in a replay instead of ending it.

Needs `mpirun`, mpi4py and two GPUs; skipped with the reason elsewhere."""

from __future__ import annotations

import json

import pytest
from gpu_reasons import GPU_REASON, needs_cufile
from test_mpi import MPI_ENV, mpirun, mpirun_cmd, needs_mpi, rank_dirs


def _gpus() -> int:
    if GPU_REASON:
        return 0
    from xferscope.gpus import gpu_count

    return gpu_count()[0]


pytestmark = [
    pytest.mark.gpu,
    needs_mpi,
    pytest.mark.skipif(_gpus() < 2, reason=f"needs two GPUs (here: {GPU_REASON or _gpus()})"),
]


@pytest.mark.parametrize("path", ["bounce", pytest.param("cufile", marks=needs_cufile)])
def test_two_ranks_one_gpu_each(path, direct_dir, tmp_path):
    out = tmp_path / "run.json"
    proc = mpirun(
        2,
        "run",
        "--mpi",
        "--path",
        path,
        "--dir",
        rank_dirs(direct_dir, 2),
        "-s",
        "256M",
        "--bs",
        "1M",
        "-w",
        "2",
        "-T",
        "2",
        "--json",
        str(out),
        timeout=180,
    )
    assert proc.returncode == 0, proc.stderr
    data = json.loads(out.read_text())
    rows = data["environment"]["cluster"]["per_rank"]
    assert [row["gpus"] for row in rows] == [[0], [1]]  # local rank i takes GPU i
    assert all(row["status"] == "ok" and row["bytes"] > 0 for row in rows)
    assert data["bytes"] == sum(row["bytes"] for row in rows)
    assert set(data["per_gpu"]) == {"0", "1"} and all(g["bytes"] > 0 for g in data["per_gpu"].values())
    assert sum(g["bytes"] for g in data["per_gpu"].values()) == data["bytes"]


def test_replay_skips_a_path_that_one_host_cannot_run(direct_dir, tmp_path):
    """Rank 1 sees no GPU (as a host without one): its bounce points are skipped with its reason, host runs."""
    import subprocess

    profile = tmp_path / "mixed.toml"
    profile.write_text('name = "mixed"\nduration = 0.5\n[base]\nfile_size = "64M"\n[grid]\npath = ["bounce", "host"]\n')
    results = tmp_path / "mixed.json"
    args = ["replay", str(profile), "--mpi", "--results", str(results), "--dir", rank_dirs(direct_dir, 2)]
    base = mpirun_cmd(1, *args)
    launcher, program = base[: base.index("-np")], base[base.index("-np") + 2 :]
    # one job, two programs: rank 1 runs where CUDA shows no GPU
    cmd = [*launcher, "-np", "1", *program, ":", "-np", "1", "-x", "CUDA_VISIBLE_DEVICES=", *program]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=180, env=MPI_ENV)
    assert proc.returncode == 0, proc.stderr
    points = {p["label"].split()[0]: p for p in json.loads(results.read_text())["points"]}
    assert points["bounce"]["status"] == "skipped" and "rank 1 on " in points["bounce"]["reason"], points["bounce"]
    assert points["host"]["status"] == "done"
    assert "Traceback" not in proc.stderr
