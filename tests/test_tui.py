"""The console driven through Pilot with the real host engine on small temporary files."""

from __future__ import annotations

import csv
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from tui_helpers import Messages, held_text, make_app, notified, retype, screen_text, until_shown, wait_for

from xferscope.app.app import XferscopeApp
from xferscope.app.messages import (
    BatchFinished,
    RunFailedMessage,
    RunFinished,
    RunStarted,
    SamplesArrived,
    SetupRefused,
    SnapshotExported,
)
from xferscope.commands.tui import console_options

NUMBER = r"([0-9][0-9,]*\.?[0-9]*)"


def figure(text: str, pattern: str) -> float:
    """The number after ``pattern`` on the screen (fails the test when it is not there)."""
    m = re.search(pattern + r"\s+" + NUMBER, text)
    assert m, f"{pattern!r} not on screen:\n{text}"
    return float(m.group(1).replace(",", ""))


async def test_default_start_runs_the_embedded_default(monkeypatch, tmp_path):
    """`xferscope tui --start`: a scratch file in a new temporary directory, the host path, started at once."""
    monkeypatch.chdir(tmp_path)
    options = console_options(start=True, duration=0.3, size="16M")
    assert options.values.paths[0] == "host" and options.values.typed_path == ""
    app = XferscopeApp(options)
    msgs = Messages()
    async with app.run_test(message_hook=msgs) as pilot:
        # on a GPU machine: host and every GPU path, 3 rounds and more while a verdict is undecided (up to 9)
        await wait_for(pilot, lambda: msgs.of(BatchFinished), timeout=300)
        several = len({m.record.spec.path for m in msgs.of(RunStarted)}) > 1
        text = await until_shown(pilot, "1.00" if several else "finished")
    started = msgs.of(RunStarted)
    paths = options.values.paths
    # host, then GPU paths where present (those that cannot run here left out); several paths run in rounds
    ran = list(dict.fromkeys(m.record.spec.path for m in started))
    assert ran[0] == "host" and set(ran) <= set(paths) and [m.record.spec.path for m in started[: len(ran)]] == ran
    rounds = len(started) // len(ran)
    assert len(started) == len(ran) * rounds and (rounds == 1 if len(ran) == 1 else 3 <= rounds <= 9)
    assert started[0].record.spec.file is None and started[0].record.spec.directory is None
    result = msgs.of(RunFinished)[0].result
    assert result.status == "ok" and result.bytes > 0
    if len(ran) == 1:
        assert "host read 1M w1" in text and "finished" in text
    else:  # host and the GPU paths: the comparison in rounds opens by itself, host first as its baseline (its
        # verdict column, as wide as the other columns leave it at the screen's edge, is the terminal's to cut)
        assert re.search(rf"^\W*1\s+host\s+{rounds}/{rounds}\s.*\s1\.00\s", text, re.M), text
    scratch = result.environment["target"]
    assert not os.path.exists(scratch), "the scratch file of the embedded default is removed"


