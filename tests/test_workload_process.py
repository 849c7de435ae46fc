"""A workload's engine process seen from the parent (``workloads.process_run``): a process that stops answering
is ended after the stop grace, and what it sent is kept; a run stopped from outside (another rank's word) says
why."""

from __future__ import annotations

import os
import time

from xferscope.workloads.common.process_run import WorkloadChild

STAND_INS = '''
import time

from xferscope.child_messages import Ready, Tick


def ignores_stop(channel):
    """A workload's process that starts, sends one tick, then never reads or sends again (a driver call that
    never returns)."""
    channel.recv()  # the job
    channel.send(Ready(["stand-in"], {}))
    channel.recv()  # Start
    channel.send(Tick({"steps": 1}))
    while True:
        time.sleep(60)


def runs_until_stopped(channel):
    """A workload's process that, once started, ticks until it is told to stop, then ends with its ticks."""
    from xferscope.child_messages import Ended, Stop

    channel.recv()  # the job
    channel.send(Ready(["stand-in"], {}))
    channel.recv()  # Start
    steps = 0
    while True:
        try:
            if isinstance(channel.recv(timeout=0.05), Stop):
                break
        except TimeoutError:
            pass
        steps += 1
        channel.send(Tick({"steps": steps}))
    channel.send(Ended(payload=steps))
    channel.recv()  # Close


def speaks_another_tongue(channel):
    """A workload's process that, once started, sends what no workload sends."""
    channel.recv()  # the job
    channel.send(Ready(["stand-in"], {}))
    channel.recv()  # Start
    channel.send(("tick", {"steps": 1}))  # the untyped message of old
    channel.recv()  # Close
'''


def stand_ins(tmp_path, monkeypatch):
    """The module of stand-in workload processes, importable here and in the processes started."""
    import importlib

    (tmp_path / "workload_stand_ins.py").write_text(STAND_INS)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", str(tmp_path) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return importlib.import_module("workload_stand_ins")


def test_a_workload_process_that_ignores_stop_is_killed_after_the_grace_and_its_ticks_are_kept(tmp_path, monkeypatch):
    """stop() from another thread (the console's) on a workload whose process has stopped answering: after the
    stop grace its process is killed, and the run ends interrupted with what it sent, not never."""
    import threading

    from xferscope.workloads.common import process_run

    monkeypatch.setattr(process_run, "STOP_GRACE_S", 1.0)
    child = WorkloadChild(stand_ins(tmp_path, monkeypatch).ignores_stop, "a stuck workload", "host")
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


def test_a_message_of_no_known_kind_fails_the_run_with_one_clear_error(tmp_path, monkeypatch):
    """Messages are typed (``child_messages``): one of another kind is named as such, not misread."""
    child = WorkloadChild(stand_ins(tmp_path, monkeypatch).speaks_another_tongue, "a stand-in", "host")
    out = child.execute({})
    assert out.status == "failed" and out.error.startswith("unexpected message tuple ('tick'"), out.error
    assert "expected one of: Tick, Ended" in out.error


def test_the_workload_host_answers_a_command_of_no_known_kind_with_a_failure():
    """The child's side: a command it does not know is answered with ``Failed`` naming it, and ignored."""
    from xferscope.child_host import ChildHost
    from xferscope.child_messages import Failed
    from xferscope.isolation import error_from_wire

    sent: list = []
    host = ChildHost(None, {}, lambda job: None)
    host.send = sent.append
    host._handle("start")  # the untyped command of old
    [failed] = sent
    assert isinstance(failed, Failed)
    assert "unexpected message str 'start'; expected one of: Start, Stop, Close" in str(error_from_wire(failed.error))
    assert not host._start.is_set()


def test_a_run_stops_at_a_word_from_outside_and_says_why(tmp_path, monkeypatch):
    """Under MPI another rank's run ending early stops this one (``stop_when``): the run ends interrupted, with the
    reason as its error and what it measured kept; without a word it would run until stopped."""
    from xferscope.workloads.common.process_run import stop_when

    child = WorkloadChild(stand_ins(tmp_path, monkeypatch).runs_until_stopped, "a stand-in", "host")
    ticks: list = []

    def word() -> str | None:  # the word comes once the run has ticked
        return "stopped: rank 1 on b ended early" if ticks else None

    with stop_when(word):
        out = child.execute({}, ticks.append)
    assert out.status == "interrupted" and out.error == "stopped: rank 1 on b ended early", out
    assert out.payload >= 1 and ticks
