"""The native memory core: the chase, the traffic each type really makes, sessions, stop and cleanup."""

import os
import re
import threading

import pytest

from xferscope import _memcore
from xferscope.memory.sweep import point_from_windows

# read:write lines at the memory controller, from MLC's documented traffic types
MLC_RATIOS = {
    "R": (1, 0),
    "W2": (2, 1),
    "W3": (3, 1),
    "W5": (1, 1),
    "W6": (0, 1),
    "W7": (2, 1),
    "W8": (1, 1),
    "W9": (3, 1),
    "W10": (2, 1),
}
NT_TYPES = {"W6", "W7", "W8", "W9", "W10"}


def two_cpus():
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        pytest.skip("needs two CPUs: one for the latency thread, one for a load thread")
    return cpus[0], cpus[1]


@pytest.mark.parametrize("n", [2, 3, 17, 1000, 65536])
@pytest.mark.parametrize("stride", [64, 256])
def test_chase_is_one_cycle_through_every_element(n, stride):
    succ = _memcore.chase_successors(n, stride, 12345 + n)
    assert sorted(succ) == list(range(n)), "every element is the successor of exactly one other"
    assert all(succ[i] != i for i in range(n))
    seen, i = set(), 0
    for _ in range(n):
        assert i not in seen, "a shorter cycle"
        seen.add(i)
        i = succ[i]
    assert i == 0 and len(seen) == n


def test_chase_is_random_and_depends_on_the_seed():
    a = _memcore.chase_successors(4096, 64, 1)
    b = _memcore.chase_successors(4096, 64, 2)
    assert a != b
    sequential = sum(1 for i, j in enumerate(a) if j == i + 1)
    assert sequential < 20, "a random cycle has almost no i -> i+1 links"


def test_traffic_types_are_the_mlc_set():
    assert set(_memcore.traffic_names()) == set(MLC_RATIOS)


@pytest.mark.parametrize("traffic", sorted(MLC_RATIOS))
@pytest.mark.parametrize("stride", [64, 256])
def test_traffic_accounting_matches_what_the_kernel_does(traffic, stride):
    info = _memcore.traffic_info(traffic)
    steps = 500
    probe = _memcore.traffic_probe(traffic, steps, stride)
    loaded, stored = probe["bytes_loaded"] / steps, probe["bytes_stored"] / steps
    # a regular store to a line not loaded before costs a read for ownership; NT and in-place stores do not
    rfo = stored if info["store"] == "regular" else 0
    assert loaded + rfo == info["read_bytes"]
    assert stored == info["write_bytes"]
    assert probe["nt_stores"] == (info["store"] == "nt")
    if _memcore.NT_STORES:
        reads, writes = MLC_RATIOS[traffic]
        assert (info["read_bytes"], info["write_bytes"]) == (64 * reads, 64 * writes)
        assert (info["store"] == "nt") == (traffic in NT_TYPES)


def test_delay_loop_calibration_is_plausible():
    ns = _memcore.calibrate_delay(1 << 20, 3)
    assert 0.02 < ns < 50


def mapped(start, size):
    with open("/proc/self/maps") as fh:
        for line in fh:
            lo, hi = (int(x, 16) for x in re.match(r"([0-9a-f]+)-([0-9a-f]+)", line).groups())
            if lo < start + size and hi > start:
                return True
    return False


def measure_with_progress(
    session, traffic: str, loads: bool, warmup_s: float, window_s: float, windows: int, tries: int = 20
) -> dict:
    """``session.measure`` (latency thread on) until every window shows progress from the threads asked for. A
    thread pinned to a CPU of a busy machine can miss a whole window; the sweep measures again then too."""
    for _ in range(tries):
        out = session.measure(traffic, 0, loads, True, warmup_s, window_s, windows)
        if all(steps > 0 and (loads_ > 0 or not loads) for _, steps, loads_, _ in out["windows"]):
            return out
    pytest.fail(f"in {tries} tries no measurement made progress in each of its {windows} windows: too busy a machine")


