"""Shared fixtures: a directory where O_DIRECT works, and the CLI through its real entry point."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from xferscope.stats import Histogram, bucket_index
from xferscope.target import probe_direct_io


@dataclass
class CliResult:
    code: int
    out: str
    err: str


#: where a test's files go when the temporary directory refuses O_DIRECT, in this order
DIRECT_IO_FALLBACKS = ("/var/tmp", os.getcwd())


@contextlib.contextmanager
def direct_dir_in(tmp: Path):
    """``tmp``, or a directory made for the test elsewhere, on a filesystem that accepts O_DIRECT (skips where
    none does)."""
    ok, why = probe_direct_io(str(tmp))
    if ok:
        yield tmp
        return
    for parent in DIRECT_IO_FALLBACKS:
        if probe_direct_io(parent)[0]:
            d = Path(tempfile.mkdtemp(prefix="xs-test-", dir=parent))
            try:
                yield d
            finally:
                shutil.rmtree(d, ignore_errors=True)
            return
    pytest.skip(f"no filesystem here accepts O_DIRECT ({why})")


@pytest.fixture
def direct_dir(tmp_path):
    """A temporary directory on a filesystem that accepts O_DIRECT (skips where none does)."""
    with direct_dir_in(tmp_path) as d:
        yield d


@pytest.fixture(scope="module")
def module_direct_dir(tmp_path_factory):
    """``direct_dir`` shared by the tests of one module (for a costly result that several tests read)."""
    with direct_dir_in(tmp_path_factory.mktemp("module")) as d:
        yield d


def xferscope_cli(*args: str, timeout: float = 120, env: dict | None = None) -> CliResult:
    """Run `python -m xferscope.cli ARGS` as a user would (a new process, the real entry point). A command still
    running after ``timeout`` fails the test with what every thread of it was doing (Python's fault handler)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "xferscope.cli", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONFAULTHANDLER": "1", **(env or {})},
    )
    out, err = communicate_or_dump(proc, timeout, f"xferscope {' '.join(args)}")
    # into a pipe, plain text: not one terminal escape code (colour, bold, a progress line's erase)
    assert "\x1b" not in out + err, f"an escape code in the output of xferscope {' '.join(args)}:\n{out}{err}"
    return CliResult(proc.returncode, out, err)


def communicate_or_dump(proc: subprocess.Popen, timeout: float, what: str) -> tuple[str, str]:
    """``proc.communicate``; a command (started with PYTHONFAULTHANDLER=1) still running after ``timeout`` fails
    the test with what every thread of it, and of the processes it started, was doing."""
    try:
        return proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        import psutil

        stacks = ""
        if shutil.which("py-spy"):  # where it is installed: the stacks of the processes the command started
            for child in psutil.Process(proc.pid).children(recursive=True):
                dump = subprocess.run(["py-spy", "dump", "--pid", str(child.pid)], capture_output=True, text=True)
                stacks += f"\n--- process {child.pid} {' '.join(child.cmdline()[2:4])}:\n{dump.stdout}{dump.stderr}"
        # every thread's stack: the command's own first (SIGUSR2, on which it prints them and goes on), then its
        # children's (the fault handler: an engine's lands in the command's own error line), then the command's
        # again should it still run
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGUSR2)
        time.sleep(0.5)  # the dump is written by the signal's handler; a moment for it before the children go
        for child in psutil.Process(proc.pid).children(recursive=True):
            with contextlib.suppress(psutil.Error):
                child.send_signal(signal.SIGABRT)
        try:
            _, err = proc.communicate(timeout=5)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGABRT)
            _, err = proc.communicate(timeout=30)
        raise AssertionError(f"{what} still ran after {timeout} s; its threads:\n{err}{stacks}") from None


@pytest.fixture
def cli():
    return xferscope_cli


def interrupted_cli(args, watch, until=None) -> tuple[int, str, str]:
    """xferscope ARGS in a process of its own (no GPU), Ctrl-C once something appears in the directory ``watch``
    and then ``until(process)`` holds (a condition on the command's psutil process: work under way), when
    given; its exit code, stdout and stderr. A command that ends first fails the test."""
    import psutil

    proc = subprocess.Popen(
        [sys.executable, "-m", "xferscope.cli", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "XFERSCOPE_NO_GPU": "1"},
    )
    deadline = time.time() + 120
    while time.time() < deadline and not any(watch.iterdir()) and proc.poll() is None:
        time.sleep(0.05)
    if until is not None:
        me = psutil.Process(proc.pid)
        while time.time() < deadline and proc.poll() is None and not until(me):
            time.sleep(0.05)
    assert proc.poll() is None, f"the command ended before the signal: {proc.communicate()}"
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    return proc.returncode, out, err


