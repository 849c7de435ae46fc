"""Engines run in a process of their own: a crash there is a failed run here, never the end of the CLI,
and no scratch file or process outlives a run, whoever dies first.

The engine's process is killed from outside (SIGSEGV, SIGKILL) in the middle of real runs of the host
engine; the CLI is hung up on, terminated and killed outright. Each test then looks at the exit status,
the one line on stderr, the partial JSON, the scratch directory and the processes left.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import psutil
import pytest
from conftest import sends_from_now

from xferscope.run.runner import EngineDied, EngineRun
from xferscope.spec import RunSpec

MIB = 1 << 20
ENGINE = "xferscope.run.engine_process:serve"


def engine_children(pid: int, target: str = ENGINE) -> list[psutil.Process]:
    """The engine processes (running ``target``) started by process ``pid``."""
    try:
        kids = psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []
    out = []
    for p in kids:
        try:
            if target in " ".join(p.cmdline()):
                out.append(p)
        except psutil.NoSuchProcess:
            pass
    return out


def wait_until(condition, timeout: float = 60.0, what: str = "the condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def scratch_left(directory) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.startswith(("xferscope", ".xferscope")))


def start_cli(*args: str, env: dict | None = None) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "xferscope.cli", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
    )


def has_read(process: psutil.Process, nbytes: int) -> bool:
    """``process`` has read ``nbytes`` from storage (O_DIRECT reads count), or has ended."""
    try:
        return process.io_counters().read_bytes >= nbytes
    except psutil.Error:
        return True


def in_timed_region(directory, proc: subprocess.Popen, nbytes: int = 4 << 20) -> psutil.Process:
    """Wait until the run's scratch file is filled (its sidecar is written), the engine has read ``nbytes`` of it
    in its timed region, and it has sent the parent a sample since; return the engine's process."""
    wait_until(
        lambda: any(p.name.endswith(".xferscope") for p in directory.iterdir()) or proc.poll() is not None,
        what="the scratch file",
    )
    assert proc.poll() is None, proc.communicate()
    engine = wait_until(lambda: engine_children(proc.pid), what="the engine process")[0]
    before = engine.io_counters().read_bytes
    wait_until(lambda: has_read(engine, before + nbytes), what="the engine reading in its timed region")
    wait_until(sends_from_now(engine), what="a sample from the engine")
    assert proc.poll() is None, "the run is still going when the test signals it"
    return engine


@pytest.mark.parametrize("sig", [signal.SIGSEGV, signal.SIGKILL])
def test_cli_run_survives_its_engine_dying_mid_run(direct_dir, sig):
    out = direct_dir / "out.json"
    series = direct_dir / "out.csv"
    proc = start_cli(
        "run",
        "-T",
        "30",
        "-s",
        "32M",
        "--bs",
        "64K",
        "--dir",
        str(direct_dir / "d"),
        "--json",
        str(out),
        "--csv",
        str(series),
    )
    (direct_dir / "d").mkdir()
    engine = in_timed_region(direct_dir / "d", proc)
    engine.send_signal(sig)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 1, (stdout, stderr)
    lines = [ln for ln in stderr.splitlines() if ln.strip() and not ln.startswith(("JSON written", "CSV written"))]
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    name = signal.Signals(sig).name
    assert lines[0].startswith(f"xferscope: host: the engine process died by {name}"), lines[0]
    data = json.loads(out.read_text())
    assert data["status"] == "failed" and data["incomplete"] is True and name in data["error"]
    assert data["bytes"] > 0 and data["seconds"] > 0 and data["samples"], "what was measured is kept"
    assert "incomplete" in series.read_text().splitlines()[0]
    assert scratch_left(direct_dir / "d") == [], "the parent removes the files the dead engine created"
    assert gone(engine.pid)


def test_cli_run_killed_outright_leaves_no_scratch_and_no_process(direct_dir):
    """SIGKILL to the CLI mid-run: its engine's process notices and removes the scratch directory it
    was given (the embedded default: a temporary directory)."""
    tmp = direct_dir / "tmp"
    tmp.mkdir()
    proc = start_cli("run", "-T", "30", "-s", "32M", "--bs", "64K", env={"TMPDIR": str(tmp)})
    made = wait_until(lambda: [d for d in tmp.iterdir() if d.name.startswith("xferscope-")], what="the temp dir")
    engine = in_timed_region(made[0], proc)
    proc.kill()
    proc.communicate(timeout=30)
    wait_until(lambda: gone(engine.pid), timeout=30, what="the engine process to leave")
    assert scratch_left(tmp) == []


