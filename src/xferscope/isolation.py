"""Native code in a process of its own: a crash there is a message here, never the end of this process.

cuFile, the CUDA driver, NVML and xferscope's own C cores can take a process down
with a signal. Whatever calls them for a run, a ``doctor`` check or a probe runs
in a child started here (``python -c CHILD_MAIN MODULE:FUNCTION``): a
fresh interpreter, never a fork of this one (no threads, CUDA contexts or locks
carried over), in a session of its own (a Ctrl-C or a hang-up at the terminal
reaches only this process, which then tells the child what to do).

The two talk over a pair of pipes with length-prefixed pickles (``Channel``). The
child's stdout and stderr go to a third pipe, of which the last lines are kept
(``Child.stderr_tail``) to say what the child said before it died.

The child notices when this process is gone, even when it was killed outright:
the kernel sends it SIGTERM when the thread that started it ends
(``PR_SET_PDEATHSIG``), and its end of the command pipe reads end-of-file.
Either way it raises ``ParentGone`` in its main thread, so that it can stop and
remove its files before it leaves.

``CallWorker.call(target, *args)`` runs a function in a child and returns its result (the
child answers call after call; ``call`` uses one for one call): a crash there
raises ``ChildDied`` here, naming the signal, and the next call starts a new child.
"""

from __future__ import annotations

import collections
import contextlib
import ctypes
import faulthandler
import importlib
import os
import pickle
import select
import signal
import struct
import subprocess
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from xferscope.errors import RunFailed, XferscopeError

_HEADER = struct.Struct("<Q")
PR_SET_PDEATHSIG = 1
#: lines of the child's stderr kept to tell what it said last
STDERR_LINES = 40


class ChildDied(RunFailed):
    """A child process ended without its answer: killed by a signal, or exited early.

    ``what`` names the work it did; ``how`` is "SIGSEGV (segmentation fault)" or "exit status 3";
    ``signal_name`` the signal's name (None when it exited); ``stderr_tail`` its last lines."""

    def __init__(
        self,
        what: str,
        how: str,
        signal_name: str | None,
        stderr_tail: list[str] | None = None,
        message: str | None = None,
    ):
        self.what, self.how, self.signal_name = what, how, signal_name
        self.stderr_tail = list(stderr_tail or [])
        super().__init__(
            message
            or (
                f"{what}: its process died by {how}"
                if signal_name
                else f"{what}: its process ended with {how} before answering"
            )
        )


class NoAnswer(ChildDied):
    """A call's child gave no answer within its time and was killed."""


class ParentGone(BaseException):
    """In a child: the process that started it has ended (or asked it to go with SIGTERM)."""


def describe_exit(returncode: int | None) -> tuple[str, str | None]:
    """("SIGSEGV (segmentation fault)", "SIGSEGV") for a death by signal; ("exit status 3", None) else."""
    if returncode is None:
        return "no exit status (still running)", None
    if returncode < 0:
        try:
            sig = signal.Signals(-returncode)
        except ValueError:
            return f"signal {-returncode}", f"signal {-returncode}"
        text = (signal.strsignal(sig) or "").lower()
        return (f"{sig.name} ({text})" if text else sig.name), sig.name
    return f"exit status {returncode}", None


def fault_summary(report: list[str], lines: int = 12) -> list[str]:
    """From Python's fault handler report (all threads): its first line ("Fatal Python error:
    Segmentation fault") and the innermost frames of the thread that faulted."""
    out = [report[0]]
    current = next((i for i, ln in enumerate(report) if ln.startswith("Current thread")), None)
    if current is not None:
        for ln in report[current:]:
            if not ln.strip() or (ln.startswith("Thread 0x") and ln is not report[current]):
                break
            out.append(ln)
    return out[:lines]


# ------------------------------------------------------------------ the channel


