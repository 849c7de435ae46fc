"""KV-cache restores and model loads in words (their lines and tables) and in ``--csv`` (a row per run, and per
GPU); a run's live line."""

from __future__ import annotations

from typing import Any

from xferscope.units import figure_text, format_bytes
from xferscope.workloads.common.cells import ms, named_csv, secs, table_csv
from xferscope.workloads.common.job_tables import Column, gpus_cell, job_tables
from xferscope.workloads.common.ranked_text import library_lines, ranked_lines
from xferscope.workloads.inference.kvcache import KvComparison
from xferscope.workloads.inference.kvcache_record import BreakEven, KvResult, median_break_even
from xferscope.workloads.inference.load import LoadComparison
from xferscope.workloads.inference.load_record import LoadResult
from xferscope.workloads.inference.transfer import TransferTick


def _gpu(g: int | None) -> str:
    return "host" if g is None else f"GPU {g}"


# ------------------------------------------------------------------ kvcache


def kv_lines(r: KvResult) -> list[Any]:
    s = r.spec
    lines: list[Any] = [
        f"workload kvcache {s.model.name}: {r.formula}",
        f"  chunks of {s.chunk_tokens} tokens ({format_bytes(r.cache.get('chunk_payload_bytes', 0))} per rank), "
        f"--tp {s.tp}, layout {s.layout}, prompts {s.prompt.text} tokens, hit ratio {s.hit_ratio:g}, "
        f"concurrency {s.concurrency}, through {s.path}",
    ]
    if r.incomplete:
        lines.append(f"  {r.status.upper()}: {r.error or 'stopped before its end'} (figures of the requests restored)")
    lines.append(
        f"  {r.requests} requests restored | restore p50 {ms(r.restore_p50_s)} p99 {ms(r.restore_p99_s)} | "
        f"{figure_text(r.gb_per_s, '{:.2f}')} GB/s | {figure_text(r.chunks_per_s, '{:.1f}')} chunks/s | {figure_text(r.tokens_per_s, '{:.0f}')} tokens/s | "
        f"{figure_text(r.cpu_s_per_gib, '{:.3f}')} CPU-s/GiB"
    )
    for g in r.per_gpu:
        lines.append(f"    {_gpu(g.gpu):>8}: {figure_text(g.gb_per_s, '{:.2f}')} GB/s ({format_bytes(g.bytes)})")
    if r.break_even is not None:
        lines.append("  " + break_even_text(r.break_even, s.chunk_tokens))
    c = r.cache
    lines.append(
        f"  cache: {c.get('chunk_files')} chunk files, {format_bytes(c.get('bytes', 0))} "
        f"({'generated' if c.get('generated') else 'read as it is'}) in {c.get('where')}"
        + (" (kept)" if c.get("kept") else "")
    )
    if r.cluster is not None:
        lines += kv_cluster_lines(r)
    if r.labels:
        lines.append("  " + "; ".join(r.labels))
    return lines


#: a KV-cache job's figures of a host and of a rank, after its requests
_KV_TIMES: list[Column] = [
    ("p50", lambda r: ms(r.restore_p50_s)),
    ("p99", lambda r: ms(r.restore_p99_s)),
    ("GB/s", lambda r: figure_text(r.gb_per_s, "{:.2f}")),
]


def kv_cluster_lines(r: KvResult) -> list[Any]:
    """An MPI job's hosts and ranks, each as it measured itself, the host of the highest p99 named."""
    c = r.cluster
    assert c is not None
    made = "once per host" if c.data_per_host else "once for all"
    how = f", the requests spread over them, the runs begun together; the cache {made}"
    return job_tables(
        c,
        how,
        [("requests", lambda h: h.requests), *_KV_TIMES],
        [("GPUs", lambda k: gpus_cell(k, "host")), ("requests", lambda k: k.requests), *_KV_TIMES],
    )


#: a KV-cache run's CSV: its own row (gpu "all"; under MPI host "all", then a row a host), then one per GPU
KV_COLUMNS = (
    "path",
    "gpu",
    "requests",
    "restore_p50_s",
    "restore_p99_s",
    "gb_per_s",
    "chunks_per_s",
    "tokens_per_s",
    "cpu_s_per_gib",
    "status",
    "host",
)