async def test_short_run_panels_show_measured_figures(direct_dir):
    # a run long enough for a busy machine's redraws to show its running figures; stopped once they have
    app = make_app(direct_dir, duration="60", workers="2", bs="64K")
    msgs = Messages()
    shown: dict[str, str] = {}

    def on_screen(key: str, *patterns: str) -> bool:
        """The screen shows every pattern (a redraw comes at its own rate, later under load): keep it."""
        text = screen_text(app)
        if all(re.search(p, text) for p in patterns):
            shown[key] = text
            return True
        return False

    async with app.run_test(message_hook=msgs) as pilot:
        await pilot.press("r")
        await wait_for(pilot, lambda: msgs.of(SamplesArrived) and msgs.of(SamplesArrived)[-1].samples[-1].t > 0.5)
        # the run's figures while it runs (not yet the whole run's), once a redraw has drawn them all
        await wait_for(
            pilot,
            lambda: (
                (
                    not msgs.of(RunFinished)
                    and on_screen(
                        "live",
                        r"now \d+\.\d+ (GiB|MiB)/s\s+[1-9][\d,]* IOPS",
                        r"p99\s+[1-9]",
                        r"│\s+1\s+[\d,]+\.\d\s+\d",
                    )
                )
                or bool(msgs.of(RunFinished))
            ),
            timeout=50,
        )
        live = shown.get("live", "")
        assert live, "the run ended before a redraw showed its running figures"
        await pilot.press("x")
        await wait_for(pilot, lambda: msgs.of(RunFinished), timeout=30)
        await wait_for(
            pilot,
            lambda: on_screen(
                "done",
                r"avg \d+\.\d+ (GiB|MiB)/s",
                "Latency \\(whole run\\)",
                r"CPU \(whole run\)",
                r"console\s+[\d.]+%",
                "last done",
            ),
        )
        done = shown["done"]
    result = msgs.of(RunFinished)[0].result
    # while running: the last interval's figures, in explicit units
    now = re.search(r"now (\d+\.\d+) (GiB|MiB)/s\s+([\d,]+) IOPS", live)
    assert now and float(now.group(1)) > 0 and int(now.group(3).replace(",", "")) > 0, live
    assert figure(live, "p50") > 0 and figure(live, "p99") > 0
    assert re.search(r"│\s+1\s+[\d,]+\.\d\s+\d", live), live  # worker 1's row has its MiB/s
    # after: whole-run averages equal to the engine's result
    avg = re.search(r"avg (\d+\.\d+) (GiB|MiB)/s\s+([\d,]+) IOPS", done)
    assert avg, done
    rate = result.throughput_gib_s if avg.group(2) == "GiB" else result.throughput_mib_s
    assert float(avg.group(1)) == pytest.approx(rate, abs=0.01 if avg.group(2) == "GiB" else 0.1)
    assert int(avg.group(3).replace(",", "")) == round(result.iops)
    assert "Latency (whole run)" in done and figure(done, "p99.9") > 0 and figure(done, "max") > 0
    proc = re.search(r"process\s+([\d.]+)%\s+([\d.]+)%", done)
    assert proc and float(proc.group(1)) + float(proc.group(2)) > 0, done
    per_core = re.search(r"cpu0 .*\d+%", done) or re.search(r"\d+ cores, one cell each", done)  # many cores: cells
    assert per_core and re.search(r"console\s+[\d.]+%", done), done
    assert "first done" in done and "last done" in done
    assert len(result.workers) == 2 and all(w.bytes > 0 for w in result.workers)


async def test_stop_mid_run_keeps_partial_results(direct_dir):
    app = make_app(direct_dir, duration="30")
    msgs = Messages()
    async with app.run_test(message_hook=msgs) as pilot:
        await pilot.press("r")
        await wait_for(pilot, lambda: sum(len(m.samples) for m in msgs.of(SamplesArrived)) >= 5)
        await pilot.press("x")
        await wait_for(pilot, lambda: msgs.of(BatchFinished), timeout=10)
        # the view is redrawn on the console's timer: on a loaded machine the first redraw after the end comes late
        await wait_for(pilot, lambda: " stopped " in screen_text(app), timeout=10)
        text = screen_text(app)
    result = msgs.of(RunFinished)[0].result
    assert result.status == "interrupted"
    assert 0 < result.seconds < 30 and result.bytes > 0 and len(result.samples) >= 5  # stopped before its 30 s
    assert "stopped" in text and "avg" in text and figure(text, "avg") > 0
    assert not [p for p in os.listdir(direct_dir) if p.startswith("xferscope-scratch")]


