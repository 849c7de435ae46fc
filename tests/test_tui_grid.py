"""Profile grids in the console, results of runs over several hosts, and the console's own CPU figure."""

from __future__ import annotations

import dataclasses
import math
import re

from tui_helpers import Messages, make_app, paste, screen_text, until_shown, wait_for

from xferscope.app import figures
from xferscope.app.app import XferscopeApp
from xferscope.app.grid_model import GridRun
from xferscope.app.messages import BatchFinished, ResultsLoaded, RunFinished
from xferscope.app.session import CpuLog, RunRecord
from xferscope.app.widgets.cpu import console_figures, cpu_figures
from xferscope.commands.tui import console_options
from xferscope.engines.base import LatencySummary, Sample
from xferscope.export import result_to_dict, write_json
from xferscope.run.runner import EngineRun
from xferscope.spec import RunSpec

GRID = """\
name = "two-blocks"
description = "2 block sizes, 2 repetitions, on the host path"
repetitions = 2
duration = 0.3

[base]
path = "host"
file_size = "8M"
directory = "{directory}"

[grid]
block_size = ["64K", "1M"]
"""


async def test_a_grid_profile_runs_its_repetitions_and_fills_the_grid_view(direct_dir, tmp_path):
    profile = tmp_path / "two-blocks.toml"
    profile.write_text(GRID.format(directory=direct_dir))
    app = XferscopeApp(console_options(start=True, profile=str(profile)))
    msgs = Messages()
    async with app.run_test(size=(80, 24), message_hook=msgs) as pilot:
        await wait_for(pilot, lambda: msgs.of(BatchFinished), timeout=40)
        await wait_for(pilot, lambda: app.current_mode == "grid")
        # redrawn at its own pace under load
        await wait_for(pilot, lambda: "2/2 points" in screen_text(app) and "vs #1" in screen_text(app))
        lines = screen_text(app)
        await pilot.press("v")
        await wait_for(pilot, lambda: "cells: median" in screen_text(app))
        heat = screen_text(app)
        await pilot.press("s", "ctrl+p")
        from textual.command import CommandPalette

        await wait_for(pilot, lambda: isinstance(app.screen, CommandPalette))
        await pilot.press(*"show grid")
        await wait_for(pilot, lambda: app.screen.query("CommandList").first().option_count > 0)
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.current_mode == "grid")
    finished = msgs.of(RunFinished)
    assert len(finished) == 4, "2 points x 2 repetitions"
    assert [(m.record.point, m.record.repetition) for m in finished] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    by_point = {0: [], 1: []}
    for m in finished:
        by_point[m.record.point].append(m.result.throughput_mib_s)
    assert "2/2 points · 2 reps each · against block_size" in lines
    for label, point in (("block_size=64K", 0), ("block_size=1M", 1)):
        row = next(line for line in lines.splitlines() if label in line)
        low, high = min(by_point[point]), max(by_point[point])
        assert "2/2" in row and "±" in row, row
        assert f"{low:,.1f}–{high:,.1f}" in row, row  # min-max over the two repetitions
        median = (low + high) / 2
        assert f"{median:,.1f}" in row, row
    # each point against the first under the rule of replay --against, with the same words
    from xferscope.compare.verdict import repeated_verdict

    v = repeated_verdict(by_point[0], by_point[1])
    assert "baseline" in next(line for line in lines.splitlines() if "block_size=64K" in line)
    assert f"{v.ratio:.2f} {v.word}" in next(line for line in lines.splitlines() if "block_size=1M" in line)
    assert "verdict: faster/slower only if every repetition" in lines
    assert re.search("[\u2801-\u28ff]", lines), "the lines are drawn:\n" + lines
    assert "cells: median MiB/s over repetitions" in heat and "64K" in heat and "1M" in heat
    for line in lines.splitlines() + heat.splitlines():
        assert len(line.rstrip()) <= 80


def test_a_grid_varies_what_its_points_vary():
    specs = [RunSpec(path=p, block_size=b, workers=w) for p in ("host",) for w in (1, 4) for b in (4096, 65536)]
    assert not GridRun.is_grid([RunSpec(path="host"), RunSpec(path="bounce")], 1)  # paths alone: the comparison
    assert GridRun.is_grid([RunSpec(path="host")], 3)
    records = [RunRecord(i, s, point=i) for i, s in enumerate(specs)]
    grid = GridRun(records)
    assert grid.axes == ["block_size", "workers"] and grid.x_axis == "block_size" and grid.heatmap_default
    assert [label for label, _ in grid.lines()] == ["workers=1", "workers=4"]
    assert all(p.state == "waiting" and p.done == 0 for p in grid.points())


