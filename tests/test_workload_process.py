"""A workload's engine process seen from the parent (``workloads.process_run``): a process that stops answering
is ended after the stop grace, and what it sent is kept."""

from __future__ import annotations

import os
import time

from xferscope.workloads.process_run import WorkloadChild

STUCK_WORKLOAD = '''
import time


def ignores_stop(channel):
    """A workload's process that starts, sends one tick, then never reads or sends again (a driver call that
    never returns)."""
    channel.recv()  # the job
    channel.send(("ready", ["stand-in"], {}))
    channel.recv()  # "start"
    channel.send(("tick", {"steps": 1}))
    while True:
        time.sleep(60)
'''


def test_a_workload_process_that_ignores_stop_is_killed_after_the_grace_and_its_ticks_are_kept(tmp_path, monkeypatch):
    """stop() from another thread (the console's) on a workload whose process has stopped answering: after the
    stop grace its process is killed, and the run ends interrupted with what it sent, not never."""
    import threading

    from xferscope.workloads import process_run

    (tmp_path / "stuck_workload.py").write_text(STUCK_WORKLOAD)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", str(tmp_path) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    monkeypatch.setattr(process_run, "STOP_GRACE_S", 1.0)
    import stuck_workload

    child = WorkloadChild(stuck_workload.ignores_stop, "a stuck workload", "host")
    ticks: list = []
    ended: list = []
    runner = threading.Thread(target=lambda: ended.append(child.execute({}, ticks.append)), daemon=True)
    runner.start()
    deadline = time.monotonic() + 60
    while not ticks and time.monotonic() < deadline:
        time.sleep(0.05)
    assert ticks == [{"steps": 1}]
    child.stop()
    runner.join(60)
    assert ended, "the run ended"
    [out] = ended
    assert out.status == "interrupted" and "did not stop within 1 s" in out.error, out
    pid = child._child.pid
    assert child._child.returncode is not None, f"process {pid} is gone"
