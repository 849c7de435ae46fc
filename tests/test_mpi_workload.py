"""Workloads across the ranks of an MPI job (`workload train --mpi`).

The tests that launch ranks need `mpirun` and mpi4py and are skipped, with the reason, where either is missing;
they run up to 4 ranks on this one machine (oversubscribed), the host path with `--compute sleep`. The sharding
and the job's figures are also checked without MPI.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import math
import signal
import subprocess
from collections.abc import Callable

import psutil
import pytest
from conftest import no_files_left
from test_mpi import MPI_CTRL_C_ENV, MPI_ENV, mpirun, mpirun_cmd, needs_mpi, wait_for_engines

from xferscope.workloads.common.au import Step
from xferscope.workloads.common.data_files import SampleRef
from xferscope.workloads.common.job_ranks import JobFacts
from xferscope.workloads.train.accelerators import BatchPlan
from xferscope.workloads.train.train_cluster import TrainRank, cluster_result, lowest_host_au
from xferscope.workloads.train.train_data import TrainData
from xferscope.workloads.train.train_record import AcceleratorRun, TrainResult
from xferscope.workloads.train.train_spec import train_spec

SMALL = [
    "--path",
    "host",
    "--compute",
    "sleep",
    "--sample-size",
    "256K",
    "--sample-sd",
    "0",
    "--files",
    "64",
    "--batch",
    "2",
    "--read-threads",
    "1",
    "--computation-time",
    "0.02",
]


def train_args(directory, *more: str) -> list[str]:
    return ["workload", "train", "unet3d", "--mpi", *SMALL, "--dir", str(directory), *more]


def wait_for_reads(proc: subprocess.Popen, ranks: int, nbytes: int = 4 << 20) -> dict[int, psutil.Process]:
    """Every rank's engine has read ``nbytes`` of the data set from storage (its timed region is under way)."""
    return wait_for_engines(proc, ranks, lambda p: p.io_counters().read_bytes >= nbytes, "train_process:serve")


def one_line_from_two_commands(one: list[str], other: list[str]) -> str:
    """Rank 0 started with ``one``, rank 1 with ``other``: the one line the job says, having exited 2."""
    cmd = mpirun_cmd(1, *one)
    python_and_cli = cmd[cmd.index("-np") + 2 : cmd.index("workload")]
    proc = subprocess.run(
        [*cmd, ":", "-np", "1", *python_and_cli, *other], capture_output=True, text=True, timeout=90, env=MPI_ENV
    )
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.startswith("xferscope:")]
    assert len(lines) == 1, proc.stderr
    return lines[0]


def ctrl_c(proc: subprocess.Popen, under_way: Callable[[subprocess.Popen, int], object], ranks: int = 2) -> None:
    """Ctrl-C on the launcher once both ranks' engines are ``under_way``."""
    under_way(proc, ranks)
    proc.send_signal(signal.SIGINT)


