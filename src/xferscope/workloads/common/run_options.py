"""What every workload run takes besides the workload's shape: the path and GPUs, where generated data goes,
its seed, whether it stays, how often the run reports, and why defaults were chosen."""

from __future__ import annotations

from dataclasses import dataclass


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
