"""Memory sweeps run in a process of their own: the native core killed from outside (SIGSEGV, SIGKILL) in
the middle of a sweep is a failed sweep naming the engine and the signal, with the points measured until
then, in the CLI and in the console, and the next sweep works."""

from __future__ import annotations

import asyncio
import json
import os
import signal

import psutil
import pytest
from test_engine_process import engine_children, gone, start_cli, wait_until
from tui_helpers import memory_view, retype, screen_text, wait_for

from xferscope.app.messages import MemPointMeasured, MemSweepFailed, MemSweepFinished
from xferscope.errors import SpecError
from xferscope.isolation import target_name
from xferscope.memory.result import loaded_points
from xferscope.memory.runner import MemRun, serve
from xferscope.memory.sweep import IDLE, MemSpec
from xferscope.run.runner import EngineDied

#: a loaded sweep of many short points on small buffers, one load thread
LONG_SWEEP = [
    "--traffic",
    "R",
    "--delays",
    ",".join(["0"] * 40),
    "--point-seconds",
    "0.3",
    "--buffer",
    "16M",
    "--threads",
    "1",
    "--no-whole-idle",
]


@pytest.fixture(autouse=True)
def two_cpus():
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("loaded latency needs two CPUs: one for the latency thread, one for a load thread")


def mem_engines(pid: int) -> list[psutil.Process]:
    """The memory engine processes started by process ``pid``."""
    return engine_children(pid, target_name(serve))


def cpu_seconds(proc: psutil.Process) -> float:
    try:
        times = proc.cpu_times()
    except psutil.NoSuchProcess:
        return 0.0
    return times.user + times.system


@pytest.mark.parametrize("sig", [signal.SIGSEGV, signal.SIGKILL])
def test_cli_sweep_survives_its_engine_dying_mid_sweep(tmp_path, sig):
    out, series = tmp_path / "mem.json", tmp_path / "mem.csv"
    proc = start_cli("mem", *LONG_SWEEP, "--json", str(out), "--csv", str(series))
    engine = wait_until(lambda: mem_engines(proc.pid) or proc.poll() is not None, what="the engine process")
    assert proc.poll() is None, proc.communicate()
    engine = engine[0]
    # its threads have run for 3 s of CPU: with at most two of them measuring, more than 1.5 s of the sweep
    # has passed, several times the first point's time (a busy machine only makes the wait longer)
    wait_until(
        lambda: cpu_seconds(engine) > 3.0 or proc.poll() is not None, timeout=120, what="the sweep's first points"
    )
    assert proc.poll() is None, proc.communicate()
    engine.send_signal(sig)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 1, (stdout, stderr)
    lines = [
        ln
        for ln in stderr.splitlines()
        if ln.strip() and not ln.startswith(("JSON written", "CSV written", "warning:"))
    ]
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    name = signal.Signals(sig).name
    assert lines[0].startswith(f"xferscope: mem: the engine process died by {name}"), lines[0]
    assert "Idle latency" in stdout, "what was measured is shown"
    data = json.loads(out.read_text())
    assert data["incomplete"] is True and name in data["error"]
    assert data["points"][0]["traffic"] == IDLE and data["points"][0]["latency_ns"] > 0
    assert 1 <= len(data["points"]) < 41
    assert len(series.read_text().splitlines()) == len(data["points"]) + 1
    assert gone(engine.pid)


def test_cli_killed_outright_takes_its_memory_engine_along(tmp_path):
    proc = start_cli("mem", *LONG_SWEEP)
    engine = wait_until(lambda: mem_engines(proc.pid), what="the engine process")[0]
    wait_until(lambda: cpu_seconds(engine) > 0.5, timeout=120, what="the sweep to run")
    proc.kill()
    proc.communicate(timeout=30)
    wait_until(lambda: gone(engine.pid), timeout=30, what="the engine process to leave")


