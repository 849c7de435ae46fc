"""The console's Workload view (w): a training run on the host path with a bar of AU per accelerator, stopped
with x, and bad form values explained; through Textual's pilot on real files."""

from __future__ import annotations

import os

from rich.text import Text
from tui_helpers import Messages, held_text, make_app, paste, retype, screen_text, wait_for

from xferscope.app.messages import WorkloadEnded, WorkloadTicked
from xferscope.app.screens.workload_run import WorkloadScreen
from xferscope.workloads.train.console import WorkloadFormValues, au_bar, build_spec


async def _fill(pilot, target, seconds: str, files: str = "40") -> None:
    for selector, text in (
        ("#wl-accelerators", "2"),
        ("#wl-files", files),
        ("#wl-seconds", seconds),
    ):
        await retype(pilot, selector, text)
    await paste(pilot, "#wl-target", str(target))


async def test_a_training_run_shows_a_bar_per_accelerator_then_its_figures(direct_dir, tmp_path, no_gpu):
    sets = direct_dir / "sets"
    sets.mkdir()
    messages = Messages()
    app = make_app(tmp_path)
    async with app.run_test(size=(120, 40), message_hook=messages) as pilot:
        await pilot.press("w")
        await wait_for(pilot, lambda: "workload train · idle" in screen_text(app))
        await _fill(pilot, sets, "2")
        await pilot.press("escape", "r")
        await wait_for(pilot, lambda: messages.of(WorkloadEnded), timeout=120)
        await wait_for(pilot, lambda: "workload train · finished" in (t := screen_text(app)) and "against" in t)
        text = screen_text(app)
        rows = app.screen.query_one("#wl-table").row_count
        session_rows = app.screen.query_one("#wl-session").row_count
    assert session_rows == 1, "the run joins the session's ranking"
    assert messages.of(WorkloadTicked), "the run's ticks arrive while it runs"
    [result] = [m.result for m in messages.of(WorkloadEnded)]
    assert result.status == "ok" and len(result.accelerators) == 2
    assert rows == 2
    assert "cosmoflow x2 through host, compute sleep" in text
    assert "|" in text and ("█" in text or "·" in text), "a bar with the threshold marked"
    assert f"AU {100 * result.au:.1f}% against 70.0%" in text
    assert os.listdir(sets) == [], "the data set is gone"


async def _start_a_long_run(pilot, app, sets, messages, ticks: int) -> None:
    """A two-minute training run started from the form, ``ticks`` of it arrived."""
    await pilot.press("w")
    await wait_for(pilot, lambda: isinstance(app.screen, WorkloadScreen) and app.screen.view.name == "workload")
    await _fill(pilot, sets, "120")
    await pilot.press("escape", "r")
    await wait_for(pilot, lambda: len(messages.of(WorkloadTicked)) >= ticks, timeout=60)


async def test_x_stops_the_run_and_keeps_its_steps(direct_dir, tmp_path, no_gpu):
    sets = direct_dir / "sets"
    sets.mkdir()
    messages = Messages()
    app = make_app(tmp_path)
    async with app.run_test(size=(120, 40), message_hook=messages) as pilot:
        await _start_a_long_run(pilot, app, sets, messages, ticks=2)
        await pilot.press("x")
        await wait_for(pilot, lambda: messages.of(WorkloadEnded), timeout=60)
        await wait_for(pilot, lambda: "workload train · stopped" in (t := screen_text(app)) and "INTERRUPTED" in t)
        text = screen_text(app)
    [result] = [m.result for m in messages.of(WorkloadEnded)]
    assert result.status == "interrupted" and result.seconds < 60
    assert "INTERRUPTED" in text
    assert os.listdir(sets) == []


async def test_q_during_a_run_stops_it_and_removes_its_data_set_before_the_console_closes(direct_dir, tmp_path, no_gpu):
    sets = direct_dir / "sets"
    sets.mkdir()
    messages = Messages()
    app = make_app(tmp_path)
    async with app.run_test(size=(120, 40), message_hook=messages) as pilot:
        await _start_a_long_run(pilot, app, sets, messages, ticks=1)
        assert app.working["workload"].busy
        await pilot.press("q")
        await wait_for(pilot, lambda: not app.is_running, timeout=60)
    assert not app.working["workload"].busy
    assert os.listdir(sets) == [], "the data set is gone before the console closed"


async def test_bad_form_values_are_explained_and_nothing_starts(tmp_path, no_gpu):
    app = make_app(tmp_path)
    async with app.run_test(size=(120, 32)) as pilot:
        await pilot.press("w")
        await wait_for(pilot, lambda: isinstance(app.screen, WorkloadScreen) and app.screen.view.name == "workload")
        await retype(pilot, "#wl-preset", "bert")
        await pilot.press("escape", "r")
        await wait_for(pilot, lambda: "no preset 'bert'; choose one of unet3d" in screen_text(app))
        assert "workload train · idle" in screen_text(app)


def test_the_form_defaults_follow_the_machine():
    assert build_spec(WorkloadFormValues(), has_gpu=False).path == "host"
    gpu = build_spec(WorkloadFormValues(), has_gpu=True)
    assert (gpu.path, gpu.compute) == ("bounce-async", "gpu")


def test_the_bar_marks_the_threshold_and_colours_by_it():
    bar = Text.assemble(*au_bar(0.5, 0.9, width=10))
    assert bar.plain == "█████····|"
    assert bar.spans[0].style == "red"
    assert Text.assemble(*au_bar(0.95, 0.9, width=10)).plain == "█████████|"
    assert Text.assemble(*au_bar(None, 0.9, 10)).plain == "·" * 10


async def test_a_dlio_summary_opens_beside_the_sessions_runs(tmp_path):
    dlio = os.path.join(os.path.dirname(__file__), "data", "dlio-summary.json")
    app = make_app(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("w")
        await wait_for(pilot, lambda: isinstance(app.screen, WorkloadScreen) and app.screen.view.name == "workload")
        await pilot.press("o")
        await wait_for(pilot, lambda: "Open a saved training run" in screen_text(app))
        await paste(pilot, "#prompt-input", str(tmp_path / "missing.json"))
        await pilot.press("enter")
        await wait_for(pilot, lambda: "No such file" in held_text(app, "#prompt-error"))
        await paste(pilot, "#prompt-input", dlio)
        await pilot.press("enter")
        await wait_for(pilot, lambda: "dlio-summary.json" in screen_text(app))
        rows = app.screen.query_one("#wl-session").row_count
        text = screen_text(app)
    assert rows == 1 and "92.5%" in text
