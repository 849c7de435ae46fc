"""One benchmark across MPI ranks (`run --mpi`, `compare --mpi`).

The tests that launch ranks need `mpirun` and mpi4py and are skipped, with the
reason, where either is missing. They run 2 to 4 ranks on this one machine
(oversubscribed), each rank on its own scratch directory (``--dir D/{rank}``).
The aggregation itself is also checked without MPI, on synthetic records from
ranks on two hosts.
"""

from __future__ import annotations

import csv
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable

import psutil
import pytest
from conftest import histogram_of, no_files_left

from xferscope.cluster.aggregate import LiveAggregate
from xferscope.cluster.layout import expand, layout_from, prepare_waves, rank_spec, share
from xferscope.cluster.merge import cluster_result
from xferscope.cluster.records import RankRecord
from xferscope.compare.verdict import RULE, WORDS
from xferscope.errors import SpecError
from xferscope.export import load_results
from xferscope.spec import RunSpec
from xferscope.stats import Histogram

MPIRUN = shutil.which("mpirun")
HAVE_MPI4PY = importlib.util.find_spec("mpi4py") is not None
MISSING = [
    what
    for what, absent in (
        ("mpirun (apt-get install openmpi-bin libopenmpi-dev)", not MPIRUN),
        ("mpi4py (pip install 'xferscope[mpi]')", not HAVE_MPI4PY),
    )
    if absent
]
needs_mpi = pytest.mark.skipif(bool(MISSING), reason="needs " + " and ".join(MISSING))


def _mpirun_flags() -> list[str]:
    out = subprocess.run([MPIRUN, "--version"], capture_output=True, text=True).stdout
    if "Open MPI" not in out:
        return []
    # TCP on loopback rather than shared memory: a job the tests abort on purpose leaves no segments in /dev/shm
    flags = ["--oversubscribe", "--mca", "btl", "self,tcp", "--mca", "btl_tcp_if_include", "lo"]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        flags.append("--allow-run-as-root")
    return flags


# shared memory without cross-process single copy, which some containers forbid
MPI_ENV = {**os.environ, "OMPI_MCA_btl_vader_single_copy_mechanism": "none"}
# for the Ctrl-C tests: on a signal, mpirun sends the ranks SIGTERM a timeout later and SIGKILL a timeout
# after that; the default 1 s is less than a loaded machine needs to save and remove the files
MPI_CTRL_C_ENV = {**MPI_ENV, "OMPI_MCA_odls_base_sigkill_timeout": "3"}
# the CPU machine's tests, the same on a GPU machine: every rank sees no GPU (the workloads' data in host memory)
NO_GPU = {"XFERSCOPE_NO_GPU": "1"}


def mpirun_cmd(ranks: int, *args: str) -> list[str]:
    """`mpirun -np RANKS python -m xferscope.cli ARGS`, as a user would start it."""
    return [MPIRUN, *_mpirun_flags(), "-np", str(ranks), sys.executable, "-m", "xferscope.cli", *args]


def engines(proc: subprocess.Popen, serving: str) -> dict[int, psutil.Process]:
    """Each rank's engine process (its command line names ``serving``), by the rank's number."""
    found = {}
    for child in psutil.Process(proc.pid).children(recursive=True):
        try:
            if serving not in " ".join(child.cmdline()):
                continue
            rank = int(child.parent().environ()["OMPI_COMM_WORLD_RANK"])
        except (psutil.Error, KeyError, ValueError):
            continue
        found[rank] = child
    return found


def wait_for_engines(
    proc: subprocess.Popen, ranks: int, done: Callable[[psutil.Process], bool], serving: str
) -> dict[int, psutil.Process]:
    """Every rank's engine (its command line names ``serving``) is under way: ``done(its process)`` holds for each
    of the ``ranks``."""
    deadline = time.monotonic() + 120  # a safety net: a loaded machine starts the ranks slowly
    while True:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the ranks' engines did not get under way"
        found = engines(proc, serving)
        try:
            if len(found) == ranks and all(done(p) for p in found.values()):
                return found
        except psutil.Error:
            pass
        time.sleep(0.05)


