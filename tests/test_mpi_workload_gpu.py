"""`workload train`, `load` and `kvcache --mpi` into GPU memory, and `workload checkpoint --mpi` from it: two ranks, each on a GPU of its
own where the host has two (`-d {local_rank}`), else both on GPU 0, by bounce-async and cufile, every rank's and
GPU's figures in the record.

Needs `mpirun`, mpi4py and a GPU; skipped with the reason elsewhere."""

from __future__ import annotations

import json
import time

import pytest
from gpu_reasons import GPU_REASON, needs_cufile
from test_mpi import MPI_CTRL_C_ENV, mpirun, mpirun_cmd, needs_mpi, wait_for_engines
from test_mpi_gpu import _gpus
from test_mpi_workload import ctrl_c, no_files_left, while_running

pytestmark = [pytest.mark.gpu, needs_mpi, pytest.mark.skipif(GPU_REASON is not None, reason=f"no GPU: {GPU_REASON}")]


def two_ranks(kind: str, path: str, args: list[str], directory, out) -> tuple[dict, bool]:
    """``workload KIND ... --mpi`` by ``path`` over two ranks, a GPU each where there are two: its record, and
    whether there were."""
    two = _gpus() >= 2
    gpu = "{local_rank}" if two else "0"
    proc = mpirun(
        2, "workload", kind, *args, "--mpi", "--path", path, "-d", gpu, "--dir", str(directory), "--json", str(out),
        timeout=240,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return json.loads(out.read_text()), two


@pytest.mark.parametrize("path", ["bounce-async", pytest.param("cufile", marks=needs_cufile)])
def test_two_ranks_train_into_their_gpus(path, direct_dir, tmp_path):
    out = tmp_path / "job.json"
    args = ["unet3d", "--compute", "gpu", "-a", "2", "--files", "32", "--sample-size", "8M", "--sample-sd", "0",
            "--batch", "2", "--computation-time", "0.02", "--steps", "6"]  # fmt: skip
    r, two = two_ranks("train", path, args, direct_dir, out)
    ranks = r["cluster"]["per_rank"]
    assert [k["gpus"] for k in ranks] == ([[0], [1]] if two else [[0], [0]])
    assert all(k["status"] == "ok" and k["au"] is not None and k["bytes_read"] > 0 for k in ranks)
    assert r["bytes_read"] == sum(k["bytes_read"] for k in ranks)
    assert r["samples_per_s"] == pytest.approx(sum(k["samples_per_s"] for k in ranks))
    by_gpu: dict[int, int] = {}
    for a in r["accelerators"]:
        by_gpu[a["gpu"]] = by_gpu.get(a["gpu"], 0) + a["bytes_read"]
    assert set(by_gpu) == ({0, 1} if two else {0}) and sum(by_gpu.values()) == r["bytes_read"]
    assert not [p for p in direct_dir.iterdir() if p.name.startswith("xferscope-")]


@pytest.mark.parametrize("path", ["bounce-async", pytest.param("cufile", marks=needs_cufile)])
def test_two_ranks_checkpoint_from_their_gpus(path, direct_dir, tmp_path):
    out = tmp_path / "job.json"
    args = ["llama3-8b", "--scale", "0.01", "--checkpoints", "2", "--rank-shift", "4", "--verify"]
    r, two = two_ranks("checkpoint", path, args, direct_dir, out)
    ranks = r["cluster"]["per_rank"]
    assert [k["gpus"] for k in ranks] == ([[0], [1]] if two else [[0], [0]])
    assert all(k["status"] == "ok" and k["save_gb_per_s"] and k["restore_gb_per_s"] for k in ranks)
    assert r["verified"] is True and r["state_on_gpu"] is True
    # each checkpoint rank read back the one 4 after it: the other rank of the job wrote it, from its GPU
    assert [k["restored_from"] for k in r["ranks"]] == [4, 5, 6, 7, 0, 1, 2, 3]
    assert [k["gpu"] for k in r["ranks"]] == ([0] * 4 + [1] * 4 if two else [0] * 8)
    for save in r["saves"]:
        assert save["bytes"] == sum(k["bytes"] for k in ranks)
    assert not [p for p in direct_dir.iterdir() if p.name.startswith("xferscope-")]


@pytest.mark.parametrize("path", ["bounce-async", pytest.param("cufile", marks=needs_cufile)])
def test_two_ranks_load_their_tensor_parallel_shares(path, direct_dir, tmp_path):
    out = tmp_path / "job.json"
    args = ["--model", "llama3.2-1b", "--layers", "4", "--share", "tp", "--verify"]
    r, two = two_ranks("load", path, args, direct_dir, out)
    ranks = r["cluster"]["per_rank"]
    assert [k["gpus"] for k in ranks] == ([[0], [1]] if two else [[0], [0]])
    assert r["verified"]["differ"] == 0 and all(k["status"] == "ok" and k["gb_per_s"] for k in ranks)
    assert r["load_s"] == pytest.approx(max(k["load_s"] for k in ranks))
    assert not [p for p in direct_dir.iterdir() if p.name.startswith("xferscope-")]


@pytest.mark.parametrize("path", ["bounce-async", pytest.param("cufile", marks=needs_cufile)])
def test_two_ranks_restore_the_jobs_requests_into_their_gpus(path, direct_dir, tmp_path):
    out = tmp_path / "job.json"
    args = ["--model", "llama3.1-8b", "--requests", "16", "--prompt-tokens", "2048-8192", "--cache-chunks", "64"]
    r, two = two_ranks("kvcache", path, args, direct_dir, out)
    ranks = r["cluster"]["per_rank"]
    assert [k["gpus"] for k in ranks] == ([[0], [1]] if two else [[0], [0]])
    assert [k["requests"] for k in ranks] == [8, 8] and r["requests"] == 16
    assert r["bytes_read"] == sum(g["bytes"] for g in r["per_gpu"])
    assert not [p for p in direct_dir.iterdir() if p.name.startswith("xferscope-")]


def test_ctrl_c_keeps_the_checkpoints_saved_from_the_gpus(direct_dir, tmp_path):
    """Ctrl-C on mpirun while the states are on the GPUs: the record is written before the launcher's kill timer
    runs out (the engine processes close after it), every rank's engine process is gone, no file is left."""
    out = tmp_path / "job.json"
    two = _gpus() >= 2
    args = ["llama3-8b", "--scale", "0.01", "--checkpoints", "40", "--every", "0.2", "--path", "bounce-async"]
    cmd = mpirun_cmd(2, "workload", "checkpoint", *args, "--mpi", "-d", "{local_rank}" if two else "0",
                     "--dir", str(direct_dir), "--json", str(out))  # fmt: skip
    engines: list = []

    def saving(proc, ranks: int):
        serving = "checkpoint_process:serve"
        found = wait_for_engines(proc, ranks, lambda p: p.io_counters().write_bytes >= 64 << 20, serving)
        engines.extend(found.values())
        return found

    _, err = while_running(cmd, MPI_CTRL_C_ENV, lambda proc: ctrl_c(proc, saving))
    assert out.exists(), err
    r = json.loads(out.read_text())
    assert r["status"] == "interrupted", err
    assert r["saves"] and all(k["status"] == "interrupted" for k in r["cluster"]["per_rank"])
    assert no_files_left(direct_dir)
    # each engine process ends (with its GPU memory): closed by its rank, or by itself where its rank was killed
    deadline = time.monotonic() + 30
    while [p for p in engines if p.is_running() and p.status() != "zombie"]:
        assert time.monotonic() < deadline, "an engine process of the job outlived it"
        time.sleep(0.05)
    assert len(engines) == 2