def no_files_left(directory, within_s: float = 30.0, pattern: str = "xferscope-*") -> bool:
    """No file of xferscope's (``pattern``) is left anywhere under ``directory``: removed by the processes that
    made them, or, where one was killed first (an MPI launcher kills its ranks a moment after Ctrl-C), by its
    janitor a moment after it ended."""
    deadline = time.monotonic() + within_s
    while list(Path(directory).rglob(pattern)):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def sends_from_now(process):
    """A condition: ``process``, a child whose only writes are its messages to the parent (its I/O reads
    storage into memory), has sent one since this call: a sample or a tick, whatever the machine's load. The
    kernel counts every write(2), a pipe's included, in its ``write_chars``."""
    before = process.io_counters().write_chars
    return lambda: process.io_counters().write_chars > before


#: the workloads' child processes, as their command lines name them
TRAIN_PROCESS = "xferscope.workloads.train.train_process:serve"
TRANSFER_PROCESS = "xferscope.workloads.inference.transfer_process:serve"


def children_running(target: str, count: int = 1):
    """A condition for ``interrupted_cli``: true once ``count`` distinct processes of the command have been seen
    running ``target`` (a ``module:function`` of the child-process framework)."""
    import psutil

    pids: set[int] = set()

    def check(process) -> bool:
        for child in process.children(recursive=True):
            with contextlib.suppress(psutil.Error):
                if target in " ".join(child.cmdline()):
                    pids.add(child.pid)
        return len(pids) >= count

    return check


def child_has_read(target: str, nbytes: int):
    """A condition for ``interrupted_cli``: true once a process of the command running ``target`` has read
    ``nbytes`` from storage (its I/O counters)."""
    import psutil

    def check(process) -> bool:
        for child in process.children(recursive=True):
            with contextlib.suppress(psutil.Error):
                if target in " ".join(child.cmdline()) and child.io_counters().read_bytes >= nbytes:
                    return True
        return False

    return check


@pytest.fixture
def no_gpu(monkeypatch, tmp_path):
    """This machine as one without any GPU, whatever it has: NVML, CUDA and cuFile all see none, and no
    link ceiling is cached; in this process, and in the processes xferscope starts (engines, checks)."""
    from xferscope import gpus
    from xferscope.engines import cufile_driver, gpu_setup
    from xferscope.telemetry import gpu

    def fail():
        raise RuntimeError("NVML Shared Library Not Found")

    monkeypatch.setattr(gpu, "_nvml", fail)
    monkeypatch.setattr(gpu_setup, "cuda_status", lambda: ("no GPU: CUDA sees no device", 0))
    monkeypatch.setattr(cufile_driver, "library_status", lambda: ("no GPU: CUDA sees no device", None))
    monkeypatch.setattr(gpus, "_session_ceilings", {})
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("XFERSCOPE_NO_GPU", "1")


@contextlib.contextmanager
def _held(tmp_path_factory, name: str, alone: bool):
    """A file lock the test processes of this run share (pytest-xdist): exclusive when ``alone``, else shared.

    Fair to the exclusive: every taker passes a gate first, which one waiting for the lock alone holds until it has
    it, so the shared takers that come after wait behind it (with the lock alone, a run of shared holders that
    overlap kept it waiting until the last of them: with 32 workers, until the GPU tests had all ended)."""
    import fcntl

    base = tmp_path_factory.getbasetemp().parent
    with open(base / f"{name}.gate", "a") as gate, open(base / name, "a") as lock:
        fcntl.flock(gate, fcntl.LOCK_EX)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
        finally:
            if not alone:
                fcntl.flock(gate, fcntl.LOCK_UN)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
            fcntl.flock(gate, fcntl.LOCK_UN)


