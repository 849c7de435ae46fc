"""The console's Saturation view, driven through Textual's pilot on the real host engine with a small budget."""

from __future__ import annotations

import os

from tui_helpers import Messages, held_text, make_app, notified, paste, retype, screen_text, toast_text, wait_for

from xferscope.app.app import XferscopeApp
from xferscope.app.messages import SaturationEnded, SaturationProgressed
from xferscope.app.saturation_model import knee_marks
from xferscope.app.screens.saturation import SaturationScreen
from xferscope.commands.tui import console_options
from xferscope.saturate.execute import PointMeasured


async def _fill(pilot, target) -> None:
    for selector, text in (
        ("#sat-bs", "64K"),
        ("#sat-workers", "1"),
        ("#sat-qd", "2"),
        ("#sat-seconds", "0.2"),
        ("#sat-rounds", "3"),
        ("#sat-size", "8M"),
    ):
        await retype(pilot, selector, text)
    await paste(pilot, "#sat-target", str(target))


async def test_points_arrive_on_the_chart_the_knee_is_marked_and_the_verdict_shown(direct_dir, tmp_path):
    run_dir = direct_dir / "sat"
    run_dir.mkdir()
    messages = Messages()
    app = make_app(tmp_path)
    async with app.run_test(size=(120, 40), message_hook=messages) as pilot:
        await pilot.press("t")
        await wait_for(pilot, lambda: "saturation · idle" in screen_text(app))
        await _fill(pilot, run_dir)
        await pilot.press("escape", "r")
        await wait_for(pilot, lambda: messages.of(SaturationEnded), timeout=120)
        # the title is one fixed line and shows "finished" a layout pass before the verdicts, which grow to fit
        await wait_for(pilot, lambda: "saturation · finished" in screen_text(app) and "→" in screen_text(app))
        text = screen_text(app)
        rows = app.screen.query_one("#sat-table").row_count
    measured = [m.event for m in messages.of(SaturationProgressed) if isinstance(m.event, PointMeasured)]
    [outcome] = [m.outcome for m in messages.of(SaturationEnded)]
    assert outcome.stopped is None and not outcome.failed, (outcome.stopped, [o.found.stopped for o in outcome.series])
    assert len(measured) >= 6, "every run arrives as it is measured (3 rounds of two neighbours at least)"
    knee = outcome.series[0].found.knee
    assert "saturation · finished" in text and "host 64K" in text
    assert f"knee {knee.short}" in text, "the legend names the knee"
    assert "▲" in text, "the knee is marked under the chart"
    assert "64K: host plateau" in text and "→" in text, "the verdict line"
    assert "in flight" in text, "the x axis is the concurrency"
    assert rows == outcome.series[0].points_measured
    assert os.listdir(run_dir) == [], "its scratch files are gone"


async def test_bad_form_values_are_explained_and_nothing_starts(tmp_path):
    app = make_app(tmp_path)
    async with app.run_test(size=(100, 32)) as pilot:
        await pilot.press("t")
        await wait_for(pilot, lambda: isinstance(app.screen, SaturationScreen))
        await retype(pilot, "#sat-workers", "0")
        await pilot.press("escape", "r")
        await wait_for(pilot, lambda: "max-workers: must be 1..1024" in screen_text(app))
        text = screen_text(app)
        assert "saturation · idle" in text


async def test_a_saved_saturation_opens_in_the_view(cli, direct_dir, tmp_path):
    saved = tmp_path / "sat.json"
    r = cli(
        "saturate",
        "--path",
        "host",
        "--bs",
        "64K",
        "--max-workers",
        "2",
        "--max-qd",
        "1",
        "--max-rounds",
        "3",
        "-T",
        "0.2",
        "-s",
        "8M",
        "--dir",
        str(direct_dir),
        "--json",
        str(saved),
    )
    assert r.code == 0, r.err
    app = make_app(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("t")
        await wait_for(pilot, lambda: isinstance(app.screen, SaturationScreen))
        await pilot.press("o")
        await wait_for(pilot, lambda: "Open a saved saturation" in screen_text(app))
        await paste(pilot, "#prompt-input", str(tmp_path / "missing.json"))
        await pilot.press("enter")
        await wait_for(pilot, lambda: "no such file" in held_text(app, "#prompt-error"))
        await paste(pilot, "#prompt-input", str(saved))
        await pilot.press("enter")
        await wait_for(pilot, lambda: "saturation · saved" in screen_text(app) and "→" in screen_text(app))
        text = screen_text(app)
    assert "saturation · saved" in text and "64K: host plateau" in text and "▲" in text


async def test_a_saturate_profile_opens_on_the_view_with_its_plan(tmp_path, monkeypatch, cli):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    saved = cli(
        "saturate",
        "--path",
        "host",
        "--bs",
        "64K,1M",
        "--max-workers",
        "8",
        "-T",
        "0.5",
        "--save-profile",
        "knees",
        env={"XDG_DATA_HOME": str(tmp_path / "data")},
    )
    assert saved.code == 0, saved.err
    app = XferscopeApp(console_options(profile="knees"))
    async with app.run_test(size=(100, 32)) as pilot:
        await wait_for(
            pilot,
            # query, not query_one: the screen is current a moment before its form is mounted
            lambda: (
                isinstance(app.screen, SaturationScreen)
                and any(w.value == "64K,1M" for w in app.screen.query("#sat-bs"))
            ),
        )
        screen = app.screen
        assert screen.query_one("#sat-workers").value == "8"
        assert screen.query_one("#sat-seconds").value == "0.5"
        assert "saturation · idle" in screen_text(app)


def test_knee_marks_sit_under_their_column():
    assert knee_marks([(0.0, "a"), (4.0, "b"), (10.0, "c")], (0.0, 10.0), 48, 8) == [(8, "a"), (24, "b"), (47, "c")]
    assert knee_marks([(1.0, "a")], (0.0, 0.0), 48, 8) == []


async def test_the_view_fits_80x24(tmp_path):
    app = make_app(tmp_path)
    msgs = Messages()
    # notifications on: a toast the view raised would be drawn, and the last check would fail
    async with app.run_test(notifications=True, message_hook=msgs) as pilot:
        await pilot.press("t")
        words = ("saturation", "Paths", "Rounds", "Start")  # the title, both form rows, the footer
        await wait_for(pilot, lambda: all(w in screen_text(app) for w in words))
        text = screen_text(app)
    assert notified(msgs) == [] and toast_text(text) == ""
