"""`workload checkpoint` in words and in ``--csv``: what each rank of this host writes, and how the bytes were found
(``--plan``); what was measured writing and reading them back; a run's live line."""

from __future__ import annotations

from itertools import groupby

from xferscope.report import text_table
from xferscope.units import format_bytes
from xferscope.workloads.checkpoint.checkpoint_process import CheckpointTick
from xferscope.workloads.checkpoint.layout import Rank
from xferscope.workloads.checkpoint.plan import CheckpointPlan
from xferscope.workloads.checkpoint.session import CheckpointComparison, CheckpointRecord
from xferscope.workloads.common.cells import named_csv
from xferscope.workloads.common.job_tables import Column, gpus_cell, job_tables
from xferscope.workloads.common.ranked_text import library_lines, ranked_lines

#: what xferscope's host path does, beside the library it imitates: from GPU memory, and from host memory
HOST_IMITATION = (
    "xferscope's own writing as torch.save does (copied to pageable host memory, buffered writes, each byte's "
    "CRC-32), not torch.save: it copies and writes 16 MiB pieces in turn, where torch.save copies the whole "
    "tensor to host memory before its first write (bench/torch_save_parts.py measures that copy's share)"
)
HOST_IMITATION_FROM_HOST = (
    "xferscope's own writing as torch.save does (buffered writes, each byte's CRC-32), not torch.save"
)


def _span(ranks: list[Rank]) -> str:
    first, last = ranks[0].rank, ranks[-1].rank
    return str(first) if first == last else f"{first}-{last}"


def _files(rank: Rank, alone: bool) -> str:
    """A rank's files (the first rank's of a run alike, named so): each named where there are few, else how many
    and of what."""
    whose = "" if alone else f"rank {rank.rank}: "
    if len(rank.files) <= 2:
        return whose + ", ".join(f"{f.name} {format_bytes(f.size)}" for f in rank.files)
    kinds = " and ".join(sorted({f.holds for f in rank.files}))
    return f"{whose}{len(rank.files)} files ({kinds}), {rank.files[0].name} ... {rank.files[-1].name}"


def plan_lines(plan: CheckpointPlan) -> list:
    """The derivation, then the ranks of this host (runs of ranks alike in their files' shape and bytes as one
    row), then the warnings."""
    rows = []

    def shape(r: Rank):
        return (len(r.files), r.size, tuple(f.holds for f in r.files))

    for _, run in groupby(plan.ranks, key=shape):
        ranks = list(run)
        rows.append((_span(ranks), len(ranks[0].files), format_bytes(ranks[0].size), _files(ranks[0], len(ranks) == 1)))
    lines: list = [f"workload checkpoint {plan.spec.model.model.name} --plan: nothing is written"]
    lines += ["  " + line for line in plan.derivation()]
    lines.append(text_table(("ranks", "files", "bytes a rank", "each rank's files"), rows, left=("ranks",)))
    if plan.metadata_bytes:
        lines.append(
            f"  rank 0 also writes .metadata ({format_bytes(plan.metadata_bytes)}), renamed from .metadata.tmp"
        )
    lines += [f"  warning: {w}" for w in plan.warnings]
    lines += [f"  a run would be refused: {r}" for r in plan.refusals]
    return lines


