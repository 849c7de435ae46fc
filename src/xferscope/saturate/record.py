"""A saturation as JSON and CSV, and read back.

The JSON holds the plan, the rules, one entry per search (its points with every
measured throughput, its comparisons with their verdicts, the knee, the figures
and the bottleneck verdict with its evidence) and, under ``"results"``, every
run as ``run --json`` writes it. ``export.load_results`` therefore reads a
saturation like any other results file (``replay --against``, the console's
Compare view), and ``load_saturation`` rebuilds the searches and judges them
again with today's rules.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from xferscope import records
from xferscope.compare.verdict import MARGIN, Verdict, rule_text
from xferscope.errors import FormatError, SpecError
from xferscope.export import _csv_text, read_json, result_from_record, result_to_record
from xferscope.export import write_json as write
from xferscope.safe_write import write_output
from xferscope.saturate.ceilings import CEILING_RULE, BottleneckFinding, verdict_line
from xferscope.saturate.execute import SaturationOutcome, SeriesOutcome, analyse
from xferscope.saturate.figures import Measurement
from xferscope.saturate.plan import SaturatePlan, Series
from xferscope.saturate.search import (
    SEARCH_RULE,
    InFlight,
    Point,
    SearchResult,
    ShapeComparison,
    judged,
)

SCHEMA = records.SATURATION_SCHEMA

POINT_COLUMNS = [
    "path",
    "block_size",
    "gpus",
    "role",
    "workers",
    "iodepth",
    "concurrency",
    "stage",
    "runs",
    "median_gib_s",
    "min_gib_s",
    "max_gib_s",
    "median_iops",
    "lat_mean_us",
    "cpu_s_per_gib",
    "knee",
    "plateau",
    "bottleneck",
    "points_measured",
    "grid_points",
]


def verdict_rule(margin: float | None = None) -> str:

    return rule_text(MARGIN if margin is None else margin)


def _shape(shape: InFlight) -> records.Shape:
    return records.Shape(workers=shape.workers, iodepth=shape.iodepth, concurrency=shape.concurrency)


def _median_of(point: Point, get) -> float | None:
    import statistics

    values = [v for v in (get(m.result) for m in point.measurements) if v is not None and math.isfinite(v)]
    return statistics.median(values) if values else None


def _point(p: Point, index_of: dict[int, int]) -> records.SaturationPoint:
    return records.SaturationPoint(
        workers=p.shape.workers,
        iodepth=p.shape.iodepth,
        concurrency=p.shape.concurrency,
        stage=p.stage,
        throughput_gib_s=list(p.values),
        median_gib_s=p.median,
        min_gib_s=p.low,
        max_gib_s=p.high,
        results=[index_of[id(m)] for m in p.measurements],
    )


def _comparison(c: ShapeComparison) -> records.PointComparison:
    return records.PointComparison(
        baseline=_shape(c.baseline),
        other=_shape(c.other),
        stage=c.stage,
        **c.verdict.as_dict(),
        told_apart=c.told_apart,
        gain=c.gain,
    )


def _bottleneck(b: BottleneckFinding) -> records.Bottleneck:
    checks = [records.CeilingCheck(ceiling=c.ceiling, text=c.text, binds=c.binds) for c in b.checks]
    return records.Bottleneck(kind=b.kind, detail=b.detail, verdict=b.word, checks=checks, advice=list(b.advice))


def series_record(o: SeriesOutcome, index_of: dict[int, int]) -> records.SaturationSeries:
    """One search as its file holds it; ``index_of`` places each run in the file's ``results``."""
    s, found = o.series, o.found
    own = o.own_ceiling
    return records.SaturationSeries(
        **records.same_fields(s, ("path", "block_size", "role", "label")),
        gpus=list(s.gpus) if s.path != "host" else [],
        **records.same_fields(o, ("grid_points", "points_measured", "share_of_grid", "limit", "error")),
        runs=found.measurements,
        stopped=found.stopped,
        unsaturated=list(found.unsaturated),
        knee=_shape(found.knee) if found.knee else None,
        plateau=_shape(found.plateau) if found.plateau else None,
        flat=found.flat.text("GiB/s") if found.flat else None,
        figures=o.figures.to_dict() if o.figures else None,
        evidence=dataclasses.asdict(o.evidence) if o.evidence else None,
        bottleneck=_bottleneck(o.bottleneck) if o.bottleneck else None,
        verdict_line=verdict_line(o.evidence, o.bottleneck) if o.bottleneck else None,
        own_ceiling=records.OwnCeiling(
            gib_s=o.own_ceiling_gib_s, note=o.own_ceiling_note, result=index_of.get(id(own)) if own else None
        ),
        points=[_point(p, index_of) for p in found.points],
        comparisons=[_comparison(c) for c in found.comparisons],
    )


