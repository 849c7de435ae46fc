"""`xferscope run`: one transfer path, headless, with gdsio's result line and what gdsio leaves out."""

from __future__ import annotations

import sys

import typer

from xferscope.commands.option_groups import SPEC_OPTIONS, SpecOptions, takes
from xferscope.commands.options import CsvOpt, FormatOpt, JsonOpt, MpiOpt, check_format
from xferscope.output.files import check_outputs
from xferscope.output.run import execute_and_report, print_run
from xferscope.output.terminal import ProgressLine, install_hangup_handlers


@takes(SpecOptions)
def run_command(
    path: str = typer.Option(
        "host",
        "--path",
        "-x",
        help="host, bounce, bounce-async, cufile, cufile-batch, cufile-async (or gdsio's -x number)",
    ),
    options: SpecOptions = SPEC_OPTIONS,
    json_path: JsonOpt = None,
    csv_path: CsvOpt = None,
    fmt: FormatOpt = "table",
    mpi: MpiOpt = False,
) -> None:
    """Run one transfer path and print gdsio's result line plus percentiles and CPU cost."""
    from xferscope.run.runner import EngineRun

    check_format(fmt)
    check_outputs(fmt, {"--json": json_path, "--csv": csv_path}, folders=not mpi)
    if mpi:
        from xferscope.cluster.runs import run_mpi

        return run_mpi(
            lambda: options.spec(path),
            gpu_given=options.gpu is not None,
            fmt=fmt,
            json_path=json_path,
            csv_path=csv_path,
        )
    spec = options.spec(path)
    install_hangup_handlers()
    progress = ProgressLine(sys.stderr.isatty() and fmt != "json", spec.duration)
    run = EngineRun(spec)
    execute_and_report(
        lambda: run.execute(on_sample=progress.sample, progress=progress.fill),
        progress,
        fmt=fmt,
        json_path=json_path,
        csv_path=csv_path,
        printer=print_run,
    )


def register(app: typer.Typer) -> None:
    app.command("run", no_args_is_help=False)(run_command)
