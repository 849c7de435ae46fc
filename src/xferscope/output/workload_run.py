"""A workload on the terminal, whichever it is (``workloads.common.kind.WorkloadKind``): run here with a live line on
stderr (only on a terminal), its record printed (its JSON with ``--format json``), ``--json`` and ``--csv`` written,
and the exit its status gives; Ctrl-C keeps what was measured and exits 130."""

from __future__ import annotations

import sys
from typing import Any

import typer

from xferscope.errors import ExitCode
from xferscope.output.files import end_of_run, show_record
from xferscope.output.terminal import clear_line, fill_line, write_status
from xferscope.workloads.common.kind import RunProgress, WorkloadKind


def show_workload(kind: WorkloadKind, result: Any, *, fmt: str, json_path: str | None, csv_path: str | None) -> int:
    """``result`` (a run, its paths side by side, saved runs ranked) printed, then the files asked for written;
    ExitCode.NOT_WRITTEN where one could not be, else 0."""
    record = kind.record_of(result)
    return show_record(
        record, lambda: kind.lines(result), lambda _: kind.csv(result), fmt=fmt, json_path=json_path, csv_path=csv_path
    )


def live_progress(kind: WorkloadKind, live: bool, who: str = "") -> RunProgress:
    """The live line of a run (``who``: "rank 0 of 4: ", say), where ``live``; warnings on stderr always."""

    def warn(line: str) -> None:
        clear_line(live)
        typer.echo(f"xferscope: warning: {line}", err=True)

    def tick(t: Any) -> None:
        write_status(f"\r\033[K{who}{kind.tick_text(t)}")

    return RunProgress(fill_line if live else None, tick if live else None, warn)


def run_here(kind: WorkloadKind, request: Any, rounds: int, **out: Any) -> None:
    """`xferscope workload NAME` on this host (``out``: fmt, json_path, csv_path): measured, shown, written."""
    live = sys.stderr.isatty() and out["fmt"] != "json"
    try:
        result = kind.measure(request, rounds, live_progress(kind, live))
    except KeyboardInterrupt:
        clear_line(live)
        typer.echo("xferscope: interrupted", err=True)
        raise typer.Exit(int(ExitCode.INTERRUPTED)) from None
    clear_line(live)
    written = show_workload(kind, result, **out)
    end_of_run(getattr(result, "status", "ok"), written, getattr(result, "error", None) or "see above")