def test_a_run_keeps_its_points_and_the_next_one_works():
    spec = MemSpec(
        traffic=("R",), delays=(0,) * 40, point_seconds=0.3, buffer_bytes=16 << 20, threads=1, whole_idle=False
    )
    run = MemRun(spec)
    assert run.expected_points() == 41
    got = []
    with pytest.raises(EngineDied) as caught:
        for point in run:
            got.append(point)
            if len(got) == 2:
                os.kill(run.pid, signal.SIGSEGV)
    assert "mem: the engine process died by SIGSEGV" in str(caught.value)
    assert caught.value.result is run.result and run.result.points == got and len(got) >= 2
    assert "SIGSEGV" in run.result.error and run.result.incomplete is True
    assert gone(run.pid)
    again = MemRun(MemSpec(mode="idle", point_seconds=0.1, buffer_bytes=16 << 20))
    assert [p.traffic for p in again] == [IDLE, IDLE] and again.result.error is None
    assert again.result.environment["ns_per_delay_iter"] > 0, "the engine's facts about the machine came along"


def test_a_run_streams_to_asyncio_and_cancels():
    spec = MemSpec(traffic=("W5",), delays=(0,) * 6, point_seconds=0.3, buffer_bytes=16 << 20, threads=1)
    run = MemRun(spec)

    async def consume():
        got = []
        async for point in run:
            got.append(point)
            if len(got) == 3:
                run.cancel()
        return got

    got = asyncio.run(consume())
    assert [p.traffic for p in got][:3] == [IDLE, IDLE, "W5"]
    assert run.result.cancelled and run.result.points == got and run.result.error is None
    assert run.result.environment["caches"], "the engine's facts about the machine came along"
    assert gone(run.pid)


def test_errors_in_the_engines_process_come_back_as_themselves():
    with pytest.raises(SpecError) as caught:
        MemRun(MemSpec(mode="idle", latency_cpu=100000))
    assert caught.value.field == "latency_cpu" and "100000" in str(caught.value)


@pytest.mark.parametrize("sig", [signal.SIGSEGV, signal.SIGKILL])
async def test_console_memory_view_survives_its_engine_dying(direct_dir, sig):
    name = signal.Signals(sig).name
    async with memory_view(direct_dir, size=(100, 30)) as (app, pilot, msgs):
        await retype(pilot, "#mem-delays", ",".join(["0"] * 40))
        await retype(pilot, "#mem-seconds", "0.3")
        await retype(pilot, "#mem-threads", "1")
        await retype(pilot, "#mem-buffer", "16M")
        await pilot.press("escape", "r")
        await wait_for(pilot, lambda: msgs.of(MemPointMeasured), timeout=90)
        engine = wait_until(lambda: mem_engines(os.getpid()), what="the engine process")[0]
        engine.send_signal(sig)
        await wait_for(pilot, lambda: msgs.of(MemSweepFailed), timeout=60)
        reason = msgs.of(MemSweepFailed)[0].reason
        assert reason.startswith(f"mem: the engine process died by {name}"), reason
        await wait_for(pilot, lambda: name in screen_text(app))
        assert app.screen.state == "failed" and app.screen.points, "the points measured stay on screen"
        failed = msgs.of(MemSweepFailed)[0]
        kept = failed.result
        assert kept is not None and kept.points and kept.error, "what it measured is kept, marked incomplete"
        assert app.screen.results[-1] is kept
        await wait_for(pilot, lambda: "points measured are kept" in screen_text(app))
        if sig == signal.SIGSEGV:  # Python's fault handler spoke on the engine's stderr: its last words shown
            assert any("Segmentation fault" in line for line in failed.detail), failed.detail
            await wait_for(pilot, lambda: "Segmentation fault" in screen_text(app).split(name, 1)[1])
        assert gone(engine.pid)
        # the console is alive and the next sweep works
        await retype(pilot, "#mem-delays", "0")
        await retype(pilot, "#mem-seconds", "0.1")
        await pilot.press("escape", "r")
        await wait_for(pilot, lambda: msgs.of(MemSweepFinished), timeout=90)
        result = msgs.of(MemSweepFinished)[0].result
        assert not result.cancelled and result.error is None and loaded_points(result.points)
        assert mem_engines(os.getpid()) == []
