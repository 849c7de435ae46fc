"""``workload checkpoint --mpi``: a training job's checkpoints written and read back by the ranks of an MPI job,
as MLPerf Storage runs its checkpointing workload.

Started as ``mpirun -n N xferscope workload checkpoint MODEL --mpi ...``. The checkpoint's ranks (the model's
world, or MLPerf's subset of 8) are split over the job's ranks, a run of them each in turn (with as many ranks as
the model's world, each rank writes its own, as DLIO's). The steps, on every rank (each an agreement: one
rank's failure is every rank's, said once by rank 0):

1. the spec: the same on every rank (another model, or other options, stops them all); each rank's directory
   (``--dir`` may hold ``{rank}``, ``{host}``) and GPU (``-d`` may hold ``{local_rank}``; without ``-d`` local
   rank *i* takes GPU *i* of its host);
2. each rank's plan, checked where it runs, and the checkpoints of a host's ranks against its disk's free space
   together;
3. each rank's directory made, and what each rank reads back: the files of the rank ``--rank-shift`` after it in
   the world, wherever they were written (a rank that cannot see them: ``--dir`` must be shared);
4. the states made in each rank's process, then every checkpoint's save and every restore begun together
   (``WorkloadRanks.together``'s meetings), so that a checkpoint's duration is the slowest rank's, as MLPerf
   times it;
5. every rank's figures to all; rank 0 prints and writes the job's record (``checkpoint_cluster``); the
   directories are removed once every rank is done reading.

A rank whose process dies is marked failed; the others stop at their next checkpoint, their figures kept, and the
exit is non-zero. Ctrl-C on the launcher (its SIGTERM to the ranks) ends every rank's run with what it measured.

What this package declares (``CHECKPOINT_JOB``); the cluster's ``WorkloadRanks`` runs it as every workload's.
"""

from __future__ import annotations

import dataclasses
import os
import shutil

import msgspec

from xferscope.errors import SpecError
from xferscope.units import format_bytes
from xferscope.workloads.checkpoint.checkpoint_cluster import CheckpointRank, cluster_record
from xferscope.workloads.checkpoint.layout import Rank, dcp_metadata
from xferscope.workloads.checkpoint.options import CheckpointRequest
from xferscope.workloads.checkpoint.plan import CheckpointPlan
from xferscope.workloads.checkpoint.session import CheckpointRecord, CheckpointSession
from xferscope.workloads.common.across_ranks import Ranks, RanksJob, rank_result
from xferscope.workloads.common.generated import DISK_MARGIN
from xferscope.workloads.common.kind import RunProgress


def _comparable(request: CheckpointRequest) -> tuple[str, bytes]:
    """What every rank must agree on: the spec and options less what is each rank's own (directory, GPUs)."""
    return f"model {request.spec.model.model.name}", msgspec.json.encode(
        (dataclasses.replace(request.spec, directory=None, gpus=(0,)), request.options)
    )


