"""The points of a sweep: each one's spec, the key that identifies it across files, and why it is skipped here."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from xferscope.gpus import gpu_text
from xferscope.profiles.model import Profile, point_identity
from xferscope.records import PointIdentity
from xferscope.units import format_size


@dataclass
class PlannedPoint:
    index: int  # 1-based, in grid order
    combo: dict[str, Any]  # the grid values of this point
    spec: Any  # RunSpec (io) or MemSpec (mem)
    key: str  # what it measures, e.g. "path=host io=randread block_size=4096 ..."
    label: str  # short, for tables
    skip: str | None = None  # why it does not run on this machine
    identity: PointIdentity = field(default_factory=lambda: PointIdentity())


def plain(value: Any) -> Any:
    """A value as JSON and keys write it."""
    if isinstance(value, tuple):
        return [plain(v) for v in value]
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


def key_of(identity: Mapping[str, object]) -> str:
    def text(v: Any) -> str:
        if isinstance(v, (list, tuple)):
            return ",".join(str(x) for x in v)
        return str(v).lower() if isinstance(v, bool) else str(v)

    return " ".join(f"{k}={text(v)}" for k, v in identity.items())


def label_of(spec) -> str:
    if hasattr(spec, "strides"):
        parts = [spec.mode] + (["/".join(spec.traffic)] if spec.mode in ("loaded", "peak") else [])
        parts.append(f"stride {'/'.join(map(str, spec.strides))}")
        if spec.locality != "default":
            parts.append(
                spec.locality if not spec.locality.isdigit() else f"locality {format_size(int(spec.locality))}"
            )
        if spec.pages != "thp":
            parts.append(f"pages {spec.pages}")
        return " ".join(parts) + (f" ({spec.backend})" if spec.backend != "builtin" else "")
    label = spec.name
    if spec.uses_gpu and spec.gpus != [0]:
        label += f" gpu {gpu_text(spec.gpus)}"
    if spec.io in ("randrw", "rw"):
        label += f" {spec.read_pct}/{100 - spec.read_pct}"
    return label


class Availability:
    """Why a point cannot run here (engine missing, GPU missing), asked once per path."""

    def __init__(
        self, path_reason: Callable[[str], str | None] | None = None, gpu_count: Callable[[], int] | None = None
    ):
        self._path_reason = path_reason
        self._gpu_count = gpu_count
        self._reasons: dict[str, str | None] = {}
        self._gpus: int | None = None

    def path_reason(self, path: str) -> str | None:
        if path not in self._reasons:
            if self._path_reason is None:
                from xferscope.engines.registry import unavailable_reason

                self._path_reason = unavailable_reason
            self._reasons[path] = self._path_reason(path)
        return self._reasons[path]

    def gpus(self) -> int:
        if self._gpus is None:
            if self._gpu_count is None:
                from xferscope.gpus import gpu_count

                self._gpu_count = lambda: gpu_count()[0]
            self._gpus = self._gpu_count()
        return self._gpus

    def io_reason(self, spec) -> str | None:
        reason = self.path_reason(spec.path)
        if reason:
            return f"{spec.path}: {reason}"
        if spec.uses_gpu:
            n = self.gpus()
            if n and max(spec.gpus) >= n:
                return f"needs GPU {max(spec.gpus)}; this machine has {n} (0-{n - 1})"
        return None


def plan_points(profile: Profile, availability: Availability | None = None) -> list[PlannedPoint]:
    """Every point of ``profile`` in grid order, with the reason it is skipped on this machine, if any."""
    availability = availability or Availability()
    points: list[PlannedPoint] = []
    seen: dict[str, int] = {}
    for index, combo in enumerate(profile.combos(), start=1):
        spec = profile.spec_for(combo)
        identity = point_identity(spec)
        key = key_of(identity)
        point = PlannedPoint(index, combo, spec, key, label_of(spec), identity=identity)
        if key in seen:
            point.skip = f"measures the same as point {seen[key]} (the varied field does not apply here)"
        elif profile.kind == "io":
            point.skip = availability.io_reason(spec)
        seen.setdefault(key, index)
        points.append(point)
    return points


def combo_text(combo: dict[str, Any]) -> str:
    """'block_size=4K iodepth=16' for titles and legends."""
    parts = []
    for k, v in combo.items():
        if k in ("block_size", "file_size", "total_bytes", "buffer") and isinstance(v, int):
            v = format_size(v)
        elif isinstance(v, (list, tuple)):
            v = gpu_text(list(v)) if k == "gpus" else ",".join(map(str, v))
        parts.append(f"{k}={v}")
    return " ".join(parts)
