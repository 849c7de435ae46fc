"""The engine's own process: one run, driven by ``xferscope.run.runner.Run`` in the process that started it.

Started by ``xferscope.isolation.Child(serve)``. What
passes over the channel, in order (parent -> child on the left):

    EngineJob(spec, gpu_telemetry, cufile_probes)
                                          Available                 or Failed
    Plan(Target)                          Progress(done, total)…
                                          Prepared(labels, worker_gpus, created) or Failed
    Start                                 Started(labels, worker GPUs, environment, Snapshot) or Failed
                                          Sampled(Sample, Snapshot)… at the sample interval
    Stop (any time)                       Ended(RunResult | None, error=…, stuck=…)
                                          (the result without its samples: the parent has them)
    Close (any time)                      Closed(files left)

then the parent closes the channel and the process leaves, or (inside ``engine_pool.kept_engines``) sends
the next run's job, which this process serves the same way with what it has opened (its imports, CUDA, the
cuFile driver). The files are planned
by the parent (it knows what this process will create, to remove them if it
dies). When the parent is gone (the channel reads end-of-file before "close", or
SIGTERM from ``PR_SET_PDEATHSIG``), the run is stopped, its files are removed
(the parent's janitor removes them too, see ``xferscope.janitor``), and the
process leaves.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import sys
import threading
import time
from typing import Any

import msgspec

from xferscope import target as targets
from xferscope.child_messages import Close, Closed, Ended, Failed, Progress, Start, Stop, expect, heard
from xferscope.engines.base import Sample, Snapshot
from xferscope.isolation import Channel, ParentGone, error_to_wire
from xferscope.run.local_run import STOP_GRACE_S, LocalRun
from xferscope.spec import RunSpec

#: once orphaned, how long the run gets to stop and clean up by itself before the files are removed anyway
ORPHAN_GRACE_S = STOP_GRACE_S + 10.0


# ---------------------------------------------------------------- an engine run's own messages (see child_messages)
class EngineJob(msgspec.Struct, frozen=True):
    """The run to serve, with what the parent knows: cuFile's mode probes of earlier runs."""

    spec: RunSpec
    gpu_telemetry: bool = True
    cufile_probes: dict[int, str | None] = {}


class Available(msgspec.Struct, frozen=True):
    """The path can run here: send the plan of the files."""


class Plan(msgspec.Struct, frozen=True):
    """The files, as the parent planned them (it removes them should this process die)."""

    target: targets.Target


class Prepared(msgspec.Struct, frozen=True):
    """Files made and the engine set up, outside the timed region."""

    labels: list[str]
    worker_gpus: list[int | None]
    created: list[str]


class Started(msgspec.Struct, frozen=True):
    """The timed region began: the engine's labels, its workers' GPUs, its environment, the first counters, and
    cuFile's mode probes as this process knows them (cuFile paths)."""

    labels: list[str]
    worker_gpus: list[int | None]
    environment: dict[str, Any]
    snapshot: Snapshot
    cufile_probes: dict[int, str | None] = {}


class Sampled(msgspec.Struct, frozen=True):
    """One sample, and the counters behind it."""

    sample: Sample
    snapshot: Snapshot | None


