"""The console's Checkpoint view (k): a model's checkpoints written by the host path, each rank's bytes and the
phase live, then the run's figures and its place in the session's ranking; stopped with x; bad form values
explained. Through Textual's pilot on real files."""

from __future__ import annotations

import os

import pytest
from tui_helpers import Messages, make_app, paste, retype, screen_text, wait_for

from xferscope.app.messages import WorkloadEnded, WorkloadTicked
from xferscope.app.screens.workload_run import WorkloadScreen
from xferscope.workloads.common.libraries import CHECKPOINT_LIBRARIES, refusal


async def _start(pilot, app, target, checkpoints: str, path: str | None = None) -> None:
    """The view opened, the form filled (``path`` where given, a small scale, ``checkpoints``, the directory), the
    run started."""
    await pilot.press("k")
    await wait_for(pilot, lambda: "workload checkpoint · idle" in screen_text(app))
    if path is not None:
        await retype(pilot, "#ck-path", path)
    await retype(pilot, "#ck-scale", "0.0002")
    await retype(pilot, "#ck-checkpoints", checkpoints)
    await paste(pilot, "#ck-target", str(target))
    await pilot.press("escape", "r")


async def test_a_checkpoint_run_shows_each_ranks_bytes_then_its_figures(tmp_path, no_gpu):
    target = tmp_path / "ckpt"
    target.mkdir()
    messages = Messages()
    app = make_app(tmp_path)
    async with app.run_test(size=(120, 40), message_hook=messages) as pilot:
        await _start(pilot, app, target, "2")
        await wait_for(pilot, lambda: messages.of(WorkloadEnded), timeout=120)
        await wait_for(
            pilot,
            lambda: "workload checkpoint · finished" in (t := screen_text(app)) and "save (the slowest rank" in t,
        )
        text = screen_text(app)
        rows = app.screen.query_one("#ck-table").row_count
        session_rows = app.screen.query_one("#ck-session").row_count
    [result] = [m.result for m in messages.of(WorkloadEnded)]
    assert result.status == "ok" and result.verified and len(result.saves) == 2 and rows == 8
    ticks = [m.tick for m in messages.of(WorkloadTicked)]
    assert {t.phase for t in ticks} >= {"writing", "evicting", "restoring"}
    written = next(t for t in ticks if t.phase == "evicting")
    assert list(written.per_rank) == [2 * r.bytes for r in result.ranks], "each rank's bytes, as the record has them"
    assert session_rows == 1, "the run joins the session's ranking"
    assert "llama3-8b x8 ranks" in text and "save (the slowest rank, MLPerf)" in text
    assert os.listdir(tmp_path / "ckpt") == [], "the checkpoints are gone"


async def test_x_stops_the_run_and_keeps_the_checkpoints_saved(tmp_path, no_gpu):
    target = tmp_path / "ckpt"
    target.mkdir()
    messages = Messages()
    app = make_app(tmp_path)
    async with app.run_test(size=(120, 40), message_hook=messages) as pilot:
        await _start(pilot, app, target, "1000")
        await wait_for(pilot, lambda: len(messages.of(WorkloadTicked)) >= 4, timeout=60)
        await pilot.press("x")
        await wait_for(pilot, lambda: messages.of(WorkloadEnded), timeout=60)
        await wait_for(pilot, lambda: "workload checkpoint · stopped" in screen_text(app))
    [result] = [m.result for m in messages.of(WorkloadEnded)]
    assert result.status == "interrupted" and 1 <= len(result.saves) < 1000
    assert os.listdir(target) == []


async def test_bad_form_values_are_explained_and_nothing_starts(tmp_path, no_gpu):
    app = make_app(tmp_path)
    async with app.run_test(size=(120, 32)) as pilot:
        await pilot.press("k")
        await wait_for(pilot, lambda: isinstance(app.screen, WorkloadScreen) and app.screen.view.name == "checkpoint")
        await retype(pilot, "#ck-model", "llama3-9b")
        await pilot.press("escape", "r")
        await wait_for(pilot, lambda: "unknown model" in screen_text(app))
        await retype(pilot, "#ck-model", "llama3-8b")
        await retype(pilot, "#ck-save", "later")
        await wait_for(pilot, lambda: "sync, or async" in screen_text(app))
        assert "workload checkpoint · idle" in screen_text(app)


@pytest.mark.gpu  # torch, which CI does not install; the states in host memory here, so no GPU is needed
@pytest.mark.skipif(refusal(CHECKPOINT_LIBRARIES["torch-save"]) is not None, reason="torch is not installed here")
async def test_a_library_path_runs_from_the_form_a_process_a_rank(tmp_path, no_gpu):
    (tmp_path / "ckpt").mkdir()
    messages, app = Messages(), make_app(tmp_path)
    async with app.run_test(size=(120, 40), message_hook=messages) as pilot:
        await _start(pilot, app, tmp_path / "ckpt", "2", path="torch-save")
        await wait_for(pilot, lambda: messages.of(WorkloadEnded), timeout=180)
        rows = app.screen.query_one("#ck-table").row_count
    [result] = [m.result for m in messages.of(WorkloadEnded)]
    assert result.status == "ok" and result.verified and len(result.saves) == 2 and rows == 8
    assert result.library is not None and result.library.path == "torch-save"
    last = messages.of(WorkloadTicked)[-1].tick  # once every rank's process restores: each one's bytes written
    assert last.phase == "restoring" and list(last.per_rank) == [2 * r.bytes for r in result.ranks]
    assert os.listdir(tmp_path / "ckpt") == [], "the checkpoints are gone"