def listing(directory):
    """What a directory holds now; nothing when it has gone (or was never one)."""
    try:
        return list(directory.iterdir())
    except (FileNotFoundError, NotADirectoryError):
        return []


def test_cli_killed_while_the_engine_fills_the_scratch_file(direct_dir):
    tmp = direct_dir / "tmp"
    tmp.mkdir()
    proc = start_cli("run", "-T", "30", "-s", "4G", "--bs", "1M", env={"TMPDIR": str(tmp)})
    engine = wait_until(lambda: engine_children(proc.pid), what="the engine process")[0]
    wait_until(
        # the scratch directory's file (a short-lived temporary file may stand beside the directory: the O_DIRECT
        # probe's, say; and either may go between the listing and the look inside)
        lambda: any(f.name.endswith(".dat") for d in tmp.iterdir() if d.is_dir() for f in listing(d)),
        what="the scratch file being filled",
    )
    proc.kill()
    proc.communicate(timeout=30)
    wait_until(lambda: gone(engine.pid), timeout=30, what="the engine process to leave")
    assert scratch_left(tmp) == []


@pytest.mark.parametrize("sig", [signal.SIGHUP, signal.SIGTERM])
def test_cli_hung_up_mid_run_keeps_its_figures_and_leaves_nothing(direct_dir, sig):
    out = direct_dir / "out.json"
    (direct_dir / "d").mkdir()
    proc = start_cli("run", "-T", "30", "-s", "32M", "--bs", "64K", "--dir", str(direct_dir / "d"), "--json", str(out))
    engine = in_timed_region(direct_dir / "d", proc)
    proc.send_signal(sig)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, (stdout, stderr)
    data = json.loads(out.read_text())
    assert data["status"] == "interrupted" and data["incomplete"] is True and data["bytes"] > 0
    assert scratch_left(direct_dir / "d") == []
    assert gone(engine.pid)


def test_cli_terminated_while_preparing_leaves_nothing(direct_dir):
    (direct_dir / "d").mkdir()
    proc = start_cli("run", "-T", "30", "-s", "4G", "--bs", "1M", "--dir", str(direct_dir / "d"))
    # the scratch file itself: the O_DIRECT probe of planning comes and goes before the engine starts
    wait_until(
        lambda: any(n.startswith("xferscope-scratch") for n in scratch_left(direct_dir / "d")),
        what="the scratch file being filled",
    )
    engine = engine_children(proc.pid)[0]
    proc.send_signal(signal.SIGTERM)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, (stdout, stderr)
    assert scratch_left(direct_dir / "d") == []
    wait_until(lambda: gone(engine.pid), timeout=30, what="the engine process to leave")


def test_compare_goes_on_after_an_engine_dies(direct_dir):
    """The first path's engine dies mid-run in the first round: its partial result is kept, the other path
    runs every round, exit 1."""
    out = direct_dir / "cmp.json"
    (direct_dir / "d").mkdir()
    proc = start_cli(
        "compare",
        "--paths",
        "host,host",
        "-T",
        "2",
        "--rounds",
        "2",
        "-s",
        "32M",
        "--bs",
        "64K",
        "--dir",
        str(direct_dir / "d"),
        "--json",
        str(out),
    )
    engine = in_timed_region(direct_dir / "d", proc)
    engine.send_signal(signal.SIGSEGV)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 1, (stdout, stderr)
    results = json.loads(out.read_text())["results"]
    assert results[0]["status"] == "failed" and len(results) >= 2, stderr
    assert all(r["status"] == "ok" and not r["incomplete"] for r in results[1:]), stderr
    assert "SIGSEGV" in results[0]["error"] and results[0]["incomplete"] and results[0]["bytes"] > 0
    assert "the engine process died by SIGSEGV" in stderr
    assert scratch_left(direct_dir / "d") == []


# ------------------------------------------------------------------ through the API


def test_within_one_command_a_paths_runs_share_its_engine_process_and_a_dead_one_is_replaced(direct_dir):
    from xferscope.run import engine_pool

    spec = RunSpec(path="host", file=str(direct_dir / "x.dat"), file_size=8 * MIB, block_size=64 * 1024, duration=0.2)
    with engine_pool.kept_engines():
        first, second = EngineRun(spec), EngineRun(spec)
        assert first.execute().status == "ok" and second.execute().status == "ok"
        assert second._child is first._child and not gone(first._child.pid)  # one process, kept
        assert first.result.fixed_cost_s and second.result.fixed_cost_s  # each run's own set-up, measured
        # killed in its timed region: that run fails, and the next run starts a process of its own
        doomed = EngineRun(spec.replace(duration=5.0))
        doomed.prepare()
        doomed.start()
        os.kill(doomed._child.pid, signal.SIGKILL)
        assert doomed.join(30)
        doomed.close()
        assert doomed.finish().status == "failed"
        fresh = EngineRun(spec)
        assert fresh.execute().status == "ok" and fresh._child.pid != first._child.pid
        kept = fresh._child.pid
    wait_until(lambda: gone(kept), timeout=30, what="the kept engine process to end with the command")
    # outside a command's block, every run has a process of its own, ended with it
    alone = EngineRun(spec)
    alone.execute()
    assert alone._child.pid != kept and gone(alone._child.pid)
    assert scratch_left(direct_dir) == []


