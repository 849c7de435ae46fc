"""A profile: one run or a sweep (a cartesian grid over spec fields), with repetitions and a duration per point.

Three kinds: ``io`` profiles make ``RunSpec``s (storage to host or GPU), ``mem``
profiles make ``MemSpec``s (memory latency and bandwidth sweeps), and ``saturate``
profiles hold a saturation plan (``xferscope saturate``: the paths, block sizes
and limits of its knee searches in ``saturate``, the runs' other fields in
``base``). A profile holds typed field values; ``xferscope.profiles.toml_format``
reads and writes them as TOML.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from dataclasses import dataclass, field
from typing import Any

from xferscope.errors import SpecError
from xferscope.memory.sweep import MemSpec
from xferscope.profiles import fields as F
from xferscope.records import PointIdentity
from xferscope.spec import RunSpec

ORIGINS = ("bundled", "user", "file")


@dataclass
class Profile:
    """What to run. ``base`` holds fixed field values; ``grid`` the values each varying field takes, in order."""

    name: str
    description: str = ""
    source: str = ""
    kind: str = "io"
    repetitions: int = 1
    duration: float | None = None  # seconds per point; None: the kind's default (or no limit with total_bytes)
    ranks: int | None = None  # MPI ranks the profile needs (replay --mpi under exactly that many); None: any
    base: dict[str, Any] = field(default_factory=dict)
    grid: dict[str, list[Any]] = field(default_factory=dict)
    saturate: dict[str, Any] = field(default_factory=dict)  # kind "saturate": the plan's fields
    workload: dict[str, Any] = field(default_factory=dict)  # kind "workload": `workload train`'s fields
    file: str | None = None  # where it was read from
    origin: str = "file"  # bundled, user or file

    # ------------------------------------------------------------ the grid
    @property
    def point_count(self) -> int:
        """Points of the grid; for a saturate plan, its knee searches (paths x GPU sets x block sizes)."""
        if self.kind == "workload":
            return len(str(self.workload.get("path", "host")).split(","))
        if self.kind == "saturate":
            return (
                len(self.paths())
                * len(self.saturate.get("gpu_sets") or [[0]])
                * len(self.saturate.get("block_sizes") or [0] * 4)
            )
        return math.prod(len(values) for values in self.grid.values()) if self.grid else 1

    @property
    def axes(self) -> list[str]:
        return list(self.grid)

    def combos(self) -> list[dict[str, Any]]:
        """The varying values of each point, first grid key outermost."""
        keys = list(self.grid)
        return [dict(zip(keys, values)) for values in itertools.product(*(self.grid[k] for k in keys))]

    def point_duration(self) -> float | None:
        if self.duration is not None:
            return self.duration
        if self.kind == "io" and self.base.get("total_bytes") is not None:
            return None
        return F.DEFAULT_DURATION[self.kind]

    def spec_for(self, combo: dict[str, Any]):
        """The validated spec of one point (RunSpec for io, MemSpec for mem); SpecError names the field."""
        values = {**self.base, **combo}
        if self.kind == "mem":
            return _mem_spec(values, self.point_duration())
        return RunSpec(**values, duration=self.point_duration()).validate()

    def points(self) -> list:
        """Every point's spec, validated: RunSpecs for an io profile, MemSpecs for a mem profile."""
        return [self.spec_for(c) for c in self.combos()]

    def paths(self) -> list[str]:
        """The transfer paths this profile measures (``mem`` for memory sweeps), in grid order."""
        if self.kind == "mem":
            return ["mem"]
        if self.kind == "saturate":
            return list(self.saturate.get("paths") or ["host"])
        if self.kind == "workload":
            return [p.strip() for p in str(self.workload.get("path", "host")).split(",")]
        values = self.grid.get("path", [self.base.get("path", RunSpec.path)])
        return list(dict.fromkeys(values))

    def check_ranks(self, mpi: bool, world_size: int | None) -> None:
        """SpecError when the profile needs N ranks and this replay is not an MPI job of N ranks."""
        if self.ranks is None:
            return
        given = self.file if self.origin == "file" and self.file else self.name
        start = f"mpirun -np {self.ranks} xferscope replay {given} --mpi"
        if not mpi:
            raise SpecError("ranks", f"profile {self.name} needs {self.ranks} MPI ranks; start it with {start}")
        if world_size != self.ranks:
            raise SpecError(
                "ranks",
                f"profile {self.name} needs {self.ranks} MPI ranks, this job has {world_size}; start it with {start}",
            )

    # ------------------------------------------------------------- changes
    def with_changes(
        self, *, duration: float | None = None, repetitions: int | None = None, sets: dict[str, Any] | None = None
    ) -> Profile:
        """A copy with a new duration, repetition count, or fixed values (each removes its grid axis)."""
        base = dict(self.base)
        grid = dict(self.grid)
        plan = dict(self.saturate)
        for key, value in (sets or {}).items():
            name = F.canonical(self.kind, key)
            if name is None and self.kind == "saturate" and F.canonical_plan(key):
                name = F.canonical_plan(key)
                try:
                    plan[name] = F.SATURATE_FIELDS[name](value)
                except ValueError as exc:
                    raise SpecError(name, str(exc)) from None
                continue
            if name is None:
                raise SpecError(
                    key, f"not a field of {self.kind} profiles; valid fields: {', '.join(F.fields_of(self.kind))}"
                )
            try:
                base[name] = F.convert(self.kind, name, value)
            except ValueError as exc:
                raise SpecError(name, str(exc)) from None
            grid.pop(name, None)
            if name == "file":
                base.pop("directory", None)
            elif name == "directory":
                base.pop("file", None)
        if repetitions is not None and repetitions < 1:
            raise SpecError("reps", f"must be 1 or more, got {repetitions}")
        return dataclasses.replace(
            self,
            base=base,
            grid=grid,
            saturate=plan,
            duration=self.duration if duration is None else duration,
            repetitions=self.repetitions if repetitions is None else repetitions,
        )

    # --------------------------------------------------------- conversions
    @classmethod
    def from_spec(cls, spec: RunSpec, name: str, description: str = "") -> Profile:
        """A single-point profile that runs ``spec`` again (fields at their defaults are left out)."""
        spec.validate()
        defaults = RunSpec()
        base: dict[str, Any] = {}
        for key in F.IO_FIELDS:
            value = getattr(spec, key)
            if value is not None and (
                key in ("path", "io", "block_size", "workers") or value != getattr(defaults, key)
            ):
                base[key] = list(value) if isinstance(value, (list, tuple)) else value
        return cls(name=name, description=description, kind="io", duration=spec.duration, base=base)