@pytest.fixture(autouse=True)
def _gpu_shared_or_alone(request, tmp_path_factory):
    """GPU tests run side by side (pytest-xdist) on one GPU. Those that read the GPU's free memory to find a leak
    (they use ``held_context``) hold it alone: every other GPU test holds it shared, so none runs beside them."""
    if request.node.get_closest_marker("gpu") is None:
        yield
        return
    with _held(tmp_path_factory, "xferscope-gpu.lock", alone="held_context" in request.fixturenames):
        yield


@pytest.fixture
def full_fs(tmp_path):
    """A real filesystem with no space left: a 64 KiB tmpfs mounted for the test and filled, holding one
    file ``r3.json`` ("previous"). Mounting needs root; skips with the reason elsewhere (the
    ``XFERSCOPE_TEST_WRITE_ERROR`` seam covers full disks there)."""
    mount = tmp_path / "full"
    mount.mkdir()
    proc = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64k,mode=0777", "tmpfs", str(mount)], capture_output=True, text=True
    )
    if proc.returncode:
        pytest.skip(f"cannot mount a small tmpfs here: {(proc.stderr or proc.stdout).strip() or 'not root'}")
    try:
        (mount / "r3.json").write_text("previous")
        try:
            with open(mount / "filler", "wb") as fh:
                while True:
                    fh.write(b"\0" * 4096)
                    fh.flush()
        except OSError:
            pass
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True)


@pytest.fixture
def sim_gpu(monkeypatch):
    """The bounce engines with host stand-ins for CUDA (xferscope._gpusim, see tests/gpu_standins.py):
    their set-up and the real native loop run here, on host memory. Yields the _gpusim module."""
    from gpu_standins import SimResources

    from xferscope import _gpusim
    from xferscope.engines import gpu_native, gpu_setup

    _gpusim.reset()
    monkeypatch.setattr(gpu_setup, "GpuResources", SimResources)
    monkeypatch.setattr(gpu_setup, "unavailable_reason", lambda: None)
    monkeypatch.setattr(gpu_native.GpuNativeEngine, "functions", lambda self: _gpusim.functions())
    yield _gpusim
    _gpusim.reset()


@pytest.fixture
def fifo_with_reader(tmp_path):
    """A named pipe with a reader thread on it: yields (path, received), where ``received()`` waits for the
    writer to close the pipe and returns the bytes read."""
    import threading

    fifo = tmp_path / "results.fifo"
    os.mkfifo(fifo)
    got: list[bytes] = []

    def reader():
        with open(fifo, "rb") as fh:
            got.append(fh.read())

    thread = threading.Thread(target=reader, daemon=True)
    thread.start()

    def received() -> bytes:
        thread.join(timeout=60)
        assert not thread.is_alive(), "the writer never closed the FIFO"
        return got[0]

    yield fifo, received
    if thread.is_alive():  # nothing ever wrote: release the reader
        try:
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        except OSError:
            pass
        thread.join(timeout=5)


def pytest_configure(config):
    # The Ctrl-C tests need SIGINT to reach Python. A suite started as a background job of a script inherits
    # SIGINT ignored, and so would every process it starts; a handler of our own is reset to the default in
    # them instead.
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


#: set by CI (.ci/run): there a test that is not marked ``gpu`` and skips fails instead, naming its reason, so that
#: every test a machine without a GPU can run does run (Open MPI missing, a namespace refused: CI is broken)
STRICT_ENV = "XFERSCOPE_TESTS_STRICT"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if os.environ.get(STRICT_ENV) == "1" and report.skipped and item.get_closest_marker("gpu") is None:
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = f"skipped, where every test without the gpu mark must run ({STRICT_ENV}=1): {reason}"


def pytest_xdist_auto_num_workers(config):
    """Workers for ``-n auto``: two per CPU (at most 32). About a third of the suite's time is spent waiting on
    the processes it starts (the CLI, engines) and on their runs, not computing; one worker per CPU leaves
    the CPUs idle then."""
    return min(32, 2 * (len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1))


def pytest_addoption(parser):
    parser.addoption(
        "--update-snapshots",
        action="store_true",
        default=False,
        help="draw the console's snapshots in tests/snapshots again (look at them before committing)",
    )


def histogram_of(values_ns) -> Histogram:
    """The histogram of ``values_ns`` bucketed in Python, one value at a time: what the C core's must equal."""
    h = Histogram()
    for v in values_ns:
        h.counts[bucket_index(int(v))] += 1
    return h