class Channel:
    """Length-prefixed pickles over two pipe ends. ``send`` may be called from any thread, and ``recv`` from one
    thread while another closes the channel: the read end is closed only when no ``recv`` is inside it (else by
    that ``recv`` on its way out), and a ``recv`` after ``close`` raises EOFError without touching the number the
    descriptor had. (Closing it under a reader between two reads let that reader read whatever pipe the number
    was given to next: the next engine's, whose first message it took.)"""

    def __init__(self, read_fd: int, write_fd: int):
        self.read_fd, self.write_fd = read_fd, write_fd
        self._lock = threading.Lock()
        self._read_lock = threading.Lock()  # guards read_fd, _readers and _close_pending
        self._readers = 0
        self._close_pending = False
        self.closed = False

    def send(self, obj: Any) -> None:
        """Raises BrokenPipeError (an OSError) when the other side is gone."""
        data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
        view = memoryview(_HEADER.pack(len(data)) + data)
        with self._lock:
            while view:
                n = os.write(self.write_fd, view)
                view = view[n:]

    def recv(self, timeout: float | None = None) -> Any:
        """The next message; raises EOFError when the other side has closed its end (or died), or this side was
        closed, and TimeoutError when none began within ``timeout`` seconds."""
        with self._read_lock:
            if self.read_fd < 0 or self._close_pending:
                raise EOFError("the channel is closed")
            fd = self.read_fd
            self._readers += 1
        try:
            if timeout is not None:
                ready, _, _ = select.select([fd], [], [], timeout)
                if not ready:
                    raise TimeoutError(f"no message within {timeout:g} s")
            (size,) = _HEADER.unpack(self._read_exactly(fd, _HEADER.size))
            return pickle.loads(self._read_exactly(fd, size))
        finally:
            with self._read_lock:
                self._readers -= 1
                if self._close_pending and not self._readers:
                    self._close_read()

    @staticmethod
    def _read_exactly(fd: int, n: int) -> bytes:
        parts, left = [], n
        while left:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                raise EOFError("the other process closed the channel")
            parts.append(chunk)
            left -= len(chunk)
        return b"".join(parts)

    def close_write(self) -> None:
        with self._lock:
            if self.write_fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(self.write_fd)
                self.write_fd = -1

    def _close_read(self) -> None:
        """Close the read end (the caller holds ``_read_lock``)."""
        if self.read_fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self.read_fd)
            self.read_fd = -1
        self._close_pending = False

    def close(self) -> None:
        self.close_write()
        with self._read_lock:
            if self._readers:  # a recv is inside: it closes the read end on its way out
                self._close_pending = True
            else:
                self._close_read()
        self.closed = True


# ------------------------------------------------------------------ errors across the pipe


@dataclass(frozen=True)
class WireError:
    """An exception as plain data, to cross into another process: its class, message and attributes, whether it is
    one of xferscope's (then it is rebuilt as such) and whether it was an interrupt."""

    module: str
    name: str
    message: str
    state: dict[str, object]
    xferscope: bool
    interrupt: bool


def error_to_wire(exc: BaseException) -> WireError:
    """``exc`` as a ``WireError`` (only the attributes that pickle)."""
    cls = type(exc)
    state = {k: v for k, v in getattr(exc, "__dict__", {}).items() if _picklable(v)}
    return WireError(
        cls.__module__,
        cls.__qualname__,
        str(exc),
        state,
        isinstance(exc, XferscopeError),
        isinstance(exc, KeyboardInterrupt),
    )


def _picklable(value: Any) -> bool:
    try:
        pickle.dumps(value)
        return True
    except Exception:
        return False


def error_from_wire(wire: WireError) -> BaseException:
    """The exception ``error_to_wire`` described: the same xferscope class and message where it can be
    rebuilt, else a RunFailed with the original class named."""
    if wire.interrupt:
        return KeyboardInterrupt()
    if wire.xferscope and wire.module.startswith("xferscope."):
        try:
            cls = getattr(importlib.import_module(wire.module), wire.name)
            exc = cls.__new__(cls)
            Exception.__init__(exc, wire.message)
            exc.__dict__.update(wire.state)
            return exc
        except Exception:
            pass
    return RunFailed(f"unexpected error: {wire.name}: {wire.message}")


# ------------------------------------------------------------------ the parent's side


def target_name(target: Callable[..., Any]) -> str:
    """ "module:function": how a child process finds ``target`` (a function or class defined at a module's top
    level), which it imports by that name. Raises ValueError for anything else (a method, a lambda, a closure)."""
    module, name = getattr(target, "__module__", None), getattr(target, "__qualname__", None)
    if not module or module == "__main__" or not name or not name.isidentifier():
        raise ValueError(f"{module}.{name}: only a module's top-level function can run in a child process")
    return f"{module}:{name}"


