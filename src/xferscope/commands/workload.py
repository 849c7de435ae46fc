"""`xferscope workload`: each workload of ``workload_kinds`` under its name, and `workload compare` of saved
training runs."""

from __future__ import annotations

from typing import Annotated

import typer

from xferscope.commands.options import CsvOpt, FormatOpt, JsonOpt, WideOpt, check_format, wide_tables
from xferscope.output.files import check_outputs

workload_app = typer.Typer(
    name="workload",
    help="Workloads measured into the GPU: train (DLIO's training input, with accelerator utilisation), kvcache "
    "(KV-cache restores), load (model loads from safetensors); checkpoint (MLPerf's llama3 checkpoints: --plan).",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
)


def compare_command(
    files: Annotated[list[str], typer.Argument(help="results of `workload train --json`, or DLIO's summary.json")],
    json_path: JsonOpt = None,
    csv_path: CsvOpt = None,
    fmt: FormatOpt = "table",
    wide: WideOpt = False,
) -> None:
    """Saved training runs side by side (xferscope's and DLIO's), ranked by the accelerators they sustain and
    their AU."""
    from xferscope.output.workload import compare_saved

    check_format(fmt)
    wide_tables(wide)
    check_outputs(fmt, {"--json": json_path, "--csv": csv_path})
    compare_saved(files, fmt=fmt, json_path=json_path, csv_path=csv_path)


def register(app: typer.Typer) -> None:
    from xferscope.commands.workload_kinds import WORKLOAD_COMMANDS

    for name, command in WORKLOAD_COMMANDS.items():
        workload_app.command(name)(command)
    workload_app.command("compare")(compare_command)
    app.add_typer(workload_app, name="workload")
