"""The console on a machine with a GPU: the picker lists the real GPUs (NVML), the embedded default runs
host and every GPU path side by side, and the GPU panel shows what NVML measured during a bounce run.
Skipped, with the reason, where there is no GPU."""

from __future__ import annotations

import re

import pytest
from tui_helpers import Messages, screen_text, until_shown, wait_for

from xferscope.app.app import XferscopeApp
from xferscope.app.messages import BatchFinished, RunFailedMessage, RunFinished, SamplesArrived
from xferscope.commands.tui import console_options
from xferscope.engines.registry import unavailable_reason

GPU_REASON = unavailable_reason("bounce")
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(GPU_REASON is not None, reason=f"no GPU path here: {GPU_REASON}")]


async def test_setup_offers_the_real_gpus_and_the_gpu_paths(direct_dir):
    options = console_options(directory=str(direct_dir))
    assert options.machine.gpus, "NVML lists this machine's GPUs"
    assert {"host", "bounce", "bounce-async"} <= set(options.values.paths)
    app = XferscopeApp(options)
    label = options.machine.gpus[0][0]
    async with app.run_test(size=(160, 50)) as pilot:
        text = await until_shown(pilot, label.split(" · ")[0])
    assert re.match(r"0: \S.* · PCIe gen\d x\d+", label), label
    assert label.split(" · ")[0] in text, text  # the picker shows GPU 0 by name
    assert "no GPU" not in text


async def test_embedded_default_compares_host_with_the_gpu_paths(direct_dir):
    """`xferscope tui --start` on a GPU machine: host, then each GPU path that can run here, one after another."""
    # runs of 0.3 s: up to 9 rounds of every path (54 runs) while a verdict is undecided
    options = console_options(start=True, duration=0.3, size="64M", directory=str(direct_dir))
    app = XferscopeApp(options)
    msgs = Messages()
    async with app.run_test(size=(160, 50), message_hook=msgs) as pilot:
        await wait_for(pilot, lambda: msgs.of(BatchFinished), timeout=300)
        await pilot.press("c")

        def every_path_has_its_row() -> bool:
            text = screen_text(app)
            return all(re.search(rf"\d\s+{re.escape(p)}\b.*\d\.\d\d", text) for p in options.values.paths)

        await wait_for(pilot, every_path_has_its_row)
        table = screen_text(app)
    failed = [(m.record.spec.path, m.reason) for m in msgs.of(RunFailedMessage)]
    assert not failed, failed
    finished = {m.record.spec.path: m.result for m in msgs.of(RunFinished)}
    assert set(finished) == set(options.values.paths)
    assert all(r.status == "ok" and r.bytes > 0 for r in finished.values())
    for path in options.values.paths:
        assert re.search(rf"\d\s+{re.escape(path)}\b.*\d\.\d\d", table), table  # a row with its ratio
    if "cufile" in finished:  # its mode is measured and shown, never left implicit
        assert finished["cufile"].environment.get("cufile_mode")


async def test_gpu_panel_shows_measured_pcie_traffic(direct_dir):
    options = console_options(start=True, path="bounce", duration=2.0, size="256M", bs="4M", directory=str(direct_dir))
    app = XferscopeApp(options)
    msgs = Messages()
    async with app.run_test(size=(160, 50), message_hook=msgs) as pilot:
        await wait_for(
            pilot,
            lambda: any(s.gpu and s.gpu[0].get("pcie_rx_mb_s") for m in msgs.of(SamplesArrived) for s in m.samples),
            timeout=60,
        )
        await wait_for(pilot, lambda: re.search(r"PCIe RX [\d.]*[1-9][\d.]* (GB|MB)/s", screen_text(app)))
        live = screen_text(app)
        await wait_for(pilot, lambda: msgs.of(RunFinished), timeout=60)
    assert re.search(r"GPU0 \S", live), live
    assert re.search(r"util\s+[\d.]+%", live) and re.search(r"mem\s+[\d.]+ of \d+ GiB", live), live
    rx = re.search(r"PCIe RX ([\d.]+) (GB|MB)/s", live)
    assert rx and float(rx.group(1)) > 0, live
    result = msgs.of(RunFinished)[0].result
    assert result.status == "ok" and result.bytes > 0
