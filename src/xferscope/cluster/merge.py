"""The result of a cluster run: one RunResult for all ranks, with one RunResult per host in ``hosts``.

Counters are sums over ranks; latency percentiles come from the merged
histograms; ``seconds`` is the last rank's last worker (as on one host);
first-done and last-done follow elbencho: the totals of *all* workers at the
moment the first (last) worker anywhere finished. ``environment["cluster"]``
says how the job was laid out, which host was slowest, and holds one row per rank.

The spec of these results is the spec every rank ran (``workers`` per rank,
``--dir``/``--file`` with their placeholders); ``environment["cluster"]`` has
the rank count and the total number of workers.
"""

from __future__ import annotations

import math
from typing import Any

from xferscope.cluster.aggregate import LiveAggregate, RankState, first_done_time, host_system_cpu
from xferscope.engines.base import DoneTotals, RunResult, Sample, WorkerResult
from xferscope.export import result_from_record
from xferscope.records import ClusterFacts, RankRow, RunEnvironment
from xferscope.run.local_run import _latency
from xferscope.spec import RunSpec
from xferscope.stats import Histogram


def rank_result(st: RankState) -> RunResult | None:
    """The rank's own result from its final record, when it sent one."""
    return result_from_record(st.summary, f"rank {st.rank}") if st.summary else None


def rank_row(st: RankState, own: RunResult | None) -> RankRow:
    """One rank as it measured itself (its own result, when its final record came), for per-rank tables."""
    seconds = own.seconds if own else st.t
    nbytes, ops = (own.bytes, own.ops) if own else (st.bytes, st.ops)
    spec = st.summary.spec if st.summary else {}
    hist = own.histogram if own and own.histogram is not None else st.hist_read + st.hist_write
    return {
        "rank": st.rank,
        "host": st.host,
        "local_rank": st.place.local_rank,
        "status": "lost" if st.lost else st.status,
        "error": st.error,
        "bytes": nbytes,
        "ops": ops,
        "seconds": seconds,
        "throughput_mib_s": nbytes / (1 << 20) / seconds if seconds > 0 else 0.0,
        "first_done_s": st.first_t,
        "workers": len(st.worker_bytes) or spec.get("workers"),
        "gpus": spec.get("gpus"),
        "cpus": spec.get("cpus"),
        "target": own.environment.get("target") if own else None,
        "latency_histogram_ns": {str(k): v for k, v in hist.to_sparse().items()},
    }


def _cpu(states: list[RankState], owns: dict[int, RunResult | None], gib: float) -> dict[str, Any]:
    """Process CPU summed over ranks (percent of one core, as on one host); system CPU averaged over hosts."""
    usr = sys_ = cpu_s = telemetry = 0.0
    measured = False
    for st in states:
        own = owns[st.rank]
        if own and own.cpu:
            measured = True
            usr += own.cpu.get("usr_pct") or 0.0
            sys_ += own.cpu.get("sys_pct") or 0.0
            cpu_s += own.cpu.get("cpu_seconds") or 0.0
            telemetry += own.cpu.get("telemetry_cpu_seconds") or 0.0
        elif st.cpu:
            measured = True
            usr += st.cpu[0]
            sys_ += st.cpu[1]
    if not measured:
        return {}
    per_host: dict[str, dict] = {}
    for st in states:
        own = owns[st.rank]
        if own and own.cpu and st.host not in per_host:
            per_host[st.host] = own.cpu
    if per_host:
        n = len(per_host)
        sys_usr = sum(c.get("sys_usr_pct") or 0.0 for c in per_host.values()) / n
        sys_sys = sum(c.get("sys_sys_pct") or 0.0 for c in per_host.values()) / n
        iowait = sum(c.get("sys_iowait_pct") or 0.0 for c in per_host.values()) / n
    else:
        sys_usr, sys_sys = host_system_cpu(states)
        iowait = math.nan
    d = {"usr_pct": usr, "sys_pct": sys_, "sys_usr_pct": sys_usr, "sys_sys_pct": sys_sys, "sys_iowait_pct": iowait}
    if all(owns[st.rank] for st in states):
        d["cpu_seconds"] = cpu_s
        d["telemetry_cpu_seconds"] = telemetry
        d["cpu_s_per_gib"] = (cpu_s - telemetry) / gib if gib > 0 else math.nan
        engines = [owns[st.rank].cpu for st in states]
        if all("engine_usr_pct" in c for c in engines):  # the workers alone: summed over ranks, the busiest thread
            d["engine_usr_pct"] = sum(c["engine_usr_pct"] for c in engines)
            d["engine_sys_pct"] = sum(c["engine_sys_pct"] for c in engines)
            d["engine_busiest_thread_pct"] = max(c.get("engine_busiest_thread_pct") or 0.0 for c in engines)
    if len({st.host for st in states}) == 1:
        own = owns[states[0].rank]
        d["per_core_pct"] = list(own.cpu.get("per_core_pct", [])) if own and own.cpu else list(states[0].cores)
    return d


def _status(states: list[RankState]) -> tuple[str, str | None]:
    failed = [st for st in states if st.error or st.lost]
    if failed:
        st = failed[0]
        more = f" (and {len(failed) - 1} more rank{'s' if len(failed) > 2 else ''})" if len(failed) > 1 else ""
        return "failed", f"rank {st.rank} on {st.host}: {st.error}{more}"
    if any(st.status != "ok" for st in states):
        return "interrupted", None
    return "ok", None