class CheckpointJobRanks:
    """The steps of ``workload checkpoint --mpi`` on one rank."""

    def __init__(self, ranks: Ranks, request: CheckpointRequest, progress: RunProgress):
        spec = request.spec
        self.ranks, self.progress = ranks, progress
        self.spec = dataclasses.replace(
            spec,
            directory=ranks.own(spec.directory, "dir"),
            gpus=ranks.gpus(request.gpu_text, spec.state != "host", spec.gpus),
            part=(ranks.rank, ranks.size),
        )
        self.options = request.options
        self.session: CheckpointSession | None = None
        self.sources: tuple[tuple[Rank, str], ...] = ()
        self.index: bytes | None = None
        #: dcp: the directory every rank writes in (rank 0's), and this rank's place in DCP's process group
        self.shared: tuple[str, tuple[int, int]] | None = None
        ranks.cleanup = self.close

    def close(self) -> None:
        if self.session is not None:
            self.session.close()

    def prepare(self) -> None:
        """Each rank's plan, checked where it runs; a host's ranks' checkpoints against its disk together; each
        rank's directory; what each rank reads back, and where."""
        plan: CheckpointPlan | None = None

        def planned() -> None:
            nonlocal plan
            plan = self.spec.plan()
            if plan.refusals:
                raise plan.refusals[0]
            self.session = CheckpointSession(plan, self.options)

        self.ranks.step("the plan", planned)
        assert plan is not None and self.session is not None
        try:
            where: tuple[str, int] | None = (self.ranks.host, os.stat(plan.directory).st_dev)
        except OSError:  # gone since the plan: said by the check below
            where = None
        rows = self.ranks.allgather((where, plan.here_bytes * plan.spec.checkpoints))
        self.ranks.step("the free space", lambda: self._check_space(plan, where, rows))
        session = self.session
        self.ranks.step("the directories", session.open_dir)
        assert session.where is not None
        world = self.ranks.allgather((self.ranks.host, plan.ranks, session.where.path))
        self.ranks.step("what each rank reads back", lambda: self._find_sources(world))

    @staticmethod
    def _check_space(
        plan: CheckpointPlan, mine: tuple[str, int] | None, rows: list[tuple[tuple[str, int] | None, int]]
    ) -> None:
        """The checkpoints of every rank on this host that writes to this filesystem (``rows``: every rank's
        host and filesystem, and its bytes), against its free space."""
        free = shutil.disk_usage(plan.directory).free  # OSError for a directory gone since the plan
        together = sum(n for where, n in rows if where == mine)
        if together + DISK_MARGIN > free:
            sharing = sum(1 for where, _ in rows if where == mine)
            host = mine[0] if mine else "this host"
            raise SpecError(
                "scale" if plan.spec.scale < 1 else "dir",
                f"the checkpoints of the {sharing} ranks writing to {plan.directory}'s filesystem on {host} "
                f"({format_bytes(together)}) do not fit its free space ({format_bytes(free)}); "
                f"--scale {max(0, free - DISK_MARGIN) / together * plan.spec.scale:.2g} fits, or fewer --checkpoints, "
                "or fewer ranks on the host",
            )

    def _find_sources(self, world: list[tuple[str, list[Rank], str]]) -> None:
        """Each of this rank's checkpoint ranks reads back the files of the rank ``--rank-shift`` after it in the
        world, in the directory the rank that wrote them made; they must be there to see."""
        if self.spec.path == "dcp":  # DCP writes one directory a checkpoint, every rank's files in it: rank 0's
            host, _, path = world[0]
            if not os.path.isdir(path):
                raise SpecError(
                    "dir",
                    f"dcp's ranks write in one directory, {path} on {host}, which {self.ranks.host} "
                    "cannot see: give a --dir every host shares",
                )
            world = [(h, ranks, path) for h, ranks, _ in world]
            self.shared = (path, (self.ranks.rank, self.ranks.size))
        every = [(r, host, path) for host, ranks, path in world for r in ranks]
        at = {r.rank: i for i, (r, _, _) in enumerate(every)}
        me = self.ranks.host
        sources = []
        assert self.session is not None
        for r in self.session.plan.ranks:
            writer, host, path = every[(at[r.rank] + self.options.rank_shift) % len(every)]
            if not os.path.isdir(path):
                raise SpecError(
                    "rank-shift",
                    f"rank {r.rank} on {me} would read back rank {writer.rank}'s files, written in {path} on {host}, "
                    "which this host cannot see: give a --dir every host shares, or a --rank-shift within a host",
                )
            sources.append((writer, path))
        self.sources = tuple(sources)
        if self.session.plan.ranks[0].rank == 0 and self.spec.layout == "dcp":
            self.index = dcp_metadata([r for r, _, _ in every])

    def run(self) -> CheckpointRecord:
        """The checkpoints, every save and restore begun together; the job's record (the same on every rank)."""

        self.prepare()
        ranks, session = self.ranks, self.session
        assert session is not None

        on_tick = self.progress.tick

        def mine(record: CheckpointRecord) -> CheckpointRank:
            assert session.end is not None
            return rank_result(ranks, record, session.end)

        parts = ranks.together(
            lambda on_ready, meet: session.run(on_tick, on_ready, meet, self.sources, self.index, self.shared),
            mine,
            lambda record: record.status != "ok",
            stop_at_word=False,  # a save under way ends, and is measured; the next meeting stops the rank
        )
        derivation = session.plan.derivation(job=(ranks.size, ranks.hosts))
        return cluster_record(parts, ranks.facts(), derivation)


CHECKPOINT_JOB = RanksJob(_comparable, CheckpointJobRanks)