def kv_csv(r: KvResult | KvComparison) -> str:
    rows: list[list[Any]] = []
    for run in r.results if isinstance(r, KvComparison) else [r]:
        figures = [getattr(run, c) for c in KV_COLUMNS[2:-2]]  # requests .. cpu_s_per_gib
        rows.append([run.path, "all", *figures, run.status, "all" if run.cluster is not None else ""])
        for h in run.cluster.hosts if run.cluster is not None else []:
            cells = [h.requests, h.restore_p50_s, h.restore_p99_s, h.gb_per_s, "", "", ""]
            rows.append([run.path, "all", *cells, run.status, h.host])
        for g in run.per_gpu:
            rows.append([run.path, _gpu_cell(g.gpu), "", "", "", g.gb_per_s, "", "", "", run.status, ""])
    return table_csv(KV_COLUMNS, rows)


def _gpu_cell(gpu: int | None) -> int | str:
    return "host" if gpu is None else gpu


# ------------------------------------------------------------------ load


def load_lines(r: LoadResult) -> list[Any]:
    s = r.spec
    d = r.data
    what = s.model.name if s.model is not None else s.files
    lib = r.library
    lines: list[Any] = [
        f"workload load {what}: {d.get('shards')} shards, {d.get('tensors')} tensors, {format_bytes(d.get('bytes', 0))}, "
        f"{r.cache_state}, through {s.path}" + (f" (the library {lib.package} {lib.version} itself)" if lib else "")
    ]
    # a library's jobs are its shards, its checks its tensors; xferscope's paths read pieces
    unit, checked = ("shards", "tensors") if lib else ("pieces", "pieces")
    if r.incomplete:
        lines.append(
            f"  {r.status.upper()}: {r.error or 'stopped before its end'} ({r.pieces_done} of {r.pieces} {unit} landed)"
        )
    first = "first shard" if lib else "first byte"
    lines.append(
        f"  loaded in {secs(r.load_s)} | {first} {'on the GPU' if s.lands_in_gpu else 'landed'} {ms(r.first_byte_s)} | {figure_text(r.gb_per_s, '{:.2f}')} GB/s | "
        f"slowest shard {r.slowest_shard or '-'} | {figure_text(r.cpu_s_per_gib, '{:.3f}')} CPU-s/GiB"
    )
    if lib is not None:
        settings = ", ".join(f"{k}={v}" for k, v in lib.settings.items())
        lines.append(
            f"  {lib.package} {lib.version}, torch {lib.torch}: {lib.io_mode}" + (f" ({settings})" * bool(settings))
        )
    for g in r.per_gpu:
        lines.append(
            f"    {_gpu(g.gpu):>8}: {format_bytes(g.bytes)} in {secs(g.seconds)}, {figure_text(g.gb_per_s, '{:.2f}')} GB/s"
        )
    if r.shape is not None:
        lines.append(f"  shape: {r.shape.line()}")
    slow = sorted((x for x in r.shards if x.seconds is not None), key=lambda x: -(x.seconds or 0))[:3]
    if len(r.shards) > 1 and slow:
        lines.append("  slowest shards: " + ", ".join(f"{x.name} {secs(x.seconds)}" for x in slow))
    if r.verified is not None:
        v = r.verified
        lines.append(
            f"  verified: {v.pieces} {checked}, every byte as in the files"
            if not v.differ
            else f"  VERIFY FAILED: {v.differ} of {v.pieces} {checked} differ from the files (first: {v.first})"
        )
    if r.cluster is not None:
        lines += load_cluster_lines(r)
    if r.labels:
        lines.append("  " + "; ".join(r.labels))
    return lines


def load_cluster_lines(r: LoadResult) -> list[Any]:
    """An MPI job's hosts and ranks, each as it measured itself, the slowest host named."""
    c = r.cluster
    assert c is not None
    share = "each rank its own copy" if c.share == "copy" else "each rank its tensor-parallel share"
    made = "once per host" if c.data_per_host else "once for all"
    how = f", {share}, the loads begun together; the shards {made}"
    bytes_load: list[Column] = [("bytes", lambda r: format_bytes(r.bytes)), ("load", lambda r: secs(r.load_s))]
    rate: Column = ("GB/s", lambda r: figure_text(r.gb_per_s, "{:.2f}"))
    return job_tables(
        c,
        how,
        [*bytes_load, rate],
        [("GPUs", lambda k: gpus_cell(k, "host")), *bytes_load, ("first byte", lambda k: ms(k.first_byte_s)), rate],
    )


#: a model load's CSV: the run's row (gpu "all"), then one per GPU
LOAD_COLUMNS = (
    "path",
    "cache",
    "gpu",
    "load_s",
    "first_byte_s",
    "gb_per_s",
    "bytes",
    "slowest_shard",
    "cpu_s_per_gib",
    "status",
    "host",
)