async def test_comparison_of_two_configurations_fills_the_table(direct_dir):
    app = make_app(direct_dir, duration="0.4")
    msgs = Messages()
    async with app.run_test(message_hook=msgs) as pilot:
        await pilot.press("r")
        await wait_for(pilot, lambda: len(msgs.of(BatchFinished)) == 1)
        await pilot.press("s")
        await retype(pilot, "#bs", "4K")
        await pilot.press("escape", "r")
        await wait_for(pilot, lambda: len(msgs.of(BatchFinished)) == 2)
        await pilot.press("c")
        text = await until_shown(pilot, "1.00 *", "■ 2 host read 4K w1")
        await pilot.press("down", "b")
        rebased = await until_shown(pilot, "against row 2")
    rows = [line for line in text.splitlines() if re.match(r"\s*[12] host", line)]
    assert len(rows) == 2, text
    assert " 1M " in rows[0] and " 4K " in rows[1]
    assert rows[0].rstrip().endswith("1.00 *")
    ratio = float(rows[1].split()[-1])
    results = [m.result for m in msgs.of(RunFinished)]
    assert ratio == pytest.approx(results[1].throughput_mib_s / results[0].throughput_mib_s, abs=0.006)
    assert "CPU-s/GiB" in text and "usr%" in text and "sys%" in text
    assert "against row 2" in rebased
    assert "Throughput, all runs" in text and "■ 1 host read 1M w1" in text and "■ 2 host read 4K w1" in text


@pytest.mark.parametrize(
    "control,value,message",
    [
        ("bs", "3000", "not a multiple of 512"),
        ("workers", "0", "must be 1..1024"),
        ("size", "lots", "not a size"),
        ("duration", "-1", "not a duration"),
    ],
)
async def test_invalid_input_is_refused_in_place(direct_dir, control, value, message):
    app = make_app(direct_dir)
    msgs = Messages()
    async with app.run_test(message_hook=msgs) as pilot:
        await retype(pilot, f"#{control}", value)
        await pilot.press("escape", "r")
        await wait_for(pilot, lambda: msgs.of(SetupRefused))
        text = await until_shown(pilot, message)
        assert app.screen.query_one(f"#{control}").has_class("-invalid-choice")
    assert message in text
    refused = msgs.of(SetupRefused)
    assert refused and refused[-1].where == control and message in refused[-1].reason
    assert not msgs.of(RunStarted)


async def test_target_problems_are_explained_before_the_run(tmp_path):
    missing = tmp_path / "no-such-dir" / "data.bin"
    app = make_app(tmp_path)
    msgs = Messages()
    async with app.run_test(message_hook=msgs) as pilot:
        app.screen.query_one("#target-path").value = str(missing)
        await pilot.press("escape", "r")
        await wait_for(pilot, lambda: msgs.of(SetupRefused))
        await wait_for(pilot, lambda: "does not exist" in held_text(app, "#error-target"))
        shown = held_text(app, "#error-target")
    refused = msgs.of(SetupRefused)[-1]
    assert refused.where == "target" and "does not exist" in refused.reason and not msgs.of(RunStarted)
    assert str(missing.parent) in shown, shown


async def test_csv_export_writes_the_snapshot(direct_dir, tmp_path):
    app = make_app(direct_dir, duration="0.4")
    exports = str(tmp_path / "exports")
    os.mkdir(exports)
    app.options.export_to = exports
    msgs = Messages()
    async with app.run_test(message_hook=msgs, notifications=True) as pilot:
        await pilot.press("e")  # nothing measured yet: says so, writes nothing
        await wait_for(pilot, lambda: any("nothing measured yet" in n for n in notified(msgs)))
        assert os.listdir(exports) == []
        await pilot.press("r")
        await wait_for(pilot, lambda: msgs.of(BatchFinished))
        await pilot.press("e")
        await wait_for(pilot, lambda: msgs.of(SnapshotExported))
        paths = msgs.of(SnapshotExported)[0].paths
        await wait_for(pilot, lambda: any(n.startswith("CSV snapshot written") for n in notified(msgs)))
    assert len(paths) == 2 and all(p.startswith(exports) and os.path.exists(p) for p in paths)
    [toast] = [n for n in notified(msgs) if n.startswith("CSV snapshot written")]
    assert toast == "CSV snapshot written: " + "\n".join(paths), toast
    series = list(csv.DictReader(Path(paths[0]).read_text().splitlines()))
    summary = list(csv.DictReader(Path(paths[1]).read_text().splitlines()))
    result = msgs.of(RunFinished)[0].result
    assert len(series) == len(result.samples) and float(series[-1]["throughput_gib_s"]) >= 0
    assert sum(int(r["bytes"]) for r in series) == result.bytes
    assert len(summary) == 1 and int(summary[0]["bytes"]) == result.bytes


