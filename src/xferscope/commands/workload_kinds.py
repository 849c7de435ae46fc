"""Every workload of `xferscope workload`, in the order the CLI lists them: its name, its command, the registry entry
of its package (``workloads.common.kind.WorkloadKind``: its record, its files, its saved runs ranked) and what prints
and writes its record. The CLI registers each command under its name; a workload profile's [workload] table replays
through the same command, its fields the command's options (``profile_options``); `workload compare` and `compare
--workload` find the workload of saved files here, and `schema` its record. A new workload brings its modules and
one line here.

The package's entry and the printer are named "module:attribute" and imported when first asked for
(``pkgutil.resolve_name``), so that a workload's command starts without its records and tables."""

from __future__ import annotations

import pkgutil
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import typer

from xferscope.commands.workload_checkpoint import checkpoint_command
from xferscope.commands.workload_inference import kvcache_command, load_command
from xferscope.commands.workload_train import train_command


@dataclass(frozen=True)
class Workload:
    name: str
    command: Callable[..., None]
    kind_at: str  # "module:attribute" of its ``WorkloadKind``
    show_at: str  # "module:attribute" of show(record, *, fmt, json_path, csv_path) -> exit code of the writes

    @property
    def kind(self) -> Any:
        return pkgutil.resolve_name(self.kind_at)

    @property
    def show(self) -> Callable[..., int]:
        return pkgutil.resolve_name(self.show_at)


WORKLOADS = (
    Workload("train", train_command, "xferscope.workloads.train.kind:TRAIN", "xferscope.output.workload:show_train"),
    Workload(
        "kvcache",
        kvcache_command,
        "xferscope.workloads.inference.kind:KVCACHE",
        "xferscope.output.workload_inference:show_kvcache",
    ),
    Workload(
        "load", load_command, "xferscope.workloads.inference.kind:LOAD", "xferscope.output.workload_inference:show_load"
    ),
    Workload(
        "checkpoint",
        checkpoint_command,
        "xferscope.workloads.checkpoint.kind:CHECKPOINT",
        "xferscope.output.workload_checkpoint:show_checkpoint",
    ),
)
WORKLOAD_COMMANDS: dict[str, Callable[..., None]] = {w.name: w.command for w in WORKLOADS}


def compare_saved(files: list[str], *, fmt: str, json_path: str | None, csv_path: str | None) -> None:
    """Saved runs of one workload side by side (`workload compare`, `compare --workload`), ranked as its live
    side-by-side ranks them; a file no workload reads, or files of two, is one line (exit 2)."""
    from xferscope.workloads.common.saved_kind import saved_workload

    kind = saved_workload(files, [w.kind for w in WORKLOADS])
    show = next(w.show for w in WORKLOADS if w.name == kind.name)
    written = show(kind.compare_saved(files), fmt=fmt, json_path=json_path, csv_path=csv_path)
    if written:
        raise typer.Exit(written)
