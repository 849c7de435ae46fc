"""`xferscope saturate` on a real GPU: a GPU path's verdict holds its plateau against the host O_DIRECT plateau
(searched first, the storage reference), the measured PCIe copy ceiling with NVML's RX, and the CPU. Skipped,
with the reason, where there is no GPU."""

from __future__ import annotations

import json

import pytest

from xferscope.engines.registry import unavailable_reason

GPU_REASON = unavailable_reason("bounce")
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(GPU_REASON is not None, reason=f"no GPU path here: {GPU_REASON}")]


def test_a_gpu_path_is_held_against_storage_pcie_and_cpu(cli, direct_dir, tmp_path):
    out = tmp_path / "gpu.json"
    r = cli(
        "saturate",
        "--path",
        "bounce-async",
        "--bs",
        "1M",
        "--max-workers",
        "2",
        "--max-rounds",
        "3",
        "-T",
        "0.5",
        "-s",
        "64M",
        "--dir",
        str(direct_dir),
        "--json",
        str(out),
        timeout=300,
    )
    assert r.code == 0, r.err
    data = json.loads(out.read_text())
    host, gpu = data["series"]
    assert host["path"] == "host" and host["role"] == "storage reference"
    assert gpu["path"] == "bounce-async" and gpu["grid_points"] == 2
    evidence = gpu["evidence"]
    assert evidence["storage_gib_s"] == pytest.approx(host["figures"]["plateau_gib_s"])
    assert evidence["pcie_ceiling_gb_s"] > 1 and evidence["pcie_mb_s"] is not None, "ceiling and NVML RX"
    assert "of storage (host " in gpu["verdict_line"] and "PCIe " in gpu["verdict_line"]
    assert gpu["bottleneck"]["kind"] in ("storage", "PCIe", "CPU", "path overhead")


def test_gpu_sets_are_searched_each(cli, direct_dir):
    from xferscope.gpus import gpu_count

    if gpu_count()[0] < 2:
        pytest.skip("needs two GPUs")
    r = cli(
        "saturate",
        "--path",
        "bounce",
        "--bs",
        "1M",
        "--max-workers",
        "2",
        "--max-rounds",
        "3",
        "-T",
        "0.3",
        "-s",
        "32M",
        "--dir",
        str(direct_dir),
        "--storage",
        "none",
        "--gpu",
        "0",
        "--gpu",
        "0,1",
        "--format",
        "json",
        timeout=300,
    )
    assert r.code == 0, r.err
    series = json.loads(r.out)["series"]
    assert [s["gpus"] for s in series] == [[0], [0, 1]]
