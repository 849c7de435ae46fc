"""`xferscope run`: one transfer path, headless, with gdsio's result line and what gdsio leaves out."""

from __future__ import annotations

import sys

import typer

from xferscope.commands.options import (
    BsOpt,
    BufferedOpt,
    CpusOpt,
    CsvOpt,
    DepthOpt,
    DirOpt,
    DurationOpt,
    FileOpt,
    ForceOpt,
    FormatOpt,
    GpuOpt,
    HugePagesOpt,
    IntervalOpt,
    IoOpt,
    JsonOpt,
    KeepOpt,
    MixOpt,
    MpiOpt,
    NumaOpt,
    RegisterOpt,
    SeedOpt,
    SizeOpt,
    SourceOpt,
    SplitOpt,
    TotalOpt,
    VerifyOpt,
    WorkersOpt,
    build_spec,
    check_format,
)
from xferscope.output.files import check_outputs
from xferscope.output.run import execute_and_report, print_run
from xferscope.output.terminal import ProgressLine, install_hangup_handlers


def run_command(
    path: str = typer.Option(
        "host",
        "--path",
        "-x",
        help="host, bounce, bounce-async, cufile, cufile-batch, cufile-async (or gdsio's -x number)",
    ),
    io: IoOpt = "read",
    bs: BsOpt = "1M",
    workers: WorkersOpt = 1,
    iodepth: DepthOpt = 1,
    size: SizeOpt = "1G",
    duration: DurationOpt = None,
    total: TotalOpt = None,
    file: FileOpt = None,
    directory: DirOpt = None,
    gpu: GpuOpt = None,
    numa: NumaOpt = None,
    cpus: CpusOpt = None,
    rwmix: MixOpt = 70,
    verify: VerifyOpt = False,
    buffered: BufferedOpt = False,
    source: SourceOpt = "storage",
    force: ForceOpt = False,
    keep: KeepOpt = False,
    json_path: JsonOpt = None,
    csv_path: CsvOpt = None,
    fmt: FormatOpt = "table",
    interval: IntervalOpt = 0.1,
    seed: SeedOpt = 0x5EED,
    mpi: MpiOpt = False,
    register: RegisterOpt = True,
    huge_pages: HugePagesOpt = None,
    split: SplitOpt = None,
) -> None:
    """Run one transfer path and print gdsio's result line plus percentiles and CPU cost."""
    from xferscope.runner import Run

    check_format(fmt)
    check_outputs(fmt, {"--json": json_path, "--csv": csv_path}, folders=not mpi)
    spec_args = dict(
        path=path,
        io=io,
        bs=bs,
        workers=workers,
        iodepth=iodepth,
        size=size,
        duration=duration,
        total=total,
        file=file,
        directory=directory,
        gpu=gpu,
        numa=numa,
        cpus=cpus,
        rwmix=rwmix,
        verify=verify,
        buffered=buffered,
        source=source,
        force=force,
        keep=keep,
        interval=interval,
        seed=seed,
        register=register,
        huge_pages=huge_pages,
        split=split,
    )
    if mpi:
        from xferscope.cluster.runs import run_mpi

        return run_mpi(
            lambda: build_spec(**spec_args), gpu_given=gpu is not None, fmt=fmt, json_path=json_path, csv_path=csv_path
        )
    spec = build_spec(**spec_args)
    install_hangup_handlers()
    progress = ProgressLine(sys.stderr.isatty() and fmt != "json", spec.duration)
    run = Run(spec)
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
