"""The parent's side of a training-input run: its engine process (``process_run``), the live ticks, Ctrl-C,
and the result.

``TrainRun(spec, data).execute(on_tick)`` starts ``train_process`` in a process of its own, waits for its
set-up, starts it, passes every tick to ``on_tick`` and returns the ``TrainResult``. Ctrl-C (or SIGTERM,
SIGHUP through the CLI's handlers) stops the run: the steps taken so far are the result, marked interrupted.
A crash of the engine's process is a failed result with the steps it had sent (every tick carries the new
ones) and its last words.
"""

from __future__ import annotations

from collections.abc import Callable

from xferscope.workloads.common.au import Step
from xferscope.workloads.common.process_run import WorkloadChild
from xferscope.workloads.train.accelerators import TrainTick
from xferscope.workloads.train.train_data import TrainData
from xferscope.workloads.train.train_process import serve
from xferscope.workloads.train.train_record import AcceleratorRun, TrainEnd, TrainJob, TrainResult
from xferscope.workloads.train.train_spec import TrainSpec


class TrainRun:
    def __init__(self, spec: TrainSpec, data: TrainData):
        self.spec = spec
        self.data = data
        self._steps: dict[int, list[Step]] = {}
        self._read: dict[int, int] = {}
        #: each accelerator's run, as the result was made from (its steps kept: a cluster's figures are made
        #: from every rank's)
        self.runs: list[AcceleratorRun] = []

        self._child = WorkloadChild(serve, f"the {spec.path} training run", spec.path)

    def stop(self) -> None:
        """End the run early (from any thread): the steps taken so far are its result, marked interrupted."""
        self._child.stop()

    def execute(
        self, on_tick: Callable[[TrainTick], None] | None = None, on_ready: Callable[[], None] | None = None
    ) -> TrainResult:
        def tick(progress: TrainTick) -> None:
            self._take(progress)
            if on_tick is not None:
                on_tick(progress)

        out = self._child.execute(TrainJob(self.spec, self.data), tick, on_ready)
        spec = self.spec
        seconds, runs = out.payload if out.payload is not None else TrainEnd(0.0, [])
        if not runs:  # the process died before its end: the steps its ticks carried
            runs = [
                AcceleratorRun(i, spec.gpu_of(i), self._steps.get(i, []), self._read.get(i, 0))
                for i in range(spec.accelerators)
            ]
        self.runs = [AcceleratorRun(*r) for r in runs]
        return TrainResult.from_steps(
            spec,
            self.data.describe(),
            runs,
            status=out.status,
            seconds=seconds,
            cpu_seconds=out.process.cpu_seconds,
            peak_rss_bytes=out.process.peak_rss_bytes,
            labels=out.labels + [spec.defaults_note] * bool(spec.defaults_note) + self.data.notes,
            environment=out.environment,
            error=out.error,
        )

    def _take(self, tick: TrainTick) -> None:
        for row in tick.accelerators:
            self._steps.setdefault(row.index, []).extend(row.new_steps)
            self._read[row.index] = row.bytes_read
