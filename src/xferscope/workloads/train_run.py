"""The parent's side of a training-input run: its engine process, the live ticks, Ctrl-C, and the result.

``TrainRun(spec, data).execute(on_tick)`` starts ``train_process`` in a process of its own, waits for its
set-up, starts it, passes every tick to ``on_tick`` and returns the ``TrainResult``. Ctrl-C (or SIGTERM,
SIGHUP through the CLI's handlers) stops the run: the steps taken so far are the result, marked interrupted.
A crash of the engine's process is a failed result with the steps it had sent (every tick carries the new
ones) and its last words.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

from xferscope.errors import RunFailed
from xferscope.isolation import Child, describe_exit, error_from_wire
from xferscope.workloads.au import Step
from xferscope.workloads.train_data import TrainData
from xferscope.workloads.train_record import TrainResult
from xferscope.workloads.train_spec import TrainSpec

#: how long a stopped run gets to end its steps in flight before its process is killed
STOP_GRACE_S = 20.0


class TrainRun:
    def __init__(self, spec: TrainSpec, data: TrainData):
        self.spec = spec
        self.data = data
        self.labels: list[str] = []
        self.environment: dict[str, Any] = {}
        self._steps: dict[int, list[Step]] = {}
        self._read: dict[int, int] = {}
        self._child: Child | None = None
        self._stop_asked = False

    def stop(self) -> None:
        """End the run early (from any thread): the steps taken so far are its result, marked interrupted."""
        self._stop_asked = True
        child = self._child
        if child is not None:
            child.send("stop")

    def _spawn(self) -> Child:
        env = None
        if self.spec.path == "cufile":
            from xferscope.engines import cufile_driver

            extra, _log = cufile_driver.log_for_child()
            env = {**os.environ, **extra} if extra else None
        return Child("xferscope.workloads.train_process:serve", what=f"the {self.spec.path} training run", env=env)

    def execute(self, on_tick: Callable[[dict[str, Any]], None] | None = None) -> TrainResult:
        child = self._child = self._spawn()
        if self._stop_asked:
            child.send("stop")
        try:
            return self._drive(child, on_tick)
        finally:
            child.end(grace_s=10.0)

    def _recv(self, child: Child):
        try:
            return child.recv()
        except (EOFError, OSError):
            return None

    def _drive(self, child: Child, on_tick) -> TrainResult:
        spec = self.spec
        child.send({"spec": spec, "data": self.data})
        try:
            message = self._recv(child)
        except KeyboardInterrupt:
            child.send("close")
            raise
        if message is None:
            raise self._died(child, "while setting up")
        if message[0] == "error":
            child.send("close")
            raise error_from_wire(message[1])
        _, self.labels, self.environment = message
        child.send("start")
        status, error, process, runs = "ok", None, {}, None
        stop_at: float | None = None
        while True:
            try:
                message = self._recv(child)
            except KeyboardInterrupt:
                status = "interrupted"
                stop_at = time.monotonic()
                child.send("stop")
                continue
            if message is None:
                died = self._died(child, "while running")
                status, error = "failed", str(died)
                self.environment["engine_last_words"] = died.detail
                break
            kind = message[0]
            if kind == "tick":
                self._take(message[1])
                if on_tick is not None:
                    on_tick(message[1])
            elif kind == "ended":
                _, runs, process, wire = message
                if wire is not None:
                    status, error = "failed", str(error_from_wire(wire))
                elif self._stop_asked:
                    status = "interrupted"
                break
            if stop_at is not None and time.monotonic() - stop_at > STOP_GRACE_S:
                child.kill()
        child.send("close")
        while (message := self._recv(child)) is not None and message[0] != "closed":
            pass
        if runs is None or not runs:
            runs = [(i, spec.gpu_of(i), self._steps.get(i, []), self._read.get(i, 0)) for i in range(spec.accelerators)]
        return TrainResult.from_steps(
            spec,
            self.data.describe(),
            runs,
            status=status,
            seconds=process.get("seconds", 0.0),
            cpu_seconds=process.get("cpu_seconds"),
            peak_rss_bytes=process.get("peak_rss_bytes"),
            labels=self.labels + [spec.defaults_note] * bool(spec.defaults_note) + self.data.notes,
            environment=self.environment,
            error=error,
        )

    def _take(self, tick: dict[str, Any]) -> None:
        for row in tick["accelerators"]:
            self._steps.setdefault(row["index"], []).extend(row.get("new_steps", ()))
            self._read[row["index"]] = row.get("bytes_read", 0)

    def _died(self, child: Child, when: str) -> _Died:
        rc = child.wait(10.0)
        if rc is None:
            child.kill()
            rc = child.wait()
        how, _ = describe_exit(rc)
        return _Died(f"the {self.spec.path} training run's process died {when} ({how})", child.stderr_tail())


class _Died(RunFailed):
    def __init__(self, message: str, detail: list[str]):
        self.detail = detail
        super().__init__(message + (f": {detail[-1]}" if detail else ""))
