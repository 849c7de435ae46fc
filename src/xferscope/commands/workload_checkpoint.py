"""`xferscope workload checkpoint`: a training job's checkpoints (MLPerf Storage's llama3 checkpointing), sized
from the model and its parallelism, rank by rank: ``--plan`` says what each rank writes; without it they are
written from where the states live (GPU memory, or host memory as DLIO's) by a path and read back; several paths
run in rotated rounds and are ranked."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Annotated

import typer

from xferscope.commands.option_groups import WORKLOAD_RUN, WorkloadRunOptions, takes
from xferscope.commands.options import WorkloadDirOpt, WorkloadMpiOpt, one_path_under_mpi, workload_gpus
from xferscope.errors import SpecError

if TYPE_CHECKING:
    from xferscope.workloads.checkpoint import session


@dataclasses.dataclass(frozen=True)
class CheckpointSizeOptions:
    """What a checkpoint is: the world's ranks and this host's share, its scale and layout, how many, whether they
    are written from a copy (--async), and where the states live."""

    ranks: Annotated[
        int | None, typer.Option("--ranks", help="ranks of the world (MLPerf's: 8, 64, 512, 1024); DP follows")
    ] = None
    subset: Annotated[
        bool, typer.Option("--subset", help="this host writes the share of 8 ranks (MLPerf's subset mode)")
    ] = False
    scale: Annotated[
        float, typer.Option("--scale", help="each file cut to this share, to fit (the figures say scaled)")
    ] = 1.0
    layout: Annotated[
        str, typer.Option("--layout", help="dlio (DLIO's torch.save files) or dcp (PyTorch Distributed Checkpoint)")
    ] = "dlio"
    threads: Annotated[int, typer.Option("--threads", help="dcp: writer threads a rank, one file each")] = 1
    checkpoints: Annotated[int, typer.Option("--checkpoints", help="checkpoints written, then read (MLPerf: 10)")] = 10
    pinned: Annotated[
        bool,
        typer.Option(
            "--async",
            help="as DCP's async_save: each state copied to pinned host memory (cufile: within GPU memory), the time "
            "the GPUs are blocked, then written from the copy",
        ),
    ] = False
    state: Annotated[
        str | None,
        typer.Option(
            "--state",
            help="where the states live: gpu (as in training; the default where there is a GPU) or host (DLIO's "
            "CPU tensors; the host path)",
        ),
    ] = None

    def spec_fields(self) -> dict[str, object]:
        """These options as ``CheckpointSpec``'s keywords (the model's ranks go to the model)."""
        return {
            "layout": self.layout,
            "threads": self.threads,
            "subset": self.subset,
            "scale": self.scale,
            "checkpoints": self.checkpoints,
            "pinned_copies": self.pinned,
            "state": self.state,
        }


CHECKPOINT_SIZE = CheckpointSizeOptions()


@dataclasses.dataclass(frozen=True)
class ModelShapeOptions:
    """A custom model's shape, or overrides of a named model's: its layers, sizes and parallelism."""

    layers: Annotated[int | None, typer.Option("--layers", help="custom (or override): layers")] = None
    hidden: Annotated[int | None, typer.Option("--hidden", help="custom (or override): hidden size")] = None
    ffn: Annotated[int | None, typer.Option("--ffn", help="custom (or override): MLP hidden size")] = None
    vocab: Annotated[int | None, typer.Option("--vocab", help="custom (or override): vocabulary")] = None
    heads: Annotated[int | None, typer.Option("--heads", help="custom (or override): attention heads")] = None
    kv_heads: Annotated[int | None, typer.Option("--kv-heads", help="custom (or override): KV heads")] = None
    tp: Annotated[int | None, typer.Option("--tp", help="custom (or override): tensor parallelism")] = None
    pp: Annotated[int | None, typer.Option("--pp", help="custom (or override): pipeline parallelism")] = None
    zero_stage: Annotated[int | None, typer.Option("--zero-stage", help="custom (or override): ZeRO stage")] = None

    def model(self, name: str, ranks: int | None):
        """The checkpoint's model: ``name``'s (MLPerf Storage's) with these overrides, or a custom one."""
        from xferscope.workloads.checkpoint.model import checkpoint_model

        return checkpoint_model(name, ranks, **dataclasses.asdict(self))


MODEL_SHAPE = ModelShapeOptions()


@dataclasses.dataclass(frozen=True)
class CheckpointIoOptions:
    """How each checkpoint is made durable, read back and checked, and how far apart they are."""

    every: Annotated[
        float, typer.Option("--every", help="seconds of training between checkpoints (--async writes under them)")
    ] = 0.0
    fsync: Annotated[bool, typer.Option("--fsync/--no-fsync", help="fsync each file, as DLIO and DCP do")] = True
    verify: Annotated[bool, typer.Option("--verify", "-V", help="check every byte restored")] = False
    rank_shift: Annotated[
        int, typer.Option("--rank-shift", help="each rank restores the files of the rank this many after it")
    ] = 0

    def run_options(self, run: WorkloadRunOptions):
        """The session's options (SpecError for a negative --every)."""
        from xferscope.workloads.checkpoint.session import CheckpointRunOptions

        if self.every < 0:
            raise SpecError("every", f"seconds of 0 or more, got {self.every:g}")
        return CheckpointRunOptions(
            fsync=self.fsync,
            verify=self.verify,
            rank_shift=self.rank_shift,
            seed=run.seed,
            keep=run.keep,
            every=self.every,
            interval=run.interval,
        )


CHECKPOINT_IO = CheckpointIoOptions()


@takes(WorkloadRunOptions)
@takes(CheckpointIoOptions)
@takes(CheckpointSizeOptions)
@takes(ModelShapeOptions)
def checkpoint_command(
    model: Annotated[
        str, typer.Argument(help="llama3-8b, llama3-70b, llama3-405b, llama3-1t (MLPerf Storage's) or custom")
    ],
    plan: Annotated[
        bool, typer.Option("--plan", help="print each rank's files and bytes and how they were found; write nothing")
    ] = False,
    size: CheckpointSizeOptions = CHECKPOINT_SIZE,
    gpu: Annotated[str | None, typer.Option("--gpu", "-d", help="GPUs the ranks' states go round-robin over")] = None,
    shape: ModelShapeOptions = MODEL_SHAPE,
    path: Annotated[
        str,
        typer.Option(
            "--path",
            "-x",
            help="host (through the page cache, as torch.save), bounce, bounce-async, cufile; torch-save and dcp "
            "(the libraries themselves, where torch is installed); a comma list runs each in rotated rounds over one "
            "checkpoint size and ranks them by the time until durable (a path twice: an A/A pair)",
        ),
    ] = "host",
    io: CheckpointIoOptions = CHECKPOINT_IO,
    directory: WorkloadDirOpt = None,
    mpi: WorkloadMpiOpt = False,
    run: WorkloadRunOptions = WORKLOAD_RUN,
) -> None:
    """MLPerf Storage's llama3 checkpoints (DLIO's checkpointing), or PyTorch DCP's: each rank's files and bytes,
    from the model's parameters and its tensor, pipeline and data parallelism with ZeRO; written (fsync per file),
    evicted from the page cache and read back: save and restore times and GB/s, MLPerf's and DLIO's. Under --mpi,
    the checkpoint's ranks split over the job's, each save and restore begun together."""
    from xferscope.output.workload_checkpoint import checkpoint_and_report
    from xferscope.workloads.checkpoint.plan import CheckpointSpec

    run.check()
    paths = [p.strip() for p in path.split(",") if p.strip()]

    def make() -> tuple[CheckpointSpec, session.CheckpointRunOptions]:
        one_path_under_mpi(paths, mpi)
        if mpi and plan:
            raise SpecError("plan", "--plan is of one host: run it without --mpi")
        spec = CheckpointSpec(
            shape.model(model, size.ranks),
            **size.spec_fields(),
            directory=directory,
            gpus=workload_gpus(gpu, mpi),
            path=paths[0],
        )
        return spec, io.run_options(run)

    if mpi:
        from xferscope.cluster.workload_checkpoint import checkpoint_mpi
        from xferscope.cluster.workload_ranks import check_launcher
        from xferscope.output.terminal import install_hangup_handlers

        check_launcher()
        install_hangup_handlers()
        checkpoint_mpi(make, gpu_text=gpu, **run.outputs)
        return
    spec, options = make()
    checkpoint_and_report(spec, paths, run.rounds, options, plan_only=plan, **run.outputs)
