"""Every workload of `xferscope workload`, in the order the CLI lists them: its name, its command, the registry entry
of its package (``workloads.common.kind.WorkloadKind``: its record, its files, its saved runs ranked) and what prints
and writes its record. The CLI registers each command under its name; a workload profile's [workload] table replays
through the same command, its fields the command's options (``profile_options``); `workload compare` and `compare
--workload` find the workload of saved files here, and `schema` its record. A new workload brings its modules and
one line here.

Each part is named "module:attribute" and imported when first asked for: `xferscope workload NAME` imports NAME's
command alone, and a command its records and tables only when it runs."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any, NamedTuple

import typer


def _imported(at: str) -> Any:
    module, name = at.split(":")
    return getattr(importlib.import_module(module), name)


class Workload(NamedTuple):
    name: str
    command_at: str  # "module:attribute" of its command (a typer command function)
    kind_at: str  # "module:attribute" of its ``WorkloadKind``
    show_at: str  # "module:attribute" of show(record, *, fmt, json_path, csv_path) -> exit code of the writes

    @property
    def command(self) -> Callable[..., None]:
        return _imported(self.command_at)

    @property
    def kind(self) -> Any:
        return _imported(self.kind_at)

    @property
    def show(self) -> Callable[..., int]:
        return _imported(self.show_at)


_COMMANDS = "xferscope.commands.workload_"
_KINDS = "xferscope.workloads."
_SHOW = "xferscope.output.workload"
WORKLOADS = (
    Workload("train", f"{_COMMANDS}train:train_command", f"{_KINDS}train.kind:TRAIN", f"{_SHOW}:show_train"),
    Workload(
        "kvcache",
        f"{_COMMANDS}inference:kvcache_command",
        f"{_KINDS}inference.kind:KVCACHE",
        f"{_SHOW}_inference:show_kvcache",
    ),
    Workload(
        "load", f"{_COMMANDS}inference:load_command", f"{_KINDS}inference.kind:LOAD", f"{_SHOW}_inference:show_load"
    ),
    Workload(
        "checkpoint",
        f"{_COMMANDS}checkpoint:checkpoint_command",
        f"{_KINDS}checkpoint.kind:CHECKPOINT",
        f"{_SHOW}_checkpoint:show_checkpoint",
    ),
)


def command_named(name: str) -> Callable[..., None] | None:
    """The command of the workload ``name``, None where no workload has that name."""
    return next((w.command for w in WORKLOADS if w.name == name), None)


def compare_saved(files: list[str], *, fmt: str, json_path: str | None, csv_path: str | None) -> None:
    """Saved runs of one workload side by side (`workload compare`, `compare --workload`), ranked as its live
    side-by-side ranks them; a file no workload reads, or files of two, is one line (exit 2)."""
    from xferscope.workloads.common.saved_kind import saved_workload

    kind = saved_workload(files, [w.kind for w in WORKLOADS])
    show = next(w.show for w in WORKLOADS if w.name == kind.name)
    written = show(kind.compare_saved(files), fmt=fmt, json_path=json_path, csv_path=csv_path)
    if written:
        raise typer.Exit(written)
