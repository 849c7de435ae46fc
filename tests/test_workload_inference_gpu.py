"""`workload load` and `workload kvcache` on a real GPU: every path lands each tensor's exact bytes in GPU memory
(checked by copying them back), and the KV-cache restores run through the GPU paths in both layouts. Skipped,
with the reason, where there is no GPU."""

from __future__ import annotations

import json

import pytest
from gpu_reasons import GPU_REASON, needs_cufile

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(GPU_REASON is not None, reason=f"no GPU path here: {GPU_REASON}")]
GPU_PATHS = ["host", "bounce", "bounce-async", pytest.param("cufile", marks=needs_cufile)]


@pytest.mark.parametrize("path", GPU_PATHS)
def test_each_path_lands_every_tensor_exactly_in_gpu_memory(cli, direct_dir, path):
    from test_workload_inference import _shards

    _shards(direct_dir)
    r = cli(
        "workload",
        "load",
        "--files",
        str(direct_dir / "*.safetensors"),
        "--path",
        path,
        "--verify",
        "--split",
        "256K",
        "--format",
        "json",
    )
    assert r.code == 0, r.err
    d = json.loads(r.out)
    assert d["status"] == "ok" and d["verified"]["differ"] == 0 and d["verified"]["pieces"] == d["pieces"]
    assert [g["gpu"] for g in d["per_gpu"]] == [0]


@pytest.mark.parametrize("layout", ["block", "layer"])
@pytest.mark.parametrize("path", ["bounce-async", pytest.param("cufile", marks=needs_cufile), "host"])
def test_kvcache_restores_into_the_gpu(cli, direct_dir, path, layout):
    r = cli(
        "workload",
        "kvcache",
        "--model",
        "custom",
        "--layers",
        "4",
        "--kv-heads",
        "8",
        "--head-dim",
        "128",
        "--cache-chunks",
        "16",
        "--prompt-tokens",
        "2048",
        "-c",
        "2",
        "-n",
        "6",
        "--layout",
        layout,
        "--path",
        path,
        "--dir",
        str(direct_dir),
        "--format",
        "json",
    )
    assert r.code == 0, r.err
    d = json.loads(r.out)
    assert d["status"] == "ok" and d["requests"] == 6 and d["restore_p50_s"] > 0
    assert [g["gpu"] for g in d["per_gpu"]] == ([None] if path == "host" else [0])
    if path == "host":
        assert "pinned host memory" in " ".join(d["labels"])


async def test_the_inference_view_restores_into_the_gpu_by_default(direct_dir, monkeypatch):
    """The console on a GPU machine: the form's empty path means bounce-async, and the chunks land on GPU 0."""
    from tui_helpers import Messages, paste, retype, screen_text, wait_for

    from xferscope.app.app import XferscopeApp
    from xferscope.app.messages import WorkloadEnded
    from xferscope.app.screens.workload_run import WorkloadScreen
    from xferscope.commands.tui import console_options

    monkeypatch.setattr("xferscope.workloads.inference.kvcache_data.DEFAULT_CACHE_BYTES", 256 << 20)
    app = XferscopeApp(console_options(directory=str(direct_dir)))
    messages = Messages()
    async with app.run_test(size=(160, 50), message_hook=messages) as pilot:
        await pilot.press("i")
        await wait_for(pilot, lambda: isinstance(app.screen, WorkloadScreen) and app.screen.view.name == "inference")
        for selector, text in (("#inf-model", "llama3.2-1b"), ("#inf-prompt", "2048"), ("#inf-seconds", "2")):
            await retype(pilot, selector, text)
        await paste(pilot, "#inf-target", str(direct_dir))
        await pilot.press("escape", "r")
        await wait_for(pilot, lambda: messages.of(WorkloadEnded), timeout=120)
        await wait_for(pilot, lambda: "restored" in screen_text(app))
    [result] = [m.result for m in messages.of(WorkloadEnded)]
    assert result.status == "ok" and result.spec.path == "bounce-async" and result.requests > 0
    assert [g.gpu for g in result.per_gpu] == [0]