def merged_result(
    template: RunSpec, states: list[RankState], samples: list[Sample], environment: RunEnvironment
) -> RunResult:
    """One RunResult for a group of ranks (every rank, or one host's)."""
    owns = {st.rank: rank_result(st) for st in states}
    read_ops = sum(st.read_ops for st in states)
    write_ops = sum(st.write_ops for st in states)
    hist_read, hist_write = Histogram(), Histogram()
    for st in states:
        hist_read = hist_read + st.hist_read
        hist_write = hist_write + st.hist_write
    hist = hist_read + hist_write
    nbytes = sum(st.bytes for st in states)
    ops = read_ops + write_ops
    lat_ns = sum(st.read_lat_ns + st.write_lat_ns for st in states)
    busy = [st for st in states if st.ops]
    lat_min = min(st.lat_min_ns for st in busy) if busy else None
    lat_max = max(st.lat_max_ns for st in busy) if busy else None
    seconds = max((owns[st.rank].seconds if owns[st.rank] else st.t) for st in states)
    both = read_ops and write_ops

    workers, gpus = _merged_workers_and_gpus(states, owns, seconds)
    t_first = first_done_time(states)
    first = None
    if t_first is not None:
        at = [st.value_at(t_first) for st in states]
        first = DoneTotals(t_first, sum(b for b, _ in at), sum(o for _, o in at))
    last = None
    if all(owns[st.rank] and owns[st.rank].last_done for st in states):
        last = DoneTotals(max(owns[st.rank].last_done.seconds for st in states), nbytes, ops)

    labels = list(dict.fromkeys(label for own in owns.values() if own for label in own.labels))
    status, error = _status(states)
    return RunResult(
        spec=template,
        status=status,
        bytes=nbytes,
        ops=ops,
        read_bytes=sum(st.read_bytes for st in states),
        write_bytes=sum(st.write_bytes for st in states),
        read_ops=read_ops,
        write_ops=write_ops,
        seconds=seconds,
        latency_us=_latency(hist, lat_ns, ops, lat_min, lat_max),
        read_latency_us=_latency(hist_read, sum(st.read_lat_ns for st in states), read_ops) if both else None,
        write_latency_us=_latency(hist_write, sum(st.write_lat_ns for st in states), write_ops) if both else None,
        cpu=_cpu(states, owns, nbytes / (1 << 30)),
        workers=workers,
        first_done=first,
        last_done=last,
        environment=environment,
        labels=labels,
        samples=list(samples),
        error=error,
        histogram=hist,
        gpus=gpus,
    )


def _merged_workers_and_gpus(
    states: list[RankState], owns: dict, seconds: float
) -> tuple[list[WorkerResult], dict[int, dict[str, float]]]:
    """Every rank's workers, numbered anew; per GPU (ranks of one host only) the bytes, operations and workers
    summed, NVML's readings taken at their highest (the device's, whichever rank asked), the throughput."""
    workers: list[WorkerResult] = []
    gpus: dict[int, dict[str, float]] = {}
    one_host = len({s.host for s in states}) == 1
    for st in states:
        own = owns[st.rank]
        for w in own.workers if own else []:
            workers.append(WorkerResult(len(workers), w.bytes, w.ops, w.seconds, w.throughput_mib_s, w.gpu))
        if own and one_host:
            for index, g in own.gpus.items():
                acc = gpus.setdefault(index, {"bytes": 0, "ops": 0, "workers": 0})
                for key in ("bytes", "ops", "workers"):
                    acc[key] += g.get(key, 0)
                for key, value in g.items():  # NVML reads the device, whichever rank asks: not to be summed
                    if key not in ("bytes", "ops", "workers", "throughput_gib_s") and value is not None:
                        acc[key] = max(acc.get(key, value), value)
    for g in gpus.values():
        g["throughput_gib_s"] = g["bytes"] / (1 << 30) / seconds if seconds > 0 else 0.0
    return workers, gpus


def _target_text(spec: RunSpec) -> str:
    if spec.file:
        return spec.file
    if spec.directory:
        return spec.directory
    return "a scratch file per rank"


def _host_list(hosts: list[str]) -> str:
    return ",".join(hosts) if len(hosts) <= 4 else f"{','.join(hosts[:3])},... ({len(hosts)} hosts)"


def cluster_result(template: RunSpec, live: LiveAggregate, meta: ClusterFacts) -> RunResult:
    """The aggregate over every rank, with per-host results in ``hosts`` and the slowest host named."""
    owns = {st.rank: rank_result(st) for st in live.states}
    rows = [rank_row(st, owns[st.rank]) for st in live.states]
    host_results = []
    for host in live.hosts:
        states = live.states_on(host)
        first_own = next((owns[st.rank] for st in states if owns[st.rank]), None)
        env = dict(first_own.environment) if first_own else {"host": host}
        env["host"] = host
        env["cluster"] = {"scope": "host", "ranks": len(states), "per_rank": [r for r in rows if r["host"] == host]}
        host_results.append(merged_result(template, states, live.host_samples[host], env))
    slowest = min(host_results, key=lambda r: r.throughput_mib_s) if len(host_results) > 1 else None
    root_own = owns[0]
    env = dict(root_own.environment) if root_own else {}
    env.update({"host": _host_list(live.hosts), "target": _target_text(template)})
    env["cluster"] = {
        "scope": "all",
        **meta,
        "ranks": len(live.states),
        "hosts": list(live.hosts),
        "workers_per_rank": template.workers,
        "workers_total": template.workers * len(live.states),
        "slowest_host": slowest.environment["host"] if slowest else None,
        "per_rank": rows,
    }
    result = merged_result(template, live.states, live.samples, env)
    result.hosts = host_results
    return result