def interrupted_within(run: EngineRun, timeout: float) -> bool:
    """``run.execute()`` in a thread: whether it ended, interrupted (``target.Interrupted``), within ``timeout``."""
    import threading

    from xferscope.target import Interrupted

    done = threading.Event()

    def execute():
        try:
            run.execute()
        except Interrupted:
            done.set()

    threading.Thread(target=execute, daemon=True).start()
    return done.wait(timeout)


def test_ctrl_c_as_a_kept_process_is_handed_the_next_run_does_not_wait_for_it(direct_dir, monkeypatch):
    """Ctrl-C between taking a kept engine process and starting to read it: the run ends that process at once
    (it used to wait its whole close timeout, 65 s, for a "closed" nobody was there to read), and leaves nothing."""
    from xferscope.run import engine_pool

    spec = RunSpec(path="host", file=str(direct_dir / "x.dat"), file_size=8 * MIB, block_size=64 * 1024, duration=0.2)
    with engine_pool.kept_engines():
        first = EngineRun(spec)
        assert first.execute().status == "ok"
        kept = first._child

        def taken_then_interrupted(self):
            self._driver.child, self._driver.log = engine_pool.take(self.spec.path)
            raise KeyboardInterrupt  # before the reader starts

        monkeypatch.setattr(EngineRun, "_spawn", taken_then_interrupted)
        second = EngineRun(spec)
        assert interrupted_within(second, 30), "the interrupted run returned"  # far less than the close timeout
        assert second._child is kept and gone(kept.pid), "the process it could not hear is ended, not kept"
    assert scratch_left(direct_dir) == []


def test_ctrl_c_just_before_a_kept_process_gets_its_job_does_not_wait_for_it(direct_dir, monkeypatch):
    """Ctrl-C after the reader started but before the job went out (starting the reader waits for a thread: long
    on a loaded machine): the kept process still belongs to the run before, so it would answer neither "stop" nor
    "close"; the run ends it at once instead of waiting for "closed" (a replay hung so after Ctrl-C)."""
    from xferscope.run import engine_pool, runner
    from xferscope.run.engine_process import EngineJob

    monkeypatch.setattr(runner, "CLOSE_TIMEOUT_S", 600.0)  # a wait for "closed" would outlast the test's
    spec = RunSpec(path="host", file=str(direct_dir / "x.dat"), file_size=8 * MIB, block_size=64 * 1024, duration=0.2)
    with engine_pool.kept_engines():
        first = EngineRun(spec)
        assert first.execute().status == "ok"
        kept = first._child
        send = kept.send

        def interrupted_before_the_job(message):
            if isinstance(message, EngineJob):  # the next run's job
                raise KeyboardInterrupt
            return send(message)

        monkeypatch.setattr(kept, "send", interrupted_before_the_job)
        second = EngineRun(spec)
        assert interrupted_within(second, 60), "the interrupted run returned"
        assert second._child is kept and gone(kept.pid), "the process that never got the job is ended, not kept"
    assert scratch_left(direct_dir) == []


def test_a_crash_while_preparing_raises_and_removes_the_file(direct_dir):
    run = EngineRun(RunSpec(file=str(direct_dir / "big.dat"), file_size=4 << 30, block_size=MIB, duration=5))
    killer = []

    def progress(done, total):
        if done >= 64 * MIB and not killer:
            killer.append(run._child.pid)
            os.kill(run._child.pid, signal.SIGSEGV)

    with pytest.raises(EngineDied) as info:
        run.execute(progress=progress)
    assert "the engine process died by SIGSEGV" in str(info.value) and "while preparing" in str(info.value)
    assert info.value.result is None and info.value.signal_name == "SIGSEGV"
    assert any("Fatal Python error" in line or "Segmentation" in line for line in info.value.detail), info.value.detail
    assert not (direct_dir / "big.dat").exists() and not (direct_dir / "big.dat.xferscope").exists()


