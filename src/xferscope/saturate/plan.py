"""What a saturation measures: the paths, block sizes and GPU sets, the limits of the search, and the full grid
it is counted against."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import Any

from xferscope import records
from xferscope.compare.verdict import MARGIN, check_margin
from xferscope.errors import SpecError
from xferscope.profiles import Profile
from xferscope.profiles.fields import SATURATE_BASE_FIELDS
from xferscope.saturate.search import MAX_POINTS, MAX_ROUNDS, MIN_ROUNDS
from xferscope.spec import PATHS, SPLIT_PATHS, RunSpec
from xferscope.units import format_size

#: paths with a queue depth of their own (host: io_uring; cufile-batch: the batch size)
QUEUE_PATHS = frozenset({"host", "cufile-batch"})
DEFAULT_BLOCKS = (4 << 10, 64 << 10, 1 << 20, 16 << 20)
DEFAULT_DURATION = 1.0  # seconds per measurement
STORAGE_AUTO, STORAGE_NONE = "auto", "none"


def has_queue(path: str) -> bool:
    return path in QUEUE_PATHS


def qd_grid(max_qd: int) -> list[int]:
    """The queue depths of the full grid a search is counted against: 1, 4, 16, 64, ... up to ``max_qd``."""
    out, q = [], 1
    while q <= max_qd:
        out.append(q)
        q *= 4
    if out[-1] != max_qd:
        out.append(max_qd)
    return out


@dataclass(frozen=True)
class Series:
    """One knee search: one path, one GPU set, one block size."""

    path: str
    block_size: int
    gpus: tuple[int, ...] = (0,)
    #: "measured", or "storage reference" for a host search run only to hold the others against
    role: str = "measured"

    @property
    def key(self) -> tuple:
        return self.path, self.block_size, self.gpus if self.path != "host" else ()

    @property
    def label(self) -> str:
        text = f"{self.path} {format_size(self.block_size)}"
        if self.path != "host" and self.gpus != (0,):
            from xferscope.gpus import gpu_text

            text += " gpu " + gpu_text(list(self.gpus))
        return text


@dataclass
class SaturatePlan:
    """``base`` holds the run's other fields (io, file, size, duration per measurement, GPUs...); each point
    replaces its path, block size, GPUs, workers and queue depth."""

    base: RunSpec
    paths: list[str]
    block_sizes: list[int] = field(default_factory=lambda: list(DEFAULT_BLOCKS))
    gpu_sets: list[list[int]] = field(default_factory=lambda: [[0]])
    max_workers: int = 16
    max_qd: int = 64
    min_rounds: int = MIN_ROUNDS
    max_rounds: int = MAX_ROUNDS
    max_points: int = MAX_POINTS
    margin: float = MARGIN  # the verdict rule's m
    storage: str = STORAGE_AUTO  # auto: search host too where it is not among the paths; none; or a results file

    def validate(self) -> SaturatePlan:
        if not self.paths:
            raise SpecError("path", "give at least one path, e.g. --path host")
        for path in self.paths:
            if path not in PATHS:
                raise SpecError("path", f"unknown transfer path {path!r}; choose one of {', '.join(PATHS)}")
        if len(set(self.paths)) != len(self.paths):
            raise SpecError("path", "a path is listed twice")
        if not self.block_sizes:
            raise SpecError("bs", "give at least one block size, e.g. --bs 4K,1M")
        if len(set(self.block_sizes)) != len(self.block_sizes):
            raise SpecError("bs", "a block size is listed twice")
        if not 1 <= self.max_workers <= 1024:
            raise SpecError("max-workers", f"must be 1..1024, got {self.max_workers}")
        if not 1 <= self.max_qd <= 4096:
            raise SpecError("max-qd", f"must be 1..4096, got {self.max_qd}")
        if not 2 <= self.min_rounds <= self.max_rounds:
            raise SpecError(
                "rounds",
                f"need 2 <= min rounds <= max rounds (one round gives no verdict), "
                f"got {self.min_rounds}..{self.max_rounds}",
            )
        if self.max_rounds > 50:
            raise SpecError("rounds", f"at most 50 rounds per comparison, got {self.max_rounds}")
        if self.max_points < 2:
            raise SpecError("max-points", f"must be 2 or more, got {self.max_points}")
        try:
            check_margin(self.margin)
        except ValueError as exc:
            raise SpecError("margin", str(exc).removeprefix("--margin ")) from None
        if not self.gpu_sets or any(not s for s in self.gpu_sets):
            raise SpecError("gpu", "every GPU set needs at least one GPU")
        for series in self.series():  # every point's spec is valid before anything runs
            self.spec(series, self.max_workers, self.max_qd if has_queue(series.path) else 1)
        return self

    # --------------------------------------------------------- the series
    @property
    def needs_storage_search(self) -> bool:
        return self.storage == STORAGE_AUTO and "host" not in self.paths and any(p != "host" for p in self.paths)

    def series(self) -> list[Series]:
        """Every search in the order it runs: host first (the storage reference), then each path as given,
        each GPU set, each block size."""
        order = (["host"] if "host" in self.paths or self.needs_storage_search else []) + [
            p for p in self.paths if p != "host"
        ]
        out = []
        for path in order:
            role = "measured" if path in self.paths else "storage reference"
            sets = [tuple(self.gpu_sets[0])] if path == "host" else [tuple(s) for s in self.gpu_sets]
            for gpus in sets:
                for bs in self.block_sizes:
                    out.append(Series(path, bs, gpus, role))
        return out

    def spec(self, series: Series, workers: int, iodepth: int) -> RunSpec:
        """The spec of one point; ``--split`` applies to the GPU paths that take it (host, the storage
        reference, and queue depths run whole blocks)."""
        split = self.base.split if series.path in SPLIT_PATHS and series.path != "host" else None
        return self.base.replace(
            path=series.path,
            block_size=series.block_size,
            gpus=list(series.gpus),
            workers=workers,
            iodepth=iodepth,
            label=None,
            split=split,
        ).validate()

    def max_qd_of(self, path: str) -> int:
        return self.max_qd if has_queue(path) else 1

    def grid_points(self, path: str) -> int:
        """Points of the full grid one search is counted against: workers 1..max x queue depths 1, 4, 16, ..."""
        return self.max_workers * (len(qd_grid(self.max_qd)) if has_queue(path) else 1)

    def points_budget(self, path: str) -> int:
        """The most points one search measures: ``max_points``, and never more than its full grid."""
        return max(2, min(self.max_points, self.grid_points(path)))

    def limit_text(self, path: str) -> str:
        text = f"{self.max_workers} workers"
        return text + (f" x qd {self.max_qd}" if has_queue(path) and self.max_qd > 1 else "")

    def worst_case_runs(self, path: str) -> int:
        """The most runs one search of ``path`` takes: its point budget, every comparison at the round cap (two
        measurements a round, each new point compared once)."""
        return 2 * self.max_rounds * (self.points_budget(path) - 1)

    def worst_case_seconds(self) -> float:
        """An upper bound of the measuring time (the runs' set-up left out: ``saturate.eta`` adds it)."""
        per = self.base.duration or 0.0
        return sum(self.worst_case_runs(s.path) * per for s in self.series())

    def to_record(self) -> records.SaturationPlan:
        """The plan as a saturation's file holds it."""
        return records.SaturationPlan(
            paths=list(self.paths),
            block_sizes=list(self.block_sizes),
            gpu_sets=[list(s) for s in self.gpu_sets],
            io=self.base.io,
            max_workers=self.max_workers,
            max_qd=self.max_qd,
            min_rounds=self.min_rounds,
            max_rounds=self.max_rounds,
            max_points=self.max_points,
            margin=self.margin,
            storage=self.storage,
            duration=self.base.duration,
            file_size=self.base.file_size,
            spec=self.base.to_dict(),
        )

    @classmethod
    def from_record(cls, rec: records.SaturationPlan) -> SaturatePlan:
        """The plan a saturation's file holds (fields an earlier version left out take today's defaults)."""
        return cls(
            base=RunSpec(**{k: v for k, v in rec.spec.items() if k in RunSpec.field_names()}),
            paths=list(rec.paths),
            block_sizes=list(rec.block_sizes),
            gpu_sets=[list(s) for s in rec.gpu_sets],
            max_workers=rec.max_workers,
            max_qd=rec.max_qd,
            min_rounds=rec.min_rounds if rec.min_rounds is not None else MIN_ROUNDS,
            max_rounds=rec.max_rounds if rec.max_rounds is not None else MAX_ROUNDS,
            max_points=rec.max_points if rec.max_points is not None else MAX_POINTS,
            margin=rec.margin if rec.margin is not None else MARGIN,
            storage=rec.storage or STORAGE_AUTO,
        )


PLAN_DEFAULTS = {
    "paths": ["host"],
    "block_sizes": list(DEFAULT_BLOCKS),
    "gpu_sets": [[0]],
    "max_workers": 16,
    "max_qd": 64,
    "min_rounds": MIN_ROUNDS,
    "max_rounds": MAX_ROUNDS,
    "max_points": MAX_POINTS,
    "margin": MARGIN,
    "storage": STORAGE_AUTO,
}


def plan_from(
    profile=None, *, fields: dict[str, Any] | None = None, duration: float | None = None, **given: Any
) -> SaturatePlan:
    """The validated plan: each of its values (``paths``, ``block_sizes``, ``gpu_sets``, ``max_workers``, ...)
    from ``given`` where not None, else from the saturate ``profile``, else the default; the runs' other fields
    are the profile's ``[base]`` updated with ``fields``. SpecError names what is wrong."""
    unknown = set(given) - set(PLAN_DEFAULTS)
    if unknown:
        raise TypeError(f"not a plan value: {sorted(unknown)}")
    if profile is not None and profile.kind != "saturate":
        raise SpecError(
            "profile",
            f"{profile.name} is a {profile.kind} profile, not a saturate plan; replay it "
            f"with `xferscope replay {profile.name}`",
        )
    held = dict(profile.saturate) if profile is not None else {}
    values = {k: given[k] if given.get(k) is not None else held.get(k, default) for k, default in PLAN_DEFAULTS.items()}
    if duration is None:
        duration = profile.duration if profile is not None and profile.duration else DEFAULT_DURATION
    runs = dict(profile.base) if profile is not None else {}
    fields = {k: v for k, v in (fields or {}).items() if v is not None}
    if fields.get("file") or fields.get("directory"):  # one replaces the other of a profile
        runs.pop("file", None)
        runs.pop("directory", None)
    runs.update(fields)
    split = runs.pop("split", None)
    base = (
        RunSpec(
            **runs,
            path=values["paths"][0],
            block_size=values["block_sizes"][0],
            gpus=list(values["gpu_sets"][0]),
            duration=duration,
        )
        .validate()
        .replace(split=split)
    )
    if split and not any(p in SPLIT_PATHS and p != "host" for p in values["paths"]):
        raise SpecError(
            "split",
            f"--split applies to {', '.join(p for p in SPLIT_PATHS if p != 'host')} here; none of the paths takes it",
        )
    storage = values["storage"]
    if storage not in (STORAGE_AUTO, STORAGE_NONE) and not os.path.isfile(storage):
        raise SpecError(
            "storage",
            f"{storage}: no such file (auto, none, or the JSON of an earlier `xferscope saturate --path host`)",
        )
    plain = ("max_workers", "max_qd", "min_rounds", "max_rounds", "max_points", "margin")
    return SaturatePlan(
        base=base,
        paths=list(values["paths"]),
        block_sizes=list(values["block_sizes"]),
        gpu_sets=[list(g) for g in values["gpu_sets"]],
        storage=storage,
        **{k: values[k] for k in plain},
    ).validate()


def profile_of(plan: SaturatePlan, name: str, description: str = ""):
    """The plan as a saturate profile (the runs' fields at their defaults left out)."""

    defaults = RunSpec()
    base = {}
    for key in SATURATE_BASE_FIELDS:
        value = getattr(plan.base, key)
        if value is not None and (value != getattr(defaults, key) or key == "io"):
            base[key] = list(value) if isinstance(value, (list, tuple)) else value
    held = {
        "paths": list(plan.paths),
        "block_sizes": list(plan.block_sizes),
        "max_workers": plan.max_workers,
        "max_qd": plan.max_qd,
        "min_rounds": plan.min_rounds,
        "max_rounds": plan.max_rounds,
        "max_points": plan.max_points,
        "margin": plan.margin,
        "storage": plan.storage,
    }
    if plan.gpu_sets != [[0]]:
        held["gpu_sets"] = [list(s) for s in plan.gpu_sets]
    return Profile(
        name=name, description=description, kind="saturate", duration=plan.base.duration, base=base, saturate=held
    )


def seconds_text(seconds: float) -> str:
    if seconds < 120:
        return f"{math.ceil(seconds)} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
