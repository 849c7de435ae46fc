"""What every workload run takes besides the workload's shape: the path and GPUs, where generated data goes,
its seed, whether it stays, how often the run reports, and why defaults were chosen."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xferscope.engines.registry import unavailable_reason
from xferscope.errors import EnvironmentProblem


@dataclass(frozen=True, kw_only=True)
class RunOptions:
    path: str = "host"
    gpus: tuple[int, ...] = (0,)
    directory: str | None = None  # where generated data goes (None: a temporary directory)
    seed: int = 0x5EED
    keep: bool = False
    interval: float = 0.5
    #: why the defaults were chosen where the user gave none (e.g. "no GPU here: --path host --compute sleep")
    defaults_note: str = ""


def check_paths(paths: Sequence[str]) -> None:
    """Every path asked for can run here (asked of a process of its own); else one line naming the first that
    cannot."""

    for p in dict.fromkeys(paths):
        if p in ("host", "mmap"):
            continue
        reason = unavailable_reason(p)
        if reason:
            raise EnvironmentProblem(f"{p}: unavailable: {reason}")
