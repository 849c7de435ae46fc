"""A checkpoint run's plan: the model, its ranks, the files each rank of this host writes and their bytes, with
how they were derived, checked against this machine before anything is written.

``CheckpointSpec.plan()`` raises SpecError (one line naming the option) for bad input: an unknown model, no
ranks, a layout other than dlio or dcp, a scale that leaves under 1 MiB a rank, a directory that does not exist
or cannot be written. What this machine cannot hold (checkpoints over the free space, the ranks' states over
the GPUs' free memory (without a GPU, the host's), or with ``--async`` pinned copies over the memory available) is
the plan's ``refusals``: a run raises it before it writes anything.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import msgspec

from xferscope.errors import SpecError
from xferscope.gpus import gpu_count
from xferscope.target import memory_total
from xferscope.units import format_bytes
from xferscope.workloads.checkpoint.layout import LAYOUTS, Rank, dcp_metadata, rank_files, restore_capacity, scaled
from xferscope.workloads.checkpoint.model import MODEL_BYTES, OPTIMIZER_BYTES, CheckpointModel, Parallelism, Transformer
from xferscope.workloads.common.generated import check_fits, parent_dir
from xferscope.workloads.common.gpu_memory import MEMORY_SHARE, measured_free
from xferscope.workloads.common.libraries import CHECKPOINT_LIBRARIES, LIBRARY_LAYOUTS, check_installed

#: MLPerf Storage's subset mode: one host writes the share of this many accelerators
SUBSET_RANKS = 8
#: xferscope's paths a checkpoint is written by (from GPU memory; host also from host memory, as DLIO)
ENGINE_PATHS = ("host", "bounce", "bounce-async", "cufile")
#: and the libraries users save with, run as they run (``library_checkpoint``), one process a rank
PATHS = ENGINE_PATHS + tuple(CHECKPOINT_LIBRARIES)
#: where the ranks' states live: GPU memory (as in training) or host memory (DLIO's CPU tensors)
STATES = ("gpu", "host")
#: the least a rank may write once scaled
MIN_RANK_BYTES = 1 << 20
#: DLIO warns when the checkpoints a host writes are under this many times its memory (the page cache holds them)
MEMORY_FACTOR = 3
GIB = 1 << 30


@dataclass(frozen=True)
class CheckpointSpec:
    model: CheckpointModel
    layout: str = "dlio"
    threads: int = 1  # DCP's writer threads a rank: one file each
    subset: bool = False
    scale: float = 1.0
    checkpoints: int = 10
    directory: str | None = None
    pinned_copies: bool = False  # --async: each rank holds a copy of its state (pinned; cufile's in GPU memory)
    gpus: tuple[int, ...] = (0,)  # the ranks' states go round-robin over these
    path: str = "host"
    #: where the states live: "gpu", "host" (DLIO's CPU tensors: the host path's only), None: GPU memory where this
    #: machine has a GPU
    state: str | None = None
    #: under MPI: this process's part of the ranks (its number, and how many parts), a run of ranks in turn
    part: tuple[int, int] = (0, 1)

    def __post_init__(self) -> None:
        if self.path in LIBRARY_LAYOUTS:  # a library writes its own layout; DCP's writer threads are its own
            object.__setattr__(self, "layout", LIBRARY_LAYOUTS[self.path])
            if self.path != "dcp":
                object.__setattr__(self, "threads", 1)

    @property
    def by_library(self) -> bool:
        return self.path in CHECKPOINT_LIBRARIES

    def _check_library(self, ranks_here: int) -> None:
        """What a library path cannot do, then its package missing or too old (one line naming what to install)."""
        if self.pinned_copies and self.path != "dcp":
            raise SpecError("async", f"{self.path} has no asynchronous save: --async is dcp's (async_save) and ours")
        parts = self.part[1]
        if parts > 1 and parts != ranks_here:
            raise SpecError(
                "mpi", f"{self.path} runs one process a rank: run mpirun -n {ranks_here} for these {ranks_here} ranks"
            )
        check_installed(self.path, CHECKPOINT_LIBRARIES)

    def plan(self, place: bool = True) -> CheckpointPlan:
        """The plan, with this machine's checks (SpecError names what does not hold); ``place`` False leaves out
        where the states live (it measures the GPUs' free memory in a process of its own: too slow for a form
        checked as it is typed), and the plan says so (``placed``)."""
        self._check_choices()
        world = self.model.parallelism.ranks
        here = range(min(SUBSET_RANKS, world)) if self.subset else range(world)
        index, parts = self.part
        if self.by_library:
            self._check_library(len(here))
        if parts > len(here):
            raise SpecError(
                "mpi",
                f"{parts} ranks in the MPI job for a checkpoint of {len(here)} ranks"
                + (" (--subset)" if self.subset else "")
                + f": run at most {len(here)}",
            )
        full = [rank_files(r, self.model, self.layout, self.threads) for r in here]
        every = [scaled(r, self.scale) for r in full]
        ranks = every[index * len(every) // parts : (index + 1) * len(every) // parts]
        metadata = len(dcp_metadata(every)) if self.layout == "dcp" and ranks[0].rank == 0 else 0
        writing = [r for r in every if r.size]
        smallest = min(writing, key=lambda r: r.size)
        if self.scale < 1 and smallest.size < MIN_RANK_BYTES:
            least = MIN_RANK_BYTES / min(r.size for r in full if r.size)
            raise SpecError(
                "scale",
                f"{self.scale:g} leaves rank {smallest.rank} {format_bytes(smallest.size)}; a rank writes at least "
                f"1 MiB: --scale {least:.2g} or more",
            )
        plan = CheckpointPlan(self, ranks, world, metadata, restore_bytes=restore_capacity(every))
        parent, direct = parent_dir(self.directory, buffered=False)
        plan.directory = parent
        if self.path in ENGINE_PATHS[1:] and not direct:
            plan.refusals.append(SpecError("dir", f"{parent} does not take O_DIRECT, which {self.path} writes with"))
        total = plan.here_bytes * self.checkpoints
        try:
            check_fits(
                parent,
                total,
                f"{self.checkpoints} checkpoints of {format_bytes(plan.here_bytes)} on this host",
                "scale" if self.scale < 1 else "dir",
                lambda room: f"--scale {room / total * self.scale:.2g} fits, or fewer --checkpoints, or another --dir",
            )
            if self.pinned_copies and self.path != "cufile":
                plan.check_memory()
        except SpecError as exc:
            plan.refusals.append(exc)
        try:
            if place:
                plan.place_state()
        except SpecError as exc:
            plan.refusals.append(exc)
        plan.placed = place
        plan.warnings = plan.memory_warnings()
        return plan

    def _check_choices(self) -> None:
        """The choices of path, state, layout, threads, scale and checkpoints (SpecError names what does not hold)."""
        if self.path not in PATHS:
            raise SpecError("path", f"{self.path}: checkpoints are written by {', '.join(PATHS)}")
        if self.state is not None and self.state not in STATES:
            raise SpecError("state", f"{self.state!r}: choose gpu (as in training) or host (DLIO's CPU tensors)")
        if self.state == "host" and self.path not in ("host", *CHECKPOINT_LIBRARIES):
            raise SpecError(
                "state", f"host memory is the host path's (DLIO's CPU tensors); {self.path} writes from GPU memory"
            )
        if self.layout not in LAYOUTS:
            raise SpecError("layout", f"{self.layout!r}: choose dlio (DLIO's torch.save files) or dcp (PyTorch DCP)")
        if self.threads < 1:
            raise SpecError("threads", f"must be at least 1, got {self.threads}")
        if self.layout != "dcp" and self.threads != 1:
            raise SpecError("threads", "writer threads are DCP's (--layout dcp); DLIO writes one file at a time")
        if not 0 < self.scale <= 1:
            raise SpecError("scale", f"a share of the checkpoint above 0 and at most 1, got {self.scale:g}")
        if self.checkpoints < 1:
            raise SpecError("checkpoints", f"must be at least 1, got {self.checkpoints}")


@dataclass
class CheckpointPlan:
    spec: CheckpointSpec
    ranks: list[Rank]  # the ranks of this host, with their files (scaled)
    world: int
    metadata_bytes: int = 0  # DCP's index, written once by rank 0
    restore_bytes: int = 0  # a restore buffer: any rank's files (a rank may read another's back)
    directory: str = ""
    warnings: list[str] = field(default_factory=list)
    #: why this machine cannot run it (the disk's free space, where the states live, the memory for --async); a run
    #: raises the first
    refusals: list[SpecError] = field(default_factory=list)
    #: where the ranks' states live, and how much each place holds
    state_in: str = ""
    state_on_gpu: bool = False
    placed: bool = True  # where the states live was decided (and checked)

    @property
    def here_bytes(self) -> int:
        """The bytes this host writes for one checkpoint."""
        return sum(r.size for r in self.ranks) + self.metadata_bytes

    def state_bytes(self) -> tuple[int, int]:
        """The whole model's weights and optimizer state (every rank's, unscaled)."""
        p = self.spec.model.model.parameters()
        return MODEL_BYTES * p, OPTIMIZER_BYTES * p

    def place_state(self) -> None:
        """Where the ranks' states live: in GPU memory (as in training), round-robin over the GPUs, each holding its
        ranks' share of its free memory (cufile's copies for --async there too); in host memory (DLIO's CPU
        tensors: ``--state host``, or on a machine without a GPU), where the memory available must hold them and
        the buffers they are read back into. A SpecError says which does not, and the --scale that fits."""

        gpus, s = self.spec.gpus, self.spec
        n, why = gpu_count()
        if s.state == "gpu" and not n:
            raise SpecError("state", f"no GPU here ({why}): the states can live in host memory (--state host)")
        if s.state == "host" or not n:
            import psutil

            if s.pinned_copies:
                raise SpecError(
                    "async",
                    "--async copies each state out of GPU memory, and the states here are in host memory"
                    + ("" if n else f" (no GPU here: {why})"),
                )

            states = sum(r.size for r in self.ranks)
            need = states + len(self.ranks) * self.restore_bytes
            room = int(psutil.virtual_memory().available * MEMORY_SHARE)
            self.state_in = "host memory, as DLIO's CPU tensors" + ("" if n else f" (no GPU here: {why})")
            if need > room:
                raise SpecError(
                    "scale",
                    f"the ranks' states and the buffers they are read back into ({format_bytes(need)}) do not fit "
                    f"this host's memory available ({format_bytes(room)} of it); --scale "
                    f"{room / need * self.spec.scale:.2g} fits",
                )
            return
        missing = [g for g in gpus if g >= n]
        if missing:
            raise SpecError("gpu", f"no GPU {missing[0]} here: this machine has {n} (0-{n - 1})")
        self.state_on_gpu = True
        held = dict.fromkeys(gpus, 0)
        restore = self.restore_bytes
        for i, r in enumerate(self.ranks):  # its state, and the buffer a restore reads into (and cufile's copy)
            copy = restore_capacity([r]) if s.pinned_copies and s.path == "cufile" else 0
            held[gpus[i % len(gpus)]] += r.size + restore + copy
        free = measured_free(sorted(held), "the GPUs' free memory, for the ranks' states")
        self.state_in = "GPU memory: " + ", ".join(
            f"GPU {g} {format_bytes(b)} of {format_bytes(free[g])} free" for g, b in sorted(held.items())
        )
        for g, b in sorted(held.items()):
            if b > free[g] * MEMORY_SHARE:
                fits = free[g] * MEMORY_SHARE / b * self.spec.scale
                raise SpecError(
                    "scale",
                    f"GPU {g} would hold {format_bytes(b)} of the ranks' states and restore buffers, over "
                    f"{MEMORY_SHARE:.0%} of its "
                    f"{format_bytes(free[g])} free; --scale {fits:.2g} fits, or more --gpu",
                )

    def check_memory(self) -> None:
        """``--async``: each rank's pinned copy of its state must fit the memory available."""
        import psutil

        available = int(psutil.virtual_memory().available)
        need = sum(restore_capacity([r]) for r in self.ranks)
        if need > available:
            raise SpecError(
                "async",
                f"the ranks' pinned copies ({format_bytes(need)}) do not fit the memory available "
                f"({format_bytes(available)}); --scale {available / need * self.spec.scale * 0.8:.2g} fits",
            )

    def memory_warnings(self) -> list[str]:
        memory = memory_total()
        written = self.here_bytes * self.spec.checkpoints
        if memory is not None and written < MEMORY_FACTOR * memory:
            return [
                f"{format_bytes(written)} of checkpoints on this host is under {MEMORY_FACTOR} times its memory "
                f"({format_bytes(memory)}): the page cache can hold much of it (DLIO warns the same)"
            ]
        return []

    def _whose(self, job: tuple[int, int] | None) -> str:
        """Which ranks this process writes (``job``: the MPI job's ranks and hosts, which write them all)."""
        first, last = self.ranks[0].rank, self.ranks[-1].rank
        if job is not None:
            ranks, hosts = job
            world = min(SUBSET_RANKS, self.world) if self.spec.subset else self.world
            return f"{ranks} ranks of an MPI job on {hosts} host{'s' * (hosts != 1)} write ranks 0-{world - 1}"
        if self.spec.part[1] > 1:
            index, parts = self.spec.part
            return f"this rank of the MPI job writes ranks {first}-{last} (part {index + 1} of {parts})"
        return "this host writes " + (
            f"ranks 0-{last} (--subset, MLPerf's subset mode)" if self.spec.subset else "every rank"
        )

    def derivation(self, job: tuple[int, int] | None = None) -> list[str]:
        """How the bytes were found, a line each; ``job`` (the ranks and hosts of an MPI job): the whole job's,
        without what is this process's own (where its states live, its bytes and directory)."""
        s, m = self.spec, self.spec.model
        t, p = m.model, m.parallelism
        weights, optimizer = self.state_bytes()
        lines = [
            f"{t.name}: {t.parameters() / 1e9:.2f} B parameters ({m.source}): embedding and lm head "
            f"2 x {t.vocab} x {t.hidden}, {t.layers} layers x {t.layer_parameters() / 1e6:.1f} M "
            f"(hidden {t.hidden}, ffn {t.ffn}, {t.heads} heads, {t.kv_heads} KV heads), final norm {t.hidden}",
            f"state: weights fp16 {format_bytes(weights)} (2 B a parameter) + optimizer fp32 "
            f"{format_bytes(optimizer)} (12 B: weights, momentum, variance) = {(weights + optimizer) / GIB:.1f} GiB",
            f"ranks: {p.text()} = {p.ranks}; " + self._whose(job),
        ]
        all_ranks = sum(rank_files(r, m, s.layout, s.threads).size for r in range(p.ranks)) if p.ranks <= 4096 else 0
        if all_ranks:
            extra = all_ranks - weights - optimizer
            why = ["5 x hidden in each of the optimizer's 3 groups a rank"]
            if p.tensor > 1 and s.layout == "dlio":
                why.insert(0, f"the norms whole on each of the {p.tensor} tensor ranks")
            lines.append(
                f"layout {s.layout}: every rank's files {all_ranks / GIB:.1f} GiB"
                + (f" (+{format_bytes(extra)}: {' and '.join(why)})" if extra else "")
            )
        if s.scale < 1:
            lines.append(f"scaled to {s.scale:g} of each file: every figure of this run is of a scaled checkpoint")
        if job is not None:
            return lines
        if self.state_in:
            lines.append(f"the ranks' states live in {self.state_in}")
        lines.append(
            f"this host: {format_bytes(self.here_bytes)} a checkpoint x {s.checkpoints} = "
            f"{format_bytes(self.here_bytes * s.checkpoints)} under {self.directory}"
        )
        return lines


