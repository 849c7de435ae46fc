"""The libraries users save checkpoints with (torch.save, PyTorch DCP), as paths of `workload checkpoint`: each
writes its own layout; what it cannot do (torch.save asynchronously, an MPI job whose processes are not one a
rank) is one line before anything runs, and so is its package missing, exit 2, nothing written. A library runs a
process a rank, the ranks meeting at each save and restore (``RankProcesses``), here with xferscope's own
checkpoint processes as the ranks. The libraries themselves run on the GPU machine
(tests/test_workload_libraries_gpu.py)."""

from __future__ import annotations

import dataclasses
import os

import pytest

from xferscope.errors import SpecError
from xferscope.workloads.checkpoint.model import checkpoint_model
from xferscope.workloads.checkpoint.plan import CheckpointSpec
from xferscope.workloads.common.libraries import CHECKPOINT_LIBRARIES, refusal

MISSING = {p: why for p, lib in CHECKPOINT_LIBRARIES.items() if (why := refusal(lib))}
SMALL = ("custom", "--layers", "2", "--hidden", "256", "--ffn", "512", "--vocab", "1024", "--heads", "4")
SMALL_MODEL = (*SMALL, "--kv-heads", "2", "--ranks", "4")


def small(tmp_path, **kw) -> CheckpointSpec:
    cm = checkpoint_model("custom", 4, layers=2, hidden=256, ffn=512, vocab=1024, heads=4, kv_heads=2)
    return CheckpointSpec(cm, checkpoints=2, directory=str(tmp_path), **kw)


@pytest.mark.parametrize("path", sorted(CHECKPOINT_LIBRARIES))
def test_a_library_path_without_torch_is_one_line_and_exit_2_before_anything_is_written(cli, tmp_path, path):
    if path not in MISSING:
        pytest.skip(f"{path}'s torch is installed here: nothing to refuse")
    r = cli("workload", "checkpoint", *SMALL_MODEL, "--path", f"host,{path}", "--dir", str(tmp_path))
    assert r.code == 2, r.err
    assert r.err.strip() == f"xferscope: path: {MISSING[path]}", r.err
    assert "pip install torch" in r.err and "Traceback" not in r.err
    assert os.listdir(tmp_path) == [], "nothing written"


def test_each_library_writes_its_own_layout_whatever_layout_is_asked(tmp_path):
    assert small(tmp_path, path="dcp", layout="dlio", threads=2).layout == "dcp"
    torch_save = small(tmp_path, path="torch-save", layout="dcp", threads=4)
    assert (torch_save.layout, torch_save.threads) == ("dlio", 1)
    assert small(tmp_path, path="host", layout="dcp").layout == "dcp", "xferscope's paths write either"


@pytest.mark.parametrize(
    ("kw", "field", "says"),
    [
        ({"path": "torch-save", "pinned_copies": True}, "async", "torch-save has no asynchronous save"),
        ({"path": "dcp", "part": (0, 3)}, "mpi", "dcp runs one process a rank: run mpirun -n 4"),
        ({"path": "torch-save", "part": (0, 2)}, "mpi", "torch-save runs one process a rank: run mpirun -n 4"),
    ],
)
def test_what_a_library_cannot_do_is_one_line_naming_the_option(tmp_path, kw, field, says):
    with pytest.raises(SpecError) as info:
        small(tmp_path, **kw).plan(place=False)
    assert info.value.field == field and says in str(info.value)
    assert os.listdir(tmp_path) == []


def test_the_console_offers_only_the_libraries_installed_here():
    from xferscope.workloads.checkpoint.console import PATH_HINT

    offered = {p.strip() for p in PATH_HINT.split(",")}
    assert offered >= {"host", "bounce", "bounce-async", "cufile"}
    assert {p for p in CHECKPOINT_LIBRARIES if p in offered} == set(CHECKPOINT_LIBRARIES) - set(MISSING)


def rank_jobs(tmp_path, directories: list[str]):
    """A checkpoint of 4 ranks by host from host memory, a process a rank, each meeting the others; rank ``i``
    writes in ``directories[i]`` and reads back the next rank's files."""
    from xferscope.workloads.checkpoint.checkpoint_process import CheckpointJob

    plan = small(tmp_path).plan()
    ranks = plan.ranks
    n = len(ranks)
    return [
        CheckpointJob(
            directories[i],
            [r],
            2,
            "dlio",
            fsync=False,
            verify=True,
            meets=True,
            sources=((ranks[(i + 1) % n], directories[(i + 1) % n]),),
            group=(i, n),
        )
        for i, r in enumerate(ranks)
    ]


def test_ranks_in_processes_of_their_own_meet_at_each_save_and_restore_and_read_each_others_files(tmp_path):
    from xferscope.workloads.checkpoint.checkpoint_process import serve
    from xferscope.workloads.checkpoint.session import joined_outcomes
    from xferscope.workloads.common.process_run import WorkloadChild
    from xferscope.workloads.common.rank_processes import RankProcesses

    directories = [str(tmp_path / f"r{i}") for i in range(4)]
    for d in directories:
        os.mkdir(d)
    jobs = rank_jobs(tmp_path, directories)
    group = RankProcesses([WorkloadChild(serve, f"rank {i}", "host") for i in range(4)])
    ticks: list[int] = []
    outs = group.execute(jobs, lambda i, t: ticks.append(i))
    assert [o.status for o in outs] == ["ok"] * 4, [o.error for o in outs]
    out = joined_outcomes(outs)
    assert out.status == "ok" and set(ticks) == {0, 1, 2, 3}
    end = out.payload
    assert [[w.rank for w in ws] for ws in end.writes] == [[0, 1, 2, 3]] * 2
    assert [[(r.rank, r.wrote) for r in rs] for rs in end.restores] == [[(0, 1), (1, 2), (2, 3), (3, 0)]] * 2
    assert out.process.cpu_seconds == pytest.approx(sum(o.process.cpu_seconds for o in outs))
    for i, job in enumerate(jobs):  # each rank wrote its own files in its own directory, every checkpoint
        for k in (1, 2):
            names = sorted(os.listdir(os.path.join(directories[i], f"global_epoch1_step{k}")))
            assert names == sorted(f.name for f in job.ranks[0].files)


def test_a_rank_that_fails_stops_the_others_and_its_error_is_the_runs(tmp_path):
    from xferscope.workloads.checkpoint.checkpoint_process import serve
    from xferscope.workloads.checkpoint.session import joined_outcomes
    from xferscope.workloads.common.process_run import WorkloadChild
    from xferscope.workloads.common.rank_processes import RankProcesses

    directories = [str(tmp_path / f"r{i}") for i in range(4)]
    for d in directories[:3]:
        os.mkdir(d)
    jobs = rank_jobs(tmp_path, directories)  # rank 3's directory is missing: its first save fails
    jobs = [dataclasses.replace(j, checkpoints=3) for j in jobs]
    outs = RankProcesses([WorkloadChild(serve, f"rank {i}", "host") for i in range(4)]).execute(jobs)
    assert outs[3].status == "failed" and "r3" in (outs[3].error or "")
    assert all(o.status in ("interrupted", "failed") for o in outs[:3]), [o.status for o in outs]
    out = joined_outcomes(outs)
    assert out.status == "failed" and out.error == outs[3].error
    assert out.payload.writes == [] and out.payload.restores == [], "no checkpoint every rank finished"