def _spread(values: list[float], unit: str, digits: int = 2) -> str:
    """The median of ``values`` with their range."""
    if not values:
        return "-"
    ordered = sorted(values)
    mid = (
        ordered[len(ordered) // 2]
        if len(ordered) % 2
        else (ordered[len(ordered) // 2 - 1] + ordered[len(ordered) // 2]) / 2
    )
    if len(ordered) == 1:
        return f"{mid:.{digits}f} {unit}"
    return f"{mid:.{digits}f} {unit} ({ordered[0]:.{digits}f}-{ordered[-1]:.{digits}f})"


def run_lines(record: CheckpointRecord) -> list:
    """What was measured: the medians over the checkpoints with their range, a row a checkpoint, a row a rank."""
    p = record.spec
    scaled = f", scaled to {p.scale:g}" if p.scaled else ""
    lines: list = [
        f"workload checkpoint {p.model.name} by {record.path}: {len(record.saves)} of {p.checkpoints} checkpoints of "
        f"{format_bytes(p.bytes_a_checkpoint_here)}{scaled}, {len(p.ranks_here)} ranks, layout {p.layout}"
        + (f" (the library {record.library.package} {record.library.version} itself)" if record.library else "")
        + ("" if record.status == "ok" else f" [{record.status}]"),
        f"  {', '.join(record.labels)}",
    ]
    lib = record.library
    if lib is not None and lib.setup_s:
        set_up = ", ".join(f"{k.replace('_', ' ')} {v:.2f} s" for k, v in lib.setup_s.items())
        lines.append(f"  set-up outside the timer (the first rank's process): {set_up}")
    lines += _medians(record) + _tables(record) + gpu_lines(record)
    if record.cluster is not None:
        lines += cluster_lines(record)
    lines += [f"  warning: {w}" for w in p.warnings if record.cluster is not None]
    return lines + _tail(record)


def _medians(record: CheckpointRecord) -> list[str]:
    """The saves' and restores' medians over the checkpoints, with their range."""
    lines = []
    saves, restores = record.saves, record.restores
    if saves:
        until = " until durable" if record.asynchronous else ""
        lines.append(
            f"  save{until} (the slowest rank, MLPerf): {_spread([s.seconds for s in saves], 's', 3)}, "
            f"{_spread([s.gb_per_s for s in saves], 'GB/s')}; DLIO's figure (rank 0's time) "
            f"{_spread([s.dlio_gb_per_s for s in saves], 'GB/s')}"
        )
        blocked = [s.blocked_seconds for s in saves if s.blocked_seconds is not None]
        if blocked:
            lines.append(f"  GPUs blocked (--async: the copy of the states): {_spread(blocked, 's', 3)}")
        if record.every_seconds:
            lines.append(f"  {record.every_seconds:g} s of training between checkpoints (--every)")
    if restores:
        held = record.resident_share_at_restore
        lines.append(
            f"  restore: {_spread([r.seconds for r in restores], 's', 3)}, {_spread([r.gb_per_s for r in restores], 'GB/s')}"
            + (f"; {held:.1%} of the checkpoints' bytes were in the page cache as it began" if held is not None else "")
        )
    return lines


def _tables(record: CheckpointRecord) -> list:
    """A row a checkpoint, and a row a rank (its mean over the checkpoints)."""
    saves, restores, lines = record.saves, record.restores, []
    # DCP fsyncs inside its save (sync_files): its rows have no fsync time of their own
    inside = record.library is not None and record.library.path == "dcp"
    rows = []
    for k, s in enumerate(saves):
        r = restores[k] if k < len(restores) else None
        rows.append(
            (
                s.checkpoint,
                *([f"{s.blocked_seconds or 0:.3f}"] if record.asynchronous else []),
                f"{s.seconds:.3f}",
                f"{s.gb_per_s:.2f}",
                f"{s.dlio_gb_per_s:.2f}",
                "in save" if inside else f"{s.fsync_seconds or 0:.3f}",
                f"{r.seconds:.3f}" if r else "-",
                f"{r.gb_per_s:.2f}" if r else "-",
            )
        )
    if rows:
        headers = (
            "#",
            *(["blocked s"] if record.asynchronous else []),
            "save s",
            "GB/s",
            "DLIO GB/s",
            "fsync s",
            "restore s",
            "restore GB/s",
        )
        lines.append(text_table(headers, rows, left=()))
    ranks = [
        (
            f.rank,
            format_bytes(f.bytes),
            f"{f.write_seconds:.3f}",
            "in save" if inside else f"{f.fsync_seconds:.3f}",
            "-" if f.restore_seconds is None else f"{f.restore_seconds:.3f}",
            "-" if f.restored_from is None else str(f.restored_from),
        )
        for f in record.ranks
    ]
    if ranks:
        headers = ("rank", "bytes", "write s", "fsync s", "restore s", "read rank")
        lines.append(text_table(headers, ranks, left=("rank",), title="each rank, mean over the checkpoints"))
    return lines


def _tail(record: CheckpointRecord) -> list[str]:
    """The CPU cost, the peak host memory, the check, where the checkpoints were kept, the error."""
    lines = []
    cpu, peak = record.cpu_s_per_gib, record.peak_rss_bytes
    tail = [
        f"CPU-s/GiB {cpu:.3f}" if cpu is not None else "",
        f"peak host memory {format_bytes(peak)}" + (" (with the pinned copies)" if record.asynchronous else "")
        if peak
        else "",
        "every byte restored checked" if record.verified else "",
    ]
    if any(tail):
        lines.append("  " + "; ".join(t for t in tail if t))
    kept = record.environment.get("kept_in")
    if kept:
        lines.append(f"  the checkpoints are kept in {kept} (--keep)")
    if record.error:
        lines.append(f"  error: {record.error}")
    return lines


def _seconds_rate(seconds: float | None, rate: float | None) -> tuple[str, str]:
    return ("-" if seconds is None else f"{seconds:.3f}", "-" if rate is None else f"{rate:.2f}")


def cluster_lines(record: CheckpointRecord) -> list:
    """An MPI job's hosts and ranks (the medians over the checkpoints), each as it measured itself, the slowest
    host named."""
    c = record.cluster
    assert c is not None
    how = ", each save and restore begun together"
    times: list[Column] = [
        ("save s", lambda x: _seconds_rate(x.save_seconds, x.save_gb_per_s)[0]),
        ("GB/s", lambda x: _seconds_rate(x.save_seconds, x.save_gb_per_s)[1]),
        ("restore s", lambda x: _seconds_rate(x.restore_seconds, x.restore_gb_per_s)[0]),
        ("GB/s", lambda x: _seconds_rate(x.restore_seconds, x.restore_gb_per_s)[1]),
    ]
    held: Column = (
        "ckpt ranks",
        lambda k: f"{k.ranks[0]}-{k.ranks[-1]}" if len(k.ranks) > 1 else ",".join(map(str, k.ranks)),
    )
    return job_tables(
        c,
        how,
        [("bytes", lambda h: format_bytes(h.bytes)), *times],
        [held, ("GPUs", gpus_cell), *times],
        ("each host, median over the checkpoints", "each rank of the job"),
    )


def gpu_lines(record: CheckpointRecord) -> list:
    """Where the ranks' states are on several GPUs: each GPU's ranks, its bytes a checkpoint, and its GB/s (its
    ranks' bytes over the slowest one's mean save, and restore, seconds)."""
    gpus = sorted({f.gpu for f in record.ranks if f.gpu is not None})
    if len(gpus) < 2:
        return []
    rows = []
    for g in gpus:
        mine = [f for f in record.ranks if f.gpu == g]
        total = sum(f.bytes for f in mine)
        save = max(f.durable_seconds or f.write_seconds + f.fsync_seconds for f in mine)
        restore = max((f.restore_seconds or 0) for f in mine)
        rows.append(
            (
                g,
                ", ".join(str(f.rank) for f in mine),
                format_bytes(total),
                f"{total / save / 1e9:.2f}" if save else "-",
                f"{total / restore / 1e9:.2f}" if restore else "-",
            )
        )
    headers = ("GPU", "ranks", "bytes", "save GB/s", "restore GB/s")
    return [text_table(headers, rows, left=("ranks",), title="each GPU, mean over the checkpoints")]


def comparison_lines(c: CheckpointComparison) -> list:
    """The paths ranked by the time until a save is durable (each run's median over its checkpoints), the restore
    time beside it."""
    if not c.rounds:  # saved runs (and DLIO's summaries, whose figures are means over their checkpoints)
        title = f"{len(c.entries)} saved checkpoint runs (DLIO's: the means its summary.json gives)"
    else:
        p = c.spec
        scaled = f", scaled to {p.scale:g}" if p.scaled else ""
        title = (
            f"workload checkpoint {p.model.name}: {len(c.entries)} paths, {c.rounds} rotated rounds, checkpoints of "
            f"{format_bytes(p.bytes_a_checkpoint_here)}{scaled}, {len(p.ranks_here)} ranks, layout {p.layout}"
        )
    table = ranked_lines(
        title, c.entries, "save s", lambda x: "-" if x is None else f"{x:.3f}", c.status, beside="restore s"
    )
    layouts = {r.path: r.spec.layout for r in c.results}
    mixed = [f"  layouts: {', '.join(f'{p} {x}' for p, x in layouts.items())} (a library writes its own)"]
    on_gpu = any(r.state_on_gpu for r in c.results if r.path == "host")
    imitation = HOST_IMITATION if on_gpu else HOST_IMITATION_FROM_HOST
    return [*table, *library_lines(c.results, imitation), *(mixed if len(set(layouts.values())) > 1 else [])]


#: ``--csv``: a row per checkpoint of each run, a row per rank (its means), and under MPI a row per host
CHECKPOINT_COLUMNS = (
    "path",
    "row",
    "bytes",
    "save_s",
    "save_gb_per_s",
    "dlio_gb_per_s",
    "fsync_s",
    "blocked_s",
    "restore_s",
    "restore_gb_per_s",
    "status",
    "host",
)


def checkpoint_csv(r: CheckpointRecord | CheckpointComparison | CheckpointPlan) -> str:
    """A run's (or every run's of a comparison) checkpoints, ranks and hosts as CSV rows; a plan's ranks, each with
    its bytes a checkpoint."""
    rows: list[dict[str, object]] = []
    if isinstance(r, CheckpointPlan):
        rows = [{"path": r.spec.path, "row": f"rank {k.rank}", "bytes": k.size, "status": "planned"} for k in r.ranks]
        return named_csv(CHECKPOINT_COLUMNS, rows)
    for run in r.results if isinstance(r, CheckpointComparison) else [r]:
        each = {"path": run.path, "status": run.status}
        for k, s in enumerate(run.saves):
            back = run.restores[k] if k < len(run.restores) else None
            rows.append(
                {
                    **each,
                    "row": f"checkpoint {s.checkpoint}",
                    "bytes": s.bytes,
                    "save_s": s.seconds,
                    "save_gb_per_s": s.gb_per_s,
                    "dlio_gb_per_s": s.dlio_gb_per_s,
                    "fsync_s": s.fsync_seconds,
                    "blocked_s": s.blocked_seconds,
                    "restore_s": back.seconds if back else None,
                    "restore_gb_per_s": back.gb_per_s if back else None,
                }
            )
        for f in run.ranks:
            rows.append(
                {
                    **each,
                    "row": f"rank {f.rank}",
                    "bytes": f.bytes,
                    "save_s": f.durable_seconds,
                    "fsync_s": f.fsync_seconds,
                    "blocked_s": f.blocked_seconds,
                    "restore_s": f.restore_seconds,
                }
            )
        for host, save, restore, rate in run.host_rows():
            rows.append(
                {**each, "row": "host", "save_s": save, "save_gb_per_s": rate, "restore_s": restore, "host": host}
            )
    return named_csv(CHECKPOINT_COLUMNS, rows)


def checkpoint_text(r: CheckpointRecord | CheckpointComparison | CheckpointPlan) -> list:
    """A run, several paths ranked, or the plan (``--plan``)."""
    if isinstance(r, CheckpointPlan):
        return plan_lines(r)
    return comparison_lines(r) if isinstance(r, CheckpointComparison) else run_lines(r)


def tick_text(t: CheckpointTick) -> str:
    return f"{t.phase} checkpoint {t.checkpoint}: {t.bytes_done / 1e9:.2f} GB written"
