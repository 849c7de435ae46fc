"""`xferscope compare --mem A,B,...`: memory results side by side (built-in runs, mlc runs, imported mlc output).

Only typer is imported at module level.
"""

from __future__ import annotations

import typer


def compare_mem(files: str, *, fmt: str, json_path: str | None, csv_path: str | None) -> None:
    """Print the results of ``files`` (comma list) side by side, then write ``--json`` (the results as a list)
    and ``--csv`` (every point, with the result it belongs to)."""
    from xferscope import records
    from xferscope.errors import SpecError
    from xferscope.importers.mlc import read_mem_results
    from xferscope.memory.report import format_side_by_side, side_by_side
    from xferscope.memory.result import sweep_name
    from xferscope.output.files import Output, show_then_write
    from xferscope.report import print_table, terminal_width, text_table

    paths = [p.strip() for p in files.split(",") if p.strip()]
    if not paths:
        raise SpecError("--mem", "name at least one memory result file (mem --json, import mlc --json, mlc output)")
    results = [r for path in paths for r in read_mem_results(path)]

    def show() -> None:
        text, width = format_side_by_side(results), terminal_width()
        if width is not None and max(len(line) for line in text.splitlines()) > width:
            headers, rows = side_by_side(results)  # wider than the terminal: the first results, a line on the rest
            print_table(text_table(headers, rows, left=("",)), first=headers[:2])
        else:
            typer.echo(text)
        for r in results:
            for warning in r.warnings:
                typer.echo(f"warning: {sweep_name(r)}: {warning}", err=True)

    records_of = results
    written = show_then_write(
        fmt,
        lambda: records_of,
        show,
        [
            Output("JSON", "--json", json_path, lambda: records.json_text(records_of)),
            Output("CSV", "--csv", csv_path, lambda: points_csv(results)),
        ],
    )
    if written:
        raise typer.Exit(written)


def points_csv(results) -> str:
    """Every point of every result, ``mem --csv``'s columns after a ``result`` column naming its result."""
    import csv
    import io

    from xferscope.memory.result import CSV_COLUMNS, csv_row, sweep_name

    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(("result", *CSV_COLUMNS))
    for r in results:
        for p in r.points:
            writer.writerow((sweep_name(r), *csv_row(p)))
    return out.getvalue()