def mpirun(
    ranks: int, *args: str, timeout: float = 90, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    """The job's output, into pipes. Plain text, checked here for every job: Open MPI gives each rank a
    pseudo-terminal for stdout, whatever mpirun's own stdout is, and a rank that took it for the user's
    terminal would print escape codes into this pipe."""
    proc = subprocess.run(
        mpirun_cmd(ranks, *args), capture_output=True, text=True, timeout=timeout, env={**MPI_ENV, **(env or {})}
    )
    assert "\x1b" not in proc.stdout + proc.stderr, f"an escape code in the job's output:\n{proc.stdout}"
    return proc


def rank_dirs(base, ranks: int, skip: int | None = None) -> str:
    for r in range(ranks):
        if r != skip:
            (base / str(r)).mkdir()
    return str(base / "{rank}")


def sparse_hist(d: dict) -> Histogram:
    return Histogram.from_sparse({int(k): v for k, v in d.items()})


# ------------------------------------------------------------------ through mpirun


@needs_mpi
@pytest.mark.parametrize("ranks", [2, 4])
def test_ranks_add_up(direct_dir, ranks):
    out_json, out_csv = direct_dir / "out.json", direct_dir / "out.csv"
    proc = mpirun(
        ranks,
        "run",
        "--mpi",
        "-T",
        "1",
        "-s",
        "8M",
        "--bs",
        "64K",
        "-w",
        "2",
        "--dir",
        rank_dirs(direct_dir, ranks),
        "--json",
        str(out_json),
        "--csv",
        str(out_csv),
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("Cluster: ") == 1  # only rank 0 prints

    [r] = load_results(str(out_json))
    cluster = r.environment["cluster"]
    rows = cluster["per_rank"]
    assert cluster["ranks"] == ranks and [row["rank"] for row in rows] == list(range(ranks))
    assert cluster["workers_total"] == 2 * ranks
    # every rank measured something, and the aggregate is the sum of what the ranks measured themselves
    assert all(row["bytes"] > 0 and row["status"] == "ok" for row in rows)
    assert r.bytes == sum(row["bytes"] for row in rows)
    assert r.ops == sum(row["ops"] for row in rows)
    assert r.bytes == sum(h.bytes for h in r.hosts) and len(r.hosts) == len(cluster["hosts"])
    assert len(r.workers) == 2 * ranks and sum(w.bytes for w in r.workers) == r.bytes

    # percentiles come from the ranks' histograms merged, not from averaged percentiles
    combined = Histogram()
    for row in rows:
        combined = combined + sparse_hist(row["latency_histogram_ns"])
    assert list(combined.counts) == list(r.histogram.counts) and combined.count == r.ops
    # a percentile is its bucket's middle, never past the latencies measured at either end
    lo, hi = r.latency_us.min * 1e3, r.latency_us.max * 1e3
    p = {k: min(max(v, lo), hi) for k, v in combined.percentiles().items()}
    ours = (r.latency_us.p50, r.latency_us.p90, r.latency_us.p99, r.latency_us.p999)
    assert ours == pytest.approx(tuple(p[q] / 1e3 for q in (50.0, 90.0, 99.0, 99.9)))

    # elbencho's first-done / last-done over all ranks
    assert r.first_done and r.last_done
    assert r.first_done.seconds == min(row["first_done_s"] for row in rows)
    assert r.last_done.seconds == max(row["seconds"] for row in rows) and r.last_done.bytes == r.bytes

    # the live series adds up to the final figures; CSV rows for the whole job and for each host
    data = json.loads(out_json.read_text())
    assert sum(s["bytes"] for s in data["samples"]) == r.bytes
    assert sum(s["bytes"] for s in data["hosts"][0]["samples"]) == r.hosts[0].bytes
    with open(out_csv) as fh:
        series = list(csv.DictReader(fh))
    assert {row["host"] for row in series} == {"all", *cluster["hosts"]}
    assert sum(int(row["bytes"]) for row in series if row["host"] == "all") == r.bytes
    assert {row["ranks"] for row in series if row["host"] == "all"} == {str(ranks)}
    # each rank removed the scratch files it created
    assert all(not os.listdir(direct_dir / str(i)) for i in range(ranks))


@needs_mpi
def test_rank_with_bad_dir_stops_every_rank(direct_dir):
    proc = mpirun(3, "run", "--mpi", "-T", "5", "-s", "8M", "--dir", rank_dirs(direct_dir, 3, skip=1))
    assert proc.returncode == 2, proc.stderr  # the failing rank's own error: bad input
    lines = [line for line in proc.stderr.splitlines() if line.startswith("xferscope:")]
    assert len(lines) == 1, proc.stderr  # one line, from rank 0
    assert "rank 1 on " in lines[0] and "does not exist" in lines[0]
    assert "Traceback" not in proc.stderr
    assert not os.listdir(direct_dir / "0") and not os.listdir(direct_dir / "2")


@needs_mpi
def test_rank_failing_mid_run_stops_the_others(direct_dir, cli):
    """Rank 2's scratch file is corrupted: --verify fails there, and ranks 0 and 1 stop long before -T."""
    dirs = rank_dirs(direct_dir, 3)
    made = cli("run", "-T", "0.2", "-s", "8M", "--dir", str(direct_dir / "2"), "--keep")
    assert made.code == 0, made.err
    [scratch] = [p for p in (direct_dir / "2").iterdir() if p.suffix == ".dat"]
    with open(scratch, "r+b") as fh:
        fh.write(os.urandom(4096))
    out_json = direct_dir / "out.json"
    proc = mpirun(3, "run", "--mpi", "-T", "30", "-s", "8M", "--verify", "--dir", dirs, "--json", str(out_json))
    assert proc.returncode == 1, proc.stderr
    assert "xferscope: rank 2 on " in proc.stderr and "verification failed" in proc.stderr
    [r] = load_results(str(out_json))
    assert r.status == "failed" and r.error.startswith("rank 2 on ")
    rows = {row["rank"]: row for row in r.environment["cluster"]["per_rank"]}
    assert rows[2]["status"] == "failed"
    assert all(rows[i]["status"] == "interrupted" and rows[i]["seconds"] < 30 for i in (0, 1))


@needs_mpi
def test_ctrl_c_keeps_what_every_rank_measured(direct_dir):
    ranks, out_json = 2, direct_dir / "out.json"
    cmd = mpirun_cmd(
        ranks, "run", "--mpi", "-T", "30", "-s", "8M", "--dir", rank_dirs(direct_dir, ranks), "--json", str(out_json)
    )
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=MPI_CTRL_C_ENV)
    try:
        # every rank's engine has read its file once from storage (O_DIRECT): its timed region is under way
        wait_for_engines(proc, ranks, lambda p: p.io_counters().read_bytes >= 8 << 20, "engine_process:serve")
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=30)  # every rank ends
    finally:
        if proc.poll() is None:
            proc.kill()
    [r] = load_results(str(out_json))  # rank 0 saved the figures of every rank
    rows = r.environment["cluster"]["per_rank"]
    assert r.status == "interrupted" and r.seconds < 30
    assert all(row["bytes"] > 0 for row in rows) and r.bytes == sum(row["bytes"] for row in rows)
    assert no_files_left(direct_dir, pattern="*.dat")  # by the ranks, or by a janitor where mpirun killed one first


