"""What a read into pinned memory cost on a filesystem when doctor last measured it (``doctor.pinned_probe``),
kept in a small file under the XDG cache directory keyed by the boot and the filesystem's device, so that
``compare`` can cite it beside a bounce path that trails host: by about that much, it is the memory's cost, not
the path's. A measurement of another boot is not recalled (memory, THP and the disk may have changed)."""

from __future__ import annotations

import contextlib
import json
import os
import time
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class PinnedCost:
    """How much slower a read went into huge pages registered with CUDA, and into cuMemHostAlloc's memory, than
    into the host path's own pages (0.04: 4% slower), where, and when (UTC, as doctor measured it)."""

    registered: float
    allocated: float
    directory: str
    measured: str


def cache_file() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "xferscope", "pinned-read-cost.json")


def _boot_id() -> str:
    try:
        with open("/proc/sys/kernel/random/boot_id") as fh:
            return fh.read().strip()
    except OSError:
        return "unknown-boot"


def _load() -> dict:
    try:
        with open(cache_file()) as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) and data.get("boot") == _boot_id() else {}


def remember(directory: str, registered: float, allocated: float) -> None:
    """Keep doctor's measurement for ``directory``'s filesystem (a cache: a write that fails is dropped)."""
    data = _load() or {"boot": _boot_id(), "devices": {}}
    data["devices"][str(os.stat(directory).st_dev)] = asdict(
        PinnedCost(registered, allocated, directory, time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()))
    )
    path = cache_file()
    with contextlib.suppress(OSError):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w") as fh:
            json.dump(data, fh)
        os.replace(tmp, path)


def recalled(device: int) -> PinnedCost | None:
    """doctor's last measurement on the filesystem of ``device`` (a file's ``st_dev``) in this boot, or None."""
    found = _load().get("devices", {}).get(str(device))
    try:
        return PinnedCost(**found) if found else None
    except TypeError:  # written by another version
        return None