async def test_engine_failure_shows_the_error_panel_and_the_console_goes_on(direct_dir):
    data = direct_dir / "data.bin"
    app = make_app(direct_dir, duration="20")
    app.options.values.typed_path = str(data)
    msgs = Messages()
    async with app.run_test(message_hook=msgs) as pilot:
        await pilot.press("r")
        await wait_for(pilot, lambda: msgs.of(SamplesArrived))
        os.truncate(data, 0)  # the file shrinks under the engine: reads come back short
        await wait_for(pilot, lambda: msgs.of(BatchFinished), timeout=10)
        failed = await until_shown(pilot, "Run failed", "short read")
        await pilot.press("s")
        app.screen.query_one("#target-path").value = str(direct_dir)
        app.screen.query_one("#duration").value = "0.5"
        await pilot.press("escape", "r")
        await wait_for(pilot, lambda: len(msgs.of(BatchFinished)) == 2)
        await wait_for(pilot, lambda: "Run failed" not in screen_text(app) and "finished" in screen_text(app))
        after = screen_text(app)
    failure = msgs.of(RunFailedMessage)[0]
    assert "short read" in failure.reason and failure.result is not None and failure.result.bytes > 0
    assert "Run failed" in failed and "short read" in failed
    assert "Throughput" in failed and "avg" in failed  # the other panels still show what was measured
    assert msgs.of(RunFinished)[-1].result.status == "ok"
    assert "Run failed" not in after and "finished" in after


async def test_80x24_layout_fits(direct_dir):
    app = make_app(direct_dir, duration="0.5")
    msgs = Messages()
    async with app.run_test(size=(80, 24), message_hook=msgs) as pilot:
        await pilot.press("r")
        await wait_for(pilot, lambda: msgs.of(BatchFinished))
        screens = {}
        expected = {"l": ("Throughput", "Workers"), "c": ("CPU-s/GiB",), "m": ("Inject Delay",), "s": ("Start (r)",)}
        for key in ("l", "c", "m", "s"):
            await pilot.press(key)
            screens[key] = await until_shown(pilot, *expected[key], "^p palette")
            for widget in app.screen.query(".panel, Footer, .screen-title, #setup-buttons"):
                if widget.display:
                    r = widget.region
                    assert r.right <= 80 and r.bottom <= 24 and r.width > 0, (key, widget, r)
    for text in screens.values():
        lines = text.splitlines()
        assert len(lines) == 24 and all(len(line) <= 80 for line in lines)
        assert "^p palette" in lines[-1]  # the footer's key bar is on the last line
    live = screens["l"].splitlines()
    for title in ("Throughput", "Latency", "CPU", "Workers"):
        assert title in screens["l"]
    boxes = [line for line in live[1:-1] if line.strip()]
    assert all(line[0] in "╭│╰" and line.rstrip()[-1] in "╮│╯" for line in boxes), screens["l"]
    assert "Start (r)" in screens["s"] and "Block size" in screens["s"] and "Duration" in screens["s"]
    assert "CPU-s/GiB" in screens["c"] and "ratio" in screens["c"]
    assert "Inject Delay" in screens["m"] and "Latency (ns)" in screens["m"]


async def test_too_small_terminal_shows_a_message(direct_dir):
    app = make_app(direct_dir)
    async with app.run_test(size=(50, 14)) as pilot:
        await until_shown(pilot, "Terminal too small: 50x14")
        await pilot.resize_terminal(80, 24)
        text = await until_shown(pilot, "Block size")
    assert "too small" not in text and "Block size" in text


def test_the_headless_cli_does_not_import_textual():
    code = (
        "import sys, xferscope.cli; "
        "bad = sorted(m for m in sys.modules if m == 'textual' or m.startswith('textual.')); "
        "print(bad); sys.exit(1 if bad else 0)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
