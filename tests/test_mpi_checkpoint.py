"""Checkpoints across the ranks of an MPI job (`workload checkpoint --mpi`).

The tests that launch ranks need `mpirun` and mpi4py and are skipped, with the reason, where either is missing;
they run up to 4 ranks on this one machine (oversubscribed), seeing no GPU (``XFERSCOPE_NO_GPU``, also on a GPU
machine): the states in host memory (DLIO's CPU tensors) and the host path, a small share of llama3-8b (its 8 ranks split over the job's). The job's figures are also checked
without MPI.
"""

from __future__ import annotations

import json
import subprocess

import psutil
import pytest
from test_mpi import MPI_CTRL_C_ENV, MPI_ENV, NO_GPU, mpirun, mpirun_cmd, needs_mpi, wait_for_engines
from test_mpi_workload import ctrl_c, no_files_left, one_line_from_two_commands, while_running

from xferscope.workloads.checkpoint.checkpoint_cluster import CheckpointRank, cluster_record
from xferscope.workloads.checkpoint.checkpoint_process import CheckpointEnd, RankRead, RankWrite
from xferscope.workloads.checkpoint.model import checkpoint_model
from xferscope.workloads.checkpoint.plan import CheckpointSpec, plan_record
from xferscope.workloads.checkpoint.session import CheckpointRecord, restores_of, saves_of
from xferscope.workloads.common.job_ranks import JobFacts

SCALE = "0.002"  # 26.8 MiB a rank of llama3-8b


def checkpoint_args(directory, *more: str) -> list[str]:
    return ["workload", "checkpoint", "llama3-8b", "--mpi", "--scale", SCALE, "--dir", str(directory), *more]


def wait_for_writes(proc: subprocess.Popen, ranks: int, nbytes: int = 8 << 20) -> dict[int, psutil.Process]:
    """Every rank's engine has written ``nbytes`` of checkpoints (its saves are under way)."""
    return wait_for_engines(proc, ranks, lambda p: p.io_counters().write_chars >= nbytes, "checkpoint_process:serve")


# ------------------------------------------------------------------ through mpirun


@needs_mpi
def test_four_ranks_save_and_restore_as_one_job(tmp_path, cli):
    out = tmp_path / "job.json"
    data = tmp_path / "ckpt"
    data.mkdir()
    args = checkpoint_args(data, "--checkpoints", "1", "--rank-shift", "1", "--verify", "--json", str(out))
    proc = mpirun(4, *args, env=NO_GPU)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("workload checkpoint llama3-8b") == 1  # only rank 0 prints
    r = json.loads(out.read_text())
    c = r["cluster"]
    assert r["status"] == "ok" and c["ranks"] == 4 and r["verified"] is True
    # llama3-8b's 8 ranks, 2 a rank of the job, in turn
    assert [k["ranks"] for k in c["per_rank"]] == [[0, 1], [2, 3], [4, 5], [6, 7]]
    assert [k["rank"] for k in r["ranks"]] == list(range(8)) and len(r["spec"]["ranks_here"]) == 8
    assert "4 ranks of an MPI job on 1 host write ranks 0-7" in r["spec"]["derivation"][2]
    # each rank reads back the next one's files, across the job's ranks (7 reads 0's, written by rank 0 of the job)
    assert [k["restored_from"] for k in r["ranks"]] == [1, 2, 3, 4, 5, 6, 7, 0]
    [save], [restore] = r["saves"], r["restores"]
    ranks = c["per_rank"]
    # one checkpoint: its duration is the slowest rank's (MLPerf's rule), its GB/s every byte over it
    assert save["bytes"] == sum(k["bytes"] for k in ranks) == r["bytes_written"]
    assert save["seconds"] == pytest.approx(max(k["save_seconds"] for k in ranks))
    assert save["gb_per_s"] == pytest.approx(save["bytes"] / save["seconds"] / 1e9)
    assert restore["seconds"] == pytest.approx(max(k["restore_seconds"] for k in ranks))
    assert restore["bytes"] == save["bytes"] == r["bytes_read"]
    [host] = c["hosts"]
    assert host["ranks"] == [0, 1, 2, 3] and host["bytes"] == save["bytes"]
    assert host["save_seconds"] == pytest.approx(save["seconds"]) and host["memory_bytes"] > 0
    assert all(k["status"] == "ok" and k["gpus"] == [] for k in ranks)
    assert no_files_left(data)
    # saved, the job compares as its figures, a row a host beside them
    shown = cli("workload", "compare", str(out), "--format", "json")
    assert shown.code == 0, shown.err
    labels = [e["label"] for e in json.loads(shown.out)["entries"]]
    assert sorted(labels) == ["job.json", f"job.json@{host['host']}"]


