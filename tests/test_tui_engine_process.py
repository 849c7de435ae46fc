"""The console outlives its engines: an engine's process killed mid-run is an error panel (engine, signal,
its last lines), the session's runs stay, a comparison goes on, the next run works; and a console hung up
on or terminated in a real terminal (tmux), in any phase, leaves no scratch file and no process."""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
import sys

import pytest
from test_engine_process import engine_children, gone, scratch_left, wait_until
from tui_helpers import Messages, make_app, screen_text, wait_for

from xferscope.app.messages import BatchFinished, RunFailedMessage, RunFinished, SamplesArrived
from xferscope.spec import RunSpec


async def _kill_engine_mid_run(pilot, msgs, sig=signal.SIGSEGV):
    await wait_for(pilot, lambda: sum(len(m.samples) for m in msgs.of(SamplesArrived)) >= 5)
    engine = engine_children(os.getpid())[0]
    engine.send_signal(sig)
    return engine


async def test_engine_crash_is_an_error_panel_and_the_next_run_works(direct_dir):
    app = make_app(direct_dir, duration="30", size="32M", bs="64K")
    msgs = Messages()
    async with app.run_test(size=(100, 40), message_hook=msgs) as pilot:
        await pilot.press("r")
        engine = await _kill_engine_mid_run(pilot, msgs)
        await wait_for(pilot, lambda: msgs.of(BatchFinished))
        await wait_for(pilot, lambda: "SIGSEGV" in screen_text(app))
        text = screen_text(app)
        failed = msgs.of(RunFailedMessage)[0]
        assert "host: the engine process died by SIGSEGV" in failed.reason
        assert failed.result is not None and failed.result.incomplete and failed.result.bytes > 0
        assert any("Fatal Python error" in line for line in failed.detail), failed.detail
        assert "Run failed" in text and "Fatal Python error" in text, text
        assert scratch_left(direct_dir) == [] and gone(engine.pid)
        first = app.records[0]
        # the next run works, and the failed one stays in the session
        app.start_batch([first.spec.replace(duration=1.0)])
        await wait_for(pilot, lambda: msgs.of(RunFinished))
        await wait_for(pilot, lambda: len(msgs.of(BatchFinished)) == 2)
        assert msgs.of(RunFinished)[0].result.status == "ok"
        assert [r.state for r in app.records] == ["failed", "finished"]
        assert app.records[0].result is failed.result
        assert engine_children(os.getpid()) == [] and scratch_left(direct_dir) == []


async def test_a_comparison_goes_on_after_an_engine_dies(direct_dir):
    app = make_app(direct_dir, duration="30", size="32M", bs="64K")
    msgs = Messages()
    async with app.run_test(message_hook=msgs) as pilot:
        spec = RunSpec(path="host", directory=str(direct_dir), file_size=32 << 20, block_size=64 << 10, duration=30)
        app.start_batch([spec, spec.replace(duration=1.0, block_size=1 << 20)])
        await _kill_engine_mid_run(pilot, msgs, signal.SIGKILL)
        await wait_for(pilot, lambda: msgs.of(BatchFinished), timeout=60)
    assert [r.state for r in app.records] == ["failed", "finished"]
    assert "SIGKILL" in app.records[0].error and app.records[0].result.bytes > 0
    assert app.records[1].result.status == "ok"
    assert scratch_left(direct_dir) == [] and engine_children(os.getpid()) == []


# ------------------------------------------------------------------ in a real terminal

needs_tmux = pytest.mark.skipif(not shutil.which("tmux"), reason="needs tmux (a real terminal for the console)")
#: the tmux server of the test running now: a new one for every test, as a server told to go may still be going
#: when the next test starts one under the same name (then new-session fails)
SOCKET = f"xferscope-test-{os.getpid()}"


@pytest.fixture(autouse=True)
def _own_tmux_server(request):
    global SOCKET
    SOCKET = f"xferscope-test-{os.getpid()}-{abs(hash(request.node.nodeid)) % 10**8}"
    yield


