"""`xferscope mem` through its real entry point, the sweep engine's streams, and the mlc backend."""

import asyncio
import contextlib
import csv
import itertools
import json
import os
import signal
import stat
import subprocess
import sys
import time

import pytest

from xferscope.memory.sweep import CSV_COLUMNS, IDLE, MemSpec, MemSweepRun, sanity_warnings
from xferscope.records import MemPoint

SMALL = ["--buffer", "32M", "--threads", "1"]


@pytest.fixture
def two_cpus():
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("loaded latency needs two CPUs: one for the latency thread, one for a load thread")


def one_line_error(r, code, *words):
    assert r.code == code, (r.out, r.err)
    lines = r.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("xferscope: "), r.err
    assert "Traceback" not in r.err + r.out
    for word in words:
        assert word in lines[0]


def test_short_sweep_is_plausible_and_bandwidth_falls_with_delay(cli, two_cpus, tmp_path):
    out = tmp_path / "sweep.csv"
    r = cli(
        "mem",
        "--traffic",
        "R",
        "--delays",
        "0,20000",
        "--point-seconds",
        "0.2",
        "--buffer",
        "64M",
        "--threads",
        "1",
        "--format",
        "json",
        "--csv",
        str(out),
    )
    assert r.code == 0, r.err
    data = json.loads(r.out)
    assert data["backend"] == "builtin" and not data["cancelled"]
    assert 5 < data["idle_latency_ns"] < 2000 and 5 < data["whole_idle_latency_ns"] < 5000
    assert data["idle_locality"] == "64-page" and data["pages"] == "thp" and data["spec"]["locality"] == "default"
    assert data["environment"]["ns_per_delay_iter"] > 0
    busy, quiet = [p for p in data["points"] if p["traffic"] == "R"]
    # loaded latency uses the chosen locality: multichase's default window, 64 pages of 4 KiB
    assert {(p["locality"], p["locality_bytes"]) for p in (busy, quiet)} == {("64-page", 64 * 4096)}
    assert (busy["delay"], quiet["delay"]) == (0, 20000)
    for p in (busy, quiet):
        assert 5 < p["latency_min_ns"] <= p["latency_ns"] <= p["latency_max_ns"] < 20000
        assert p["write_mb_s"] == 0 and p["read_mb_s"] == pytest.approx(p["bandwidth_mb_s"])
    # delay 20000 spins ~20000 loop iterations per 64-byte step: far less traffic than delay 0
    assert busy["bandwidth_mb_s"] > 100
    assert busy["bandwidth_mb_s"] > 2 * quiet["bandwidth_mb_s"]
    with open(out) as fh:
        rows = list(csv.reader(fh))
    assert tuple(rows[0]) == CSV_COLUMNS
    assert [row[5] for row in rows[1:]] == [IDLE, IDLE, "R", "R"]
    assert [row[8] for row in rows[1:]] == ["64-page", "whole-buffer", "64-page", "64-page"]
    assert rows[3][0] == "0" and rows[4][0] == "20000" and rows[1][7] == "builtin" and rows[1][9] == str(64 << 20)


def test_table_in_mlc_shape_with_write_traffic(cli, two_cpus):
    r = cli("mem", "--traffic", "W7", "--stride", "128", "--delays", "0,500", "--point-seconds", "0.15", *SMALL)
    assert r.code == 0, r.err
    lines = r.out.splitlines()
    # the tables come first (a sweep that measured nothing would print only its footer: pages, THP coverage)
    assert lines[0].startswith("Idle latency: ") and "(64-page locality; whole-buffer " in lines[0], r.out + r.err
    assert "Loaded latency: traffic W7, stride 128 B, 64-page locality, builtin" in r.out
    head = next(line for line in lines if "Inject Delay" in line)
    assert "Latency (ns)" in head and "Bandwidth (MB/sec)" in head
    row = next(line.split() for line in lines if line.strip().startswith("00000"))
    total, read, write = float(row[2]), float(row[3]), float(row[4])
    assert read == pytest.approx(2 * write, rel=0.01) and total == pytest.approx(read + write, rel=0.01)
    assert "THP coverage:" in r.out and "ns per iteration" in r.out
    assert "Pages: asked transparent huge pages (2 MiB), got " in r.out


def test_write_only_traffic_sweep(two_cpus):
    result = MemSweepRun(
        MemSpec(traffic=("W6",), delays=(0,), point_seconds=0.1, buffer_bytes=8 << 20, threads=1, whole_idle=False)
    ).run()
    idle, w6 = result.points
    assert idle.traffic == IDLE and w6.traffic == "W6"
    assert w6.read_mb_s == 0 and w6.write_mb_s == pytest.approx(w6.bandwidth_mb_s) and w6.bandwidth_mb_s > 0


