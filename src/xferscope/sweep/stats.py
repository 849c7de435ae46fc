"""Statistics over a point's repetitions: median, standard deviation, min and max of each figure.

Repetitions are kept as the dictionaries the results file stores (``records.Run`` as plain data for io
points, ``records.MemSweep`` for memory sweeps), so a resumed sweep and a
fresh one compute the same way. Only repetitions that finished ("ok") count.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

from xferscope.records import MemRow
from xferscope.stats import summarize
from xferscope.telemetry.gpu import summed_over_gpus


def _get(*keys: str) -> Callable[[dict], Any]:
    def get(d: dict) -> Any:
        for key in keys:
            if not isinstance(d, dict):
                return None
            d = d.get(key)
        return d

    return get


#: The figures of an io point, as (name, how to read it from a result dictionary).
IO_METRICS: dict[str, Callable[[dict], Any]] = {
    "throughput_mib_s": _get("throughput_mib_s"),
    "iops": _get("iops"),
    "lat_mean_us": _get("latency_us", "mean"),
    "lat_p99_us": _get("latency_us", "p99"),
    "cpu_usr_pct": _get("cpu", "usr_pct"),
    "cpu_sys_pct": _get("cpu", "sys_pct"),
    "first_done_mib_s": _get("first_done", "throughput_mib_s"),
    "last_done_mib_s": _get("last_done", "throughput_mib_s"),
    "cpu_s_per_gib": _get("cpu_s_per_gib"),
    "pcie_rx_mb_s": lambda d: summed_over_gpus(_get("per_gpu")(d), "pcie_rx_mb_s"),
    "pcie_tx_mb_s": lambda d: summed_over_gpus(_get("per_gpu")(d), "pcie_tx_mb_s"),
}
#: The figures of one delay of a memory sweep.
MEM_METRICS = ("latency_ns", "bandwidth_mb_s", "read_mb_s", "write_mb_s")
#: What else tells two memory points of one delay apart: the chase's locality, the curve's working set, the
#: matrix cell.
MEM_WHERE = ("locality", "size_bytes", "cpu_node", "mem_node")


def mem_where(d: dict) -> dict[str, str | int]:
    """The MEM_WHERE fields of a point or row that are set."""
    return {k: d[k] for k in MEM_WHERE if d.get(k) is not None}


STAT_NAMES = ("median", "stdev", "min", "max")


def ok_repetitions(reps: list[dict]) -> list[dict]:
    return [r for r in reps if r.get("status", "ok") == "ok"]


def io_stats(reps: list[dict]) -> dict[str, dict[str, float]]:
    """{metric: {median, stdev, min, max, n}} over the finished repetitions of an io point."""
    done = ok_repetitions(reps)
    return {name: summarize(get(r) for r in done) for name, get in IO_METRICS.items()}


def median_repetition(reps: list[dict]) -> dict | None:
    """The finished repetition with the median throughput (the lower one of an even count)."""
    done = sorted(ok_repetitions(reps), key=lambda r: r.get("throughput_mib_s") or 0.0)
    return done[(len(done) - 1) // 2] if done else None


def mem_rows(reps: list[dict]) -> list[MemRow]:
    """One row per (traffic, stride, delay, and MEM_WHERE) with statistics of latency and bandwidth over the
    repetitions."""
    groups: dict[tuple, list[dict]] = {}
    for rep in ok_repetitions(reps):
        for p in rep.get("points", []):
            key = (p.get("traffic"), p.get("stride"), p.get("delay"), *(p.get(k) for k in MEM_WHERE))
            groups.setdefault(key, []).append(p)
    rows = []
    for (traffic, stride, delay, *where), points in groups.items():
        row = {"traffic": traffic, "stride": stride, "delay": delay, "backend": points[0].get("backend")}
        row.update(zip(MEM_WHERE, where))
        row.update({metric: summarize(p.get(metric) for p in points) for metric in MEM_METRICS})
        rows.append(cast(MemRow, row))  # MEM_WHERE and MEM_METRICS name MemRow's other keys
    return rows