def _tmux(*args: str, check: bool = True) -> str:
    proc = subprocess.run(["tmux", "-L", SOCKET, *args], capture_output=True, text=True)
    if check and proc.returncode:
        raise AssertionError(f"tmux {' '.join(args[:3])} failed ({proc.returncode}): {proc.stderr.strip()}")
    return proc.stdout


def _console_in_tmux(tmp, *args: str) -> int:
    """Start `xferscope tui ARGS` in a tmux session of its own; the console's pid."""
    cmd = [sys.executable, "-m", "xferscope.cli", "tui", *args]
    _tmux("new-session", "-d", "-s", "console", "-x", "100", "-y", "30", "-c", str(tmp), "exec " + shlex.join(cmd))
    return int(_tmux("display-message", "-p", "-t", "console", "#{pane_pid}").strip())


def _screen() -> str:
    return _tmux("capture-pane", "-p", "-t", "console", check=False)


@needs_tmux
@pytest.mark.parametrize(
    "phase, how",
    [
        ("preparing", "hangup"),
        ("running", "hangup"),
        ("running", "sigterm"),
        ("comparing", "hangup"),
        ("comparing", "sigterm"),
    ],
)
def test_console_hung_up_or_terminated_leaves_nothing(direct_dir, phase, how):
    work = direct_dir / "d"
    work.mkdir()
    size = "4G" if phase == "preparing" else "32M"
    args = ["--start", "--path", "host", "--dir", str(work), "--size", size, "--bs", "64K", "--duration", "30"]
    if phase == "comparing":  # a grid of two runs: the second one runs when the console is told to go
        profile = direct_dir / "two.toml"
        profile.write_text(
            'name = "two"\nkind = "io"\nrepetitions = 1\nduration = 3\n'
            f'[base]\npath = "host"\ndirectory = "{work}"\nfile_size = "32M"\n'
            '[grid]\nblock_size = ["64K", "1M"]\n'
        )
        args = ["--start", "--profile", str(profile)]
    try:
        console = _console_in_tmux(direct_dir, *args)
        engine = wait_until(lambda: engine_children(console), what="the engine process")[0]
        if phase == "preparing":
            wait_until(lambda: scratch_left(work), what="the scratch file being filled")
        elif phase == "running":
            wait_until(lambda: "running" in _screen(), what="the run on screen")
        else:
            # the second run (its own title) in the engine process the first one left to it
            wait_until(lambda: "(2/2)" in _screen() and "running" in _screen(), timeout=90, what="the second run")
            engine = engine_children(console)[0]
        if how == "hangup":
            _tmux("kill-server", check=False)  # the terminal goes: SIGHUP to the console
        else:
            os.kill(console, signal.SIGTERM)
        wait_until(lambda: gone(console), timeout=60, what="the console to leave")
        wait_until(lambda: gone(engine.pid), timeout=30, what="the engine process to leave")
        wait_until(lambda: not scratch_left(work), timeout=30, what="the scratch files to go")
    finally:
        _tmux("kill-server", check=False)
    assert scratch_left(work) == []


def test_a_long_session_keeps_the_newest_time_series_and_every_summary(direct_dir):
    """Hours of runs in one console: the time series of the newest runs stay, older runs keep their
    summary figures (what a comparison table shows), so the console does not grow without end."""
    from xferscope.app.session import compact, new_records
    from xferscope.run.runner import EngineRun

    spec = RunSpec(
        path="host", file=str(direct_dir / "x.dat"), file_size=8 << 20, block_size=64 << 10, duration=0.3, keep=True
    )
    records = new_records([spec] * 4)
    for record in records:
        run = EngineRun(spec)
        run.subscribe(record.buffer.push)
        record.result = run.execute()
        record.take_samples()
        record.state = "finished"
    summaries = [(r.result.bytes, r.result.iops, r.result.latency_us.p99) for r in records]
    assert all(r.history and r.result.samples and r.result.histogram is not None for r in records)
    assert compact(records, keep=2) == 2 and compact(records, keep=2) == 0
    assert [r.compacted for r in records] == [True, True, False, False]
    assert not records[0].history and not records[0].result.samples and records[0].result.histogram is None
    assert records[3].history and records[3].result.samples
    assert [(r.result.bytes, r.result.iops, r.result.latency_us.p99) for r in records] == summaries