def test_peak_and_idle_modes(cli):
    r = cli(
        "mem", "--mode", "peak", "--traffic", "R,W6", "--buffer", "16M", "--point-seconds", "0.15", "--format", "json"
    )
    assert r.code == 0, r.err
    points = json.loads(r.out)["points"]
    assert [p["traffic"] for p in points] == ["R", "W6"]
    assert all(p["latency_ns"] is None and p["bandwidth_mb_s"] > 100 for p in points)
    assert points[1]["write_mb_s"] == pytest.approx(points[1]["bandwidth_mb_s"]) and points[1]["read_mb_s"] == 0
    r = cli("mem", "--mode", "idle", "--stride", "64,256", "--buffer", "32M", "--point-seconds", "0.15")
    assert r.code == 0, r.err
    assert "stride 64 B" in r.out and "stride 256 B" in r.out and r.out.count("Idle latency") == 2


@pytest.mark.parametrize(
    "args, option",
    [
        (["--mode", "fast"], "--mode"),
        (["--traffic", "W4"], "--traffic"),
        (["--stride", "100"], "--stride"),
        (["--delays", "0,ten"], "--delays"),
        (["--delays", "-5"], "--delays"),
        (["--point-seconds", "0"], "--point-seconds"),
        (["--point-seconds", "soon"], "--point-seconds"),
        (["--buffer", "12Q"], "--buffer"),
        (["--buffer", "4K"], "--buffer"),
        (["--cpus", "4000"], "--cpus"),
        (["--cpus", "3-1"], "--cpus"),
        (["--threads", "4000"], "--threads"),
        (["--backend", "fast"], "--backend"),
        (["--format", "xml"], "--format"),
        (["--csv", "/nonexistent-dir/x.csv"], "--csv"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(cli, args, option):
    r = cli("mem", *args)
    one_line_error(r, 2, f"xferscope: {option}: ")


def test_backend_mlc_without_the_binary(cli, tmp_path):
    r = cli("mem", "--backend", "mlc", env={"PATH": str(tmp_path)})
    one_line_error(r, 3, "mlc", "intel.com", "--mlc")
    r = cli("mem", "--backend", "mlc", "--mlc", str(tmp_path / "nothing"))
    one_line_error(r, 3, "intel.com")


FAKE_MLC = """\
import os, sys
args = sys.argv[1:]
with open(os.environ["FAKE_MLC_LOG"], "a") as log:
    log.write(" ".join(args) + "\\n")
if os.environ.get("FAKE_MLC_FAIL"):
    print("Fatal: cannot allocate buffers")
    sys.exit(7)
print("Intel(R) Memory Latency Checker - v3.11")
print("Command line parameters: " + " ".join(args))
print("*** Unable to modify prefetchers (try executing 'modprobe msr')")
print("*** So, enabling random access for latency measurements")
kib = [int(a[2:]) for a in args if a.startswith("-b")]
if "--idle_latency" in args:
    size = kib[0] * 1024 if kib else 1 << 30  # a cache-level curve from a made-up machine: 48K, 1M, 32M
    ns = 1.2 if size <= 48 << 10 else 4.5 if size <= 1 << 20 else 18.0 if size <= 32 << 20 else 79.3
    print("Each iteration took 190.3 core clocks ( %.1f\\tns)" % ns)
elif "--max_bandwidth" in args:
    print("Measuring Maximum Memory Bandwidths for the system")
    print("ALL Reads        :\\t150000.5\\n3:1 Reads-Writes :\\t140000.0\\nStream-triad like:\\t120000.0")
elif "--latency_matrix" in args:
    print("Measuring idle latencies for random access (in ns)...\\n\\t\\tNuma node\\nNuma node\\t     0\\n       0\\t  80.1")
elif "--bandwidth_matrix" in args:
    print("Measuring Memory Bandwidths between nodes within system\\nUsing Read-only traffic type")
    print("\\t\\tNuma node\\nNuma node\\t     0\\n       0\\t99000.5")
else:
    delays = [0, 2, 8, 15, 50, 100, 200, 300, 400, 500, 700, 1000, 1300, 1700, 2500, 3500, 5000, 9000, 20000]
    for a in args:
        if a.startswith("-d"):
            delays = [int(a[2:])]
        if a.startswith("-g"):
            delays = [int(x) for x in open(a[2:]).read().split()]
    print("Measuring Loaded Latencies for the system")
    print("Inject\\tLatency\\tBandwidth\\nDelay\\t(ns)\\tMB/sec\\n==========================")
    for d in delays:
        print(" %05d\\t%.2f\\t %.1f" % (d, 80 + 20000.0 / (d + 100), 150000.0 / (1 + d / 100.0)), flush=True)
"""


@pytest.fixture
def fake_mlc(tmp_path):
    path = tmp_path / "mlc"
    path.write_text(f"#!{sys.executable}\n" + FAKE_MLC)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    log = tmp_path / "mlc.log"
    return path, log


def test_backend_mlc_runs_the_binary_and_parses_it(cli, fake_mlc, tmp_path):
    path, log = fake_mlc
    out = tmp_path / "m.csv"
    r = cli(
        "mem",
        "--backend",
        "mlc",
        "--mlc",
        str(path),
        "--traffic",
        "W6,W8",
        "--stride",
        "256",
        "--delays",
        "0,100,1000",
        "--point-seconds",
        "1",
        "--cpus",
        "1",
        "--csv",
        str(out),
        env={"FAKE_MLC_LOG": str(log)},
    )
    assert r.code == 0, r.err
    calls = log.read_text().splitlines()
    assert calls[0] == "--idle_latency -l256"
    assert calls[1].startswith("--loaded_latency -W6 -l256 -t1 -g") and calls[1].endswith(" -k1")
    assert calls[2].startswith("--loaded_latency -W8 -l256 -t1 -g")
    with open(out) as fh:
        rows = list(csv.reader(fh))
    assert rows[1] == ["", "79.30", "", "", "", "idle", "256", "mlc", "mlc random", "", "", ""]
    assert rows[2:5] == [
        ["0", "280.00", "150000.0", "", "", "W6", "256", "mlc", "mlc random", "", "", ""],
        ["100", "180.00", "75000.0", "", "", "W6", "256", "mlc", "mlc random", "", "", ""],
        ["1000", "98.18", "13636.4", "", "", "W6", "256", "mlc", "mlc random", "", "", ""],
    ]
    assert [row[5] for row in rows[5:]] == ["W8"] * 3
    assert "warning: mlc: Unable to modify prefetchers" in r.err


def test_backend_mlc_peak_and_failure(cli, fake_mlc):
    path, log = fake_mlc
    r = cli(
        "mem",
        "--backend",
        "mlc",
        "--mlc",
        str(path),
        "--mode",
        "peak",
        "--traffic",
        "R,W10",
        "--format",
        "json",
        env={"FAKE_MLC_LOG": str(log)},
    )
    assert r.code == 0, r.err
    assert [(p["traffic"], p["bandwidth_mb_s"]) for p in json.loads(r.out)["points"]] == [
        ("R", 150000.5),
        ("W10", 120000.0),
    ]
    r = cli(
        "mem",
        "--backend",
        "mlc",
        "--mlc",
        str(path),
        "--mode",
        "idle",
        env={"FAKE_MLC_LOG": str(log), "FAKE_MLC_FAIL": "1"},
    )
    one_line_error(r, 1, "mlc exited with status 7", "cannot allocate")


def test_ctrl_c_stops_the_sweep_and_prints_what_was_measured(two_cpus, tmp_path):
    out = tmp_path / "partial.json"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "xferscope.cli",
            "mem",
            "--traffic",
            "R",
            "--delays",
            "0,0,0,0,0,0,0,0,0,0",
            "--point-seconds",
            "1",
            *SMALL,
            "--json",
            str(out),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    import psutil

    # the sweep's process: its two idle points (1 s each on one thread) come first, then ten loaded points (two
    # threads); past 3 CPU-s (its set-up included, 0.5 s and more on a loaded machine) the first idle point is in
    # for sure, and the sweep is far from its end (22 CPU-s)
    def sweep_cpu_s() -> float:
        total = 0.0
        for child in psutil.Process(proc.pid).children(recursive=True):
            with contextlib.suppress(psutil.Error):
                if "memory.runner:serve" in " ".join(child.cmdline()):
                    times = child.cpu_times()
                    total += times.user + times.system
        return total

    deadline = time.monotonic() + 60
    while sweep_cpu_s() < 3.0 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert proc.poll() is None
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr
    assert "Idle latency" in stdout and "Interrupted" in stdout
    data = json.loads(out.read_text())
    assert data["cancelled"] is True and 1 <= len(data["points"]) < 12


def test_the_command_module_imports_light():
    code = (
        "import sys, xferscope.commands.mem; "
        "heavy = [m for m in ('textual', 'xferscope._memcore', 'xferscope.memory.sweep') if m in sys.modules]; "
        "print(heavy)"
    )
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.strip() == "[]"


def test_async_stream_and_cancel(two_cpus):
    spec = MemSpec(traffic=("W5",), delays=(0, 0, 0, 0, 0, 0), point_seconds=0.5, buffer_bytes=16 << 20, threads=1)
    sweep = MemSweepRun(spec)

    async def consume():
        got = []
        async for point in sweep:
            got.append(point)
            if len(got) == 3:
                sweep.cancel()
        return got

    got = asyncio.run(consume())
    assert [p.traffic for p in got] == [IDLE, IDLE, "W5"]  # cancelled after the third point of six
    assert sweep.result.cancelled and sweep.result.points == got


def test_blocking_stream_yields_points_as_they_come(two_cpus):
    sweep = MemSweepRun(MemSpec(traffic=("R",), delays=(0, 1000), point_seconds=0.3, buffer_bytes=16 << 20, threads=1))
    t0, stamps = time.monotonic(), []
    for _ in sweep:
        stamps.append(time.monotonic() - t0)
    assert len(stamps) == 4  # idle at the chosen locality and over the whole buffer, then two delays
    assert all(b - a > 0.25 for a, b in itertools.pairwise(stamps)), "one point at a time, not all at the end"
    with pytest.raises(RuntimeError):
        next(iter(sweep))


def point(delay, lat, bw, traffic="R"):
    return MemPoint(
        delay=delay, latency_ns=lat, latency_min_ns=lat, latency_max_ns=lat, bandwidth_mb_s=bw, read_mb_s=bw,
        write_mb_s=0.0, traffic=traffic, stride=64, backend="builtin",
    )  # fmt: skip


def test_sanity_warnings():
    idle = MemPoint(latency_ns=250.0, traffic=IDLE, stride=64, backend="builtin")
    curve = [point(0, 260, 1000), point(100, 259, 900), point(1000, 258, 1200)]
    text = "\n".join(sanity_warnings([idle, *curve]))
    assert "outside the 60-200 ns" in text
    assert "below 1.3x idle" in text
    assert "bandwidth rises as delay rises (100->1000)" in text
    clean = [
        MemPoint(latency_ns=90.0, traffic=IDLE, stride=64, backend="builtin"),
        point(0, 200, 9000),
        point(100, 120, 5000),
        point(20000, 91, 100),
    ]
    assert sanity_warnings(clean) == []
    far = [clean[0], point(0, 200, 9000), point(20000, 99, 100)]
    assert "more than 5% away from idle" in sanity_warnings(far)[0]


class _Starved:
    """A sweep's session whose latency thread gets no CPU in its first ``starved`` measurements, then runs."""

    def __init__(self, starved: int):
        self.starved, self.calls = starved, 0

    def measure(self, *args, **kwargs) -> dict:
        self.calls += 1
        progress = 0 if self.calls <= self.starved else 1000
        return {"cancelled": False, "windows": [(0.02, progress, 0)] * 3}


def _short_point_sweep() -> MemSweepRun:
    return MemSweepRun(MemSpec(traffic=("R",), delays=(0,), point_seconds=0.05, buffer_bytes=2 << 20, threads=1))


def test_a_short_points_thread_that_misses_its_windows_for_a_moment_is_waited_for():
    """A 0.05 s point is 0.0625 s a try: on a busy machine its latency thread may not run for ten of them (0.6 s);
    the point is measured once it does, not the sweep failed."""
    assert _short_point_sweep()._measure(_Starved(10), "R", 0, loads=False, chase=True) == [(0.02, 1000, 0)] * 3


class _Seldom(_Starved):
    """A session whose threads make progress in one window of three for the first ``starved`` measurements."""

    def measure(self, *args, **kwargs) -> dict:
        self.calls += 1
        if self.calls <= self.starved:
            return {"cancelled": False, "windows": [(0.02, 1000, 1000), (0.02, 0, 0), (0.02, 0, 0)]}
        return {"cancelled": False, "windows": [(0.02, 1000, 1000)] * 3}


@pytest.mark.parametrize(("chase", "loads"), [(True, False), (False, True)])
def test_threads_that_ran_in_too_few_windows_for_a_median_are_measured_again(chase, loads):
    """A busy 2-CPU machine: the load threads ran in one window of three, whose median is then 0 MB/s, a figure of
    the threads off their CPUs, not of memory. The point is measured again until they ran in most windows."""
    session = _Seldom(2)
    assert _short_point_sweep()._measure(session, "R", 0, loads=loads, chase=chase) == [(0.02, 1000, 1000)] * 3
    assert session.calls == 3


def test_a_thread_that_never_runs_fails_the_sweep_saying_why():
    from xferscope.errors import RunFailed
    from xferscope.memory.sweep import PATIENCE_S

    sweep, session = _short_point_sweep(), _Starved(10**6)
    with pytest.raises(
        RunFailed, match=r"the latency thread made progress in at most half of their windows in \d+ tries"
    ):
        sweep._measure(session, "R", 0, loads=False, chase=True)
    plan = sweep._plan
    assert session.calls * (plan.warmup_s + plan.window_s * plan.windows) >= PATIENCE_S
