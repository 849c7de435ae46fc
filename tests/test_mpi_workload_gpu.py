"""`workload train --mpi` into GPU memory: two ranks, each on a GPU of its own where the host has two
(`-d {local_rank}`), else both on GPU 0, by bounce-async and cufile, every rank's and GPU's figures in the record.

Needs `mpirun`, mpi4py and a GPU; skipped with the reason elsewhere."""

from __future__ import annotations

import json

import pytest
from test_mpi import mpirun, needs_mpi
from test_mpi_gpu import CUFILE_REASON, GPU_REASON, _gpus

pytestmark = [pytest.mark.gpu, needs_mpi, pytest.mark.skipif(GPU_REASON is not None, reason=f"no GPU: {GPU_REASON}")]
needs_cufile = pytest.mark.skipif(CUFILE_REASON is not None, reason=f"cuFile unavailable: {CUFILE_REASON}")


@pytest.mark.parametrize("path", ["bounce-async", pytest.param("cufile", marks=needs_cufile)])
def test_two_ranks_train_into_their_gpus(path, direct_dir, tmp_path):
    out = tmp_path / "job.json"
    two = _gpus() >= 2
    proc = mpirun(
        2,
        "workload",
        "train",
        "unet3d",
        "--mpi",
        "--path",
        path,
        "--compute",
        "gpu",
        "-a",
        "2",
        "-d",
        "{local_rank}" if two else "0",
        "--files",
        "32",
        "--sample-size",
        "8M",
        "--sample-sd",
        "0",
        "--batch",
        "2",
        "--computation-time",
        "0.02",
        "--steps",
        "6",
        "--dir",
        str(direct_dir),
        "--json",
        str(out),
        timeout=240,
    )
    assert proc.returncode == 0, proc.stderr
    r = json.loads(out.read_text())
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