def load_csv(r: LoadResult | LoadComparison) -> str:
    """A row a run (gpu "all"; under MPI host "all", then a row a host), then one a GPU."""
    rows: list[dict[str, Any]] = []
    for run in r.results if isinstance(r, LoadComparison) else [r]:
        each = {"path": run.path, "cache": run.cache_state, "status": run.status}
        figures = {c: getattr(run, c) for c in ("load_s", "first_byte_s", "gb_per_s", "slowest_shard", "cpu_s_per_gib")}
        job = "all" if run.cluster is not None else ""
        rows.append({**each, "gpu": "all", **figures, "bytes": run.bytes_read, "host": job})
        for h in run.cluster.hosts if run.cluster is not None else []:
            rows.append(
                {**each, "gpu": "all", "load_s": h.load_s, "gb_per_s": h.gb_per_s, "bytes": h.bytes, "host": h.host}
            )
        for g in run.per_gpu:
            rows.append(
                {**each, "gpu": _gpu_cell(g.gpu), "load_s": g.seconds, "gb_per_s": g.gb_per_s, "bytes": g.bytes}
            )
    return named_csv(LOAD_COLUMNS, rows)


# ------------------------------------------------------------------ side by side


def break_even_text(b: BreakEven, chunk_tokens: int) -> str:
    """Where restoring a prompt gets faster than recomputing it at the user's prefill rate."""
    head = f"break-even at {b.prefill_rate:g} tokens/s prefill"
    fit = f"restore = {1000 * b.fixed_s:.2f} ms + {1e6 * b.s_per_token:.2f} us a token; {b.fit}"
    if b.tokens is None:
        return (
            f"{head}: none: restoring takes {1e6 * b.s_per_token:.1f} us a token here, recomputing "
            f"{1e6 / b.prefill_rate:.1f} us ({b.fit})"
        )
    if b.tokens <= chunk_tokens:
        return f"{head}: every prompt with a chunk on disk restores faster than it recomputes ({fit})"
    return (
        f"{head}: prompts over {b.tokens} tokens restore faster than they recompute ({fit}; restores come in "
        f"chunks of {chunk_tokens})"
    )


def path_break_evens(c: KvComparison) -> list[str]:
    """With --prefill-rate and several paths: each path's break-even, from its runs."""
    lines = []
    for path in dict.fromkeys(r.path for r in c.results):
        evens = [r.break_even for r in c.results if r.path == path and r.break_even is not None]
        if evens:
            lines.append(f"  {path}: " + break_even_text(median_break_even(evens), c.spec.chunk_tokens))
    return lines


def kv_comparison_lines(c: KvComparison) -> list[Any]:
    """The paths ranked by restore time, then each path's break-even (with --prefill-rate); saved runs (no rounds)
    ranked alone."""
    if not c.rounds:
        return ranked_lines(f"{len(c.entries)} saved kvcache runs", c.entries, "restore p50", ms, c.status)
    s = c.spec
    table = ranked_lines(
        f"workload kvcache {s.model.name}: {len(c.entries)} paths, {c.rounds} rotated rounds over one cache "
        f"(layout {s.layout}, concurrency {s.concurrency}, prompts {s.prompt.text})",
        c.entries,
        "restore p50",
        ms,
        c.status,
    )
    return [*table, *path_break_evens(c)]


def load_comparison_lines(c: LoadComparison) -> list[Any]:
    """The paths ranked by load time, then which rows are the libraries; saved loads (no rounds) ranked alone."""
    if not c.rounds:
        return ranked_lines(f"{len(c.entries)} saved model loads", c.entries, "load time", secs, c.status)
    s = c.spec
    table = ranked_lines(
        f"workload load: {len(c.entries)} paths, {c.rounds} rotated rounds, {s.cache}",
        c.entries,
        "load time",
        secs,
        c.status,
    )
    return [*table, *library_lines(c.results)]


def kvcache_text(r: KvResult | KvComparison) -> list[Any]:
    """A restore run, or paths side by side (run or saved)."""
    return kv_comparison_lines(r) if isinstance(r, KvComparison) else kv_lines(r)


def load_text(r: LoadResult | LoadComparison) -> list[Any]:
    """A load, or paths side by side (run or saved)."""
    return load_comparison_lines(r) if isinstance(r, LoadComparison) else load_lines(r)


def tick_text(tick: TransferTick) -> str:
    return f"{tick.t:6.1f} s  {tick.jobs} done"