def _run(m: Measurement, place: records.SaturatePlace) -> records.Run:

    run = result_to_record(m.result)
    run.saturate = place
    return run


def saturation_to_record(outcome: SaturationOutcome) -> records.Saturation:
    """The saturation as its file holds it (``records.Saturation``): every run once, under ``results``, and each
    search's points naming theirs by place."""
    results: list[records.Run] = []
    index_of: dict[int, int] = {}
    for number, o in enumerate(outcome.series):
        for p in o.found.points:
            for m in p.measurements:
                index_of[id(m)] = len(results)
                place = records.SaturatePlace(
                    series=number, workers=p.shape.workers, iodepth=p.shape.iodepth, cpus_allowed=m.cpus_allowed
                )
                results.append(_run(m, place))
        if o.own_ceiling is not None:
            index_of[id(o.own_ceiling)] = len(results)
            place = records.SaturatePlace(series=number, own_ceiling=True, cpus_allowed=o.own_ceiling.cpus_allowed)
            results.append(_run(o.own_ceiling, place))
    return records.Saturation(
        schema_version=records.SCHEMA_VERSION,
        plan=outcome.plan.to_record(),
        rules={"search": SEARCH_RULE, "verdict": verdict_rule(outcome.plan.margin), "ceilings": CEILING_RULE},
        stopped=outcome.stopped,
        storage_source=outcome.storage_source,
        storage={str(bs): list(v) for bs, v in (outcome.storage or {}).items()} or None,
        environment=outcome.environment,
        series=[series_record(o, index_of) for o in outcome.series],
        results=results,
    )


def point_rows(outcome: SaturationOutcome):
    for o in outcome.series:
        found = o.found
        for p in found.points:
            yield {
                "path": o.series.path,
                "block_size": o.series.block_size,
                "gpus": " ".join(map(str, o.series.gpus)) if o.series.path != "host" else "",
                "role": o.series.role,
                "workers": p.shape.workers,
                "iodepth": p.shape.iodepth,
                "concurrency": p.shape.concurrency,
                "stage": p.stage,
                "runs": len(p.measurements),
                "median_gib_s": p.median,
                "min_gib_s": p.low,
                "max_gib_s": p.high,
                "median_iops": _median_of(p, lambda r: r.iops),
                "lat_mean_us": _median_of(p, lambda r: r.latency_us.mean),
                "cpu_s_per_gib": _median_of(p, lambda r: r.cpu_seconds_per_gib),
                "knee": "yes" if p.shape == found.knee else "",
                "plateau": "yes" if p.shape == found.plateau else "",
                "bottleneck": o.bottleneck.word if o.bottleneck else "",
                "points_measured": o.points_measured,
                "grid_points": o.grid_points,
            }


def write_json(path: str, outcome: SaturationOutcome) -> None:

    write(path, saturation_to_record(outcome))


def csv_text(outcome: SaturationOutcome) -> str:

    return _csv_text(POINT_COLUMNS, point_rows(outcome))


def write_csv(path: str, outcome: SaturationOutcome) -> None:

    write_output(path, csv_text(outcome))


