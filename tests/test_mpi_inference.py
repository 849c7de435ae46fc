"""Model loads and KV-cache restores across the ranks of an MPI job (`workload load --mpi`, `workload kvcache
--mpi`).

The tests that launch ranks need `mpirun` and mpi4py and are skipped, with the reason, where either is missing;
they run up to 4 ranks on this one machine (oversubscribed), seeing no GPU (``XFERSCOPE_NO_GPU``, also on a GPU
machine): the host path into host memory.
"""

from __future__ import annotations

import csv
import io
import json
import statistics

import pytest
from test_mpi import MPI_CTRL_C_ENV, MPI_ENV, NO_GPU, mpirun, mpirun_cmd, needs_mpi, wait_for_engines
from test_mpi_workload import ctrl_c, no_files_left, while_running

SMALL_MODEL = ["--model", "llama3.2-1b", "--layers", "2", "--dtype", "fp8", "--path", "host"]  # one shard of 367 MiB
KV = ["--model", "llama3.2-1b", "--path", "host", "--prompt-tokens", "1024-4096", "--cache-chunks", "64"]


# ------------------------------------------------------------------ load


@needs_mpi
def test_every_rank_loads_its_copy_and_the_job_takes_the_slowest(tmp_path, cli):
    out, table = tmp_path / "job.json", tmp_path / "job.csv"
    proc = mpirun(
        3, "workload", "load", *SMALL_MODEL, "--mpi", "--verify", "--dir", str(tmp_path), "--json", str(out),
        "--csv", str(table), env=NO_GPU,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("workload load llama3.2-1b") == 1  # only rank 0 prints
    r = json.loads(out.read_text())
    c = r["cluster"]
    ranks = c["per_rank"]
    assert r["status"] == "ok" and c["ranks"] == 3 and c["share"] == "copy" and c["data_per_host"] is False
    # each rank its own copy of the whole model; the job's time the slowest rank's, its GB/s every byte over it
    assert all(k["bytes"] == r["data"]["bytes"] and k["status"] == "ok" for k in ranks)
    assert r["bytes_read"] == sum(k["bytes"] for k in ranks)
    assert r["load_s"] == pytest.approx(max(k["load_s"] for k in ranks))
    assert r["first_byte_s"] == pytest.approx(min(k["first_byte_s"] for k in ranks))
    assert r["gb_per_s"] == pytest.approx(r["bytes_read"] / r["load_s"] / 1e9)
    assert r["verified"]["differ"] == 0 and r["verified"]["pieces"] == r["pieces"]
    [host] = c["hosts"]
    assert host["ranks"] == [0, 1, 2] and host["load_s"] == pytest.approx(r["load_s"])
    rows = list(csv.DictReader(io.StringIO(table.read_text())))
    assert [(row["gpu"], row["host"]) for row in rows[:2]] == [("all", "all"), ("all", host["host"])]
    assert no_files_left(tmp_path)
    shown = cli("workload", "compare", str(out), "--format", "json")  # saved: the job, a row a host beside it
    assert shown.code == 0, shown.err
    assert sorted(e["label"] for e in json.loads(shown.out)["entries"]) == ["job.json", f"job.json@{host['host']}"]


@needs_mpi
def test_tensor_parallel_ranks_each_load_their_share(tmp_path):
    out = tmp_path / "job.json"
    for rank in range(2):
        (tmp_path / str(rank)).mkdir()
    args = [*SMALL_MODEL, "--mpi", "--share", "tp", "--verify", "--dir", str(tmp_path / "{rank}"), "--json", str(out)]
    proc = mpirun(2, "workload", "load", *args, env=NO_GPU)
    assert proc.returncode == 0, proc.stderr
    r = json.loads(out.read_text())
    c = r["cluster"]
    assert c["share"] == "tp" and c["data_per_host"] is True  # a directory each: a set each
    # the matrices' rows split over the two ranks, the norms whole on each: a little over half each
    whole = r["data"]["bytes"]
    assert all(whole / 2 < k["bytes"] < whole * 0.51 for k in c["per_rank"])
    assert r["verified"]["differ"] == 0
    assert no_files_left(tmp_path)


def test_share_without_mpi_is_one_line(cli):
    r = cli("workload", "load", *SMALL_MODEL, "--share", "tp")
    assert r.code == 2 and "--mpi" in r.err and r.err.strip().count("\n") == 0


# ------------------------------------------------------------------ kvcache


@needs_mpi
def test_the_requests_spread_over_the_ranks_and_their_times_pool(tmp_path):
    out, table = tmp_path / "job.json", tmp_path / "job.csv"
    args = [*KV, "--mpi", "--requests", "30", "--dir", str(tmp_path), "--json", str(out), "--csv", str(table)]
    proc = mpirun(3, "workload", "kvcache", *args, env=NO_GPU)
    assert proc.returncode == 0, proc.stderr
    r = json.loads(out.read_text())
    c = r["cluster"]
    ranks = c["per_rank"]
    # the job's 30 requests, 10 a rank, each once
    assert [k["requests"] for k in ranks] == [10, 10, 10] and r["requests"] == 30
    assert sorted(q["number"] for q in r["request_log"]) == list(range(30))
    times = [q["seconds"] for q in r["request_log"] if q["hits"]]
    # the percentiles over every rank's requests together (interpolated between order statistics)
    assert r["restore_p50_s"] == pytest.approx(statistics.median(times))
    assert r["restore_p99_s"] == pytest.approx(statistics.quantiles(times, n=100, method="inclusive")[98])
    assert r["gb_per_s"] == pytest.approx(r["bytes_read"] / r["seconds"] / 1e9)
    assert r["seconds"] == pytest.approx(max(k["seconds"] for k in ranks))
    [host] = c["hosts"]
    assert host["requests"] == 30 and host["restore_p99_s"] == pytest.approx(r["restore_p99_s"])
    rows = list(csv.DictReader(io.StringIO(table.read_text())))
    assert [row["host"] for row in rows[:2]] == ["all", host["host"]]
    assert no_files_left(tmp_path)


def _kv_engines_reading(proc, ranks: int):
    return wait_for_engines(proc, ranks, lambda p: p.io_counters().read_bytes >= 8 << 20, "transfer_process:serve")


@needs_mpi
def test_a_kvcache_rank_whose_engine_dies_stops_the_others_and_is_marked(tmp_path):
    """Rank 0 was to restore for 10 minutes: it stops at the word, its requests kept."""
    out = tmp_path / "job.json"
    cmd = mpirun_cmd(2, "workload", "kvcache", *KV, "--mpi", "-T", "600", "--dir", str(tmp_path), "--json", str(out))
    code, err = while_running(cmd, {**MPI_ENV, **NO_GPU}, lambda proc: _kv_engines_reading(proc, 2)[1].kill())
    assert code == 1, err
    r = json.loads(out.read_text())
    assert r["status"] == "failed" and r["error"].startswith("rank 1 on ")
    assert r["error"].endswith("rank 0 stopped with it"), r["error"]
    ranks = {k["rank"]: k for k in r["cluster"]["per_rank"]}
    assert ranks[1]["status"] == "failed" and ranks[0]["status"] == "interrupted" and ranks[0]["requests"] > 0
    assert no_files_left(tmp_path)


@needs_mpi
def test_ctrl_c_keeps_what_every_kvcache_rank_restored(tmp_path):
    out = tmp_path / "job.json"
    cmd = mpirun_cmd(2, "workload", "kvcache", *KV, "--mpi", "-T", "60", "--dir", str(tmp_path), "--json", str(out))
    _, err = while_running(cmd, {**MPI_CTRL_C_ENV, **NO_GPU}, lambda proc: ctrl_c(proc, _kv_engines_reading))
    assert out.exists(), err
    r = json.loads(out.read_text())
    assert r["status"] == "interrupted", err
    assert all(k["status"] == "interrupted" for k in r["cluster"]["per_rank"])
    assert r["requests"] == sum(k["requests"] for k in r["cluster"]["per_rank"])
    assert no_files_left(tmp_path)


def test_kvcache_mpi_without_a_launcher_is_one_line(tmp_path, cli):
    r = cli("workload", "kvcache", *KV, "--mpi", "--dir", str(tmp_path))
    assert r.code == 3 and "no MPI launcher" in r.err
    assert list(tmp_path.iterdir()) == []