#: what a child runs: this module's ``child_main``, imported once (``-m`` would run a second copy of it as __main__)
CHILD_MAIN = "import sys; from xferscope.isolation import child_main; child_main(sys.argv[1:])"


class Child:
    """One child process running ``target`` (a module's top-level function, called there with a ``Channel``)."""

    def __init__(
        self,
        target: Callable[[Channel], Any],
        *,
        what: str,
        env: dict[str, str] | None = None,
        thread_death_signal: bool = True,
    ):
        """``thread_death_signal``: the child also gets SIGTERM when the thread starting it ends (the
        kernel ties PR_SET_PDEATHSIG to that thread); without it, only this process's end is noticed."""
        self.target = target_name(target)
        self.what = what
        self._tail: collections.deque[str] = collections.deque(maxlen=STDERR_LINES)
        self._fatal: list[str] | None = None  # Python's fault handler report, from its first line
        cmd_r, cmd_w = os.pipe()  # parent -> child
        msg_r, msg_w = os.pipe()  # child -> parent
        err_r, err_w = os.pipe()  # child's stdout and stderr
        for fd in (cmd_w, msg_r, err_r):
            os.set_inheritable(fd, False)
        try:
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    "-c",
                    CHILD_MAIN,
                    self.target,
                    str(os.getpid()),
                    str(cmd_r),
                    str(msg_w),
                    "1" if thread_death_signal else "0",
                ],
                stdin=subprocess.DEVNULL,
                stdout=err_w,
                stderr=err_w,
                pass_fds=(cmd_r, msg_w),
                start_new_session=True,
                env=env,
                close_fds=True,
            )
        except BaseException:
            for fd in (cmd_r, cmd_w, msg_r, msg_w, err_r, err_w):
                os.close(fd)
            raise
        finally:
            for fd in (cmd_r, msg_w, err_w):
                with contextlib.suppress(OSError):
                    os.close(fd)
        self.channel = Channel(msg_r, cmd_w)
        self.pid = self.proc.pid
        self._err_fd = err_r
        self._stderr_done = threading.Event()
        threading.Thread(target=self._read_stderr, name=f"xferscope-child-{self.pid}-stderr", daemon=True).start()

    def _read_stderr(self) -> None:
        pending = b""
        try:
            while True:
                chunk = os.read(self._err_fd, 65536)
                if not chunk:
                    break
                pending += chunk
                *lines, pending = pending.split(b"\n")
                for line in lines:
                    text = line.decode(errors="replace").rstrip()
                    self._tail.append(text)
                    if text.startswith("Fatal Python error"):
                        self._fatal = [text]
                    elif self._fatal is not None and len(self._fatal) < 400:
                        self._fatal.append(text)
                if len(pending) > 8192:  # a very long line: keep its end
                    pending = pending[-8192:]
        except OSError:
            pass
        finally:
            if pending:
                self._tail.append(pending.decode(errors="replace").rstrip())
            with contextlib.suppress(OSError):
                os.close(self._err_fd)
            self._stderr_done.set()

    def stderr_tail(self, lines: int = 12) -> list[str]:
        """What the child said last: after a fault, the fault handler's first line and the stack of the
        thread that faulted; else its last non-empty lines on stdout or stderr."""
        if self.proc.poll() is not None:
            self._stderr_done.wait(1.0)
        if self._fatal:
            return fault_summary(self._fatal, lines)
        return [ln for ln in list(self._tail) if ln.strip()][-lines:]

    def send(self, obj: Any) -> bool:
        """False when the child can no longer hear (it has ended)."""
        try:
            self.channel.send(obj)
            return True
        except OSError:
            return False

    def recv(self, timeout: float | None = None) -> Any:
        """The child's next message (see ``Channel.recv``: EOFError, and TimeoutError after ``timeout``)."""
        return self.channel.recv(timeout)

    @property
    def returncode(self) -> int | None:
        return self.proc.poll()

    def wait(self, timeout: float | None = None) -> int | None:
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def end(self, grace_s: float = 5.0) -> int:
        """Close the command pipe (the child's cue to leave), wait ``grace_s``, then kill it. Returns its
        exit status."""
        self.channel.close_write()
        rc = self.wait(grace_s)
        if rc is None:
            self.kill()
            rc = self.proc.wait()
        self.channel.close()
        return rc

    def kill(self, sig: int = signal.SIGKILL) -> None:
        with contextlib.suppress(ProcessLookupError, OSError):
            self.proc.send_signal(sig)

    def died(self) -> ChildDied:
        """What to raise when the child ended without its answer (call once it has ended)."""
        rc = self.proc.wait()
        how, name = describe_exit(rc)
        return ChildDied(self.what, how, name, self.stderr_tail())


