"""``workload train`` from start to end, for the CLI (and the console): the data set prepared once, checked
before anything is written, one run or a ``--find-max`` search over it, and the set removed at the end."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence

from xferscope.compare.rounds import path_labels
from xferscope.engines.registry import unavailable_reason
from xferscope.errors import EnvironmentProblem
from xferscope.target import memory_available
from xferscope.workloads.common.fetchers import slot_capacity
from xferscope.workloads.common.gpu_memory import MEMORY_SHARE, measured_free
from xferscope.workloads.common.libraries import TRAIN_LIBRARIES
from xferscope.workloads.common.run_options import check_paths
from xferscope.workloads.common.side_by_side import rounds_of
from xferscope.workloads.train import train_data
from xferscope.workloads.train.accelerators import TrainTick, check_enough
from xferscope.workloads.train.find_max import Search, find_max
from xferscope.workloads.train.train_compare import TrainComparison, entry_of_runs, entry_of_search, rank
from xferscope.workloads.train.train_data import TrainData
from xferscope.workloads.train.train_process import check_memory
from xferscope.workloads.train.train_record import AcceleratorRun, FindMaxPoint, FindMaxResult, TrainResult
from xferscope.workloads.train.train_run import TrainRun
from xferscope.workloads.train.train_spec import TrainSpec


def check_path(spec: TrainSpec) -> None:
    """The path (and a GPU for --compute gpu) can run here, asked of a process of its own."""

    if spec.path in TRAIN_LIBRARIES:  # its package checked with the spec; its batches go to a GPU
        reason = unavailable_reason("bounce")  # the same CUDA check
        if reason:
            raise EnvironmentProblem(f"{spec.path}: its batches go to a GPU, and there is none: {reason}")
    else:
        check_paths([spec.path])
    if spec.compute == "gpu":
        reason = unavailable_reason("bounce")  # the same CUDA check
        if reason:
            raise EnvironmentProblem(f"--compute gpu: no GPU to compute on: {reason}; use --compute sleep")


def check_memory_before(specs: Sequence[TrainSpec], lengths: list[int]) -> None:
    """Every spec's batch buffers fit, before the set is written: the GPUs' free memory asked of one process of
    its own (CUDA is never loaded here), for all of them at once."""

    free: dict[int, int] = {}
    gpus = sorted({s.accelerator_gpu(i) for s in specs if s.lands_in_gpu for i in range(s.accelerators)})
    if gpus:
        free = measured_free(gpus)
    for spec in specs:
        check_memory(spec, slot_capacity(lengths, spec.batch), free)


def most_that_fit(spec: TrainSpec, data: TrainData) -> int:
    """The most accelerators whose batch buffers fit the free memory (GPU or host), round-robin over --gpu."""

    each = spec.slots * slot_capacity([s.length for s in data.samples], spec.batch)
    if spec.lands_in_gpu:
        free = measured_free(sorted(set(spec.gpus)), what="free memory")
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

    def prepare(self, progress: Callable[[int, int], None] | None = None, paths: Sequence[str] = ()) -> TrainData:
        """The data set, after checking that every path asked for (``paths``, else the spec's) can run here and
        that the batch buffers fit."""
        self.check(paths)
        if self.data is None:
            self.data = train_data.generate(self.spec, progress, cancel=lambda: self.stopped)
        return self.data

    def check(self, paths: Sequence[str] = ()) -> None:
        """Every path asked for can run here, the set has a batch for every accelerator and the batch buffers
        fit (nothing is written); the user's own set (``--data``) is scanned into ``data``."""
        spec = self.spec
        specs = [dataclasses.replace(spec, path=p) for p in paths] or [spec]
        for s in specs:
            check_path(s)
        if spec.data is not None:
            self.data = train_data.scan(spec)
            lengths = [s.length for s in self.data.samples]
        else:
            lengths = train_data.plan_generated(spec)[2]
        check_enough(spec, len(lengths))
        check_memory_before(specs, lengths)

    def run(
        self,
        spec: TrainSpec | None = None,
        on_tick: Callable[[TrainTick], None] | None = None,
        on_ready: Callable[[], None] | None = None,
    ) -> TrainResult:
        """One run over the set; ``on_ready``: called when its process is set up, before the timed region."""
        return self.run_with_steps(spec, on_tick, on_ready)[0]

    def run_with_steps(
        self,
        spec: TrainSpec | None = None,
        on_tick: Callable[[TrainTick], None] | None = None,
        on_ready: Callable[[], None] | None = None,
    ) -> tuple[TrainResult, list[AcceleratorRun]]:
        """``run``, with each accelerator's steps the result was made from."""
        assert self.data is not None
        spec = spec or self.spec
        check_enough(spec, len(self.data.samples))
        run = self._run = TrainRun(spec, self.data)
        if self.stopped:
            run.stop()
        try:
            return run.execute(on_tick, on_ready), run.runs
        finally:
            self._run = None

    def find_max(
        self,
        upper: int,
        on_point: Callable[[Search, int], None] | None = None,
        on_tick: Callable[[TrainTick], None] | None = None,
        spec: TrainSpec | None = None,
    ) -> FindMaxResult:
        assert self.data is not None
        spec = spec or self.spec
        upper = min(upper, len(self.data.samples) // spec.batch, most_that_fit(spec, self.data))

        stopped_runs: list[TrainResult] = []  # a run cut short: kept in the record, judged nothing

        def measure(n: int) -> tuple[float, TrainResult]:
            result = self.run(spec.with_accelerators(n), on_tick)
            if result.status != "ok" or self.stopped:
                stopped_runs.append(result)
                raise KeyboardInterrupt
            return (math.nan if result.au is None else result.au), result

        search = find_max(measure, spec.au_threshold, upper, on_point=on_point)
        return find_max_record(search, stopped_runs)

    def compare_paths(
        self,
        paths: Sequence[str],
        rounds: int,
        *,
        find_max_upper: int | None = None,
        on_tick: Callable[[TrainTick], None] | None = None,
    ) -> TrainComparison:
        """Each path over the one data set: ``rounds`` rounds, the order rotated each round (or, with
        ``find_max_upper``, one search per path), ranked. Ctrl-C or ``stop`` ends it with what was measured."""
        searches: list[FindMaxResult] = []
        status = "ok"
        runs: dict[str, tuple[str, list[TrainResult]]] = {}
        results: list[TrainResult] = []
        if find_max_upper is not None:
            try:
                for p in paths:
                    spec = dataclasses.replace(self.spec, path=p)
                    searches.append(self.find_max(find_max_upper, on_tick=on_tick, spec=spec))
                    if searches[-1].status != "ok":
                        status = "interrupted"
                        break
            except KeyboardInterrupt:
                status = "interrupted"
        else:
            runs, _, status = rounds_of(self.spec, paths, rounds, lambda s: self.run(s, on_tick), lambda: self.stopped)
            results = [r for _, rs in runs.values() for r in rs]
        searches = [s for s in searches if s.results]
        if searches:
            entries = [entry_of_search(label, s) for label, s in zip(path_labels(paths), searches)]
        else:
            entries = [entry_of_runs(label, rs) for label, (_, rs) in runs.items()]
        return TrainComparison(
            rounds=rounds, entries=rank(entries, paired=not searches), results=results, searches=searches, status=status
        )

    def close(self) -> None:
        if self.data is not None:
            self.data.close(keep=self.spec.keep)


def find_max_record(search: Search, stopped_runs: Sequence[TrainResult] = ()) -> FindMaxResult:
    points = [
        FindMaxPoint(
            accelerators=n,
            aus=[None if math.isnan(a) else a for a in p.aus],
            au=None if math.isnan(p.au) else p.au,
            passed=p.au >= search.threshold,
        )
        for n, p in sorted(search.points.items())
        if p.aus  # a count whose run was interrupted has no figure
    ]
    results = [r for p in search.points.values() for r in p.results] + list(stopped_runs)
    return FindMaxResult(
        best=search.best,
        upper=search.upper,
        au_threshold=search.threshold,
        runs=search.runs,
        points=points,
        results=results,
        status="interrupted" if search.stopped else "ok",
    )