@needs_mpi
def test_compare_across_ranks(direct_dir):
    out_json = direct_dir / "out.json"
    proc = mpirun(
        2,
        "compare",
        "--mpi",
        "--paths",
        "host,host",
        "-T",
        "0.3",
        "-s",
        "8M",
        "--bs",
        "64K",
        "--rounds",
        "2",
        "--dir",
        rank_dirs(direct_dir, 2),
        "--json",
        str(out_json),
    )
    assert proc.returncode == 0, proc.stderr
    results = load_results(str(out_json))
    assert len(results) == 4  # two paths, two rounds, each run across both ranks
    for r in results:
        rows = r.environment["cluster"]["per_rank"]
        assert len(rows) == 2 and r.bytes == sum(row["bytes"] for row in rows) > 0
    comp = json.loads(out_json.read_text())["comparison"]
    assert comp["order"] == [["host#1", "host#2"], ["host#2", "host#1"]]
    assert comp["paths"][1]["verdict"] in WORDS and len(comp["paths"][1]["rounds"]) == 2
    assert "Cluster: 2 ranks" in proc.stdout and "host#2" in proc.stdout and RULE in proc.stdout


def test_mpi_without_mpi4py_says_how_to_get_it(tmp_path, cli):
    blocker = tmp_path / "mpi4py"
    blocker.mkdir()
    (blocker / "__init__.py").write_text("raise ImportError('mpi4py is blocked for this test')\n")
    path = f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"
    res = cli("run", "--mpi", "-T", "1", env={"PYTHONPATH": path})
    assert res.code == 3
    assert "pip install 'xferscope[mpi]'" in res.err and "Traceback" not in res.err


# ------------------------------------------------------------------ without MPI


