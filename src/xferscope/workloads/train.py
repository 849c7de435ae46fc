"""``workload train`` from start to end, for the CLI (and the console): the data set prepared once, checked
before anything is written, one run or a ``--find-max`` search over it, and the set removed at the end."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from xferscope.errors import EnvironmentProblem
from xferscope.workloads import train_data
from xferscope.workloads.accelerators import check_enough
from xferscope.workloads.fetchers import slot_capacity
from xferscope.workloads.find_max import Search, find_max
from xferscope.workloads.train_data import TrainData
from xferscope.workloads.train_record import FindMaxPoint, FindMaxResult, TrainResult
from xferscope.workloads.train_run import TrainRun
from xferscope.workloads.train_spec import TrainSpec


def check_path(spec: TrainSpec) -> None:
    """The path (and a GPU for --compute gpu) can run here, asked of a process of its own."""
    from xferscope.engines.registry import unavailable_reason

    if spec.path != "host":
        reason = unavailable_reason(spec.path)
        if reason:
            raise EnvironmentProblem(f"{spec.path}: unavailable: {reason}")
    if spec.compute == "gpu":
        reason = unavailable_reason("bounce")  # the same CUDA check
        if reason:
            raise EnvironmentProblem(f"--compute gpu: no GPU to compute on: {reason}; use --compute sleep")


def check_memory_before(spec: TrainSpec, lengths: list[int]) -> None:
    from xferscope.isolation import call
    from xferscope.workloads.train_process import check_memory

    capacity = slot_capacity(lengths, spec.batch)
    free: dict[int, int] = {}
    if spec.lands_in_gpu:
        gpus = sorted({spec.accelerator_gpu(i) for i in range(spec.accelerators)})
        free = call("xferscope.workloads.train_process:free_gpu_memory", gpus, what="the GPUs' free memory")
    check_memory(spec, capacity, free)


def most_that_fit(spec: TrainSpec, data: TrainData) -> int:
    """The most accelerators whose batch buffers fit the free memory (GPU or host), round-robin over --gpu."""
    from xferscope.isolation import call
    from xferscope.target import memory_available
    from xferscope.workloads.train_process import MEMORY_SHARE

    each = spec.slots * slot_capacity([s.length for s in data.samples], spec.batch)
    if spec.lands_in_gpu:
        free = call("xferscope.workloads.train_process:free_gpu_memory", sorted(set(spec.gpus)), what="free memory")
        per_gpu = [int(free[g] * MEMORY_SHARE // each) for g in spec.gpus]
        # accelerator i goes to gpus[i % len]: n fit while each GPU's share fits
        n = 0
        while n < 100_000 and per_gpu[n % len(per_gpu)] > n // len(per_gpu):
            n += 1
        return max(1, n)
    avail = memory_available()
    return max(1, int(avail * MEMORY_SHARE // each)) if avail else 1 << 20


class TrainSession:
    """The data set and the runs over it. ``close()`` (also after Ctrl-C) removes a generated set."""

    def __init__(self, spec: TrainSpec):
        self.spec = spec
        self.data: TrainData | None = None
        self.stopped = False
        self._run: TrainRun | None = None

    def stop(self) -> None:
        """From any thread: stop making the set, or the run in flight; no further run starts."""
        self.stopped = True
        run = self._run
        if run is not None:
            run.stop()

    def prepare(self, progress: Callable[[int, int], None] | None = None, *, most_accelerators: int = 0) -> TrainData:
        spec = self.spec
        check_path(spec)
        if spec.data is not None:
            data = train_data.scan(spec)
            lengths = [s.length for s in data.samples]
        else:
            data = None
            lengths = train_data.plan_generated(spec)[2]
        check_enough(spec, len(lengths))
        check_memory_before(spec, lengths)
        if data is None:
            data = train_data.generate(spec, progress, cancel=lambda: self.stopped)
        self.data = data
        return data

    def run(
        self, spec: TrainSpec | None = None, on_tick: Callable[[dict[str, Any]], None] | None = None
    ) -> TrainResult:
        assert self.data is not None
        spec = spec or self.spec
        check_enough(spec, len(self.data.samples))
        run = self._run = TrainRun(spec, self.data)
        if self.stopped:
            run.stop()
        try:
            return run.execute(on_tick)
        finally:
            self._run = None

    def find_max(
        self,
        upper: int,
        on_point: Callable[[Search, int], None] | None = None,
        on_tick: Callable[[dict[str, Any]], None] | None = None,
    ) -> FindMaxResult:
        assert self.data is not None
        spec = self.spec
        upper = min(upper, len(self.data.samples) // spec.batch, most_that_fit(spec, self.data))

        def measure(n: int) -> tuple[float, TrainResult]:
            result = self.run(spec.with_accelerators(n), on_tick)
            if result.status == "interrupted" or self.stopped:
                raise KeyboardInterrupt
            return (math.nan if result.au is None else result.au), result

        search = find_max(measure, spec.au_threshold, upper, on_point=on_point)
        return find_max_record(search)

    def close(self) -> None:
        if self.data is not None:
            self.data.close(keep=self.spec.keep)


def find_max_record(search: Search) -> FindMaxResult:
    points = [
        FindMaxPoint(
            accelerators=n,
            aus=[None if math.isnan(a) else a for a in p.aus],
            au=None if math.isnan(p.au) else p.au,
            passed=p.au >= search.threshold,
        )
        for n, p in sorted(search.points.items())
    ]
    results = [r for p in search.points.values() for r in p.results]
    return FindMaxResult(
        best=search.best,
        upper=search.upper,
        au_threshold=search.threshold,
        runs=search.runs,
        points=points,
        results=results,
    )
