"""The parent's side of work in a child process: one driver for engine runs, memory sweeps and workloads.

``ChildDriver(what, progress=..., on_progress=...)`` starts the process (``launch``: with its environment and
cuFile's log, or a kept process of an earlier run) and a reader thread that sorts what the child sends
(``child_messages``):

* the kinds given as ``progress`` (samples, points, ticks) go to ``on_progress`` as they come;
* ``Ended`` is kept (``ended``) and handed to ``on_ended``; ``Closed`` is noted (``closed``);
* every other message is the answer to a step, which ``answer(kind)`` waits for (``Failed`` is raised there as
  the error it carries, another kind as ``UnknownMessage``).

``over`` is set once when the work is over: its ``Ended`` came, its process is gone, or it has closed and may
serve another run (``keep_after_close``); ``on_over`` is called then, in the reader. When the process ends
without having closed (a signal, an early exit, killed after its stop grace), the reader asks the owner's
``died(how, signal_name)`` for the error that says so, and every later wait raises it.

The job goes out with ``send_job`` (a stop asked before it follows it: before its job a kept process still
belongs to the run before, and would not hear it). ``stop`` asks once; ``stop_overdue(grace_s)`` says when a
stopped child has had its grace; ``close`` asks the child to free what it holds and waits for ``Closed``, then
ends the process unless it is kept, and removes cuFile's log with it.
"""

from __future__ import annotations

import os
import queue
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from xferscope import janitor
from xferscope.child_messages import Close, Closed, Ended, Failed, Progress, Stop, expect
from xferscope.errors import RunFailed
from xferscope.isolation import Channel, Child, ChildDied, describe_exit, error_from_wire, error_to_wire

M = TypeVar("M")
#: the reader's word to whoever waits for an answer: the process is gone
_GONE = object()
#: lines of the process's stderr and of cuFile's log kept with a failure
TAIL_LINES = 12


class EngineDied(ChildDied):
    """An engine's process died (a signal) or left without its result. ``result``: what it measured until then
    (None when it died before its timed region); ``detail``: its last words."""

    def __init__(self, path: str, how: str, signal_name: str | None, when: str, detail: list[str]):
        self.path, self.when, self.detail = path, when, list(detail)
        self.result: Any = None
        verb = f"died by {how}" if signal_name else f"ended with {how}"
        ChildDied.__init__(
            self, f"{path} engine", how, signal_name, detail, message=f"{path}: the engine process {verb} {when}"
        )


def _tail(path: str, lines: int) -> list[str]:
    """The last non-empty lines of a log file (of its last 64 KiB)."""
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(0, fh.tell() - (64 << 10)))
            text = fh.read().decode(errors="replace")
    except OSError:
        return []
    return [ln.rstrip() for ln in text.splitlines() if ln.strip()][-lines:]


