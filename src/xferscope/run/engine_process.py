"""The engine's own process: one run, driven by ``xferscope.run.runner.EngineRun`` in the process that started it, served
by the one child host (``xferscope.child_host``). What passes over the channel, in order (parent -> child on the
left):

    EngineJob(spec, gpu_telemetry, cufile_probes)
                                          Available                 or Failed
    Plan(Target)                          Progress(done, total)...
                                          Prepared(labels, worker_gpus, created) or Failed
    Start                                 Started(labels, worker GPUs, environment, Snapshot) or Failed
                                          Sampled(Sample, Snapshot)... at the sample interval
    Stop (any time)                       Ended(RunResult | None, error=..., stuck=...)
                                          (the result without its samples: the parent has them)
    Close (any time)                      Closed(files left)

then the parent closes the channel and the process leaves, or (inside ``engine_pool.kept_engines``) sends the next
run's job, which this process serves the same way with what it has opened (its imports, CUDA, the cuFile driver).
The files are planned by the parent (it knows what this process will create, to remove them if it dies). When the
parent is gone, the run is stopped, its files are removed (the parent's janitor removes them too, see
``xferscope.janitor``), and the process leaves.
"""

from __future__ import annotations

import dataclasses
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import msgspec

from xferscope import target as targets
from xferscope.child_host import Talk, Work, WorkOutcome, serve_with
from xferscope.child_messages import Progress
from xferscope.engines.base import Sample, Snapshot
from xferscope.isolation import Channel
from xferscope.records import EngineEnvironment
from xferscope.run.local_run import STOP_GRACE_S, LocalRun
from xferscope.spec import RunSpec


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
    environment: EngineEnvironment
    snapshot: Snapshot
    cufile_probes: dict[int, str | None] = {}


class Sampled(msgspec.Struct, frozen=True):
    """One sample, and the counters behind it."""

    sample: Sample
    snapshot: Snapshot | None


class EngineWork(Work):
    """An engine run as the child host's work: checked, its files made as the parent planned them, then timed."""

    def __init__(self, job: EngineJob):
        self.job = job
        self.local: LocalRun | None = None
        self.planned: targets.Target | None = None
        self._stop_at: float | None = None

    def interrupt(self) -> None:
        if self._stop_at is None:
            self._stop_at = time.monotonic()
        if self.local is not None:
            self.local.stop()

    def build(self, talk: Talk) -> None:
        job = self.job
        run = self.local = LocalRun(job.spec, gpu_telemetry=job.gpu_telemetry)
        if job.cufile_probes:
            from xferscope.engines import cufile_probe

            cufile_probe.remember_probes(job.cufile_probes)
        run.subscribe(lambda sample: self._on_sample(talk, sample))
        run.check_available()
        plan = talk.ask(Available(), Plan)
        if plan is None:
            raise targets.Interrupted("stopped before the run started")
        run.target = self.planned = plan.target
        if self._stop_at is not None:
            run.stop()
        run.prepare(progress=lambda done, total: talk.send(Progress(done, total)))

    def _on_sample(self, talk: Talk, sample: Sample | None) -> None:
        run = self.local
        if sample is not None and run is not None:
            talk.send(Sampled(sample, run.last_snapshot))

    def ready(self) -> Prepared:
        run = self._local()
        assert run.target is not None
        return Prepared(list(run.engine.labels), list(run.engine.worker_gpus), list(run.target.created))

    def _local(self) -> LocalRun:
        assert self.local is not None
        return self.local

    def run(self, stop: threading.Event, send: Callable[[Any], None]) -> WorkOutcome:
        run = self._local()
        if stop.is_set():
            raise targets.Interrupted("stopped before the run started")
        run.start()
        t0 = time.monotonic()
        started = self._started(run)
        run.setup_steps["environment"] = time.monotonic() - t0
        send(started)
        while not run.join(0.2):
            if self._stop_at is not None and time.monotonic() - self._stop_at > STOP_GRACE_S:
                run._abandon()
        try:
            result, error = run.finish(), None
        except Exception as exc:
            result, error = None, exc
        if result is not None:  # the parent has every sample already: send the rest, once
            result = dataclasses.replace(result, samples=[])
        return WorkOutcome(result, error, run.stuck)

    def _started(self, run: LocalRun) -> Started:
        probes: dict[int, str | None] = {}
        if run.spec.path.startswith("cufile"):
            from xferscope.engines import cufile_probe

            probes = cufile_probe.known_probes()
        engine = run.engine
        return Started(list(engine.labels), list(engine.worker_gpus), run.environment(), engine.snapshot(), probes)

    def close(self) -> list[str]:
        run = self.local
        if run is not None:
            try:
                run.close()
            except Exception as exc:  # the files are what matters now
                print(f"xferscope: closing the engine failed: {exc!r}", file=sys.stderr)
                if run.target is not None:
                    targets.cleanup(run.target, keep=run.spec.keep)
        elif self.planned is not None:
            targets.cleanup(self.planned, keep=False)
        return list(run.target.created) if run is not None and run.target is not None else []

    def abandon(self) -> None:
        target = (self.local.target if self.local is not None else None) or self.planned
        if target is not None:
            targets.cleanup(target, keep=False)


def serve(channel: Channel) -> None:
    """The engine's process: each job sent to it, one after the other (``engine_pool`` keeps it for the next)."""
    serve_with(channel, EngineWork, EngineJob, (Plan,))
