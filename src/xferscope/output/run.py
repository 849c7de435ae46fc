"""A run's result on the terminal (gdsio's line and what gdsio leaves out) and in its files, in that order."""

from __future__ import annotations

import typer

from xferscope.output.files import emit, end_of_run


def print_run(results) -> None:
    from xferscope.report import done_line, extras_line, gdsio_line

    for r in results:
        typer.echo(gdsio_line(r))
        typer.echo(extras_line(r))
        line = done_line(r)
        if line:
            typer.echo(line)


def execute_and_report(execute, progress, *, fmt: str, json_path: str | None, csv_path: str | None, printer) -> None:
    """Call ``execute()`` for one result, then print and save it; a failure's partial result is printed and
    saved before the error goes on; an interrupted run exits 130, a file not written 4. ``None`` from
    ``execute``: nothing to say."""
    try:
        result = execute()
    except Exception as exc:
        progress.clear()
        partial = getattr(exc, "result", None)
        if partial is not None:
            emit([partial], fmt=fmt, json_path=json_path, csv_path=csv_path, printer=printer)
        raise
    progress.clear()
    if result is None:
        return
    written = emit([result], fmt=fmt, json_path=json_path, csv_path=csv_path, printer=printer)
    end_of_run("interrupted" if result.status == "interrupted" else "ok", written)
