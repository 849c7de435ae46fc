"""`xferscope import gdsio|fio|elbencho|mlc FILE`: other tools' results in xferscope's form, source marked.

``--json FILE`` writes the same keys as ``run --json``; ``--csv FILE`` one row per
imported result with the summary columns xferscope writes for its own runs (the
tools give no time series). MLC output gives memory-sweep points and writes the
same columns as ``mem``.
"""

from __future__ import annotations

from typing import Annotated

import typer

from xferscope.commands.options import CsvOpt, FormatOpt, JsonOpt, check_format
from xferscope.output.files import check_outputs, emit

FileArg = Annotated[str, typer.Argument(help="the file the tool wrote (or the text pasted from its output)")]
SummaryCsvOpt = Annotated[str | None, typer.Option("--csv", help="write one summary row per result to FILE")]

TOOL_HELP = {
    "gdsio": "gdsio result lines ('IoType: ... XferType: ... Throughput: ...'), text around them ignored",
    "fio": "fio --output-format=json output",
    "elbencho": "an elbencho --csvfile results file",
}


def print_imported(title: str):
    def printer(results) -> None:
        from xferscope.report import compare_table, gdsio_line, print_table

        for r in results:
            typer.echo(gdsio_line(r))
        print_table(compare_table(results, title=title))

    return printer


def import_results(tool: str, path: str, json_path: str | None, csv_path: str | None, fmt: str) -> None:
    from xferscope.export import summary_csv_text
    from xferscope.importers import import_file

    check_format(fmt)
    check_outputs(fmt, {"--json": json_path, "--csv": csv_path})
    results = import_file(tool, path)
    written = emit(
        results,
        fmt=fmt,
        json_path=json_path,
        csv_path=csv_path,
        csv_text=summary_csv_text,
        printer=print_imported(
            f"{len(results)} {tool} result{'s' if len(results) != 1 else ''} from {path} (ratio against the first)"
        ),
    )
    if written:
        raise typer.Exit(written)


def _tool_command(tool: str):
    def command(
        file: FileArg, json_path: JsonOpt = None, csv_path: SummaryCsvOpt = None, fmt: FormatOpt = "table"
    ) -> None:
        import_results(tool, file, json_path, csv_path, fmt)

    command.__doc__ = f"Import {TOOL_HELP[tool]}."
    return command


def import_mlc(file: FileArg, json_path: JsonOpt = None, csv_path: CsvOpt = None, fmt: FormatOpt = "table") -> None:
    """Import a saved Intel MLC output (idle latency, peak bandwidth, loaded latencies)."""
    from xferscope.importers.mlc import import_mlc as read_mlc
    from xferscope.output.mem import emit_mem

    check_format(fmt)
    check_outputs(fmt, {"--json": json_path, "--csv": csv_path})
    raise typer.Exit(emit_mem(read_mlc(file), fmt, json_path, csv_path))


def register(app: typer.Typer) -> None:
    group = typer.Typer(
        name="import",
        help="Bring in results of gdsio, fio, elbencho or Intel MLC.",
        no_args_is_help=True,
        rich_markup_mode=None,
    )
    for tool in TOOL_HELP:
        group.command(tool)(_tool_command(tool))
    group.command("mlc")(import_mlc)
    app.add_typer(group, name="import")
