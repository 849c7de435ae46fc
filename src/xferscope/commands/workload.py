"""`xferscope workload`: each workload of the registry (``workloads.registry``) under its name, and `workload
compare` of saved runs of any of them."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from xferscope.commands.options import CsvOpt, FormatOpt, JsonOpt, WideOpt, check_format, wide_tables
from xferscope.output.files import check_outputs
from xferscope.workloads.registry import NAMES, WORKLOADS

workload_app = typer.Typer(
    name="workload",
    help="Workloads measured into the GPU: "
    + ", ".join(f"{w.name} ({w.about})" for w in WORKLOADS)
    + "; compare (saved runs of one of them).",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
)


def compare_command(
    files: Annotated[
        list[str],
        typer.Argument(help=f"results of one workload's --json ({NAMES}), or DLIO's summary.json"),
    ],
    json_path: JsonOpt = None,
    csv_path: CsvOpt = None,
    fmt: FormatOpt = "table",
    wide: WideOpt = False,
) -> None:
    """Saved runs of one workload side by side (xferscope's, and DLIO's summary.json of a training or
    checkpointing run), ranked as the workload's paths are ranked live: training by the accelerators sustained and
    AU, kvcache by restore time, load by load time, checkpoint by the time until a save is durable."""
    from xferscope.commands.workload_kinds import compare_saved

    check_format(fmt)
    wide_tables(wide)
    check_outputs(fmt, {"--json": json_path, "--csv": csv_path})
    compare_saved(files, fmt=fmt, json_path=json_path, csv_path=csv_path)


def register(app: typer.Typer) -> None:
    """The workload group, built as far as the command line needs (a lazy group): `xferscope workload NAME` builds
    NAME alone, `xferscope workload` (help, a typo) every workload, and a command line that names no workload
    (`xferscope --help`, the console) the group's help alone, none of the workloads' modules imported."""
    from xferscope.commands.workload_kinds import workload_command

    argv = sys.argv[1:3]
    names = [w.name for w in WORKLOADS]
    if argv[:1] != ["workload"]:
        names = []
    elif len(argv) > 1 and argv[1] in names:
        names = [argv[1]]
    for w in WORKLOADS:
        if w.name in names:
            workload_app.command(w.name)(workload_command(w))
    workload_app.command("compare")(compare_command)
    app.add_typer(workload_app, name="workload")
