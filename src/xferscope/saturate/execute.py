"""Run a saturation: one knee search per (path, GPU set, block size), host first as the storage reference.

    saturation = SaturationRun(plan, LocalRunner(), listener=print)
    outcome = saturation.run()       # Ctrl-C or stop(): what was measured is kept, outcome.stopped says why

Every measurement is a real run of the engine (``RunResult``), one after another,
on one dataset: without ``--file``/``--dir`` all points read the same scratch
file, created once and removed at the end. The listener gets past-tense events
from the thread that runs the saturation; it must not block.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from xferscope.engines.registry import unavailable_reason
from xferscope.errors import EngineUnavailable, XferscopeError
from xferscope.records import RunEnvironment
from xferscope.run.runner import EngineRun
from xferscope.run.scratch import SweepScratch
from xferscope.saturate.ceilings import BottleneckFinding, Evidence
from xferscope.saturate.figures import Figures, Measurement, cpus_allowed, figures_of, judge
from xferscope.saturate.plan import STORAGE_AUTO, STORAGE_NONE, SaturatePlan, Series
from xferscope.saturate.search import MAX_ROUNDS, InFlight, KneeSearch, Point, SearchResult, ShapeComparison, StopSearch
from xferscope.spec import RunSpec
from xferscope.target import Interrupted


# ------------------------------------------------------------------ events
@dataclass(frozen=True)
class SeriesStarted:
    series: Series
    index: int  # 1-based
    total: int


@dataclass(frozen=True)
class MeasurementStarted:
    series: Series
    shape: InFlight
    spec: RunSpec


@dataclass(frozen=True)
class PointMeasured:
    series: Series
    point: Point


@dataclass(frozen=True)
class Compared:
    series: Series
    comparison: ShapeComparison


@dataclass(frozen=True)
class SeriesFinished:
    series: Series
    outcome: SeriesOutcome


# ----------------------------------------------------------------- outcome
@dataclass
class SeriesOutcome:
    series: Series
    found: SearchResult
    grid_points: int
    limit: str
    figures: Figures | None = None
    evidence: Evidence | None = None
    bottleneck: BottleneckFinding | None = None
    error: str | None = None  # the run that ended this search failed
    #: a path whose plateau is its own overhead: one run at the plateau from the page cache (--source cache)
    own_ceiling: Measurement | None = None
    own_ceiling_note: str | None = None  # why it was not measured

    @property
    def own_ceiling_gib_s(self) -> float | None:
        if self.own_ceiling is None:
            return None
        return self.own_ceiling.result.throughput_mib_s / 1024

    @property
    def points_measured(self) -> int:
        return len([p for p in self.found.points if p.measurements])

    @property
    def share_of_grid(self) -> float:
        return self.points_measured / self.grid_points if self.grid_points else 0.0


@dataclass
class SaturationOutcome:
    """Every search of a saturation as it runs and as it is judged. A type of its own beside its record
    (``records.Saturation``, ``saturate.record``): its points hold their runs, where the file lists each run once and
    points name theirs by place, and a saved one is judged again by this version's rules when it is read."""

    plan: SaturatePlan
    series: list[SeriesOutcome] = field(default_factory=list)
    stopped: str | None = None  # "interrupted", or the failure that ended the saturation
    failed: bool = False
    storage_source: str | None = None  # where the storage ceilings came from, when not from this run
    storage: dict[int, tuple[float, str | None]] | None = None  # those ceilings: block size -> (GiB/s, note)
    environment: RunEnvironment = field(default_factory=lambda: RunEnvironment())

    def of(self, series: Series) -> SeriesOutcome | None:
        return next((o for o in self.series if o.series == series), None)