def test_an_engine_that_ignores_the_stop_is_killed_with_its_figures_kept(direct_dir, monkeypatch):
    """A driver call that never returns: the engine's process does not answer the stop request (here:
    it is stopped with SIGSTOP); after the grace period it is killed, and what it sent is kept."""
    import xferscope.run.runner as runner_mod

    monkeypatch.setattr(runner_mod, "STOP_GRACE_S", 0.5)
    run = EngineRun(RunSpec(file=str(direct_dir / "x.dat"), file_size=16 * MIB, block_size=4096, duration=30))
    run.prepare()
    run.start()
    wait_until(lambda: len(run.samples) >= 5, what="samples")
    pid = run._child.pid
    os.kill(pid, signal.SIGSTOP)
    run.stop()
    assert not run.join(0.3)
    run._abandon()
    run.close()
    result = run.finish()
    assert result.status == "interrupted" and "did not stop" in result.error and result.bytes > 0
    assert not (direct_dir / "x.dat").exists()
    assert gone(pid)


def test_the_result_keeps_the_engine_process_cpu_and_samples(direct_dir):
    """The process figures are the engine process's; the result comes whole from there."""
    run = EngineRun(RunSpec(file=str(direct_dir / "x.dat"), file_size=16 * MIB, block_size=4096, duration=0.6))
    result = run.execute()
    assert result.status == "ok" and not result.incomplete
    assert result.cpu["cpu_seconds"] > 0 and result.samples and run.samples
    assert len(result.samples) == len(run.samples)
    assert result.environment["io_mode"] == "O_DIRECT" and run.engine.labels == result.labels
    assert run.snapshot().bytes == result.bytes


def test_errors_from_the_engine_process_keep_their_kind(direct_dir):
    from xferscope.errors import SpecError

    (direct_dir / "theirs.dat").write_bytes(b"x" * MIB)
    with pytest.raises(SpecError) as info:
        EngineRun(RunSpec(io="write", file=str(direct_dir / "theirs.dat"), file_size=MIB, duration=0.2)).execute()
    assert info.value.field == "file" and info.value.exit_code == 2
    assert (direct_dir / "theirs.dat").read_bytes() == b"x" * MIB


def test_a_message_of_no_known_kind_is_one_clear_error_on_either_side(direct_dir):
    """The engine's protocol is typed (``child_messages``, ``engine_process``): the engine's process answers a
    command it does not know with ``Failed`` naming it (and goes on), and the run raises ``UnknownMessage`` for
    a message it did not expect, instead of misreading either."""
    from xferscope.child_host import ChildHost
    from xferscope.child_messages import Failed, Progress, Start, UnknownMessage
    from xferscope.isolation import error_from_wire
    from xferscope.run.engine_process import EngineJob, EngineWork, Plan, Prepared

    spec = RunSpec(path="host", file=str(direct_dir / "x.dat"), file_size=8 * MIB, duration=0.2)
    sent: list = []
    host = ChildHost(None, EngineJob(spec), EngineWork, (Plan,))
    host.send = sent.append
    host._handle("start")  # the untyped command of old
    [failed] = sent
    assert isinstance(failed, Failed) and not host._start.is_set()
    assert "unexpected message str 'start'; expected one of: Plan, Start, Stop, Close" in str(
        error_from_wire(failed.error)
    )
    run = EngineRun(spec)
    run._driver.control.put(Progress(1, 2))  # set-up progress is taken on the way
    run._driver.control.put(Start())
    with pytest.raises(UnknownMessage, match=r"unexpected message Start.*expected one of: Prepared"):
        run._await(Prepared)


def test_start_keeps_the_counters_the_engine_sent_after_started(direct_dir):
    """The engine's messages are read in their order: "started" (with its first counters), then samples. A run that
    fails at its first block can send its last counters (with the error) before ``start`` takes up "started";
    ``start`` must not put the first counters back (an MPI rank read its error from them, and its failure went
    unnoticed)."""
    from xferscope.engines.base import Snapshot
    from xferscope.run.engine_process import Started
    from xferscope.stats import Histogram

    def counters(error):
        return Snapshot(0, (), Histogram(), Histogram(), 0, 0, None, 0, error)

    run = EngineRun(RunSpec(path="host", file=str(direct_dir / "x.dat"), file_size=8 * MIB, duration=0.2))
    first, last = counters(None), counters(("verification failed: data at offset 0", 0))
    started = Started([], [None], {}, first)
    run._snapshot = last  # the reader has read "started", then the last counters
    run._driver.control.put(started)
    run.start()
    assert run.snapshot() is last
