"""The options of `workload checkpoint`, declared once (``workloads.common.options``): what a checkpoint is, a
custom model's shape, and how each checkpoint is made durable and read back."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Annotated, Any

from xferscope.errors import SpecError
from xferscope.workloads.common.options import Arg, CommandShape, Given, opt, paths_of, workload_gpus

if TYPE_CHECKING:
    from xferscope.workloads.checkpoint.plan import CheckpointSpec
    from xferscope.workloads.checkpoint.session import CheckpointRunOptions


@dataclasses.dataclass(frozen=True)
class CheckpointSizeOptions:
    """What a checkpoint is: the world's ranks and this host's share, its scale and layout, how many, whether they
    are written from a copy (--async), and where the states live."""

    ranks: Annotated[int | None, opt("--ranks", help="ranks of the world (MLPerf's: 8, 64, 512, 1024); DP follows")] = (
        None
    )
    subset: Annotated[bool, opt("--subset", help="this host writes the share of 8 ranks (MLPerf's subset mode)")] = (
        False
    )
    scale: Annotated[float, opt("--scale", help="each file cut to this share, to fit (the figures say scaled)")] = 1.0
    layout: Annotated[
        str, opt("--layout", help="dlio (DLIO's torch.save files) or dcp (PyTorch Distributed Checkpoint)")
    ] = "dlio"
    threads: Annotated[int, opt("--threads", help="dcp: writer threads a rank, one file each")] = 1
    checkpoints: Annotated[int, opt("--checkpoints", help="checkpoints written, then read (MLPerf: 10)")] = 10
    pinned: Annotated[
        bool,
        opt(
            "--async",
            help="as DCP's async_save: each state copied to pinned host memory (cufile: within GPU memory), the time "
            "the GPUs are blocked, then written from the copy",
        ),
    ] = False
    state: Annotated[
        str | None,
        opt(
            "--state",
            help="where the states live: gpu (as in training; the default where there is a GPU) or host (DLIO's "
            "CPU tensors; the host path)",
        ),
    ] = None


@dataclasses.dataclass(frozen=True)
class ModelShapeOptions:
    """A custom model's shape, or overrides of a named model's: its layers, sizes and parallelism."""

    layers: Annotated[int | None, opt("--layers", help="custom (or override): layers")] = None
    hidden: Annotated[int | None, opt("--hidden", help="custom (or override): hidden size")] = None
    ffn: Annotated[int | None, opt("--ffn", help="custom (or override): MLP hidden size")] = None
    vocab: Annotated[int | None, opt("--vocab", help="custom (or override): vocabulary")] = None
    heads: Annotated[int | None, opt("--heads", help="custom (or override): attention heads")] = None
    kv_heads: Annotated[int | None, opt("--kv-heads", help="custom (or override): KV heads")] = None
    tp: Annotated[int | None, opt("--tp", help="custom (or override): tensor parallelism")] = None
    pp: Annotated[int | None, opt("--pp", help="custom (or override): pipeline parallelism")] = None
    zero_stage: Annotated[int | None, opt("--zero-stage", help="custom (or override): ZeRO stage")] = None

    def model(self, name: str, ranks: int | None):
        """The checkpoint's model: ``name``'s (MLPerf Storage's) with these overrides, or a custom one."""
        from xferscope.workloads.checkpoint.model import checkpoint_model

        return checkpoint_model(name, ranks, **dataclasses.asdict(self))


@dataclasses.dataclass(frozen=True)
class CheckpointIoOptions:
    """How each checkpoint is made durable, read back and checked, and how far apart they are."""

    every: Annotated[
        float, opt("--every", help="seconds of training between checkpoints (--async writes under them)")
    ] = 0.0
    fsync: Annotated[bool, opt("--fsync/--no-fsync", help="fsync each file, as DLIO and DCP do")] = True
    verify: Annotated[bool, opt("--verify", "-V", help="check every byte restored")] = False
    rank_shift: Annotated[
        int, opt("--rank-shift", help="each rank restores the files of the rank this many after it")
    ] = 0

    def run_options(self, *, seed: int, keep: bool, interval: float):
        """The session's options (SpecError for a negative --every)."""
        from xferscope.workloads.checkpoint.session import CheckpointRunOptions

        if self.every < 0:
            raise SpecError("every", f"seconds of 0 or more, got {self.every:g}")
        return CheckpointRunOptions(
            fsync=self.fsync,
            verify=self.verify,
            rank_shift=self.rank_shift,
            seed=seed,
            keep=keep,
            every=self.every,
            interval=interval,
        )


@dataclasses.dataclass(frozen=True)
class CheckpointTargetOptions:
    """Where the checkpoints go, from where and by which paths; or --plan, to write nothing."""

    plan: Annotated[
        bool, opt("--plan", help="print each rank's files and bytes and how they were found; write nothing")
    ] = False
    gpu: Annotated[str | None, opt("--gpu", "-d", help="GPUs the ranks' states go round-robin over")] = None
    path: Annotated[
        str,
        opt(
            "--path",
            "-x",
            help="host (through the page cache, as torch.save), bounce, bounce-async, cufile; torch-save and dcp "
            "(the libraries themselves, where torch is installed); a comma list runs each in rotated rounds over one "
            "checkpoint size and ranks them by the time until durable (a path twice: an A/A pair)",
        ),
    ] = "host"
    directory: Annotated[str | None, opt("--dir", "-D", help="where the data set is generated")] = None


@dataclasses.dataclass(frozen=True)
class CheckpointRequest:
    """What `workload checkpoint` runs: the spec and the run's options, the paths side by side, ``-d`` as given
    (``{local_rank}`` filled in by each rank under --mpi), and --plan."""

    spec: CheckpointSpec
    options: CheckpointRunOptions
    paths: list[str]
    gpu_text: str | None
    plan_only: bool


def checkpoint_spec(model: str, size: CheckpointSizeOptions, shape: ModelShapeOptions, **where: Any) -> CheckpointSpec:
    """The checkpoints of ``model`` these options ask for, ``where`` the rest of ``CheckpointSpec`` (the path, the
    GPUs, the directory)."""
    from xferscope.workloads.checkpoint.plan import CheckpointSpec

    return CheckpointSpec(
        shape.model(model, size.ranks),
        layout=size.layout,
        threads=size.threads,
        subset=size.subset,
        scale=size.scale,
        checkpoints=size.checkpoints,
        pinned_copies=size.pinned,
        state=size.state,
        **where,
    )


def checkpoint_request(given: Given) -> CheckpointRequest:
    target = given[CheckpointTargetOptions]
    paths = paths_of(target.path, given.mpi)
    if given.mpi and target.plan:
        raise SpecError("plan", "--plan is of one host: run it without --mpi")
    spec = checkpoint_spec(
        given.argument or "",
        given[CheckpointSizeOptions],
        given[ModelShapeOptions],
        directory=target.directory,
        gpus=workload_gpus(target.gpu, given.mpi),
        path=paths[0],
    )
    options = given[CheckpointIoOptions].run_options(seed=given.seed, keep=given.keep, interval=given.interval)
    return CheckpointRequest(spec, options, paths, target.gpu, target.plan)


COMMAND = CommandShape(
    help="MLPerf Storage's llama3 checkpoints (DLIO's checkpointing), or PyTorch DCP's: each rank's files and bytes, "
    "from the model's parameters and its tensor, pipeline and data parallelism with ZeRO; written (fsync per file), "
    "evicted from the page cache and read back: save and restore times and GB/s, MLPerf's and DLIO's. Under --mpi, "
    "the checkpoint's ranks split over the job's, each save and restore begun together.",
    argument=Arg("model", "llama3-8b, llama3-70b, llama3-405b, llama3-1t (MLPerf Storage's) or custom"),
    groups=(CheckpointTargetOptions, CheckpointSizeOptions, ModelShapeOptions, CheckpointIoOptions),
    make=checkpoint_request,
)