class EngineHost:
    def __init__(self, channel: Channel, job: EngineJob):
        self.channel = channel
        self.job = job
        self.run: LocalRun | None = None
        self.planned: targets.Target | None = None
        self._target_given = threading.Event()
        self._start = threading.Event()
        self._close = threading.Event()
        self._done = threading.Event()
        self._stop_at: float | None = None
        self._closed_sent = False

    # ---------------------------------------------------------------- talking
    def send(self, message: Any) -> None:
        try:
            self.channel.send(message)
        except OSError:  # the parent is gone; the main thread sees it too and cleans up
            pass

    def _on_sample(self, sample) -> None:
        run = self.run
        if sample is not None and run is not None:
            self.channel.send(Sampled(sample, run.last_snapshot))

    # ---------------------------------------------------------------- the main thread: commands
    def serve(self) -> EngineJob | None:
        """Serve this run; the next run's job when the parent sends one after this run closed, else None."""
        life = threading.Thread(target=self._life, name="xferscope-engine-life", daemon=True)
        life.start()
        next_job = None
        try:
            while True:
                try:
                    command = self.channel.recv()
                except EOFError:
                    if self._closed_sent:
                        break
                    raise ParentGone("the channel closed before the run did") from None
                if isinstance(command, EngineJob) and self._closed_sent:  # the next run, in this process
                    next_job = command
                    break
                self._handle(command)
        except ParentGone:
            self._orphaned(life)
            os._exit(0)
        life.join(ORPHAN_GRACE_S)
        if self.run is not None and self.run.stuck:  # workers stuck in a driver call: do not wait for them
            sys.stderr.flush()
            os._exit(0)
        return next_job

    def _handle(self, command: Any) -> None:
        command = heard(command, self.send, Plan, Start, Stop, Close)
        if command is None:
            return
        if isinstance(command, Plan):
            self.planned = command.target
            self._target_given.set()
        elif isinstance(command, Start):
            self._start.set()
        elif isinstance(command, Stop):
            self._request_stop()
        else:
            self._request_stop()
            self._close.set()

    def _request_stop(self) -> None:
        if self._stop_at is None:
            self._stop_at = time.monotonic()
        if self.run is not None:
            self.run.stop()

    def _orphaned(self, life: threading.Thread) -> None:
        """The parent is gone: stop, remove this run's files and the parent's, leave."""
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, signal.SIG_IGN)
        self._request_stop()
        self._close.set()
        self._target_given.set()
        self._start.set()
        life.join(ORPHAN_GRACE_S)
        target = (self.run.target if self.run is not None else None) or self.planned
        if target is not None and life.is_alive():  # the run could not close by itself
            with contextlib.suppress(Exception):
                targets.cleanup(target, keep=False)
        sys.stderr.flush()

    # ---------------------------------------------------------------- the run's life, in its own thread
    def _life(self) -> None:
        try:
            self._live()
        except BaseException as exc:
            self.send(Failed(error_to_wire(exc)))
            self._close.wait()
            self._close_run()
        finally:
            self._done.set()

    def _live(self) -> None:
        job = self.job
        run = self.run = LocalRun(job.spec, gpu_telemetry=job.gpu_telemetry)
        if job.cufile_probes:
            from xferscope.engines import cufile_probe

            cufile_probe.remember_probes(job.cufile_probes)
        run.subscribe(self._on_sample)
        run.check_available()
        self.send(Available())
        self._wait(self._target_given)
        if self._close.is_set():
            raise targets.Interrupted("stopped before the run started")
        run.target = self.planned
        if self._stop_at is not None:
            run.stop()
        run.prepare(progress=lambda done, total: self.send(Progress(done, total)))
        self.send(Prepared(list(run.engine.labels), list(run.engine.worker_gpus), list(run.target.created)))
        self._wait(self._start)
        if self._close.is_set() or self._stop_at is not None:
            raise targets.Interrupted("stopped before the run started")
        run.start()
        t0 = time.monotonic()
        started = self._started(run)
        run.setup_steps["environment"] = time.monotonic() - t0
        self.send(started)
        while not run.join(0.2):
            if self._stop_at is not None and time.monotonic() - self._stop_at > STOP_GRACE_S:
                run._abandon()
        try:
            result, error = run.finish(), None
        except Exception as exc:
            result, error = None, error_to_wire(exc)
        if result is not None:  # the parent has every sample already: send the rest, once
            result = dataclasses.replace(result, samples=[])
        self.send(Ended(result, error=error, stuck=run.stuck))
        self._close.wait()
        self._close_run()

    def _started(self, run: LocalRun) -> Started:
        probes: dict[int, str | None] = {}
        if run.spec.path.startswith("cufile"):
            from xferscope.engines import cufile_probe

            probes = cufile_probe.known_probes()
        engine = run.engine
        return Started(list(engine.labels), list(engine.worker_gpus), run.environment(), engine.snapshot(), probes)

    def _wait(self, event: threading.Event) -> None:
        while not event.wait(0.5):
            if self._close.is_set():
                return

    def _close_run(self) -> None:
        run = self.run
        if run is not None:
            try:
                run.close()
            except Exception as exc:  # the files are what matters now
                print(f"xferscope: closing the engine failed: {exc!r}", file=sys.stderr)
                if run.target is not None:
                    targets.cleanup(run.target, keep=run.spec.keep)
        elif self.planned is not None:
            targets.cleanup(self.planned, keep=False)
        left = list(run.target.created) if run is not None and run.target is not None else []
        self._closed_sent = True
        self.send(Closed(left))


def serve(channel: Channel) -> None:
    try:
        job: EngineJob | None = expect(channel.recv(), EngineJob)
    except EOFError:
        return
    while job is not None:
        job = EngineHost(channel, job).serve()
