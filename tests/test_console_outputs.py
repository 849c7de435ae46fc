"""The console's export says where the CSV went or why it could not be written, and the session goes on;
the setup's GPU line, path order and free-space refusal, and the GPU panel while a run prepares."""

from __future__ import annotations

import os
import re

import pytest
from textual.app import App
from tui_helpers import Messages, make_app, notified, screen_text, until_shown, wait_for

from xferscope import target as targets
from xferscope.app.app import ConsoleOptions, Machine, XferscopeApp
from xferscope.app.messages import BatchFinished, SnapshotExported
from xferscope.app.session import RunRecord
from xferscope.app.setup_model import FormValues, no_gpu_text, path_order
from xferscope.app.widgets.gpu import GpuPanel
from xferscope.commands.tui import console_options
from xferscope.errors import EnvironmentProblem
from xferscope.safe_write import TEMP_SUFFIX, TEST_ERROR_ENV
from xferscope.spec import PATHS, RunSpec


async def test_export_that_cannot_be_written_says_why_and_the_session_goes_on(direct_dir, monkeypatch):
    app = make_app(direct_dir, duration="0.5")
    msgs = Messages()
    async with app.run_test(message_hook=msgs, notifications=True) as pilot:
        await pilot.press("r")
        await wait_for(pilot, lambda: msgs.of(BatchFinished))
        monkeypatch.setenv(TEST_ERROR_ENV, "xferscope-*-series.csv=ENOSPC")  # a full disk
        await pilot.press("e")
        await wait_for(pilot, lambda: any(n.startswith("CSV snapshot not written") for n in notified(msgs)))
        [refused] = [n for n in notified(msgs) if n.startswith("CSV snapshot not written")]
        monkeypatch.delenv(TEST_ERROR_ENV)
        await pilot.press("e")  # room again: the same session exports
        await wait_for(pilot, lambda: msgs.of(SnapshotExported))
        await wait_for(pilot, lambda: any(n.startswith("CSV snapshot written") for n in notified(msgs)))
    series = re.escape(str(direct_dir)) + r"/xferscope-[-0-9]+-series\.csv"
    assert re.search(r"could not write " + series + ": no space left on device", refused), refused
    paths = msgs.of(SnapshotExported)[0].paths
    assert len(paths) == 2 and all(os.path.exists(p) for p in paths)
    assert not [n for n in os.listdir(direct_dir) if n.endswith(TEMP_SUFFIX)]


async def test_setup_says_no_gpu_once(no_gpu, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    app = XferscopeApp(console_options(duration=1.0))
    async with app.run_test() as pilot:
        text = await until_shown(pilot, "no GPU (NVML")
        line = str(app.setup_screen.query_one("#gpu").render())
    # NVML is asked in a process of its own, where the fixture's XFERSCOPE_NO_GPU hides the GPUs
    assert line.startswith("no GPU (NVML") and line.count("no GPU") == 1, line
    assert "no GPU (NVML" in text and "no GPU (no GPU" not in " ".join(text.split()), text


def test_no_gpu_text():
    assert no_gpu_text("no GPU (NVML sees none)") == "no GPU (NVML sees none)"
    assert no_gpu_text("cuInit failed") == "no GPU (cuInit failed)"
    assert no_gpu_text("") == "no GPU"


async def test_setup_lists_paths_in_the_order_they_run(direct_dir):
    every_path = dict.fromkeys(PATHS)  # as a machine where every path can run
    form = FormValues(paths=["bounce", "host"], duration="1", size="16M", typed_path=str(direct_dir))
    app = XferscopeApp(ConsoleOptions(form, Machine([], "", every_path), export_to=str(direct_dir)))
    async with app.run_test(size=(100, 30)) as pilot:
        await until_shown(pilot, "Transfer paths", *PATHS)
        listed = list(
            re.findall(
                r"\b(" + "|".join(map(re.escape, sorted(PATHS, key=len, reverse=True))) + r")\b",
                screen_text(app).split("Transfer paths")[1],
            )
        )
        form_widget = app.setup_screen.form
        first = form_widget.values().paths
        form_widget.query_one("#paths").select("cufile")
        await wait_for(pilot, lambda: "cufile" in form_widget.values().paths)
        then = form_widget.values().paths
    order = list(dict.fromkeys(listed))
    assert order[:2] == ["bounce", "host"] and set(order) == set(PATHS), listed
    assert first == ["bounce", "host"]
    assert then == [p for p in order if p in ("bounce", "host", "cufile")]  # as listed, top to bottom
    assert path_order(["bounce", "host"])[:2] == ["bounce", "host"]


class _PanelApp(App):
    def compose(self):
        yield GpuPanel(id="gpu")


async def test_gpu_panel_does_not_call_nvml_missing_while_a_run_prepares():
    app = _PanelApp()
    async with app.run_test() as pilot:
        panel = app.query_one(GpuPanel)
        record = RunRecord(run_id=1, spec=RunSpec(path="bounce"), state="preparing")
        panel.show(record)
        await wait_for(pilot, lambda: "preparing" in str(panel.render()))
        preparing = str(panel.render())
        record.state = "finished"
        panel.show(record)
        await wait_for(pilot, lambda: "preparing" not in str(panel.render()))
        finished = str(panel.render())
    assert "NVML not available" not in preparing and "preparing" in preparing
    assert "NVML not available" in finished  # the run ended with no GPU figure at all


def test_free_space_refusal_states_the_margin_and_why(tmp_path, monkeypatch):
    class Usage:
        free = int(52.1 * 2**20)

    monkeypatch.setattr(targets.shutil, "disk_usage", lambda path: Usage)
    spec = RunSpec(path="host", file=str(tmp_path / "x.dat"), file_size=40 << 20, buffered=True).validate()
    with pytest.raises(EnvironmentProblem) as refused:
        targets.plan(spec)
    text = str(refused.value)
    assert "the scratch file needs 40.00 MiB and 64.00 MiB more stay free beside it" in text
    assert "so that the run never fills the filesystem" in text and "104.00 MiB in all; 52.10 MiB free" in text
