"""Everyday console use: profiles, saved results, the memory sweep screen, help and the command palette."""

from __future__ import annotations

import csv
import os
from pathlib import Path

from tui_helpers import (
    Messages,
    held_text,
    make_app,
    memory_view,
    notified,
    on_screen,
    paste,
    retype,
    screen_text,
    until_shown,
    wait_for,
)

from xferscope.app.app import XferscopeApp
from xferscope.app.messages import (
    BatchFinished,
    MemPointMeasured,
    MemSweepFinished,
    ResultsLoaded,
    RunStarted,
    SnapshotExported,
)
from xferscope.commands.tui import console_options
from xferscope.export import result_to_dict, write_json
from xferscope.run.runner import EngineRun
from xferscope.spec import RunSpec


async def test_save_the_setup_as_a_profile_and_open_it_again(direct_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    app = make_app(direct_dir)
    msgs = Messages()
    async with app.run_test(notifications=True, message_hook=msgs) as pilot:
        await retype(pilot, "#bs", "64K")
        await retype(pilot, "#workers", "3")
        await pilot.press("escape", "p")
        await wait_for(pilot, lambda: bool(app.screen.query("#prompt-input")))
        await paste(pilot, "#prompt-input", "bad name!")
        await pilot.press("enter")  # refused in place: the dialog stays
        await wait_for(pilot, lambda: "must be letters, digits" in held_text(app, "#prompt-error"))
        await paste(pilot, "#prompt-input", "mine-64k")
        await pilot.press("enter")
        saved = tmp_path / "data" / "xferscope" / "profiles" / "mine-64k.toml"
        await wait_for(pilot, lambda: any(n.startswith("profile mine-64k saved: ") for n in notified(msgs)))
        assert saved.exists()
        await wait_for(pilot, lambda: not app.screen.query("#prompt-input"))
        await retype(pilot, "#bs", "1M")
        await retype(pilot, "#workers", "1")
        await pilot.press("escape", "o")
        await until_shown(pilot, "Open a profile", "mine-64k", "gds-vs-bounce-random")
        await pilot.press("tab", *"mine-64k", "enter")
        await wait_for(pilot, lambda: bool(app.screen.query("#bs")) and app.screen.query_one("#bs").value == "64K")
        form = app.screen
        assert form.query_one("#bs").value == "64K" and form.query_one("#workers").value == "3"
        await until_shown(pilot, "profile mine-64k")


async def test_a_bundled_grid_profile_opens_with_its_points(direct_dir):
    options = console_options(profile="ssd-block-mix-qd16", duration=1.0)
    app = XferscopeApp(options)
    first = options.profile_points[0]
    assert len(options.profile_points) > 1 and first.iodepth == 16
    expected = (
        f"profile ssd-block-mix-qd16: {len(options.profile_points)} points",
        "run one after another",
        "Queue depth 16",
    )
    shown = []

    def all_shown() -> bool:
        """One redraw shows the profile's note and its first point in the form (they may come in turns)."""
        text = screen_text(app)
        if all(e in text for e in expected):
            shown.append(text)
        return bool(shown)

    async with app.run_test() as pilot:
        await wait_for(pilot, all_shown, timeout=60)
    text = shown[0]
    assert all(e in text for e in expected), text


async def test_saved_results_join_the_comparison(direct_dir, tmp_path):
    result = EngineRun(
        RunSpec(path="host", block_size=1 << 16, file_size=8 << 20, duration=0.3, directory=str(direct_dir))
    ).execute()
    saved = tmp_path / "old.json"
    write_json(str(saved), result_to_dict(result))
    app = make_app(direct_dir)
    msgs = Messages()
    async with app.run_test(message_hook=msgs) as pilot:
        await pilot.press("c", "o")
        await wait_for(pilot, lambda: bool(app.screen.query("#prompt-input")))
        await paste(pilot, "#prompt-input", str(tmp_path / "missing.json"))
        await pilot.press("enter")
        await until_shown(pilot, "no such file")
        await paste(pilot, "#prompt-input", str(saved))
        await pilot.press("enter")
        await wait_for(pilot, lambda: msgs.of(ResultsLoaded))
        text = await until_shown(pilot, f"{result.throughput_mib_s:.1f}", "□ 1 host read 64K w1")
    rows = [line for line in text.splitlines() if line.lstrip().startswith("1 host")]
    assert len(rows) == 1 and " 64K " in rows[0] and rows[0].rstrip().endswith("1.00 *")
    assert f"{result.throughput_mib_s:.1f}" in rows[0]
    assert "□ 1 host read 64K w1" in text  # saved results carry no time series: no curve


async def test_memory_sweep_draws_points_as_they_come(direct_dir):
    async with memory_view(direct_dir) as (app, pilot, msgs):
        await retype(pilot, "#mem-delays", "0,5000")
        await retype(pilot, "#mem-seconds", "0.1")
        await retype(pilot, "#mem-buffer", "16M")
        await retype(pilot, "#mem-stride", "65")
        await wait_for(pilot, lambda: "not a stride we measure" in held_text(app, "#mem-error"))
        await retype(pilot, "#mem-stride", "64")
        await pilot.press("escape", "r")
        await wait_for(pilot, lambda: msgs.of(MemSweepFinished), timeout=30)
        curve = [m.point for m in msgs.of(MemPointMeasured) if m.point.traffic != "idle"]
        text = await until_shown(pilot, "finished", *(f"{p.bandwidth_mb_s:.1f}" for p in curve))
        await pilot.press("e")
        await wait_for(pilot, lambda: msgs.of(SnapshotExported))
    points = [m.point for m in msgs.of(MemPointMeasured)]
    curve = [p for p in points if p.traffic != "idle"]
    assert [p.delay for p in curve] == [0, 5000]
    assert all(p.latency_ns > 0 and p.bandwidth_mb_s > 0 for p in curve)
    for p in curve:
        assert f"{p.delay:05d}" in text and f"{p.latency_ns:.2f}" in text and f"{p.bandwidth_mb_s:.1f}" in text
    assert "Inject Delay" in text and "■ R stride 64" in text and "finished" in text
    path = msgs.of(SnapshotExported)[0].paths[0]
    rows = list(csv.DictReader(Path(path).read_text().splitlines()))
    assert os.path.dirname(path) == str(direct_dir) and [r["delay"] for r in rows if r["traffic"] == "R"] == [
        "0",
        "5000",
    ]


async def test_help_and_command_palette(direct_dir):
    app = make_app(direct_dir, duration="0.5")
    msgs = Messages()
    async with app.run_test(message_hook=msgs) as pilot:
        await pilot.press("question_mark")
        help_text = await until_shown(pilot, "Keys here", "Export CSV")
        await pilot.press("escape")
        await wait_for(pilot, lambda: "Keys here" not in screen_text(app))
        await pilot.press("ctrl+p")
        from textual.command import CommandPalette

        await on_screen(pilot, CommandPalette)
        await pilot.press(*"start runs")
        await until_shown(pilot, "Start")
        await wait_for(pilot, lambda: app.screen.query("CommandList").first().option_count > 0)
        await pilot.press("enter")
        await wait_for(pilot, lambda: msgs.of(BatchFinished))
    assert "Keys here" in help_text and "Start" in help_text and "Export CSV" in help_text
    assert "ctrl+p" in help_text
    assert len(msgs.of(RunStarted)) == 1
