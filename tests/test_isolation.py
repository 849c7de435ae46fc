"""A function run in a child process: its answer, its errors as themselves, its death by a signal named,
and a child that leaves when its parent is gone."""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from xferscope.engines.registry import engine_class
from xferscope.errors import RunFailed, SpecError
from xferscope.isolation import CallWorker, ChildDied, call, describe_exit, fault_summary


def test_an_answer_comes_back_from_another_process():
    assert call(os.getpid, what="a pid") != os.getpid()


def test_xferscope_errors_keep_their_kind_and_fields():
    with pytest.raises(SpecError) as info:
        call(engine_class, "warp", what="a path")
    assert (
        info.value.field == "path" and info.value.exit_code == 2 and "unknown transfer path 'warp'" in str(info.value)
    )
    with pytest.raises(RunFailed) as info:  # not one of xferscope's: a failure that names it
        call(os.listdir, "/nonexistent/dir", what="listing")
    assert str(info.value).startswith("unexpected error: FileNotFoundError:")


def test_a_crash_is_named_by_its_signal_with_the_fault_report():
    with pytest.raises(ChildDied) as info:
        call(ctypes.string_at, 0, what="reading address 0")
    assert info.value.signal_name == "SIGSEGV" and "reading address 0: its process died by SIGSEGV" in str(info.value)
    assert info.value.stderr_tail[0].startswith("Fatal Python error: Segmentation fault")


def test_a_worker_starts_again_after_its_child_died():
    with CallWorker("checks") as worker:
        first = worker.call(os.getpid)
        assert worker.call(os.getpid) == first
        with pytest.raises(ChildDied):
            worker.call(os.abort)
        assert worker.call(os.getpid) not in (first, None)


def test_no_answer_in_time_kills_the_child():
    with pytest.raises(ChildDied) as info:  # it returns at all: the call would sleep for a minute
        call(time.sleep, 60, what="sleeping", timeout=1)
    assert "no answer within 1 s" in str(info.value)


def test_exit_statuses_read_as_words():
    assert describe_exit(-signal.SIGSEGV) == ("SIGSEGV (segmentation fault)", "SIGSEGV")
    assert describe_exit(3) == ("exit status 3", None)


def test_the_fault_summary_is_the_faulting_thread():
    report = [
        "Fatal Python error: Segmentation fault",
        "",
        "Thread 0x1 (most recent call first):",
        '  File "a.py", line 1 in other',
        "",
        "Current thread 0x2 (most recent call first):",
        '  File "b.py", line 9 in crashing',
        '  File "b.py", line 2 in <module>',
        "",
        "Extension modules: x",
    ]
    assert fault_summary(report) == [report[0], report[5], report[6], report[7]]


def test_a_child_leaves_when_its_parent_is_killed(tmp_path):
    """The parent is SIGKILLed while its child waits for a request: the child notices and leaves."""
    script = textwrap.dedent("""
        import sys, time
        from xferscope.isolation import Child, _serve_calls
        child = Child(_serve_calls, what="waiting")
        print(child.pid, flush=True)
        time.sleep(60)
    """)
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    pid = int(parent.stdout.readline())
    parent.kill()
    parent.wait()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    else:
        pytest.fail("the child outlived its parent")


def test_a_channel_closed_under_its_reader_never_reads_the_next_pipe_that_gets_its_number():
    """A reader thread between two reads while another thread closes the channel: its next read must end, not
    read whatever pipe the descriptor's number is given to next (the next engine's: it took that engine's first
    message, and the run waiting for it waited for ever)."""
    import threading

    from xferscope.isolation import Channel

    r1, w1 = os.pipe()
    first = Channel(r1, w1)
    first.send("one")
    got, go_on, out = [], threading.Event(), []

    def reader():
        got.append(first.recv())
        go_on.wait(10)  # between two reads
        try:
            out.append(first.recv())
        except EOFError:
            out.append("EOF")

    thread = threading.Thread(target=reader)
    thread.start()
    while not got:
        time.sleep(0.01)
    first.close()
    r2, w2 = os.pipe()  # the lowest free numbers: the ones just closed
    assert r2 == r1, "the test needs the closed number given out again"
    second = Channel(r2, w2)
    second.send("two")
    go_on.set()
    thread.join(10)
    assert out == ["EOF"], "the old reader read the new pipe"
    assert second.recv(timeout=5) == "two"
    second.close()


def test_only_a_module_level_function_can_be_a_childs_target():
    """A child process imports its target by name: a method, a lambda or a function of a script cannot be found
    there, and is refused here, before any process starts."""
    from xferscope.isolation import target_name

    assert target_name(os.getpid) == "posix:getpid" and target_name(call) == "xferscope.isolation:call"
    for bad in (lambda: None, CallWorker.call, test_only_a_module_level_function_can_be_a_childs_target.__call__):
        with pytest.raises(ValueError, match="top-level function"):
            target_name(bad)