def analyse(outcome: SaturationOutcome) -> None:
    """Figures and verdicts of every series: each plateau against the host plateau at its block size (from this
    saturation's host searches, else from ``outcome.storage``)."""
    plan, storage = outcome.plan, outcome.storage
    writes = plan.base.writes
    hosts = {}
    for o in outcome.series:
        o.figures = figures_of(o.found, writes)
        if o.series.path == "host" and o.figures is not None:
            hosts[o.series.block_size] = o
    for o in outcome.series:
        if o.figures is None:
            o.evidence = o.bottleneck = None
            continue
        value, note = _storage_of(o, hosts, storage, plan)
        o.evidence, o.bottleneck = judge(
            o.series,
            o.found,
            o.figures,
            writes=writes,
            limit=o.limit,
            storage_gib_s=value,
            storage_note=note,
            own_ceiling_gib_s=o.own_ceiling_gib_s,
            own_ceiling_note=o.own_ceiling_note,
        )


def _storage_of(o: SeriesOutcome, hosts: dict, storage: dict | None, plan: SaturatePlan):
    host = hosts.get(o.series.block_size)
    if host is not None:
        if host is o:  # the host search is the storage reference: say what limits it, if not the device
            return o.figures.plateau_gib_s, None
        value = host.figures.plateau_gib_s
        notes = []
        if host.bottleneck is not None and host.bottleneck.kind not in ("storage",):
            notes.append(f"itself {host.bottleneck.word}")
        if host.found.stopped:
            notes.append(f"its search {host.found.stopped}")
        return value, "; ".join(notes) or None
    if storage and o.series.block_size in storage:
        return storage[o.series.block_size]
    if plan.storage == STORAGE_NONE:
        return None, "--storage none"
    return None, "no host search at this block size"


# ------------------------------------------------------------------ runners
class LocalRunner:
    """Runs each measurement on this host through ``runner.EngineRun``, on one set of scratch files."""

    def __init__(self) -> None:

        self.scratch = SweepScratch()
        self._current = None
        self._stop = threading.Event()
        self._ctrl_c = False

    def __call__(self, spec: RunSpec, on_sample: Callable | None = None):

        if self._stop.is_set():
            raise StopSearch
        if self._ctrl_c:  # Ctrl-C landed as the last run ended: that run counted, the saturation stops now
            raise KeyboardInterrupt
        run = EngineRun(self.scratch.adapt(spec))
        self._current = run
        try:
            return run.execute(on_sample=on_sample)
        finally:
            self._ctrl_c = run.stopped_by_user
            self._current = None

    def stop(self) -> None:
        self._stop.set()
        current = self._current
        if current is not None:
            current.stop()

    def cleanup(self) -> None:
        self.scratch.cleanup()