@needs_mpi
def test_dcp_index_is_the_worlds_written_once(tmp_path):
    out = tmp_path / "job.json"
    args = checkpoint_args(tmp_path, "--checkpoints", "1", "--layout", "dcp", "--keep", "--json", str(out))
    proc = mpirun(2, *args, env=NO_GPU)
    assert proc.returncode == 0, proc.stderr
    r = json.loads(out.read_text())
    kept = sorted(p for p in tmp_path.iterdir() if p.name.startswith("xferscope-checkpoint-"))
    assert len(kept) == 2  # a directory each rank of the job
    indexes = [p for d in kept for p in d.rglob(".metadata")]
    assert len(indexes) == 1
    index = json.loads(indexes[0].read_text())
    assert sorted({f["rank"] for f in index["files"].values()}) == list(range(8))
    assert r["spec"]["metadata_bytes"] == indexes[0].stat().st_size


@needs_mpi
def test_a_rank_whose_engine_dies_stops_the_others_and_is_marked(tmp_path):
    out = tmp_path / "job.json"
    cmd = mpirun_cmd(2, *checkpoint_args(tmp_path, "--checkpoints", "40", "--every", "0.2", "--json", str(out)))
    code, err = while_running(cmd, {**MPI_ENV, **NO_GPU}, lambda proc: wait_for_writes(proc, 2)[1].kill())
    assert code == 1, err
    lines = [line for line in err.splitlines() if line.startswith("xferscope:")]
    assert len(lines) == 1 and lines[0].startswith("xferscope: rank 1 on "), err
    r = json.loads(out.read_text())
    assert r["status"] == "failed" and "died" in r["error"] and "rank 0 stopped with it" in r["error"]
    ranks = {k["rank"]: k for k in r["cluster"]["per_rank"]}
    assert ranks[1]["status"] == "failed" and ranks[0]["status"] == "interrupted"
    # the rank still running stopped at its next checkpoint, what it saved kept
    assert ranks[0]["save_seconds"] is not None
    assert len(r["saves"]) < 40 and no_files_left(tmp_path)


@needs_mpi
def test_ctrl_c_keeps_what_every_rank_saved(tmp_path):
    out = tmp_path / "job.json"
    cmd = mpirun_cmd(2, *checkpoint_args(tmp_path, "--checkpoints", "40", "--every", "0.2", "--json", str(out)))
    _, err = while_running(cmd, {**MPI_CTRL_C_ENV, **NO_GPU}, lambda proc: ctrl_c(proc, wait_for_writes))
    assert out.exists(), err
    r = json.loads(out.read_text())
    assert r["status"] == "interrupted", err
    assert all(k["status"] == "interrupted" for k in r["cluster"]["per_rank"])
    assert r["saves"] and r["bytes_written"] == sum(s["bytes"] for s in r["saves"])
    assert no_files_left(tmp_path)


@needs_mpi
def test_ranks_that_disagree_on_the_model_get_one_line(tmp_path):
    one = checkpoint_args(tmp_path, "--checkpoints", "1")
    line = one_line_from_two_commands(one, [a if a != "llama3-8b" else "llama3-70b" for a in one])
    assert "rank 1 on " in line and "model llama3-70b but rank 0 runs model llama3-8b" in line
    assert list(tmp_path.iterdir()) == []


@needs_mpi
def test_more_ranks_than_the_checkpoint_has_is_one_line(tmp_path):
    proc = mpirun(3, *checkpoint_args(tmp_path, "--ranks", "2"), env=NO_GPU)
    assert proc.returncode == 2, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.startswith("xferscope:")]
    assert len(lines) == 1 and "3 ranks in the MPI job for a checkpoint of 2 ranks" in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr and list(tmp_path.iterdir()) == []