def while_running(
    cmd: list[str], env: dict[str, str], act: Callable[[subprocess.Popen], object], timeout: float = 90
) -> tuple[int, str]:
    """``cmd`` started, ``act(its process)`` while it runs, then its exit code and stderr (killed if it is left)."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        act(proc)
        _, err = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
    return proc.returncode, err


# ------------------------------------------------------------------ through mpirun


@needs_mpi
def test_four_ranks_add_up_to_the_job(tmp_path, cli):
    out = tmp_path / "job.json"
    data = tmp_path / "data"
    data.mkdir()
    table = tmp_path / "job.csv"
    proc = mpirun(4, *train_args(data, "-a", "2", "--steps", "12", "--json", str(out), "--csv", str(table)))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("workload train unet3d") == 1  # only rank 0 prints
    r = json.loads(out.read_text())
    c = r["cluster"]
    assert r["spec"]["accelerators"] == 8 and c["ranks"] == 4
    assert sorted(a["index"] for a in r["accelerators"]) == list(range(8))
    ranks = c["per_rank"]
    assert [k["rank"] for k in ranks] == [0, 1, 2, 3]
    assert [k["first_accelerator"] for k in ranks] == [0, 2, 4, 6]
    assert all(k["status"] == "ok" and k["au"] is not None for k in ranks)
    # the job's figures are every rank's own together: sums, and AU the mean (each rank has 2 accelerators)
    assert r["samples_per_s"] == pytest.approx(sum(k["samples_per_s"] for k in ranks))
    assert r["mb_per_s"] == pytest.approx(sum(k["mb_per_s"] for k in ranks))
    assert r["bytes_read"] == sum(k["bytes_read"] for k in ranks)
    assert r["au"] == pytest.approx(sum(k["au"] for k in ranks) / 4)
    # every rank took its 12 steps of 2 samples: together, 12 steps of every accelerator, no sample twice a step
    assert all(a["steps"] == 12 for a in r["accelerators"])
    [host] = c["hosts"]
    assert host["ranks"] == [0, 1, 2, 3] and host["accelerators"] == 8 and host["au"] == pytest.approx(r["au"])
    assert host["memory_bytes"] > 0 and c["clients_memory_bytes"] == host["memory_bytes"]
    assert c["data_per_host"] is False  # one set, made by rank 0, read by all
    assert all(k["gpus"] == [] for k in ranks)  # host path, compute sleep: no GPU
    assert list(data.iterdir()) == []  # the set is gone
    # the CSV: a row an accelerator (its host named), the job's ("all"), then a row a host
    rows = list(csv.DictReader(io.StringIO(table.read_text())))
    assert [row["host"] for row in rows] == [host["host"]] * 8 + ["all", host["host"]]
    assert rows[-1]["accelerators"] == "8" and float(rows[-1]["au"]) == pytest.approx(host["au"])
    # saved, the job compares as its aggregate plus one row per host
    shown = cli("workload", "compare", str(out), "--format", "json")
    assert shown.code == 0, shown.err
    entries = json.loads(shown.out)["entries"]
    assert [e["label"] for e in entries] == ["job.json", f"job.json@{host['host']}"]
    assert entries[0]["source"] == "xferscope, 4 ranks" and entries[1]["source"] == "xferscope, 4 of 4 ranks"


@needs_mpi
def test_a_directory_of_each_rank_gets_a_set_of_its_own(tmp_path):
    out = tmp_path / "job.json"
    for r in range(2):
        (tmp_path / str(r)).mkdir()
    proc = mpirun(2, *train_args(tmp_path / "{rank}", "--steps", "4", "--keep", "--json", str(out)))
    assert proc.returncode == 0, proc.stderr
    r = json.loads(out.read_text())
    assert r["cluster"]["data_per_host"] is True
    # --keep: each rank's set stays in its own directory, made there by that rank
    made = [[p.name for p in (tmp_path / str(k)).iterdir()] for k in range(2)]
    assert all(len(m) == 1 and m[0].startswith("xferscope-train-unet3d-") for m in made), made
    assert r["data"]["where"].startswith(str(tmp_path / "0"))


@needs_mpi
def test_a_rank_whose_engine_dies_stops_the_others_and_is_marked(tmp_path):
    """The others were to train for 10 minutes: they stop at the word, what they read kept (the job's wait runs
    out long before their end if they do not)."""
    out = tmp_path / "job.json"
    cmd = mpirun_cmd(3, *train_args(tmp_path, "-T", "600", "--json", str(out)))
    code, err = while_running(cmd, MPI_ENV, lambda proc: wait_for_reads(proc, 3)[1].kill())
    assert code == 1, err
    lines = [line for line in err.splitlines() if line.startswith("xferscope:")]
    assert len(lines) == 1 and lines[0].startswith("xferscope: rank 1 on "), err
    r = json.loads(out.read_text())
    assert r["status"] == "failed" and r["error"].startswith("rank 1 on ") and "died" in r["error"]
    assert r["error"].endswith("ranks 0, 2 stopped with it"), r["error"]
    ranks = {k["rank"]: k for k in r["cluster"]["per_rank"]}
    assert ranks[1]["status"] == "failed"
    assert all(ranks[i]["status"] == "interrupted" and ranks[i]["bytes_read"] > 0 for i in (0, 2))
    assert no_files_left(tmp_path)  # removed by the ranks, or by a janitor where the launcher killed one first


@needs_mpi
def test_ctrl_c_keeps_what_every_rank_measured(tmp_path):
    out = tmp_path / "job.json"
    cmd = mpirun_cmd(2, *train_args(tmp_path, "-T", "60", "--json", str(out)))
    _, err = while_running(cmd, MPI_CTRL_C_ENV, lambda proc: ctrl_c(proc, wait_for_reads))
    r = json.loads(out.read_text())
    assert r["status"] == "interrupted", err
    assert all(k["status"] == "interrupted" and k["bytes_read"] > 0 for k in r["cluster"]["per_rank"])
    assert r["bytes_read"] == sum(k["bytes_read"] for k in r["cluster"]["per_rank"])
    assert no_files_left(tmp_path)  # removed by the ranks, or by a janitor where the launcher killed one first


@needs_mpi
def test_ranks_that_disagree_on_the_preset_get_one_line(tmp_path):
    one = [*train_args(tmp_path, "--steps", "2")]
    line = one_line_from_two_commands(one, [a if a != "unet3d" else "resnet50" for a in one])
    assert "rank 1 on " in line and "preset resnet50 but rank 0 runs preset unet3d" in line
    assert list(tmp_path.iterdir()) == []


@needs_mpi
def test_bad_input_on_every_rank_is_one_line_from_rank_0(tmp_path):
    proc = mpirun(2, *train_args(tmp_path, "--files", "0"))
    assert proc.returncode == 2, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.startswith("xferscope:")]
    assert len(lines) == 1 and "rank 0 on " in lines[0] and "files" in lines[0], proc.stderr


def test_mpi_without_a_launcher_is_one_line(tmp_path, cli):
    r = cli(*train_args(tmp_path, "--steps", "2"))
    assert r.code == 3
    assert r.err.strip().splitlines() == [r.err.strip()] and "no MPI launcher" in r.err
    assert list(tmp_path.iterdir()) == []


# ------------------------------------------------------------------ without MPI


def _data(samples: int) -> TrainData:
    return TrainData(
        root="/nowhere", files=[], samples=[SampleRef(0, i, 1) for i in range(samples)], generated=True, direct=True
    )


def test_the_ranks_shard_the_data_set_as_one_process_with_all_accelerators():
    """Rank r's accelerator a reads what accelerator r*A+a of one process with every rank's accelerators reads."""
    data = _data(97)
    whole = train_spec("unet3d", batch=3, accelerators=8, path="host")
    for epoch in (0, 1):
        expected = [BatchPlan(whole, data, i).batch(epoch * BatchPlan(whole, data, i).per_epoch + 1) for i in range(8)]
        got = []
        for rank in range(4):
            mine = dataclasses.replace(whole, accelerators=2, world_accelerators=8, first_accelerator=2 * rank)
            got += [BatchPlan(mine, data, a).batch(epoch * BatchPlan(mine, data, a).per_epoch + 1) for a in range(2)]
        assert got == expected


def _rank(rank: int, host: str, au_compute: float, status: str = "ok", error: str | None = None) -> TrainRank:
    """A rank of 2 accelerators, each 5 steps of 1 s in which it computes ``au_compute`` s."""
    spec = train_spec("unet3d", batch=2, accelerators=2, path="host", world_accelerators=8, first_accelerator=2 * rank)
    runs = [
        AcceleratorRun(
            a, None, [Step(1 - au_compute, au_compute, float(i + 1), 2, 2 << 20) for i in range(5)], 10 << 20, 0.5
        )
        for a in range(2)
    ]
    result = TrainResult.from_steps(spec, {"bytes": 100 << 30}, runs, status=status, seconds=5.0, error=error)
    return TrainRank(rank, host, result, 64 << 30, 16, detail=runs)


def test_the_job_is_every_rank_together_with_hosts_and_the_slowest_named():
    ranks = [_rank(0, "a", 0.95), _rank(1, "a", 0.93), _rank(2, "b", 0.8), _rank(3, "b", 0.82)]
    r = cluster_result(ranks[0].result.spec, ranks, JobFacts("mpirun (Open MPI)", "Open MPI v4", False))
    c = r.cluster
    assert r.status == "ok" and r.spec.accelerators == 8 and r.spec.world_accelerators == 0
    assert r.au == pytest.approx(sum(k.result.au for k in ranks) / 4)
    assert r.samples_per_s == pytest.approx(sum(k.result.samples_per_s for k in ranks))
    assert [h.host for h in c.hosts] == ["a", "b"] and c.slowest_host == "b"
    assert c.hosts[0].au == pytest.approx((ranks[0].result.au + ranks[1].result.au) / 2)
    assert c.hosts[0].passed is True and c.hosts[1].passed is False
    assert lowest_host_au(r) == pytest.approx(c.hosts[1].au)
    assert c.clients_memory_bytes == 128 << 30 and c.data_to_memory == pytest.approx(100 / 128)


def test_a_failed_rank_fails_the_job_and_keeps_the_others():
    ranks = [
        _rank(0, "a", 0.95),
        _rank(1, "a", 0.9, "failed", "the host training run's process died"),
        _rank(2, "b", 0.9),
    ]
    r = cluster_result(ranks[0].result.spec, ranks, JobFacts("srun", "MPICH", True))
    assert r.status == "failed" and r.error == "rank 1 on a: the host training run's process died"
    assert [k.status for k in r.cluster.per_rank] == ["ok", "failed", "ok"]
    assert r.bytes_read == sum(k.result.bytes_read for k in ranks)
    assert not math.isnan(lowest_host_au(r))