# --------------------------------------------------------------- saturation
class SaturationRun:
    def __init__(
        self,
        plan: SaturatePlan,
        runner,
        *,
        listener: Callable[[Any], None] | None = None,
        storage: dict[int, tuple[float, str | None]] | None = None,
        storage_source: str | None = None,
    ):
        self.plan = plan
        self.runner = runner
        self.listener = listener or (lambda event: None)
        self.outcome = SaturationOutcome(plan, storage_source=storage_source, storage=storage)
        self._stop = threading.Event()
        self._search: KneeSearch | None = None
        #: set once ``run`` has ended and removed its scratch files
        self.finished = threading.Event()

    def stop(self) -> None:
        """End after the measurement in flight (it stops within a second); keep what was measured."""
        self._stop.set()
        stop = getattr(self.runner, "stop", None)
        if stop:
            stop()

    def run(self) -> SaturationOutcome:
        series_list = self.plan.series()
        try:
            for index, series in enumerate(series_list, start=1):
                if self._stop.is_set():
                    self.outcome.stopped = "interrupted"
                    break
                self.listener(SeriesStarted(series, index, len(series_list)))
                done = self._run_series(series)
                self.listener(SeriesFinished(series, done))
                if done.found.stopped == "interrupted":
                    self.outcome.stopped = "interrupted"
                    break
                if done.error:
                    self.outcome.stopped, self.outcome.failed = done.error, True
                    break
        except KeyboardInterrupt:
            self.outcome.stopped = "interrupted"
            if self._search is not None:  # Ctrl-C between two measurements: keep the search's points
                self._keep_partial("interrupted")
        finally:
            self._search = None
            cleanup = getattr(self.runner, "cleanup", None)
            try:
                if cleanup:
                    cleanup()
            finally:
                self.finished.set()
        analyse(self.outcome)
        return self.outcome

    def _run_series(self, series: Series) -> SeriesOutcome:
        plan = self.plan
        error: list[str] = []

        def measure(shape: InFlight) -> Measurement:
            if self._stop.is_set():
                raise StopSearch
            spec = plan.spec(series, shape.workers, shape.iodepth)
            self.listener(MeasurementStarted(series, shape, spec))
            try:
                result = self.runner(spec)
            except Interrupted:
                raise StopSearch from None
            except XferscopeError as exc:  # the engine failed, or this machine cannot run the point
                error.append(str(exc))
                raise StopSearch(f"failed: {exc}") from None
            if result.status == "interrupted":
                raise StopSearch
            if result.status != "ok":
                error.append(result.error or "the run failed")
                raise StopSearch(f"failed: {result.error or 'the run failed'}")
            return Measurement(result, cpus_allowed(spec))

        def relay(event) -> None:
            self.listener(PointMeasured(series, event) if isinstance(event, Point) else Compared(series, event))

        search = KneeSearch(
            measure,
            max_workers=plan.max_workers,
            max_qd=plan.max_qd_of(series.path),
            min_rounds=plan.min_rounds,
            max_rounds=plan.max_rounds,
            margin=plan.margin,
            # --max-rounds given: its cap for the knee's tests too; by default, as many as compare's auto
            knee_rounds=None if plan.max_rounds == MAX_ROUNDS else plan.max_rounds,
            max_points=plan.points_budget(series.path),
            listener=relay,
        )
        self._search = search
        found = search.run()
        self._search = None
        done = SeriesOutcome(
            series,
            found,
            plan.grid_points(series.path),
            plan.limit_text(series.path),
            error=error[0] if error else None,
        )
        self.outcome.series.append(done)
        self._environment(found)
        analyse(self.outcome)  # the verdicts so far, for listeners that show them as they come
        self._measure_own_ceiling(done)
        return done

    def _measure_own_ceiling(self, done: SeriesOutcome) -> None:
        """A path whose plateau is its own overhead: one run at its plateau with the file in the page cache
        (--source cache), so that the verdict can say whether the path is at its own ceiling or pays a cost per
        request. Not for writes, nor cuFile (O_DIRECT only)."""
        plateau = done.found.plateau
        if done.bottleneck is None or done.bottleneck.kind != "path overhead" or plateau is None:
            return
        if self._stop.is_set() or done.found.stopped == "interrupted":
            return
        spec = self.plan.spec(done.series, plateau.workers, plateau.iodepth)
        if spec.writes or spec.path.startswith("cufile"):
            done.own_ceiling_note = "writes are not read from the page cache" if spec.writes else "O_DIRECT only"
        else:
            try:
                result = self.runner(spec.replace(source="cache"))
            except (StopSearch, Interrupted):
                return
            except XferscopeError as exc:
                done.own_ceiling_note = str(exc)
            else:
                if result.status == "ok":
                    done.own_ceiling = Measurement(result, cpus_allowed(spec))
                else:
                    done.own_ceiling_note = result.error or result.status
        analyse(self.outcome)

    def _keep_partial(self, reason: str) -> None:
        series = self.plan.series()[len(self.outcome.series)]
        found = self._search.result(reason)
        self.outcome.series.append(
            SeriesOutcome(series, found, self.plan.grid_points(series.path), self.plan.limit_text(series.path))
        )

    def _environment(self, found: SearchResult) -> None:
        if self.outcome.environment:
            return
        for point in found.points:
            for m in point.measurements:
                self.outcome.environment = {k: v for k, v in m.result.environment.items() if k not in ("cluster",)}
                return


def check_paths(plan) -> None:

    for path in dict.fromkeys(s.path for s in plan.series()):
        reason = unavailable_reason(path)
        if reason:
            raise EngineUnavailable(path, reason)


__all__ = [
    "STORAGE_AUTO",
    "Compared",
    "LocalRunner",
    "MeasurementStarted",
    "PointMeasured",
    "SaturationOutcome",
    "SaturationRun",
    "SeriesFinished",
    "SeriesOutcome",
    "SeriesStarted",
    "analyse",
    "check_paths",
]