# -------------------------------------------------------------------- read back
def is_saturation(data: Any) -> bool:
    return isinstance(data, dict) and data.get("schema") == SCHEMA


def load_saturation(path: str) -> SaturationOutcome:
    """A saturation from its JSON, judged again (figures, evidence, verdicts) by the rules of this version."""

    data = read_json(path)
    if not is_saturation(data):
        raise FormatError(path, None, f"not a saturation (written by `xferscope saturate --json`; schema {SCHEMA})")
    return saturation_from_record(records.as_saturation(data, path), path)


def _measurement(run: records.Run, where: str) -> Measurement:

    place = run.saturate if isinstance(run.saturate, records.SaturatePlace) else None
    return Measurement(result_from_record(run, where), place.cpus_allowed if place else None)


def _verdict(c: records.PointComparison):

    low = c.interval_low if c.interval_low is not None else c.ratio_min  # files before the interval: the range
    high = c.interval_high if c.interval_high is not None else c.ratio_max
    margin = {"equivalence": float(c.equivalence)} if c.equivalence is not None else {}
    return Verdict(c.verdict, c.ratio, low, high, c.rounds, c.interval_coverage, c.ratio_min, c.ratio_max, **margin)


def _search(s: records.SaturationSeries, runs: list[Measurement], margin: float) -> SearchResult:
    points = [Point(InFlight(p.workers, p.iodepth), p.stage or "", [runs[i] for i in p.results]) for p in s.points]
    comparisons = [
        ShapeComparison(
            InFlight(c.baseline.workers, c.baseline.iodepth),
            InFlight(c.other.workers, c.other.iodepth),
            _verdict(c),
            c.stage,
        )
        for c in s.comparisons
    ]
    return judged(points, comparisons, list(s.unsaturated), s.stopped, margin)


def saturation_from_record(rec: records.Saturation, where: str = "<json>") -> SaturationOutcome:
    """The outcome a typed saturation record holds, its searches judged again by today's rules."""
    try:
        runs = [_measurement(r, where) for r in rec.results]
        outcome = SaturationOutcome(
            SaturatePlan.from_record(rec.plan),
            stopped=rec.stopped,
            storage_source=rec.storage_source,
            environment=rec.environment,
            storage={int(bs): (float(v[0]), v[1]) for bs, v in (rec.storage or {}).items()} or None,
        )
        for s in rec.series:
            series = Series(s.path, s.block_size, tuple(s.gpus or [0]), s.role)
            found = _search(s, runs, outcome.plan.margin)
            done = SeriesOutcome(series, found, int(s.grid_points or 0), s.limit or "", error=s.error)
            if s.own_ceiling is not None and s.own_ceiling.result is not None:
                done.own_ceiling = runs[s.own_ceiling.result]
            done.own_ceiling_note = s.own_ceiling.note if s.own_ceiling else None
            outcome.series.append(done)
    except (TypeError, ValueError, IndexError) as exc:
        raise FormatError(where, None, f"not a saturation: {exc!r}") from None
    analyse(outcome)
    return outcome


def storage_from_file(path: str) -> dict[int, tuple[float, str | None]]:
    """Host plateaus by block size from an earlier saturation's JSON (``--storage FILE``)."""
    earlier = load_saturation(path)
    out = {}
    for o in earlier.series:
        if o.series.path == "host" and o.figures is not None:
            note = f"from {path}"
            if o.bottleneck is not None and o.bottleneck.kind != "storage":
                note += f", itself {o.bottleneck.word}"
            out[o.series.block_size] = (o.figures.plateau_gib_s, note)
    if not out:
        raise SpecError(
            "storage",
            f"{path} holds no host saturation to take the storage ceiling from; run "
            "`xferscope saturate --path host --json FILE` first",
        )
    return out


def storage_of(plan):
    """(ceilings, source) from ``--storage FILE``; (None, None) otherwise."""
    if plan.storage in ("auto", "none"):
        return None, None
    return storage_from_file(plan.storage), plan.storage