class ChildDriver:
    def __init__(
        self,
        what: str,
        *,
        progress: tuple[type, ...] = (),
        on_progress: Callable[[Any], None] | None = None,
        on_ended: Callable[[Ended], None] | None = None,
        on_over: Callable[[], None] | None = None,
        died: Callable[[str, str | None], BaseException] | None = None,
        keep_after_close: Callable[[], bool] = lambda: False,
        on_answer: Callable[[Any], None] | None = None,
    ):
        self.what = what
        self._progress, self._on_progress = progress, on_progress
        self._on_ended, self._on_over, self._died = on_ended, on_over, died
        self._keep_after_close = keep_after_close
        #: sees each step's answer in the reader, in the order the child sent it (before any later progress)
        self._on_answer = on_answer
        self.child: Child | None = None
        #: cuFile's log of the process (a file of ours, guarded by the janitor until removed)
        self.log: str | None = None
        #: the answers to steps, then ``_GONE`` once the process is gone
        self.control: queue.Queue[Any] = queue.Queue()
        self.ended: Ended | None = None
        self.death: BaseException | None = None
        self.over = threading.Event()
        self.closed = threading.Event()
        self.reader: threading.Thread | None = None
        #: the process has its job: only then does it answer Stop and Close
        self.job_sent = False
        #: when the stop was first asked (None: not asked): its grace runs from then
        self.stop_at: float | None = None

    # ---------------------------------------------------------------- the process
    def launch(
        self,
        target: Callable[[Channel], Any],
        *,
        env: dict[str, str] | None = None,
        log: str | None = None,
        thread_death_signal: bool = True,
        kept: tuple[Child, str | None] | None = None,
    ) -> Child:
        """Start the process running ``target`` with ``env`` (or adopt ``kept``, a process and its log), and its
        reader (first: a Ctrl-C from here on finds a reader to hear the child's ``Closed``). ``log``: cuFile's log
        of the process, a file of ours guarded by the janitor, removed with the process."""
        if kept is not None:
            self.child, self.log = kept
        else:
            self.log = log
            self.child = Child(target, what=self.what, env=env, thread_death_signal=thread_death_signal)
        self.reader = threading.Thread(target=self._read, name=f"xferscope-child-{self.child.pid}", daemon=True)
        self.reader.start()
        return self.child

    @property
    def pid(self) -> int:
        return self._launched().pid

    def _launched(self) -> Child:
        if self.child is None:
            raise RuntimeError(f"the {self.what}'s process has not been launched")
        return self.child

    def send(self, message: Any) -> bool:
        """False when the child can no longer hear (or has not been launched)."""
        return self.child is not None and self.child.send(message)

    def send_job(self, job: Any) -> bool:
        self.job_sent = self._launched().send(job)
        if self.stop_asked:  # asked before there was a process to tell
            self.send(Stop())
        return self.job_sent

    def _read(self) -> None:
        child = self._launched()
        try:
            while True:
                message = child.recv()
                if isinstance(message, self._progress):
                    if self._on_progress is not None:
                        self._on_progress(message)
                elif isinstance(message, Ended):
                    self.ended = message
                    if self._on_ended is not None:
                        self._on_ended(message)
                    self._set_over()
                elif isinstance(message, Closed):
                    self.closed.set()
                    if self._keep_after_close():  # the process may serve the next run: stop reading here
                        self._set_over()
                        return
                else:
                    if self._on_answer is not None:
                        self._on_answer(message)
                    self.control.put(message)
        except (EOFError, OSError):
            pass
        except Exception as exc:  # a message that cannot be read: the channel is useless from here on
            self.control.put(Failed(error_to_wire(RunFailed(f"cannot read the {self.what}'s messages: {exc!r}"))))
            child.kill()
        child.wait(10.0)
        if not self.closed.is_set():
            how, name = self._exit()
            self.death = self._died(how, name) if self._died else ChildDied(self.what, how, name, child.stderr_tail())
        self.control.put(_GONE)
        self._set_over()

    def _set_over(self) -> None:
        if not self.over.is_set():
            self.over.set()
            if self._on_over is not None:
                self._on_over()

    def _exit(self) -> tuple[str, str | None]:
        """How the process ended (a process that closed its end yet lives on is killed)."""
        child = self._launched()
        rc = child.returncode
        if rc is None:
            child.kill()
            rc = child.wait()
        return describe_exit(rc)

    def last_words(self, lines: int = TAIL_LINES) -> list[str]:
        """The process's last lines on stderr, and cuFile's log's, each under a heading."""
        out: list[str] = []
        if self.child is not None:
            tail = self.child.stderr_tail(lines)
            if tail:
                out += ["engine process stderr (last lines):"] + ["  " + ln for ln in tail]
        if self.log:
            tail = _tail(self.log, lines)
            if tail:
                out += [f"cuFile log {self.log} (last lines):"] + ["  " + ln for ln in tail]
        return out

    # ---------------------------------------------------------------- steps
    def next_answer(self, timeout: float | None = None) -> Any:
        """The next answer to a step; None when none came within ``timeout``. Raises the process's death (or
        RunFailed) once it is gone."""
        try:
            message = self.control.get(timeout=timeout)
        except queue.Empty:
            return None
        if message is _GONE:
            self.control.put(message)  # every later wait sees it too
            raise self.death or RunFailed(f"the {self.what}'s process is gone")
        return message

    def answer(self, kind: type[M], on_progress: Callable[[int, int], None] | None = None) -> M:
        """The next answer, a ``kind``: ``Progress`` on the way goes to ``on_progress``, an error there is raised
        here, and so is a message of another kind (``UnknownMessage``)."""
        while True:
            message = self.next_answer(timeout=0.2)  # short waits: Ctrl-C is heard between them
            if message is None:
                continue
            if isinstance(message, Progress):
                if on_progress is not None:
                    on_progress(message.done, message.total)
                continue
            if isinstance(message, Failed):
                raise error_from_wire(message.error)
            return expect(message, kind)

    # ---------------------------------------------------------------- stop and end
    @property
    def stop_asked(self) -> bool:
        return self.stop_at is not None

    def stop(self) -> None:
        """Ask the work to stop and keep what it measured (once the job is out; before, it follows the job)."""
        if self.stop_at is None:
            self.stop_at = time.monotonic()
        if self.job_sent:
            self.send(Stop())

    def stop_overdue(self, grace_s: float) -> bool:
        return self.stop_at is not None and time.monotonic() - self.stop_at > grace_s

    def kill(self) -> None:
        if self.child is not None:
            self.child.kill()

    def close(
        self, timeout_s: float, *, ask: bool = True, end_grace_s: float = 5.0, keep: Callable[[], bool] | None = None
    ) -> bool:
        """Ask the child to close (``ask``, and only once it has its job) and wait up to ``timeout_s`` for
        ``Closed``; then hand the process to ``keep`` (True: kept for the next run), or end it (after
        ``end_grace_s``). cuFile's log goes with a process that is not kept. Returns whether it was kept."""
        child = self.child
        kept = False
        try:
            if child is None:
                return False
            if ask and self.job_sent and self.reader is not None and child.send(Close()):
                deadline = time.monotonic() + timeout_s
                while not self.closed.wait(0.2):
                    if child.returncode is not None or time.monotonic() > deadline:
                        break
            kept = keep is not None and keep()
            if not kept:
                child.end(grace_s=end_grace_s)
                if self.reader is not None:
                    self.over.wait(10.0)
            return kept
        finally:
            if self.log and not kept:  # a kept process goes on writing to it; the pool removes it
                janitor.discard(self.log)
                self.log = None
