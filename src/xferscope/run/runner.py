"""Drive one run with its engine in a process of its own: prepare, start, sample, stop, clean up.

``EngineRun`` is what the CLI, the console, sweeps and MPI ranks use. Its engine (and
every native library it calls: cuFile, the CUDA driver, NVML, the C cores) runs in
a child process (``xferscope.run.engine_process``); this process plans the files,
receives the samples and the result, and only renders them. A crash there is a
failed run here:

* the error names the path and the signal ("cufile: the engine process died by
  SIGSEGV (segmentation fault) 3.1 s into the run"), and ``error_detail`` holds
  the last lines the engine's process wrote and those of cuFile's log;
* what was measured until then is kept: the result of a run that died in its
  timed region is built here from the last counters it sent (``incomplete``);
* the files the run created are removed here, since they were planned here.

When this process is gone, the engine's process notices (see ``isolation``),
stops and removes its files. Samples reach consumers as before: callbacks that
must not block, or an async iterator.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from xferscope import janitor
from xferscope import target as targets
from xferscope.child_driver import ChildDriver, EngineDied
from xferscope.child_messages import Ended, Start
from xferscope.engines.base import RunResult, Sample, Snapshot
from xferscope.errors import RunFailed
from xferscope.isolation import Child, error_from_wire
from xferscope.records import EngineEnvironment
from xferscope.run import engine_pool
from xferscope.run.engine_process import Available, EngineJob, Plan, Prepared, Sampled, Started, serve
from xferscope.run.local_run import STOP_GRACE_S, SampleFeed, build_result, cpu_from_samples, run_to_end
from xferscope.spec import RunSpec

M = TypeVar("M")

#: after "close", how long the engine's process gets to free the engine and remove its files
CLOSE_TIMEOUT_S = STOP_GRACE_S + 60.0

#: cuFile's mode probe per block device, learnt by earlier runs of this process (see cufile_driver)
_cufile_probes: dict[int, str | None] = {}


class EngineView:
    """``run.engine`` for consumers written when the engine lived in this process: what it said about
    itself (labels, GPUs of the workers, environment) and its latest counters."""

    def __init__(self, run: EngineRun):
        self._run = run

    @property
    def labels(self) -> list[str]:
        return self._run.labels

    @property
    def worker_gpus(self) -> list[int | None]:
        return self._run.worker_gpus

    def snapshot(self) -> Snapshot:
        return self._run.snapshot()

    def environment(self) -> EngineEnvironment:
        return self._run.engine_environment.copy()


class EngineRun(SampleFeed):
    """One run of one spec, its engine in a child process. Use ``execute()`` for the simple case, or
    the steps (``prepare``, ``start``, ``join``, ``close``, ``finish``) for live consumers.

    The files the run will create (and cuFile's log) are guarded by ``xferscope.janitor`` from planning
    to ``close``: they go even when this process is killed outright."""

    def __init__(self, spec: RunSpec, *, gpu_telemetry: bool = True):
        SampleFeed.__init__(self)
        self.spec = spec.validate()
        self.target: targets.Target | None = None
        self.samples: list[Sample] = []
        self.result: RunResult | None = None
        self.state = "new"  # new, preparing, running, finished, closed
        self.labels: list[str] = []
        self.worker_gpus: list[int | None] = []
        self.engine_environment: EngineEnvironment = {}
        #: the engine's workers did not stop when asked; its process was killed (nothing is left here)
        self.stuck = False
        self._gpu_telemetry = gpu_telemetry
        self._guarded: list[str] = []
        self._snapshot: Snapshot | None = None
        self._started_at: float | None = None
        #: monotonic times of the run's steps: prepare called, the timed region's end seen, closed
        self._t_prepare: float | None = None
        self._t_available: float | None = None
        self._t_ended: float | None = None
        self._t_closed: float | None = None
        self._stopped_by_user = False
        self._ended = threading.Event()
        self._child_result: RunResult | None = None
        self._child_error: BaseException | None = None
        self._abandoned: str | None = None
        self._phase = "starting"
        self._driver = ChildDriver(
            f"{self.spec.path} engine",
            progress=(Sampled,),
            on_progress=self._sampled,
            on_ended=self._ended_message,
            on_over=self._end,
            died=self._died,
            keep_after_close=engine_pool.keeping,
            on_answer=self._answered,
        )

    @property
    def engine(self) -> EngineView | None:
        return EngineView(self) if self.state in ("running", "finished", "closed") or self.labels else None

    # ---------------------------------------------------------------- the engine's process
    @property
    def _child(self) -> Child | None:
        return self._driver.child

    @property
    def _death(self) -> EngineDied | None:
        death = self._driver.death
        return death if isinstance(death, EngineDied) else None

    def _spawn(self) -> None:
        """The engine's process (one kept from an earlier run of this command, with what it has opened, or a
        new one), its reader, then its job."""
        kept = engine_pool.take(self.spec.path) if engine_pool.keeping() else None
        if kept is not None:
            self._driver.launch(serve, kept=kept)
        else:
            from xferscope.engines import cufile_driver  # imported here: at the top it would slow every command's start

            env, log = cufile_driver.child_env(self.spec.path)
            self._driver.launch(serve, env=env, log=log)
        self._driver.send_job(EngineJob(self.spec, self._gpu_telemetry, dict(_cufile_probes)))

    def _answered(self, message: Any) -> None:
        if isinstance(message, Started):  # its counters, before the samples that follow it
            self._snapshot = message.snapshot

    def _sampled(self, message: Sampled) -> None:
        self._snapshot = message.snapshot
        self.samples.append(message.sample)
        self._publish(message.sample)

    def _ended_message(self, message: Ended) -> None:
        result = message.payload
        if result is not None:  # every sample came before it, one by one
            result.samples = list(self.samples)
        self._child_result = result
        self._child_error = error_from_wire(message.error) if message.error else None
        if message.stuck:
            self._abandoned = result.error if result is not None else "workers did not stop"

    def _died(self, how: str, signal_name: str | None) -> EngineDied:
        return EngineDied(self.spec.path, how, signal_name, self._when(), self._driver.last_words())

    def _end(self) -> None:
        if not self._ended.is_set():
            self._t_ended = time.monotonic()
            self.state = "finished" if self.state == "running" else self.state
            self._ended.set()
            if self._started_at is not None:
                self._publish(None)

    def _when(self) -> str:
        if self._ended.is_set() and (self._child_result is not None or self._child_error is not None):
            return "while closing (after its results were in)"
        if self._started_at is not None:
            return f"{time.monotonic() - self._started_at:.1f} s into the run"
        return f"while {self._phase}"

    def _await(self, kind: type[M], progress: Callable[[int, int], None] | None = None) -> M:
        """The next answer of the engine's process, a ``kind``; an error there is raised here, and so is a message
        of another kind (``UnknownMessage``)."""
        return self._driver.answer(kind, progress)

    # ---------------------------------------------------------------- steps
    def prepare(self, progress: Callable[[int, int], None] | None = None) -> None:
        """Plan the files (here: a file xferscope did not create, or a missing directory, is refused before any
        process starts), check the path (in the engine's process), create the files and set up the engine
        (there). Outside the timed region."""
        self.state = "preparing"
        self._t_prepare = time.monotonic()
        self._phase = "planning the files"
        self.target = targets.plan(self.spec)
        if self.target.temp_dir:
            self._guard(self.target.temp_dir)
        if not self.spec.keep:
            for tf in self.target.files:
                if tf.create:
                    self._guard(tf.path)
                    self._guard(targets.sidecar_path(tf.path))
        self._phase = "checking the path"
        self._spawn()
        self._await(Available)
        self._t_available = time.monotonic()
        self._driver.send(Plan(self.target))
        self._phase = "preparing"
        prepared = self._await(Prepared, progress)
        self.labels, self.worker_gpus = prepared.labels, prepared.worker_gpus
        self.target.created = list(prepared.created)

    def start(self) -> None:
        self._phase = "starting"
        self._driver.send(Start())
        started = self._await(Started)
        self._started_at = time.monotonic()
        self.labels, self.worker_gpus = started.labels, started.worker_gpus
        self.engine_environment = started.environment
        _cufile_probes.update(started.cufile_probes)
        self.state = "running"

    def stop(self) -> None:
        """Stop early and keep what was measured."""
        self._stopped_by_user = True
        self._driver.stop()  # before the job is out, the job is followed by "stop"

    @property
    def stopped_by_user(self) -> bool:
        """Asked to stop (Ctrl-C, the console's stop): whether or not the run had ended by then."""
        return self._stopped_by_user

    def join(self, timeout: float | None = None) -> bool:
        """Wait for the run's end (its result is in, or its process died); True when it has."""
        if self._child is None or self._started_at is None:
            return True
        return self._ended.wait(timeout)

    def snapshot(self) -> Snapshot:
        """The engine's cumulative counters as last sent (at most one sample interval old)."""
        if self._snapshot is None:
            raise RunFailed(f"{self.spec.path}: the engine has not started")
        return self._snapshot

    def _abandon(self) -> None:
        """The engine ignores the stop request: kill its process; what it sent is kept."""
        self._abandoned = (
            f"the engine did not stop within {STOP_GRACE_S:.0f} s of the stop request (stuck "
            "in a driver call?); its process was killed; the figures measured until then are kept"
        )
        self._driver.kill()
        self._ended.wait(10.0)

    def close(self) -> None:
        """End the engine's process (it frees the engine and removes the run's files unless --keep); where
        it cannot, remove them here. Idempotent."""
        if self.state == "closed":
            return
        d = self._driver
        try:
            # a Ctrl-C before the job went out (starting the reader waits for a thread, long on a loaded machine)
            # leaves a process that would never answer "close": the driver ends it instead of asking
            d.close(
                CLOSE_TIMEOUT_S,
                ask=self._abandoned is None,
                keep=lambda: (
                    d.child is not None and self._reusable() and engine_pool.give_back(self.spec.path, d.child, d.log)
                ),
            )
        finally:
            if not d.closed.is_set():
                self._remove_files()
            for path in self._guarded:
                janitor.release(path)
            self._guarded.clear()
            self.state = "closed"
            self._t_closed = time.monotonic()

    def _reusable(self) -> bool:
        """The engine's process closed this run cleanly and may serve the next (never after a death, a stuck
        engine, an engine error or a failed run)."""
        result = self._child_result
        return (
            self._driver.closed.is_set()
            and self._driver.death is None
            and self._abandoned is None
            and self._child_error is None
            and result is not None
            and result.status != "failed"
        )

    def _guard(self, path: str) -> None:
        janitor.guard(path)
        self._guarded.append(path)

    def _remove_files(self) -> None:
        """The engine's process could not clean up: remove what the plan said it would create."""
        t = self.target
        if t is None:
            return
        for tf in t.files:
            if not tf.create:
                continue
            if self.spec.keep and targets.read_sidecar(tf.path) is not None:
                if self.spec.writes:  # the pattern may be gone: say so, as a finished write run does
                    with contextlib.suppress(OSError):
                        targets.write_sidecar(tf.path, tf.pattern_seed, intact=False)
                continue
            for path in (tf.path, targets.sidecar_path(tf.path)):
                with contextlib.suppress(OSError):
                    os.unlink(path)
        if t.temp_dir:
            import shutil

            shutil.rmtree(t.temp_dir, ignore_errors=True)
        t.created.clear()

    def execute(
        self,
        on_sample: Callable[[Sample | None], None] | None = None,
        progress: Callable[[int, int], None] | None = None,
    ) -> RunResult:
        """Prepare, run to the end (or Ctrl-C), close. Returns the result, partial when interrupted.

        Raises RunFailed (with ``.result`` holding what was measured) when the engine reports an error
        or its process dies (``EngineDied``)."""
        if on_sample:
            self.subscribe(on_sample)
        # the engine's process gets 2 s more than its own workers' grace to send what they measured
        run_to_end(self, progress, started=lambda: self._started_at is not None, grace_s=STOP_GRACE_S + 2.0)
        result = self.finish()
        if result.status == "failed":
            if self._death is not None:
                self._death.result = result
                raise self._death
            err = RunFailed(f"{self.spec.path}: {result.error}")
            err.result = result
            raise err
        return result

    # ---------------------------------------------------------------- result
    def fixed_cost(self) -> dict[str, float] | None:
        """Seconds outside the timed region: ``setup`` (prepare called to the engine's first I/O) and
        ``teardown`` (the timed region's end to the process closed); None before the run has closed."""
        t0, started, ended, closed = self._t_prepare, self._started_at, self._t_ended, self._t_closed
        if t0 is None or started is None or ended is None or closed is None:
            return None
        setup, teardown = started - t0, max(0.0, closed - ended)
        cost = {"setup": setup, "teardown": teardown, "total": setup + teardown}
        if (
            self._t_available is not None
        ):  # the files planned, the engine's process started (or taken from the pool) and checked
            cost["process_step"] = self._t_available - t0
        return cost

    def finish(self) -> RunResult:
        """The run's result: the engine's own, or, when its process died or was killed in the timed
        region, one built here from the last counters it sent (incomplete, with the error); with the run's
        fixed cost once it has closed."""
        result = self._finish()
        cost = self.fixed_cost()
        if cost is not None:  # with the steps the engine's process timed, where it sent them
            result.fixed_cost_s = {**(result.fixed_cost_s or {}), **cost}
        return result

    def _finish(self) -> RunResult:
        if self.result is not None:
            return self.result
        if self._child_result is not None:
            result = self._child_result
            if self._abandoned and result.status == "ok":
                result.status, result.error = "interrupted", self._abandoned
            if self._death is not None:  # died while closing: the figures are whole, say what happened
                result.labels.append(f"the engine process died by {self._death.how} after its results were in")
                result.error_detail = self._death.detail
            self.result = result
            return result
        if self._child_error is not None:
            raise self._child_error
        snap = self._snapshot
        if snap is None or self._started_at is None:
            raise self._death or RunFailed("the run ended before it measured anything")
        if self._abandoned is not None:
            status, error, detail = "interrupted", self._abandoned, []
        else:
            death = self._death
            status, error = "failed", (str(death).split(": ", 1)[1] if death else "the engine process is gone")
            error += "; what it measured until then is kept, marked incomplete"
            detail = death.detail if death else []
        env = dict(self.engine_environment)
        self.result = build_result(
            self.spec,
            snap,
            self.samples,
            cpu=cpu_from_samples(self.samples),
            status=status,
            error=error,
            worker_gpus=self.worker_gpus,
            labels=self.labels,
            environment=env,
            error_detail=detail,
        )
        return self.result

    def environment(self) -> dict:
        return dict(self.engine_environment)
