"""The results file of a sweep: JSON (everything, for resume and ``--against``) and CSV beside it.

The JSON holds the profile, one entry per point (its repetitions as measured,
their statistics, its status and any reason it was skipped or failed) and, under
``results``, the median repetition of each finished point, so that every reader
of xferscope results (``load_results``) can take it. It is rewritten atomically
(``xferscope.safe_write``) after every point, after every repetition while that is
cheap, and when the sweep stops (Ctrl-C included): an interrupted sweep loses nothing
it measured, and a write that fails (a full disk, a crash) leaves the previous complete
version of both files.
"""

from __future__ import annotations

import csv
import datetime as _dt
import io
import json
import os
import time
from dataclasses import dataclass, field
from typing import Any

from xferscope import records
from xferscope.errors import FormatError, NotWritten, SpecError
from xferscope.export import write_json
from xferscope.profiles.model import Profile
from xferscope.profiles.toml_format import profile_to_dict
from xferscope.records import PointIdentity, SweepEnvironment
from xferscope.safe_write import reason_of, write_output
from xferscope.sweep.plan import PlannedPoint, plain
from xferscope.sweep.stats import IO_METRICS, MEM_METRICS, MEM_WHERE, STAT_NAMES, io_stats, median_repetition, mem_rows

SCHEMA = records.SWEEP_SCHEMA
CHEAP_SAVE_S = 0.05


def _now() -> str:
    return _dt.datetime.now().astimezone().isoformat(timespec="seconds")


#: what a point's record in the file and ``PointRecord`` hold alike, name for name
POINT_FIELDS = ("index", "key", "reason", "params", "identity")


@dataclass
class PointRecord:
    """What a results file knows of one point."""

    key: str
    label: str
    index: int
    params: dict[str, Any]
    identity: PointIdentity
    repetitions: list[dict] = field(default_factory=list)
    status: str = "pending"  # pending, done, partial (some repetitions), skipped, failed
    reason: str | None = None

    def ok_count(self) -> int:
        return sum(1 for r in self.repetitions if r.get("status", "ok") == "ok")

    def to_record(self, kind: str) -> records.SweepPoint:
        return records.SweepPoint(
            **records.same_fields(self, POINT_FIELDS),
            label=self.label,
            status=self.status,
            repetitions_done=self.ok_count(),
            stats=io_stats(self.repetitions) if kind == "io" else records.UNSET,
            rows=mem_rows(self.repetitions) if kind != "io" else records.UNSET,
            repetitions=self.repetitions,
        )

    @classmethod
    def from_record(cls, p: records.SweepPoint) -> PointRecord:
        return cls(
            **records.same_fields(p, POINT_FIELDS),
            label=p.label or p.key,
            repetitions=list(p.repetitions),
            status=p.status or "pending",
        )


def csv_path_for(json_path: str) -> str:
    stem = json_path[:-5] if json_path.endswith(".json") else json_path
    return stem + ".csv"


