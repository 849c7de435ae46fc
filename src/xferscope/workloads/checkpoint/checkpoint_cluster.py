"""The figures of checkpoints across the ranks of an MPI job (``workload checkpoint --mpi``), from every rank's own.

Each rank of the job holds a run of the checkpoint's ranks and hands over its record and what its process
measured (``CheckpointRank``). The job's figures are made from every checkpoint rank's times together, exactly as one
process with all of them would make them: a checkpoint's duration is the slowest rank's and its GB/s every
rank's bytes over that (MLPerf's rule), DLIO's figure every byte over rank 0's time. Beside them: each rank of
the job, and each host (its ranks' bytes over its slowest rank's time), the slowest host named, and the bytes a
host writes against its memory (DLIO warns under 3 times).
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from xferscope.stats import median_of
from xferscope.units import format_bytes
from xferscope.workloads.checkpoint.checkpoint_process import CheckpointEnd
from xferscope.workloads.checkpoint.cluster_figures import (
    CheckpointCluster,
    CheckpointHostFigures,
    CheckpointRankFigures,
)
from xferscope.workloads.checkpoint.plan import MEMORY_FACTOR, CheckpointPlanRecord
from xferscope.workloads.checkpoint.session import CheckpointRecord, Phase, restores_of, saves_of
from xferscope.workloads.common.job_ranks import JobFacts, RankResult, host_row_fields, job_record, process_totals

#: what a rank of the job hands to the others when its run has ended: its record, and what its process measured
#: (each save's and restore's times) as the detail
CheckpointRank = RankResult[CheckpointRecord, CheckpointEnd]


def _rates(phases: list[Phase]) -> tuple[float | None, float | None]:
    """The median seconds and GB/s over ``phases``."""
    return median_of([p.seconds for p in phases]), median_of([p.gb_per_s for p in phases])


def merged_end(ends: Sequence[CheckpointEnd]) -> CheckpointEnd:
    """Every rank's figures of each checkpoint that every rank saved (and restored), in rank order; a rank that
    measured nothing (its process died before its first save ended) is left out, its status says why."""
    ends = [e for e in ends if e.writes] or list(ends[:1])
    saved = min(len(e.writes) for e in ends)
    restored = min(len(e.restores) for e in ends)
    shares = [(e.resident_share, sum(w.bytes for ws in e.writes for w in ws)) for e in ends]
    weight = sum(b for s, b in shares if s is not None)
    return CheckpointEnd(
        writes=[[w for e in ends for w in e.writes[k]] for k in range(saved)],
        metadata_s=list(ends[0].metadata_s[:saved]),  # DCP's index: written by rank 0's process
        restores=[[r for e in ends for r in e.restores[k]] for k in range(restored)],
        resident_share=sum(s * b for s, b in shares if s is not None) / weight if weight else None,
        verify_cpu_s=sum(e.verify_cpu_s for e in ends),
    )


def _job_plan(parts: Sequence[CheckpointRank], warnings: list[str], derivation: list[str]) -> CheckpointPlanRecord:
    """The plan of the whole job: every rank's checkpoint ranks, as one host with all of them would plan them."""
    first = parts[0].result.spec
    return msgspec.structs.replace(
        first,
        ranks_here=[r for p in parts for r in p.result.spec.ranks_here],
        bytes_a_checkpoint_here=sum(p.result.spec.bytes_a_checkpoint_here for p in parts),
        derivation=derivation,
        warnings=warnings,
        refused=list(dict.fromkeys(r for p in parts for r in p.result.spec.refused)),
    )


def _rank_figures(p: CheckpointRank) -> CheckpointRankFigures:
    r = p.result
    save_s, save_rate = _rates(r.saves)
    restore_s, restore_rate = _rates(r.restores)
    return CheckpointRankFigures(
        **p.row_fields([k.gpu for k in r.ranks]),
        ranks=[k.rank for k in r.spec.ranks_here],
        bytes=r.spec.bytes_a_checkpoint_here,
        save_seconds=save_s,
        save_gb_per_s=save_rate,
        restore_seconds=restore_s,
        restore_gb_per_s=restore_rate,
    )


def _host_figures(host: str, parts: Sequence[CheckpointRank], staged: bool) -> CheckpointHostFigures:
    end = merged_end([p.detail for p in parts])
    save_s, save_rate = _rates(saves_of(end, staged))
    restore_s, restore_rate = _rates(restores_of(end))
    written = sum(p.result.spec.bytes_a_checkpoint_here for p in parts) * parts[0].result.spec.checkpoints
    memory = parts[0].memory_bytes
    return CheckpointHostFigures(
        **host_row_fields(host, parts),
        bytes=sum(p.result.spec.bytes_a_checkpoint_here for p in parts),
        save_seconds=save_s,
        save_gb_per_s=save_rate,
        restore_seconds=restore_s,
        restore_gb_per_s=restore_rate,
        written_to_memory=written / memory if memory else None,
    )


def _memory_warnings(hosts: list[CheckpointHostFigures]) -> list[str]:
    """DLIO's warning, a host at a time: the checkpoints it writes under 3 times its memory."""
    return [
        f"{h.host}: its checkpoints are {h.written_to_memory:.2g} times its memory ({format_bytes(h.memory_bytes or 0)}), "
        f"under {MEMORY_FACTOR} times: the page cache can hold much of them (DLIO warns the same)"
        for h in hosts
        if h.written_to_memory is not None and h.written_to_memory < MEMORY_FACTOR
    ]


def cluster_record(parts: Sequence[CheckpointRank], facts: JobFacts, derivation: list[str]) -> CheckpointRecord:
    """The job's record from every rank's (any order): every checkpoint rank's figures together, with each rank's
    and each host's beside them; ``derivation``: how the job's bytes were found (``CheckpointPlan.derivation``)."""
    parts = sorted(parts, key=lambda p: p.rank)
    first = parts[0].result
    end = merged_end([p.detail for p in parts])
    saves, restores = saves_of(end, first.asynchronous), restores_of(end)
    written, read = sum(s.bytes for s in saves), sum(r.bytes for r in restores)
    cluster, hosts, status, error = job_record(
        CheckpointCluster,
        parts,
        facts,
        _rank_figures,
        lambda h, ps: _host_figures(h, ps, first.asynchronous),
        lambda h: h.save_seconds,
    )
    return msgspec.structs.replace(
        first,
        status=status,
        error=error,
        spec=_job_plan(parts, _memory_warnings(hosts), derivation),
        bytes_read=read,
        bytes_written=written,
        saves=saves,
        restores=restores,
        ranks=[k for p in parts for k in p.result.ranks],
        resident_share_at_restore=end.resident_share,
        verified=all(p.result.verified for p in parts),
        cluster=cluster,
        **process_totals([p.result for p in parts], written + read),
    )