class PlannedFile(msgspec.Struct, kw_only=True):
    name: str
    bytes: int
    holds: str


class PlannedRank(msgspec.Struct, kw_only=True):
    rank: int
    tensor: int
    pipeline: int
    data: int
    bytes: int
    files: list[PlannedFile]


class CheckpointPlanRecord(msgspec.Struct, kw_only=True):
    """``workload checkpoint --plan --json``: what a run would write, and how its bytes were found."""

    kind: str = "checkpoint_plan"
    path: str
    model: Transformer
    source: str
    parameters: int
    parallelism: Parallelism
    ranks: int
    weight_bytes: int
    optimizer_bytes: int
    state_gib: float
    layout: str
    scale: float
    scaled: bool
    subset: bool
    checkpoints: int
    directory: str
    ranks_here: list[PlannedRank]
    metadata_bytes: int
    bytes_a_checkpoint_here: int
    derivation: list[str]
    warnings: list[str]
    refused: list[str]
    state_in: str = ""


def plan_record(plan: CheckpointPlan) -> CheckpointPlanRecord:
    s, m = plan.spec, plan.spec.model
    t, p = m.model, m.parallelism
    weights, optimizer = plan.state_bytes()
    return CheckpointPlanRecord(
        path=s.path,
        model=t,
        source=m.source,
        parameters=t.parameters(),
        parallelism=p,
        ranks=p.ranks,
        weight_bytes=weights,
        optimizer_bytes=optimizer,
        state_gib=round((weights + optimizer) / GIB, 3),
        layout=s.layout,
        scale=s.scale,
        scaled=s.scale < 1,
        subset=s.subset,
        checkpoints=s.checkpoints,
        directory=plan.directory,
        ranks_here=[
            PlannedRank(
                rank=r.rank,
                tensor=r.tensor,
                pipeline=r.pipeline,
                data=r.data,
                bytes=r.size,
                files=[PlannedFile(name=f.name, bytes=f.size, holds=f.holds) for f in r.files],
            )
            for r in plan.ranks
        ],
        metadata_bytes=plan.metadata_bytes,
        bytes_a_checkpoint_here=plan.here_bytes,
        derivation=plan.derivation(),
        warnings=plan.warnings,
        refused=[str(r) for r in plan.refusals],
        state_in=plan.state_in,
    )