def test_ranks_on_a_host_share_its_gpus_and_cpus():
    rows = [("a", (0, 1, 2, 3))] * 2 + [("b", (0, 1, 2, 3))] * 3
    spec = RunSpec(path="bounce", directory="/scratch/{host}/{rank}", gpus=[0])
    specs = [rank_spec(spec, layout_from(rows, me), gpu_given=False, gpus_on_host=2) for me in range(5)]
    assert [s.gpus for s in specs] == [[0], [1], [0], [1], [0]]  # local_rank % gpus_on_host
    assert [s.cpus for s in specs] == [[0, 1], [2, 3], [0, 1], [2], [3]]
    assert specs[3].directory == "/scratch/b/3"
    assert len({s.seed for s in specs}) == 5
    given = [
        rank_spec(spec.replace(gpus=[4, 5, 6, 7]), layout_from(rows, me), gpu_given=True, gpus_on_host=8)
        for me in (0, 1)
    ]
    assert [s.gpus for s in given] == [[4, 5], [6, 7]]
    # a launcher that bound each rank to its own CPUs is left alone
    bound = [("a", (0,)), ("a", (1,))]
    assert rank_spec(RunSpec(), layout_from(bound, 1), gpu_given=False, gpus_on_host=0).cpus is None
    assert share([0, 1, 2], 4, 5) == [1]


def test_placeholders_and_prepare_waves():
    layout = layout_from([("a", (0,))] * 2 + [("b", (0,))] * 2, 0)
    with pytest.raises(SpecError, match="unknown placeholder"):
        expand("/data/{node}", "dir", layout.mine)
    assert prepare_waves(RunSpec(directory="/d/{rank}"), layout) == [{0, 1, 2, 3}]
    assert prepare_waves(RunSpec(file="/shared/f.dat"), layout) == [{0}, {2}, {1, 3}]


def _record(rank, t, nbytes, lat_ns, first=None, status="running", workers=1):
    h = histogram_of([lat_ns] * (nbytes // 4096))
    return RankRecord(
        rank=rank,
        seq=0,
        t=t,
        read_bytes=nbytes,
        write_bytes=0,
        read_ops=nbytes // 4096,
        write_ops=0,
        read_lat_ns=lat_ns * (nbytes // 4096),
        write_lat_ns=0,
        hist_read=h.to_sparse(),
        hist_write={},
        lat_min_ns=lat_ns,
        lat_max_ns=lat_ns,
        first=first,
        done=0,
        worker_bytes=(0,) * workers,
        error=None,
        cpu=(10.0, 5.0, 20.0, 10.0),
        cores=(),
        gpu=(),
        status=status,
    )


#: the synthetic ranks' latencies, in ns
LATENCY = {0: 100_000, 1: 200_000, 2: 900_000}


def three_ranks_on_two_hosts():
    """A run over three ranks on hosts "fast" (ranks 0 and 1) and "slow" (rank 2), fed synthetic records (none
    final: a partial result), and what its ranks measured."""
    layout = layout_from([("fast", (0,)), ("fast", (0,)), ("slow", (0,))], 0)
    live = LiveAggregate(layout)
    for t in (1.0, 2.0):
        for rank in range(3):
            nbytes = (4 if rank < 2 else 1) * 4096 * 100
            # rank 0's first worker finishes at 1.5 s: the others' totals are interpolated there
            first = (1_500_000_000, 4096 * 600, 600) if rank == 0 and t == 2.0 else None
            live.add(_record(rank, t, nbytes, LATENCY[rank], first), now=t)
        live.emit(t)
    spec = RunSpec(directory="/d/{rank}")
    return cluster_result(spec, live, {"launcher": "test", "mpi": "test"}), live


def test_aggregation_merges_ranks_and_hosts():
    """Three ranks on two hosts, fed synthetic records: sums, merged percentiles, first-done, slowest host."""
    r, live = three_ranks_on_two_hosts()
    lat = LATENCY
    per_rank = [st.bytes for st in live.states]
    assert r.bytes == sum(per_rank) == sum(s.bytes for s in r.samples)
    assert [h.environment["host"] for h in r.hosts] == ["fast", "slow"]
    assert [h.bytes for h in r.hosts] == [per_rank[0] + per_rank[1], per_rank[2]]
    assert r.environment["cluster"]["slowest_host"] == "slow"
    combined = histogram_of([lat[0]] * 800 + [lat[1]] * 800 + [lat[2]] * 200)
    p = combined.percentiles()
    assert (r.latency_us.p50, r.latency_us.p99) == (p[50.0] / 1e3, p[99.0] / 1e3)
    assert r.latency_us.mean == pytest.approx((800 * lat[0] + 800 * lat[1] + 200 * lat[2]) / 1800 / 1e3)
    # first done at 1.5 s: rank 0's own totals then, ranks 1 and 2 halfway between their 1 s and 2 s records
    assert r.first_done.seconds == 1.5
    assert r.first_done.bytes == 4096 * 600 + 4096 * 600 + 4096 * 150
    assert r.cpu["usr_pct"] == 30.0 and r.status == "interrupted"  # no final records: a partial result