def point_identity(spec) -> PointIdentity:
    """What a RunSpec or MemSpec measures, as plain values: the key for resume and ``--against``."""
    if isinstance(spec, RunSpec):
        from xferscope.engines.host import host_buffers_on_huge_pages

        return {  # in the order of F.IO_IDENTITY: the key's order
            **spec.shape(),  # type: ignore[typeddict-item]
            "gpus": list(spec.gpus) if spec.uses_gpu else [],
            "buffered": spec.buffered,
            "source": spec.source,
            "register_buffers": spec.register_buffers,
            "huge_pages": host_buffers_on_huge_pages(spec),  # the pages measured, asked for or by default
            "split": spec.split,
        }
    return {
        "mode": spec.mode,
        "traffic": list(spec.traffic),
        "stride": list(spec.strides),
        "backend": spec.backend,
        "locality": spec.locality,
        "pages": spec.pages,
    }


def _mem_spec(values: dict[str, Any], seconds: float | None):

    kwargs: dict[str, Any] = {"point_seconds": seconds}
    renames = {"stride": "strides", "buffer": "buffer_bytes", "mlc": "mlc_path"}
    for key, value in values.items():
        if key in ("traffic", "stride"):
            value = tuple(value) if isinstance(value, list) else (value,)
        elif key in ("delays", "cpus"):
            value = tuple(value)
        kwargs[renames.get(key, key)] = value
    try:
        return MemSpec(**kwargs).validated()
    except SpecError as exc:
        if exc.field == "point_seconds":
            raise SpecError("duration", str(exc).split(": ", 1)[-1]) from None
        raise