class CallWorker:
    """A child that answers calls one after another (``call(target, *args)``); when it dies, that call
    raises ``ChildDied`` and the next one starts a new child. ``close()`` ends it."""

    def __init__(self, what: str, env: dict[str, str] | None = None):
        self.what = what
        self.env = env
        self._child: Child | None = None

    def call(self, target: Callable[..., Any], *args: Any, timeout: float | None = None) -> Any:
        """``target(*args)`` (a module's top-level function) in the child; its return value (picklable). An exception
        there is raised here (xferscope's own errors as themselves); a death by signal, an early exit, or
        ``timeout`` seconds without an answer (the child is then killed) raise ``ChildDied``."""
        child = self._child
        if child is None or child.returncode is not None:
            child = self._child = Child(_serve_calls, what=self.what, env=self.env)
        if not child.send((target_name(target), args)):
            self._child = None
            raise child.died()
        try:
            kind, value = child.channel.recv(timeout)
        except TimeoutError:
            child.kill()
            child.end(grace_s=5.0)
            self._child = None
            raise NoAnswer(
                self.what,
                "SIGKILL (no answer in time)",
                None,
                child.stderr_tail(),
                message=f"{self.what}: no answer within {timeout:g} s; its process was killed",
            ) from None
        except (EOFError, OSError):
            child.end(grace_s=5.0)
            self._child = None
            raise child.died() from None
        if kind == "error":
            raise error_from_wire(value)
        return value

    def close(self) -> None:
        if self._child is not None:
            self._child.end(grace_s=5.0)
            self._child = None

    def __enter__(self) -> CallWorker:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def call(
    target: Callable[..., Any], *args: Any, what: str, timeout: float | None = None, env: dict[str, str] | None = None
) -> Any:
    """``target(*args)`` in a short-lived child of its own (see ``CallWorker.call``)."""
    with CallWorker(what, env) as worker:
        return worker.call(target, *args, timeout=timeout)


# ------------------------------------------------------------------ the child's side


def die_with_parent(sig: int = signal.SIGTERM) -> None:
    """Ask the kernel for ``sig`` when the thread that started this process ends. (A parent already gone
    is seen all the same: the channel reads end-of-file.)"""
    with contextlib.suppress(Exception):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0)


def _parent_gone(signum, frame) -> None:
    # once only: the code that handles it must not be interrupted again
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    raise ParentGone(f"signal {signal.Signals(signum).name}")


def child_main(argv: list[str]) -> None:
    target, read_fd, write_fd = argv[0], int(argv[2]), int(argv[3])  # argv[1]: the parent's pid, for ps
    faulthandler.enable(file=sys.stderr, all_threads=True)
    signal.signal(signal.SIGTERM, _parent_gone)
    signal.signal(signal.SIGINT, _parent_gone)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    channel = Channel(read_fd, write_fd)
    try:
        if len(argv) < 5 or argv[4] != "0":
            die_with_parent()
        module_name, fn_name = target.split(":")
        fn: Callable[[Channel], Any] = getattr(importlib.import_module(module_name), fn_name)
        fn(channel)
    except ParentGone:
        pass
    finally:
        sys.stdout.flush()
        sys.stderr.flush()


def _serve_calls(channel: Channel) -> None:
    """The child of a ``CallWorker``: answer requests until the channel closes, then leave at once (no exit
    handlers: a library's teardown that crashes must not turn good answers into a crash)."""
    try:
        while True:
            try:
                target, args = channel.recv()
            except (EOFError, OSError):
                break
            module_name, fn_name = target.split(":")
            try:
                answer = ("ok", getattr(importlib.import_module(module_name), fn_name)(*args))
            except ParentGone:
                raise
            except BaseException as exc:
                answer = ("error", error_to_wire(exc))
            try:
                channel.send(answer)
            except OSError:
                break
    except ParentGone:
        pass
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