async def test_a_result_over_several_hosts_shows_one_row_per_host(direct_dir, tmp_path):
    spec = RunSpec(path="host", block_size=1 << 16, file_size=8 << 20, duration=0.3, directory=str(direct_dir))
    hosts = []
    for name in ("node-a", "node-b"):
        r = EngineRun(spec).execute()
        hosts.append(
            dataclasses.replace(
                r, environment={**r.environment, "host": name, "cluster": {"scope": "host", "ranks": 1}}
            )
        )
    slow = min(hosts, key=lambda h: h.throughput_mib_s)
    fast = max(hosts, key=lambda h: h.throughput_mib_s)
    seconds = max(h.seconds for h in hosts)
    total = dataclasses.replace(
        hosts[0],
        bytes=sum(h.bytes for h in hosts),
        ops=sum(h.ops for h in hosts),
        seconds=seconds,
        environment={"host": "node-a,node-b", "cluster": {"scope": "all", "ranks": 2, "hosts": ["node-a", "node-b"]}},
        hosts=hosts,
    )
    saved = tmp_path / "mpi.json"
    write_json(str(saved), result_to_dict(total))
    app = make_app(direct_dir)
    msgs = Messages()
    async with app.run_test(size=(80, 24), message_hook=msgs) as pilot:
        await pilot.press("c", "o")
        await wait_for(pilot, lambda: bool(app.screen.query("#prompt-input")))
        await paste(pilot, "#prompt-input", str(saved))
        await pilot.press("enter")
        await wait_for(pilot, lambda: msgs.of(ResultsLoaded))
        text = await until_shown(
            pilot, "(all 2 hosts)", f"↳ {slow.environment['host']}", f"↳ {fast.environment['host']}"
        )
    lines = text.splitlines()
    aggregate = next(line for line in lines if "1 host" in line and "(all 2 hosts)" in line)
    assert f"{total.throughput_mib_s:.1f}" in aggregate
    slow_row = next(line for line in lines if f"↳ {slow.environment['host']}" in line)
    fast_row = next(line for line in lines if f"↳ {fast.environment['host']}" in line)
    assert "slowest" in slow_row and "slowest" not in fast_row
    assert f"{slow.throughput_mib_s:.1f}" in slow_row and f"{fast.throughput_mib_s:.1f}" in fast_row
    assert lines.index(aggregate) < lines.index(slow_row) and lines.index(aggregate) < lines.index(fast_row)
    assert f"slowest {slow.environment['host']}" in " ".join(text.split())


# ----------------------------------------------------------- the console's CPU figure


def _sample(t: float, usr: float, sys_: float, dt: float = 0.1) -> Sample:
    nan = math.nan
    return Sample(
        t=t,
        dt=dt,
        bytes=0,
        ops=0,
        read_bytes=0,
        write_bytes=0,
        throughput_gib_s=0.0,
        throughput_mb_s=0.0,
        iops=0.0,
        latency_us=LatencySummary(nan, nan, nan, nan, nan, nan, nan),
        cpu_usr_pct=usr,
        cpu_sys_pct=sys_,
        sys_usr_pct=0.0,
        sys_sys_pct=0.0,
        per_core_pct=(0.0,),
        total_bytes=0,
        total_ops=0,
        worker_bytes=(0,),
        workers_done=0,
    )


class _Meter:
    """Stands in for the console thread's CPU clock: (user, system) seconds, set by the test."""

    def __init__(self):
        self.now = (0.0, 0.0)

    def times(self):
        return self.now


def test_the_console_figure_covers_the_window_of_the_process_figure():
    """After a screen switch the console burns CPU between two samples: the figure shown for it is taken
    over the same intervals as the engine process's."""
    meter = _Meter()
    log = CpuLog(meter)
    record = RunRecord(1, RunSpec(path="host"))
    record.state = "running"
    # 2 s of run: the process at 30% usr, 10% sys; the console idle at 2% usr ...
    t0 = 100.0
    for i in range(21):
        now = t0 + 0.1 * i
        meter.now = (0.02 * 0.1 * i, 0.0)
        log.take(now)
        if i:
            record.buffer._q.append((now, _sample(0.1 * i, 30.0, 10.0)))
    record.take_samples()
    usr, sys_ = console_figures(record, log)
    assert abs(usr - 2.0) < 1e-6 and sys_ == 0.0
    # ... then a screen switch: 0.25 s of console CPU after the last sample, before the next one
    meter.now = (meter.now[0] + 0.25, 0.05)
    log.take(t0 + 2.05)
    usr, sys_ = console_figures(record, log)
    assert abs(usr - 2.0) < 1e-6, "the burst lies after the window of the process figure"
    # the next sample's interval holds the burst: so does the console's figure over the same window
    record.buffer._q.append((t0 + 2.1, _sample(2.1, 30.0, 10.0)))
    meter.now = (meter.now[0] + 0.002, 0.05)
    log.take(t0 + 2.1)
    record.take_samples()
    usr, sys_ = console_figures(record, log)
    assert usr > 20.0 and sys_ > 4.0, (usr, sys_)


def test_the_console_figure_is_its_own_beside_the_engine_process_figure():
    """The engine runs in a process of its own: a console busier than the engine's process shows its own
    figure, not one capped at the engine's."""
    meter = _Meter()
    log = CpuLog(meter)
    record = RunRecord(1, RunSpec(path="host"))
    record.state = "running"
    for i in range(12):  # the console busier than the process says, at every reading
        meter.now = (0.5 * 0.1 * i, 0.2 * 0.1 * i)
        log.take(10.0 + 0.1 * i)
        if i:
            record.buffer._q.append((10.0 + 0.1 * i, _sample(0.1 * i, 20.0, 5.0)))
    record.take_samples()
    usr, sys_ = console_figures(record, log)
    proc_usr, proc_sys = cpu_figures(record)[1]["process"]
    assert abs(proc_usr - 20.0) < 1e-9 and abs(proc_sys - 5.0) < 1e-9
    assert abs(usr - 50.0) < 1e-6 and abs(sys_ - 20.0) < 1e-6
    assert figures.pct(usr) != figures.pct(proc_usr)