def test_checkpoint_mpi_without_a_launcher_is_one_line(tmp_path, cli):
    r = cli(*checkpoint_args(tmp_path, "--checkpoints", "1"))
    assert r.code == 3
    assert r.err.strip().splitlines() == [r.err.strip()] and "no MPI launcher" in r.err
    assert list(tmp_path.iterdir()) == []


# ------------------------------------------------------------------ without MPI


def _part(rank: int, host: str, seconds: list[float], status: str = "ok", error: str | None = None) -> CheckpointRank:
    """Rank ``rank`` of a job of 2-rank parts of llama3-8b (scaled): each checkpoint's save of each of its two
    checkpoint ranks ``seconds[k]`` and ``seconds[k] / 2``, a restore half as long."""
    spec = CheckpointSpec(checkpoint_model("llama3-8b"), scale=0.002, checkpoints=2, part=(rank, 4))
    plan = spec.plan(place=False)
    first, second = plan.ranks
    end = CheckpointEnd(
        writes=[
            [RankWrite(first.rank, first.size, s, 0.0), RankWrite(second.rank, second.size, s / 2, 0.0)]
            for s in seconds
        ],
        restores=[
            [
                RankRead(first.rank, first.rank, first.size, s / 2),
                RankRead(second.rank, second.rank, second.size, s / 4),
            ]
            for s in seconds
        ],
    )
    record = CheckpointRecord(
        status=status,
        error=error,
        spec=plan_record(plan),
        bytes_read=0,
        bytes_written=0,
        cpu_seconds=1.0,
        cpu_s_per_gib=None,
        peak_rss_bytes=1 << 30,
        saves=saves_of(end),
        restores=restores_of(end),
        ranks=[],
        resident_share_at_restore=0.0,
        verified=False,
        fsync=True,
        rank_shift=0,
    )
    return CheckpointRank(rank, host, record, 64 << 30, 16, detail=end)


def test_the_job_is_every_checkpoint_rank_together_with_hosts_and_the_slowest_named():
    parts = [_part(0, "a", [1.0, 2.0]), _part(1, "a", [1.5, 1.0]), _part(2, "b", [3.0, 1.0]), _part(3, "b", [1.0, 1.0])]
    r = cluster_record(parts, JobFacts("mpirun (Open MPI)", "Open MPI v4"), ["how the bytes were found"])
    c = r.cluster
    assert r.status == "ok" and len(r.spec.ranks_here) == 8
    # each checkpoint's duration is the slowest checkpoint rank's, over every rank of the job
    assert [s.seconds for s in r.saves] == [3.0, 2.0]
    total = sum(p.result.spec.bytes_a_checkpoint_here for p in parts)
    assert [s.bytes for s in r.saves] == [total, total] and r.bytes_written == 2 * total
    assert r.saves[0].dlio_gb_per_s == pytest.approx(total / 1.0 / 1e9)  # DLIO's: rank 0's time
    assert [s.seconds for s in r.restores] == [1.5, 1.0]
    assert [h.host for h in c.hosts] == ["a", "b"] and c.slowest_host == "b"
    assert c.hosts[0].save_seconds == pytest.approx(1.75)  # median of (1.5, 2.0)
    assert c.hosts[1].save_seconds == pytest.approx(2.0)  # median of (3.0, 1.0)
    assert [k.ranks for k in c.per_rank] == [[0, 1], [2, 3], [4, 5], [6, 7]]


def test_a_rank_that_measured_nothing_fails_the_job_and_the_others_are_kept():
    dead = _part(1, "a", [], "failed", "workload checkpoint's process died while running")
    parts = [_part(0, "a", [1.0, 2.0], "interrupted"), dead, _part(2, "b", [2.0], "interrupted")]
    r = cluster_record(parts, JobFacts("srun", "MPICH"), [])
    assert r.status == "failed"
    assert r.error == "rank 1 on a: workload checkpoint's process died while running; ranks 0, 2 stopped with it"
    assert [k.status for k in r.cluster.per_rank] == ["interrupted", "failed", "interrupted"]
    # the checkpoints every rank that measured saved: the first
    assert [s.seconds for s in r.saves] == [2.0]