def test_session_measures_then_frees_every_buffer():
    lat_cpu, load_cpu = two_cpus()
    s = _memcore.Session(32 << 20, 64, lat_cpu, [load_cpu], 16 << 20, ["R", "W10"])
    assert s.start() is True
    regions = s.regions()
    assert len(regions) == 1 + 3  # the chase, then rd0, rd1 and wr of the one load thread
    assert all(mapped(a, n) for a, n in regions)
    idle = measure_with_progress(s, "R", False, 0.02, 0.05, 3)
    loaded = measure_with_progress(s, "W10", True, 0.02, 0.05, 3)
    assert not idle["cancelled"] and len(idle["windows"]) == 3
    assert all(loads == 0 for _, _, loads, _ in idle["windows"]), "no load thread runs for idle latency"
    point = point_from_windows(
        loaded["windows"],
        traffic="W10",
        stride=64,
        delay=0,
        read_bytes=128,
        write_bytes=64,
        backend="builtin",
        ns_per_iter=None,
        latency=True,
        bandwidth=True,
    )
    assert point.read_mb_s == pytest.approx(2 * point.write_mb_s)
    assert point.latency_min_ns <= point.latency_ns <= point.latency_max_ns
    s.close()
    assert not any(mapped(a, n) for a, n in regions)


def test_measure_refuses_traffic_the_session_has_no_buffers_for():
    lat_cpu, load_cpu = two_cpus()
    s = _memcore.Session(1 << 20, 64, lat_cpu, [load_cpu], 1 << 20, ["R"])
    assert s.start()
    with pytest.raises(ValueError, match="W6"):
        s.measure("W6", 0, True, True, 0.0, 0.01, 1)
    s.close()


def test_idle_latency_in_a_session_without_read_buffers():
    lat_cpu, load_cpu = two_cpus()
    s = _memcore.Session(1 << 20, 64, lat_cpu, [load_cpu], 1 << 20, ["W6"])
    assert s.start()
    assert len(s.regions()) == 2  # the chase and the one write buffer
    idle = measure_with_progress(s, "R", False, 0.0, 0.05, 2)
    assert len(idle["windows"]) == 2 and not idle["cancelled"]
    s.close()


def native_threads_cpu() -> int:
    """The CPU time (clock ticks) of this process's threads that are not Python's: the session's latency and load
    threads, which spin while measure() measures."""
    python = {t.native_id for t in threading.enumerate()}
    ticks = 0
    for tid in os.listdir("/proc/self/task"):
        if int(tid) not in python:
            with open(f"/proc/self/task/{tid}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
            ticks += int(fields[11]) + int(fields[12])  # utime and stime
    return ticks


def test_stop_ends_a_long_measure_quickly_and_the_gil_stays_free():
    lat_cpu, load_cpu = two_cpus()
    s = _memcore.Session(8 << 20, 64, lat_cpu, [load_cpu], 4 << 20, ["R"])
    assert s.start()
    out = {}
    worker = threading.Thread(target=lambda: out.update(s.measure("R", 100, True, True, 0.0, 1.0, 60)))
    worker.start()
    # the session's threads measuring: a quarter second of their CPU (idle between measures, they nap and take
    # about 5 ticks a second). This loop is Python: were the GIL held by measure(), it would get to look only once
    # measure() had returned
    before = native_threads_cpu()
    while native_threads_cpu() < before + 25:
        pass
    assert worker.is_alive() and not out, "this thread ran Python while measure() was measuring"
    s.stop()
    worker.join(30)  # measure() was asked for 60 s: stop ended it
    assert not worker.is_alive()
    assert out["cancelled"] is True
    s.close()


def test_pinning_to_a_missing_cpu_is_an_error_not_a_hang():
    s = _memcore.Session(1 << 20, 64, 4000, [], 0, [])
    with pytest.raises(OSError, match="CPU 4000"):
        s.start()


def test_bad_arguments_are_rejected():
    with pytest.raises(ValueError):
        _memcore.Session(1 << 20, 100, 0, [], 0, [])
    with pytest.raises(ValueError):
        _memcore.Session(1 << 20, 64, 0, [], 0, ["W4"])
    with pytest.raises(ValueError):
        _memcore.traffic_info("W11")
    with pytest.raises(ValueError):
        _memcore.chase_successors(1)
