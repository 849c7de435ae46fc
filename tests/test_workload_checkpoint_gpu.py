"""`workload checkpoint` on a real GPU: the ranks' states in GPU memory, written by host (through pageable memory and
the page cache), bounce, bounce-async and cufile (O_DIRECT), fsync per file, with --async from a copy, evicted,
read back into GPU memory by the same path, every byte checked. Skipped, with the reason, where there is no GPU."""

from __future__ import annotations

import json
import os

import pytest
from gpu_reasons import GPU_REASON, needs_cufile

from xferscope.gpus import gpu_count
from xferscope.workloads.checkpoint.model import checkpoint_model
from xferscope.workloads.checkpoint.plan import CheckpointSpec

GPUS = 0 if GPU_REASON else gpu_count()[0]
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(GPU_REASON is not None, reason=f"no GPU path here: {GPU_REASON}")]
PATHS = ["bounce", "bounce-async", pytest.param("cufile", marks=needs_cufile)]
MODEL = ("custom", "--layers", "2", "--hidden", "512", "--ffn", "1536", "--vocab", "4000", "--heads", "8",
         "--kv-heads", "2", "--ranks", "4")  # fmt: skip


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("layout", ["dlio", "dcp"])
def test_each_gpu_path_saves_from_gpu_memory_and_restores_every_byte(cli, direct_dir, path, layout):
    out = direct_dir / f"{path}-{layout}.json"
    args = ["workload", "checkpoint", *MODEL, "--path", path, "--layout", layout, "--checkpoints", "2", "--verify",
            "--keep", "--dir", str(direct_dir), "--json", str(out)]  # fmt: skip
    if layout == "dcp":
        args += ["--threads", "2"]
    r = cli(*args)
    assert r.code == 0, r.err
    d = json.loads(out.read_text())
    assert d["status"] == "ok" and d["verified"] is True and d["spec"]["path"] == path
    assert d["labels"][0].startswith(f"GPU memory, written by {path}")
    kept = d["environment"]["kept_in"]
    for rank in d["spec"]["ranks_here"]:
        for f in rank["files"]:  # whole, the unaligned tails too
            assert os.path.getsize(os.path.join(kept, "global_epoch1_step2", f["name"])) == f["bytes"]
    held = d["resident_share_at_restore"]
    assert held is None or held <= 0.01


@pytest.mark.parametrize("path", PATHS)
def test_verify_fails_on_a_byte_flipped_on_disk(direct_dir, monkeypatch, path):
    from test_workload_checkpoint import run_with_a_flipped_byte

    from xferscope.workloads.checkpoint import checkpoint_process as cp

    cm = checkpoint_model("custom", 2, layers=2, hidden=512, ffn=1536, vocab=4000, heads=8, kv_heads=2)
    plan = CheckpointSpec(cm, checkpoints=1, directory=str(direct_dir), path=path).plan()
    job = cp.CheckpointJob(str(direct_dir), plan.ranks, 1, "dlio", verify=True, path=path, on_gpu=plan.state_on_gpu)
    error = run_with_a_flipped_byte(monkeypatch, job, 0, 9)  # rank 0's first file, 9 bytes in
    assert error is not None and "rank 0 read rank 0's checkpoint back wrong at byte 9" in str(error)


@pytest.mark.parametrize("path", ["host", "bounce-async", pytest.param("cufile", marks=needs_cufile)])
def test_async_blocks_the_gpus_for_the_copy_only_and_restores_every_byte(cli, direct_dir, path):
    out = direct_dir / f"{path}-async.json"
    r = cli("workload", "checkpoint", *MODEL, "--path", path, "--async", "--every", "0.05", "--checkpoints", "3",
            "--verify", "--rank-shift", "1", "--dir", str(direct_dir), "--json", str(out))  # fmt: skip
    assert r.code == 0, r.err
    d = json.loads(out.read_text())
    assert d["status"] == "ok" and d["verified"] is True and d["asynchronous"] is True and d["state_on_gpu"] is True
    assert all(0 < s["blocked_seconds"] < s["seconds"] for s in d["saves"])
    assert all(f["blocked_seconds"] > 0 and f["gpu"] == 0 for f in d["ranks"])
    assert "GPUs blocked" in r.out
    assert sorted(os.listdir(direct_dir)) == [out.name]


def test_the_host_path_writes_from_gpu_memory_through_pageable_memory(cli, direct_dir):
    out = direct_dir / "host.json"
    r = cli("workload", "checkpoint", *MODEL, "--checkpoints", "2", "--verify", "--dir", str(direct_dir),
            "--json", str(out))  # fmt: skip
    assert r.code == 0, r.err
    d = json.loads(out.read_text())
    assert d["status"] == "ok" and d["verified"] is True and d["state_on_gpu"] is True
    assert d["labels"][0].startswith("GPU memory, copied to pageable host memory")


@pytest.mark.skipif(GPUS < 2, reason=f"needs 2 GPUs or more, this machine has {GPUS}")
@pytest.mark.parametrize("path", ["bounce-async", pytest.param("cufile", marks=needs_cufile)])
def test_ranks_go_round_robin_over_the_gpus_with_figures_for_each(cli, direct_dir, path):
    n = GPUS
    out = direct_dir / "gpus.json"
    every = ",".join(str(i) for i in range(n))
    r = cli("workload", "checkpoint", *MODEL[:-1], "8", "--path", path, "--gpu", every, "--checkpoints", "1",
            "--verify", "--dir", str(direct_dir), "--json", str(out))  # fmt: skip
    assert r.code == 0, r.err
    d = json.loads(out.read_text())
    assert [f["gpu"] for f in d["ranks"]] == [i % n for i in range(8)] and d["verified"] is True
    assert "each GPU" in r.out
