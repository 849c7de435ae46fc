"""What the setup form holds, and how it becomes validated RunSpecs. No Textual here.

Every error is a ``SpecError`` whose field names the form control to explain it
beside; the checks are the CLI's (``RunSpec.validate()`` and the target plan).
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field

import psutil

from xferscope import target as targets
from xferscope.app.form_text import whole_number
from xferscope.compare.rounds import rounds_plan
from xferscope.engines.registry import availability
from xferscope.errors import SpecError, XferscopeError
from xferscope.spec import GPU_PATHS, PATHS, RunSpec
from xferscope.units import format_bytes, format_size, parse_duration, parse_size

#: SpecError field -> the form control that explains it
FIELD_CONTROL = {
    "path": "paths",
    "io": "io",
    "block_size": "bs",
    "bs": "bs",
    "workers": "workers",
    "iodepth": "iodepth",
    "file_size": "size",
    "size": "size",
    "duration": "duration",
    "file": "target",
    "dir": "target",
    "directory": "target",
    "gpus": "gpu",
    "gpu": "gpu",
    "total_bytes": "duration",
    "verify": "target",
    "rounds": "rounds",
    "split": "split",
}
DEFAULT_TARGET = ""  # the embedded default: a scratch file in a new temporary directory


@dataclass
class FormValues:
    """The form as typed: strings where people type, choices where they pick."""

    paths: list[str]
    io: str = "read"
    bs: str = "1M"
    split: str = ""  # each request of bs as parallel sub-requests of this size (KvikIO's task size); "": none
    workers: str = "1"
    iodepth: str = "1"
    size: str = "1G"
    duration: str = "10"
    rounds: str = "auto"  # with several paths: rounds of the comparison (auto, or a number), order rotated
    mount: str = DEFAULT_TARGET
    typed_path: str = ""
    gpu: int | None = None
    buffered: bool = False  # through the page cache (no O_DIRECT)
    base: RunSpec = field(default_factory=RunSpec)  # fields the form does not show (from a profile)

    @classmethod
    def from_spec(cls, spec: RunSpec, paths: list[str]) -> FormValues:
        return cls(
            paths=list(paths),
            io=spec.io,
            bs=format_size(spec.block_size),
            split=format_size(spec.split) if spec.split else "",
            workers=str(spec.workers),
            iodepth=str(spec.iodepth),
            size=format_size(spec.file_size),
            duration=f"{spec.duration:g}" if spec.duration else "",
            typed_path=spec.file or spec.directory or "",
            gpu=spec.gpus[0] if spec.gpus else None,
            buffered=spec.buffered,
            base=spec,
        )


def default_paths(avail: dict[str, str | None] | None = None) -> list[str]:
    """``host``, plus every GPU path that can run here."""
    avail = availability() if avail is None else avail
    return ["host"] + [p for p in PATHS if p in GPU_PATHS and avail.get(p) is None]


def path_order(chosen: list[str]) -> list[str]:
    """Every path in the order the setup lists them, which is the order they run: the chosen ones as given
    (the first is the comparison's baseline), then the others."""
    return list(dict.fromkeys([p for p in chosen if p in PATHS] + list(PATHS)))


def no_gpu_text(reason: str) -> str:
    """The setup's GPU line where there is none: the reason, saying "no GPU" once."""
    if not reason:
        return "no GPU"
    return reason if "no GPU" in reason else f"no GPU ({reason})"


def _size(text: str, name: str) -> int:
    try:
        return parse_size(str(text).strip())
    except ValueError as exc:
        raise SpecError(name, str(exc)) from None


def build_specs(values: FormValues) -> list[RunSpec]:
    """One validated spec per chosen path. Raises SpecError naming the field."""
    if not values.paths:
        raise SpecError("path", "choose at least one transfer path")
    try:
        duration = parse_duration(values.duration) if str(values.duration).strip() else None
    except ValueError as exc:
        raise SpecError("duration", str(exc)) from None
    file = directory = None
    typed = values.typed_path.strip()
    if typed:
        typed = os.path.expanduser(typed)
        if os.path.isdir(typed):
            directory = typed
        else:
            file = typed
    elif values.mount != DEFAULT_TARGET:
        directory = values.mount
    spec = values.base.replace(
        path=values.paths[0],
        io=values.io,
        block_size=_size(values.bs, "block_size"),
        split=_size(values.split, "split") if str(values.split).strip() else None,
        workers=whole_number(values.workers, "workers"),
        iodepth=whole_number(values.iodepth, "iodepth"),
        file_size=_size(values.size, "file_size"),
        duration=duration,
        total_bytes=values.base.total_bytes if duration is None else None,
        file=file,
        directory=directory,
        gpus=[values.gpu] if values.gpu is not None else list(values.base.gpus),
        buffered=values.buffered,
        label=None,
    )
    specs = [spec.replace(path=p).validate() for p in values.paths]
    return specs


def parse_rounds(values: FormValues) -> tuple[int, int | None]:
    """The comparison's rounds (several paths run in rounds, order rotated): (rounds planned, the most with auto,
    else None), as ``compare --rounds``. Raises SpecError("rounds")."""
    return rounds_plan(values.rounds or "auto")


def check_target(spec: RunSpec) -> None:
    """The filesystem checks a run makes before it creates anything (O_DIRECT, space, the user's file).

    Only for a typed file or directory: the embedded default makes its own temporary directory.
    """
    if not (spec.file or spec.directory):
        return
    if spec.directory and not os.access(spec.directory, os.W_OK):
        raise SpecError("dir", f"you cannot create files in {spec.directory}; choose a directory you can write to")
    try:
        targets.plan(spec)
    except SpecError:
        raise
    except XferscopeError as exc:  # no O_DIRECT, no space: still the target's fault
        raise SpecError("dir" if spec.directory else "file", str(exc)) from None


@dataclass(frozen=True)
class Mount:
    mountpoint: str
    fstype: str
    free: int
    writable: bool
    direct: bool | None  # None: not probed (not writable)
    why: str = ""

    @property
    def label(self) -> str:
        if not self.writable:
            state = "not writable"
        elif self.direct is None:
            state = "checking O_DIRECT"
        else:
            state = "O_DIRECT yes" if self.direct else f"O_DIRECT no ({self.why})"
        return f"{self.mountpoint} ({self.fstype}, {format_bytes(self.free)} free, {state})"


def scratch_parent() -> Mount:
    """Where the embedded default puts its temporary directory."""
    parent, direct = targets.default_scratch_parent()
    fs = targets.filesystem_of(parent)
    return Mount(parent, fs.fstype, _free(parent), True, direct, "" if direct else "refused")


def list_mounts(probe: bool = True) -> list[Mount]:
    """Real filesystems, with type, free space, whether you can write there and whether O_DIRECT works."""
    out = []
    seen = set()
    for part in psutil.disk_partitions(all=False):
        mp = part.mountpoint
        if mp in seen or not os.path.isdir(mp):
            continue
        seen.add(mp)
        writable = os.access(mp, os.W_OK)
        direct, why = (None, "")
        if writable and probe:
            direct, why = targets.probe_direct_io(mp)
        out.append(Mount(mp, part.fstype, _free(mp), writable, direct, why))
    return out


def _free(path: str) -> int:
    try:
        return shutil.disk_usage(path).free
    except OSError:
        return 0
