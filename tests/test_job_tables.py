"""An MPI job's record, whatever the workload: a row a rank and a row a host made from what each rank handed over,
the slowest host named, and the tables printed with the columns every kind shares around its own."""

from __future__ import annotations

import msgspec
from rich.console import Console
from test_mpi_checkpoint import _part
from test_mpi_workload import _rank
from test_tui_inference import _a_load

from xferscope.units import figure_text
from xferscope.workloads.checkpoint.checkpoint_cluster import cluster_record
from xferscope.workloads.checkpoint.text import cluster_lines as checkpoint_lines
from xferscope.workloads.common.job_ranks import JobFacts, RankResult
from xferscope.workloads.inference.load_cluster import cluster_result as load_job
from xferscope.workloads.inference.text import load_cluster_lines
from xferscope.workloads.train.text import cluster_lines as train_lines
from xferscope.workloads.train.train_cluster import cluster_result as train_job
from xferscope.workloads.train.train_spec import train_spec

FACTS = JobFacts("mpirun", "Open MPI")


def rows_of(lines: list) -> list[list[str]]:
    """The printed lines' table rows, each as its cells (a console wide enough for every row on one line)."""
    console = Console(width=400, record=True, color_system=None)
    for line in lines:
        console.print(line)
    text = console.export_text()
    return [[c.strip() for c in row.strip("│ \n").split("│")] for row in text.splitlines() if row.startswith("│")]


def test_a_load_job_has_a_row_a_rank_and_a_row_a_host(tmp_path):
    one = _a_load(tmp_path)
    failed = msgspec.structs.replace(one, status="failed", error="boom")
    ranks = [RankResult(0, "node-a", one, 1 << 30, 2), RankResult(1, "node-b", failed, 2 << 30, 4),
             RankResult(2, "node-a", one, 1 << 30, 2)]  # fmt: skip
    job = load_job(ranks, FACTS, "copy")
    c = job.cluster
    assert c is not None and c.ranks == 3 and [h.host for h in c.hosts] == ["node-a", "node-b"]
    assert [h.ranks for h in c.hosts] == [[0, 2], [1]] and [h.cpus for h in c.hosts] == [2, 4]
    assert [(k.rank, k.host, k.status, k.error) for k in c.per_rank] == [
        (0, "node-a", "ok", None),
        (1, "node-b", "failed", "boom"),
        (2, "node-a", "ok", None),
    ]
    rows = rows_of(load_cluster_lines(job))
    hosts, ranks = rows[:2], rows[2:]
    assert [(r[0], r[1], r[-1]) for r in hosts] == [("node-a", "0,2", "2"), ("node-b", "1", "4")]
    assert [(r[0], r[1], r[-1]) for r in ranks] == [("0", "node-a", "ok"), ("1", "node-b", "failed: boom"),
                                                    ("2", "node-a", "ok")]  # fmt: skip


def test_the_slowest_host_is_the_one_each_kind_says():
    """train: the lowest AU; checkpoint: the longest save."""
    spec = train_spec("unet3d", batch=2, accelerators=8, path="host")
    job = train_job(spec, [_rank(0, "a", 0.9), _rank(1, "b", 0.5), _rank(2, "b", 0.5), _rank(3, "a", 0.9)], FACTS)
    assert job.cluster is not None and job.cluster.slowest_host == "b"
    assert [r[:2] for r in rows_of(train_lines(job))[:2]] == [["a", "0,3"], ["b", "1,2"]]
    record = cluster_record([_part(0, "a", [2.0, 2.5]), _part(1, "b", [1.0, 1.5])], FACTS, [])
    assert record.cluster is not None and record.cluster.slowest_host == "a"
    rows = rows_of(checkpoint_lines(record))
    assert [r[0] for r in rows] == ["a", "b", "0", "1"] and rows[3][-1] == "ok"


def test_a_run_over_hosts_prints_its_hosts_and_ranks_as_every_job_does():
    """`run --mpi`: a row a host (its ranks' run taken together) and a row a rank, by the printer every MPI job's
    rows go through, the columns every job shares around the run's own."""
    from test_mpi import three_ranks_on_two_hosts

    from xferscope.cluster.report import cluster_lines

    r, live = three_ranks_on_two_hosts()
    rows = rows_of(cluster_lines(r))
    hosts, ranks = rows[:2], rows[2:]
    assert [(h[0], h[1]) for h in hosts] == [("fast", "0,1"), ("slow", "2")]
    assert [(k[0], k[1]) for k in ranks] == [("0", "fast"), ("1", "fast"), ("2", "slow")]
    assert [k[-1] for k in ranks] == [st.status for st in live.states]
    assert [k[4] for k in ranks] == [
        figure_text(row["throughput_mib_s"]) for row in r.environment["cluster"]["per_rank"]
    ]
    assert [h[2] for h in hosts] == [figure_text(h.throughput_mib_s) for h in r.hosts]
    assert [h[-3] for h in hosts] == [h.status for h in r.hosts]  # its status, then the RAM and CPUs not known: "-"
    assert [h[-2:] for h in hosts] == [["-", "-"], ["-", "-"]]
