"""`xferscope workload NAME` for every workload of the registry (``workloads.registry``): its command built from the
shape its package declares (``workload_command``), run here or by every rank of an MPI job; saved runs of one
workload side by side (`workload compare`, `compare --workload`)."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Annotated, Any

import typer

from xferscope.commands.option_groups import WorkloadRunOptions, grouped, options_of, signed
from xferscope.commands.options import WorkloadMpiOpt
from xferscope.workloads.common.options import CommandShape, Given
from xferscope.workloads.registry import WORKLOADS, Workload, imported


def workload_command(workload: Workload) -> Callable[..., None]:
    """A workload's command: its argument, its option groups, --mpi and the run's options (``WorkloadRunOptions``)
    as typer reads them; run, it makes what to run from them (``shape.make``; the output options checked first, on
    every rank under --mpi) and runs it here, or under --mpi by every rank of the job."""
    shape: CommandShape = imported(workload.command_at)
    params = []
    if shape.argument is not None:
        argument, required = shape.argument, shape.argument.default is None
        params.append(
            inspect.Parameter(
                argument.name,
                inspect.Parameter.KEYWORD_ONLY,
                default=inspect.Parameter.empty if required else argument.default,
                annotation=Annotated[str, typer.Argument(help=argument.help)],
            )
        )
    for group in shape.groups:
        params += options_of(group)
    params.append(inspect.Parameter("mpi", inspect.Parameter.KEYWORD_ONLY, default=False, annotation=WorkloadMpiOpt))
    params += options_of(WorkloadRunOptions)

    def command(**values: Any) -> None:
        from xferscope.output.terminal import install_hangup_handlers

        argument = values.pop(shape.argument.name) if shape.argument is not None else None
        mpi, run = values.pop("mpi"), grouped(WorkloadRunOptions, values)
        groups = {group: grouped(group, values) for group in shape.groups}

        def make() -> Any:
            run.check()
            return shape.make(Given(argument, groups, mpi, seed=run.seed, keep=run.keep, interval=run.interval))

        install_hangup_handlers()
        if not mpi:
            from xferscope.output.workload_run import run_here

            run_here(workload.kind, make(), run.rounds, **run.outputs)
            return
        from xferscope.cluster.workload_ranks import check_launcher, run_workload_job

        check_launcher()
        run_workload_job(make, imported(workload.across_at), workload.kind, **run.outputs)

    command.__name__ = command.__qualname__ = f"{workload.name}_command"
    command.__doc__ = shape.help
    return signed(command, params)


def command_named(name: str) -> Callable[..., None] | None:
    """The command of the workload ``name``, None where no workload has that name."""
    return next((workload_command(w) for w in WORKLOADS if w.name == name), None)


def compare_saved(files: list[str], *, fmt: str, json_path: str | None, csv_path: str | None) -> None:
    """Saved runs of one workload side by side (`workload compare`, `compare --workload`), ranked as its live
    side-by-side ranks them; a file no workload reads, or files of two, is one line (exit 2)."""
    from xferscope.output.workload_run import show_workload
    from xferscope.workloads.common.saved_kind import saved_workload

    kind = saved_workload(files, [w.kind for w in WORKLOADS])
    written = show_workload(kind, kind.compare_saved(files), fmt=fmt, json_path=json_path, csv_path=csv_path)
    if written:
        raise typer.Exit(written)
