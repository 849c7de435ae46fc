"""Every workload of `xferscope workload`, in the order the CLI lists them: its name, and what its package declares:
its command's shape (``workloads.common.options.CommandShape``: its options and what it makes of them), its kind
(``workloads.common.kind.WorkloadKind``: its record, its files, its saved runs ranked, its run on this host, its
text) and what every rank of an MPI job runs. The CLI builds each command from its shape (``workload_command``) and
registers it under its name; it runs here and is printed and written as every workload is (``output.workload_run``);
a workload profile's [workload] table replays through the same command, its fields the command's options
(``profile_options``); `workload compare` and `compare --workload` find the workload of saved files here, and
`schema` its record. A new workload brings its package and one line here.

Each part is named "module:attribute" and imported when first asked for: `xferscope workload NAME` imports NAME's
command alone, and a command its records and tables only when it runs."""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from typing import Annotated, Any, NamedTuple

import typer

from xferscope.commands.option_groups import WorkloadRunOptions, grouped, options_of, signed
from xferscope.commands.options import WorkloadMpiOpt
from xferscope.workloads.common.options import CommandShape, Given


def _imported(at: str) -> Any:
    module, name = at.split(":")
    return getattr(importlib.import_module(module), name)


class Workload(NamedTuple):
    name: str
    command_at: str  # "module:attribute" of its ``CommandShape`` (``workloads.common.options``), in its package
    kind_at: str  # "module:attribute" of its ``WorkloadKind``, in its package
    #: "module:attribute" of across(make, *, fmt, json_path, csv_path), run by every rank (--mpi); or of its
    #: ``DataSetJob`` (a workload whose ranks read a data set made for them), run by ``cluster.data_set_job``
    across_at: str

    @property
    def command(self) -> Callable[..., None]:
        """`xferscope workload NAME`, built from the command's shape (``workload_command``)."""
        return workload_command(self)

    @property
    def kind(self) -> Any:
        return _imported(self.kind_at)

    def show(self, result: Any, **out: Any) -> int:
        """``result`` printed, and the files asked for written (``out``: fmt, json_path, csv_path)."""
        from xferscope.output.workload_run import show_workload

        return show_workload(self.kind, result, **out)


def workload_command(workload: Workload) -> Callable[..., None]:
    """A workload's command: its argument, its option groups, --mpi and the run's options (``WorkloadRunOptions``)
    as typer reads them; run, it makes what to run from them (``shape.make``; the output options checked first, on
    every rank under --mpi) and runs it here, or under --mpi by every rank of the job."""
    shape: CommandShape = _imported(workload.command_at)
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
        from xferscope.cluster.workload_ranks import check_launcher

        check_launcher()
        across = _imported(workload.across_at)
        from xferscope.workloads.common.job_ranks import DataSetJob

        if isinstance(across, DataSetJob):  # the steps every data-set workload takes across the ranks
            from xferscope.cluster.data_set_job import run_data_set_job

            run_data_set_job(make, across, workload.show, **run.outputs)
            return
        across(make, **run.outputs)

    command.__name__ = command.__qualname__ = f"{workload.name}_command"
    command.__doc__ = shape.help
    return signed(command, params)


_IN = "xferscope.workloads."
_MPI = "xferscope.cluster.workload_"
WORKLOADS = (
    Workload("train", f"{_IN}train.options:COMMAND", f"{_IN}train.kind:TRAIN", f"{_MPI}train:train_mpi"),
    Workload(
        "kvcache",
        f"{_IN}inference.options:KVCACHE_COMMAND",
        f"{_IN}inference.kind:KVCACHE",
        f"{_IN}inference.rank_jobs:KVCACHE_JOB",
    ),
    Workload(
        "load",
        f"{_IN}inference.options:LOAD_COMMAND",
        f"{_IN}inference.kind:LOAD",
        f"{_IN}inference.rank_jobs:LOAD_JOB",
    ),
    Workload(
        "checkpoint",
        f"{_IN}checkpoint.options:COMMAND",
        f"{_IN}checkpoint.kind:CHECKPOINT",
        f"{_MPI}checkpoint:checkpoint_mpi",
    ),
)


def command_named(name: str) -> Callable[..., None] | None:
    """The command of the workload ``name``, None where no workload has that name."""
    return next((w.command for w in WORKLOADS if w.name == name), None)


def compare_saved(files: list[str], *, fmt: str, json_path: str | None, csv_path: str | None) -> None:
    """Saved runs of one workload side by side (`workload compare`, `compare --workload`), ranked as its live
    side-by-side ranks them; a file no workload reads, or files of two, is one line (exit 2)."""
    from xferscope.output.workload_run import show_workload
    from xferscope.workloads.common.saved_kind import saved_workload

    kind = saved_workload(files, [w.kind for w in WORKLOADS])
    written = show_workload(kind, kind.compare_saved(files), fmt=fmt, json_path=json_path, csv_path=csv_path)
    if written:
        raise typer.Exit(written)