class ResultsFile:
    """The results of one profile's sweep, read back for resume and written after each repetition."""

    def __init__(self, path: str, profile: Profile, points: list[PlannedPoint]):
        self.path = path
        self.csv_path = csv_path_for(path)
        self.profile = profile
        self.kind = profile.kind
        self.created = _now()
        self.environment: SweepEnvironment = {}
        self.last_save_s = 0.0
        self.records: dict[str, PointRecord] = {}
        self._load_existing()
        self.order: list[str] = []
        for point in points:
            if point.key in self.order:  # a point that measures the same as an earlier one: one record, one row
                continue
            record = self.records.get(point.key)
            if record is None:
                record = PointRecord(point.key, point.label, point.index, _params(point), point.identity)
                self.records[point.key] = record
            record.index, record.label, record.params = point.index, point.label, _params(point)
            self.order.append(point.key)
        # points of an earlier plan that this one lacks stay in the file, after the planned ones
        self.order += [k for k in self.records if k not in self.order]
        self.saved_repetitions = self.repetitions_measured()  # what the file on disk holds

    # ---------------------------------------------------------------- reading
    def _load_existing(self) -> None:
        if not os.path.exists(self.path):
            return
        try:
            with open(self.path, encoding="utf-8") as fh:
                data = json.load(fh)
        except json.JSONDecodeError as exc:
            raise FormatError(self.path, exc.lineno, f"not valid JSON: {exc.msg}; pass another --results") from None
        except OSError as exc:
            raise FormatError(self.path, None, f"cannot read: {exc.strerror or exc}") from None
        if not isinstance(data, dict) or data.get("schema") != SCHEMA:
            raise FormatError(self.path, None, "not a sweep results file of xferscope replay; pass another --results")
        saved = records.as_sweep(data, self.path)
        old = saved.profile
        if old.get("name") != self.profile.name or old.get("kind", "io") != self.kind:
            raise SpecError(
                "results",
                f"{self.path} holds results of profile {old.get('name')!r}, not "
                f"{self.profile.name!r}; pass another --results",
            )
        old_duration = old.get("duration")
        new_duration = self.profile.duration
        if old_duration is not None and new_duration is not None and float(old_duration) != float(new_duration):
            raise SpecError(
                "duration",
                f"{self.path} was measured with {old_duration} s points; pass --duration "
                f"{old_duration} to resume it, or another --results",
            )
        self.created = saved.created or self.created
        for point in saved.points:
            record = PointRecord.from_record(point)
            record.index = 0  # not in this plan until the plan says so
            self.records[record.key] = record

    # ---------------------------------------------------------------- queries
    def record(self, point: PlannedPoint) -> PointRecord:
        return self.records[point.key]

    def planned(self) -> list[PointRecord]:
        return [self.records[k] for k in self.order if self.records[k].index > 0]

    def repetitions_measured(self) -> int:
        return sum(self.records[k].ok_count() for k in self.order)

    # ---------------------------------------------------------------- writing
    def to_record(self) -> records.Sweep:
        medians = (median_repetition(self.records[k].repetitions) for k in self.order)
        return records.Sweep(
            schema_version=records.SCHEMA_VERSION,
            profile=profile_to_dict(self.profile),
            kind=self.kind,
            created=self.created,
            updated=_now(),
            environment=self.environment,
            points=[self.records[k].to_record(self.kind) for k in self.order],
            results=[records.as_run(rep, self.path) for rep in medians if rep is not None]
            if self.kind == "io"
            else records.UNSET,
        )

    def save(self) -> None:
        """Both files, each replaced whole; NotWritten names the one that could not be written."""
        started = time.monotonic()
        directory = os.path.dirname(os.path.abspath(self.path))
        try:
            os.makedirs(directory, exist_ok=True)
        except OSError as exc:
            raise NotWritten(self.path, reason_of(exc)) from None
        write_json(self.path, self.to_record())
        self.saved_repetitions = self.repetitions_measured()  # the JSON is the record; the CSV shows it
        write_csv(self.csv_path, self)
        self.last_save_s = time.monotonic() - started

    @property
    def cheap_to_save(self) -> bool:
        """Whether saving after every repetition costs little (a large sweep saves after every point)."""
        return self.last_save_s < CHEAP_SAVE_S


def _params(point: PlannedPoint) -> dict[str, Any]:
    return {k: plain(v) for k, v in point.combo.items()}


def _cell(v: Any) -> Any:
    if v is None:
        return ""
    if isinstance(v, float):
        return "" if v != v else f"{v:.6g}"
    if isinstance(v, (list, tuple)):
        return " ".join(map(str, v))
    if isinstance(v, bool):
        return str(v).lower()
    return v


IO_ID_COLUMNS = ("path", "io", "block_size", "workers", "iodepth", "rwmix", "gpus", "buffered")
MEM_ID_COLUMNS = ("mode", "traffic", "stride", "backend", "delay", "locality", "size_bytes", "cpu_node", "mem_node")


def csv_columns(kind: str) -> list[str]:
    metrics = IO_METRICS if kind == "io" else MEM_METRICS
    ids = IO_ID_COLUMNS if kind == "io" else MEM_ID_COLUMNS
    return [
        "point",
        "label",
        *ids,
        "status",
        "reason",
        "repetitions",
        *(f"{m}_{s}" for m in metrics for s in STAT_NAMES),
    ]


def csv_rows(results: ResultsFile) -> list[dict[str, object]]:
    """One row per io point, or per delay of a memory point (with one row for a point with no rows yet)."""
    rows = []
    for key in results.order:
        rec = results.records[key]
        common = {
            "point": rec.index or "",
            "label": rec.label,
            "status": rec.status,
            "reason": rec.reason,
            "repetitions": rec.ok_count(),
        }
        if results.kind == "io":
            row = {**common, **{c: rec.identity.get(c) for c in IO_ID_COLUMNS}}
            for metric, st in io_stats(rec.repetitions).items():
                row.update({f"{metric}_{s}": st[s] for s in STAT_NAMES})
            rows.append(row)
            continue
        ident = {"mode": rec.identity.get("mode"), "backend": rec.identity.get("backend")}
        delay_rows = mem_rows(rec.repetitions) or [{}]
        for mr in delay_rows:
            row = {
                **common,
                **ident,
                "traffic": mr.get("traffic", " ".join(rec.identity.get("traffic", []))),
                "stride": mr.get("stride", " ".join(map(str, rec.identity.get("stride", [])))),
                "delay": mr.get("delay"),
                **{k: mr.get(k) for k in MEM_WHERE},
            }
            for metric in MEM_METRICS:
                st = mr.get(metric) or {}
                row.update({f"{metric}_{s}": st.get(s) for s in STAT_NAMES})
            rows.append(row)
    return rows


def write_csv(path: str, results: ResultsFile) -> None:
    buf = io.StringIO(newline="")
    writer = csv.DictWriter(buf, fieldnames=csv_columns(results.kind))
    writer.writeheader()
    for row in csv_rows(results):
        writer.writerow({k: _cell(v) for k, v in row.items()})
    write_output(path, buf.getvalue())
