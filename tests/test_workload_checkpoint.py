"""`workload checkpoint`: MLPerf Storage's llama3 checkpoints sized from the model and its parallelism, rank by rank,
in DLIO's files or PyTorch DCP's; ``--plan`` prints them (and writes nothing); bad input is one line, exit 2."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys

import pytest

from xferscope.errors import SpecError
from xferscope.gpus import gpu_count
from xferscope.workloads.checkpoint.layout import dcp_metadata, layer_span, rank_files
from xferscope.workloads.checkpoint.model import MODELS, checkpoint_model
from xferscope.workloads.checkpoint.plan import CheckpointSpec

GIB = 1 << 30


def every_rank(name: str, layout: str, **kw):
    cm = checkpoint_model(name, **kw)
    return cm, [rank_files(r, cm, layout) for r in range(cm.parallelism.ranks)]


@pytest.mark.parametrize(
    ("name", "ranks", "gib"), [("llama3-8b", 8, 104.7), ("llama3-70b", 64, 911.2), ("llama3-405b", 512, 5291.7)]
)
def test_the_ranks_of_each_model_hold_its_whole_state(name, ranks, gib):
    """MLPerf's checkpoint sizes (GiB, as DLIO divides): 14 bytes a parameter over the model's ranks. DCP's files
    hold exactly that; DLIO's a little more (norms whole on every tensor rank, 5 x hidden a group), under 0.6 GiB."""
    cm, dcp = every_rank(name, "dcp")
    assert cm.parallelism.ranks == ranks
    state = 14 * cm.model.parameters()
    assert sum(r.size for r in dcp) == state and round(state / GIB, 1) == gib
    _, dlio = every_rank(name, "dlio")
    assert 0 <= sum(r.size for r in dlio) - state < 0.6 * GIB


def test_llama3_8b_has_the_published_parameter_count():
    assert round(MODELS["llama3-8b"].model.parameters() / 1e9, 2) == 8.03


def test_dlio_names_zero_3_files_by_data_and_model_rank():
    _, ranks = every_rank("llama3-8b", "dlio")
    assert [f.name for f in ranks[5].files] == [
        "zero_pp_rank_5_mp_rank_0_model_states.pt",
        "zero_pp_rank_5_mp_rank_0_optim_states.pt",
    ]
    assert len({r.size for r in ranks}) == 1  # ZeRO-3: every rank the same share


def test_dlio_zero_1_with_a_pipeline_writes_the_model_layer_by_layer_from_data_rank_0_alone():
    cm, ranks = every_rank("llama3-405b", "dlio")
    first = ranks[0]  # tensor 0, stage 0, data 0: the embedding and its layers
    names = [f.name for f in first.files]
    assert names[0] == "layer_0-model_0_model_states.pt" and names[-1] == "zero_pp_rank_0_mp_rank_0_optim_states.pt"
    stage_1 = layer_span(1, cm)  # rank 9: stage 1, tensor rank 1, model rank 9
    assert [f.name for f in ranks[9].files[:-1]] == [f"layer_{i}-model_9_model_states.pt" for i in stage_1]
    last_stage = ranks[cm.parallelism.model_ranks - 1]
    assert last_stage.files[-2].name == f"layer_{cm.model.layers + 2}-model_255_model_states.pt"  # the final norm
    replica = ranks[cm.parallelism.model_ranks + 3]  # data rank 1: the optimizer's share alone
    assert [f.name for f in replica.files] == ["zero_pp_rank_1_mp_rank_3_optim_states.pt"]


def test_the_pipeline_stages_cover_every_layer_once():
    cm = checkpoint_model("llama3-405b")
    spans = [layer_span(s, cm) for s in range(cm.parallelism.pipeline)]
    covered = [i for span in spans for i in span]
    assert covered == list(range(cm.model.layers + 3))


def test_dcp_writes_a_file_a_writer_thread_and_an_index():
    cm = checkpoint_model("llama3-8b")
    rank = rank_files(3, cm, "dcp", threads=2)
    assert [f.name for f in rank.files] == ["__3_0.distcp", "__3_1.distcp"]
    index = json.loads(dcp_metadata([rank]))
    assert index["files"]["__3_1.distcp"] == {"rank": 3, "bytes": rank.files[1].size}


def test_ranks_set_the_data_parallelism():
    assert checkpoint_model("llama3-70b", ranks=16).parallelism.data == 2
    with pytest.raises(SpecError, match="do not split into whole copies"):
        checkpoint_model("llama3-70b", ranks=12)


def test_a_scaled_subset_plan_is_this_hosts_eight_ranks(tmp_path):
    plan = CheckpointSpec(checkpoint_model("llama3-70b"), subset=True, scale=0.001, directory=str(tmp_path)).plan()
    assert [r.rank for r in plan.ranks] == list(range(8)) and plan.refusals == []
    assert "scaled to 0.001" in "\n".join(plan.derivation())


def test_checkpoints_that_do_not_fit_are_refused_with_the_scale_that_fits(tmp_path):
    plan = CheckpointSpec(checkpoint_model("llama3-405b"), directory=str(tmp_path)).plan()
    disk = str(plan.refusals[0])
    assert "does not fit the free space" in disk and "--scale" in disk


def test_plan_s_csv_is_a_row_a_rank_with_its_bytes(cli, tmp_path):
    out = tmp_path / "plan.csv"
    r = cli(
        "workload", "checkpoint", "llama3-8b", "--plan", "--scale", "0.01", "--dir", str(tmp_path), "--csv", str(out)
    )
    assert r.code == 0, r.err
    rows = list(csv.DictReader(out.open()))
    assert [row["row"] for row in rows] == [f"rank {k}" for k in range(8)]
    assert all(int(row["bytes"]) > 0 and row["status"] == "planned" for row in rows)
    assert sorted(os.listdir(tmp_path)) == ["plan.csv"]  # nothing else written


def test_plan_prints_each_ranks_files_and_writes_nothing(cli, tmp_path):
    out = tmp_path / "plan.json"
    r = cli(
        "workload", "checkpoint", "llama3-8b", "--plan", "--scale", "0.01", "--dir", str(tmp_path), "--json", str(out)
    )
    assert r.code == 0, r.err
    assert "nothing is written" in r.out and "zero_pp_rank_0_mp_rank_0_optim_states.pt" in r.out
    assert "104.7 GiB" in r.out and "scaled" in r.out
    d = json.loads(out.read_text())
    assert d["kind"] == "checkpoint_plan" and round(d["state_gib"], 1) == 104.7 and d["scaled"] is True
    assert [x["rank"] for x in d["ranks_here"]] == list(range(8))
    assert d["model"]["name"] == "llama3-8b" and d["parallelism"] == {
        "tensor": 1,
        "pipeline": 1,
        "data": 8,
        "zero_stage": 3,
    }
    assert sorted(os.listdir(tmp_path)) == ["plan.json"]


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("llama3-9b",), "unknown model"),
        (("llama3-8b", "--ranks", "0"), "ranks: must be at least 1"),
        (("llama3-8b", "--scale", "0.00001"), "a rank writes at least 1 MiB"),
        (("llama3-8b", "--scale", "2"), "at most 1"),
        (("llama3-8b", "--layout", "zarr"), "choose dlio"),
        (("llama3-8b", "--dir", "/nonexistent/ckpt"), "no such directory"),
        (("custom", "--layers", "2"), "custom needs"),
        (("llama3-8b", "--threads", "2"), "DCP's"),
        (("llama3-8b", "--state", "nvme"), "choose gpu"),
        (("llama3-8b", "--state", "host", "--path", "bounce"), "host memory is the host path's"),
        (("llama3-8b", "--path", "host,nfs"), "checkpoints are written by host, bounce"),
        (("llama3-8b", "--path", "host,host"), "--plan is of one path"),
        (("llama3-8b", "--every", "-1"), "seconds of 0 or more"),
        (("llama3-8b", "--rounds", "0"), "rounds: must be at least 1"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(cli, args, says):
    r = cli("workload", "checkpoint", *args, "--plan")
    assert r.code == 2 and says in r.err, r.err
    assert len(r.err.strip().splitlines()) == 1 and "Traceback" not in r.err


def _bound_by_mode_bits() -> None:
    """In a child, before it runs the command: root gives up CAP_DAC_OVERRIDE, so that a directory's mode bits bind
    it as they bind any user. Dropped from the bounding set (prctl PR_CAPBSET_DROP): the capabilities root holds
    after exec are that set's."""
    import ctypes

    pr_capbset_drop, cap_dac_override = 24, 1
    if os.geteuid() == 0 and ctypes.CDLL(None, use_errno=True).prctl(pr_capbset_drop, cap_dac_override, 0, 0, 0):
        raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP, CAP_DAC_OVERRIDE)")


def test_a_directory_that_cannot_be_written_is_refused(tmp_path):
    tmp_path.chmod(0o500)
    try:
        r = subprocess.run(
            [
                sys.executable,
                "-m",
                "xferscope.cli",
                "workload",
                "checkpoint",
                "llama3-8b",
                "--plan",
                "--dir",
                str(tmp_path),
            ],
            capture_output=True,
            text=True,
            timeout=120,
            preexec_fn=_bound_by_mode_bits,
        )
    finally:
        tmp_path.chmod(0o700)
    assert r.returncode == 2 and f"{tmp_path}: not writable" in r.stderr, r.stderr


def test_without_a_gpu_the_states_live_in_host_memory_and_must_fit_it(no_gpu, tmp_path):
    small = CheckpointSpec(checkpoint_model("llama3-8b"), scale=0.001, directory=str(tmp_path)).plan()
    assert small.state_in.startswith("host memory, as DLIO's CPU tensors (no GPU here") and small.refusals == []
    whole = CheckpointSpec(checkpoint_model("llama3-405b"), subset=True, directory=str(tmp_path)).plan()
    memory = [str(r) for r in whole.refusals if "memory available" in str(r)]
    assert memory and "--scale" in memory[0]


_GPU_COUNT, _NO_GPU = gpu_count()


@pytest.mark.gpu
@pytest.mark.skipif(not _GPU_COUNT, reason=f"no GPU here: {_NO_GPU}")
def test_on_a_gpu_the_states_go_round_robin_and_must_fit_its_free_memory(tmp_path):
    cm = checkpoint_model("llama3-8b")
    plan = CheckpointSpec(cm, scale=0.01, directory=str(tmp_path), gpus=(0,), path="cufile").plan()
    assert plan.state_in.startswith("GPU memory: GPU 0 ") and plan.refusals == []
    huge = CheckpointSpec(
        checkpoint_model("llama3-405b"), subset=True, directory=str(tmp_path), gpus=(0,), path="cufile"
    ).plan()
    assert any("GPU 0 would hold" in str(r) for r in huge.refusals)


# ------------------------------------------------------------------ checkpoints written and read back (host path)

SMALL = ("custom", "--layers", "2", "--hidden", "256", "--ffn", "512", "--vocab", "1024", "--heads", "4")
SMALL_MODEL = (*SMALL, "--kv-heads", "2", "--ranks", "4")


def small_plan(tmp_path, layout="dlio", checkpoints=2):
    cm = checkpoint_model("custom", 4, layers=2, hidden=256, ffn=512, vocab=1024, heads=4, kv_heads=2)
    return CheckpointSpec(cm, layout=layout, checkpoints=checkpoints, directory=str(tmp_path)).plan()


def test_a_run_writes_each_ranks_files_fsyncs_them_evicts_and_reads_them_back(cli, tmp_path):
    out = tmp_path / "ckpt.json"
    r = cli("workload", "checkpoint", *SMALL_MODEL, "--checkpoints", "2", "--dir", str(tmp_path), "--keep",
            "--verify", "--json", str(out))  # fmt: skip
    assert r.code == 0, r.err
    d = json.loads(out.read_text())
    assert d["status"] == "ok" and d["verified"] is True and len(d["saves"]) == len(d["restores"]) == 2
    kept = d["environment"]["kept_in"]
    plan = d["spec"]
    for k in (1, 2):
        directory = os.path.join(kept, f"global_epoch1_step{k}")
        for rank in plan["ranks_here"]:
            for f in rank["files"]:
                assert os.path.getsize(os.path.join(directory, f["name"])) == f["bytes"]
    assert all(s["fsync_seconds"] > 0 for s in d["saves"])  # each file fsynced, its time counted apart
    held = d["resident_share_at_restore"]
    if held is not None:  # where the page cache can be read (mincore): evicted before the restore
        assert held <= 0.01
    assert "save (the slowest rank, MLPerf)" in r.out and "DLIO's figure" in r.out
    assert d["peak_rss_bytes"] > 0 and "peak host memory" in r.out


def test_without_fsync_none_is_counted_and_nothing_is_left(cli, tmp_path):
    out = tmp_path / "ckpt.json"
    r = cli("workload", "checkpoint", *SMALL_MODEL, "--checkpoints", "1", "--no-fsync", "--dir", str(tmp_path),
            "--json", str(out))  # fmt: skip
    assert r.code == 0, r.err
    d = json.loads(out.read_text())
    assert [s["fsync_seconds"] for s in d["saves"]] == [0.0]
    assert sorted(os.listdir(tmp_path)) == ["ckpt.json"]


def test_dcp_commits_its_index_by_renaming_it(tmp_path):
    from xferscope.workloads.checkpoint.session import CheckpointRunOptions, run_checkpoints

    plan = small_plan(tmp_path, layout="dcp", checkpoints=1)
    record = run_checkpoints(plan, CheckpointRunOptions(keep=True))
    kept = record.environment["kept_in"]
    names = sorted(os.listdir(os.path.join(str(kept), "global_epoch1_step1")))
    assert names == [".metadata", "__0_0.distcp", "__1_0.distcp", "__2_0.distcp", "__3_0.distcp"]


def run_with_a_flipped_byte(monkeypatch, job, file: int, offset: int):
    """``job`` run in this process, a byte of the ``file``-th file written (0: rank 0's first) flipped on disk
    between the save and the restore; the run's error."""
    import threading

    from xferscope.engines import page_cache
    from xferscope.workloads.checkpoint import checkpoint_process as cp

    evict = page_cache.evict_files

    def flip_then_evict(paths):
        with open(paths[file], "r+b") as fh:
            fh.seek(offset)
            byte = fh.read(1)
            fh.seek(offset)
            fh.write(bytes([byte[0] ^ 0xFF]))
        return evict(paths)

    monkeypatch.setattr(page_cache, "evict_files", flip_then_evict)
    setup = cp.CheckpointSetup(job)
    setup.build()
    try:
        return setup.run(threading.Event(), lambda tick: None)[1]
    finally:
        setup.close()


def test_verify_fails_on_a_flipped_byte(tmp_path, monkeypatch):
    """A byte changed on disk between the save and the restore: --verify names the rank and the byte."""
    from xferscope.workloads.checkpoint import checkpoint_process as cp

    plan = small_plan(tmp_path, checkpoints=1)
    error = run_with_a_flipped_byte(
        monkeypatch, cp.CheckpointJob(str(tmp_path), plan.ranks, 1, "dlio", verify=True), 1, 5
    )
    first = plan.ranks[0].files[0].size  # rank 0's second file, 5 bytes in
    assert error is not None and f"rank 0 read rank 0's checkpoint back wrong at byte {first + 5}" in str(error)


def test_paths_side_by_side_are_ranked_by_the_time_until_durable_with_the_restore_beside(cli, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    r = cli("workload", "checkpoint", *SMALL_MODEL, "--path", "host,host", "--rounds", "2", "--checkpoints", "2",
            "--dir", str(tmp_path), "--json", str(out / "c.json"))  # fmt: skip
    assert r.code == 0, r.err
    d = json.loads((out / "c.json").read_text())
    assert d["kind"] == "workload-checkpoint-compare" and d["rounds"] == 2 and len(d["results"]) == 4
    assert sorted(e["label"] for e in d["entries"]) == ["host#1", "host#2"]
    for e in d["entries"]:
        assert e["runs"] == 2 and e["low"] <= e["value"] <= e["high"] and e["beside"] > 0
    assert all(len(x["saves"]) == len(x["restores"]) == 2 and x["status"] == "ok" for x in d["results"])
    # an A/A pair is level both ways, or apart both ways
    a, b = d["entries"]
    assert (b["label"] in a["level_with"]) == (a["label"] in b["level_with"])
    assert "restore s" in r.out and "rotated rounds" in r.out
    assert sorted(os.listdir(tmp_path)) == ["out"]


def test_async_without_a_gpu_is_refused_before_anything_is_written(cli, tmp_path):
    r = cli("workload", "checkpoint", *SMALL_MODEL, "--async", "--dir", str(tmp_path), env={"XFERSCOPE_NO_GPU": "1"})
    assert r.code == 2 and "--async copies each state out of GPU memory" in r.err
    assert len(r.err.strip().splitlines()) == 1 and os.listdir(tmp_path) == []


def test_a_gpu_path_without_a_gpu_is_one_line_before_anything_is_written(cli, tmp_path):
    r = cli("workload", "checkpoint", *SMALL_MODEL, "--path", "cufile", "--dir", str(tmp_path),
            env={"XFERSCOPE_NO_GPU": "1"})  # fmt: skip
    assert r.code == 3 and "cufile: unavailable" in r.err and len(r.err.strip().splitlines()) == 1
    assert os.listdir(tmp_path) == []


def test_an_unknown_path_is_one_line(cli, tmp_path):
    r = cli("workload", "checkpoint", *SMALL_MODEL, "--path", "nfs", "--dir", str(tmp_path))
    assert r.code == 2 and "checkpoints are written by host, bounce" in r.err
    assert os.listdir(tmp_path) == []


def test_ctrl_c_keeps_the_checkpoints_measured_and_removes_the_files(tmp_path):
    from conftest import interrupted_cli

    process = "xferscope.workloads.checkpoint.checkpoint_process:serve"

    def wrote_two_checkpoints(command) -> bool:
        import contextlib

        import psutil

        for child in command.children(recursive=True):
            with contextlib.suppress(psutil.Error):
                if process in " ".join(child.cmdline()) and child.io_counters().write_bytes >= 2 * 4 * (1 << 20):
                    return True
        return False

    out = tmp_path / "out"
    out.mkdir()
    args = ["workload", "checkpoint", *SMALL_MODEL, "--checkpoints", "400", "--dir", str(tmp_path), "--json",
            str(out / "c.json")]  # fmt: skip
    code, stdout, _err = interrupted_cli(args, tmp_path, until=wrote_two_checkpoints)
    assert code == 130 and "[interrupted]" in stdout
    d = json.loads((out / "c.json").read_text())
    assert d["status"] == "interrupted" and 1 <= len(d["saves"]) < 400
    assert sorted(os.listdir(tmp_path)) == ["out"]


def test_dcps_writer_threads_write_their_files_at_once(tmp_path, monkeypatch):
    """Each of a rank's DCP files is written by a thread of its own, all started together (DCP's thread_count)."""
    import threading

    from xferscope.workloads.checkpoint import checkpoint_process as cp

    cm = checkpoint_model("custom", 2, layers=2, hidden=256, ffn=512, vocab=1024, heads=4, kv_heads=2)
    plan = CheckpointSpec(cm, layout="dcp", threads=3, checkpoints=1, directory=str(tmp_path)).plan()
    seen: list[tuple[int, int | None, str]] = []
    store = cp.store_rank

    def noted(rank, directory, storer, fsync, stop, only=None, spaced=False):
        seen.append((rank.rank, only, threading.current_thread().name))
        return store(rank, directory, storer, fsync, stop, only, spaced)

    monkeypatch.setattr(cp, "store_rank", noted)
    setup = cp.CheckpointSetup(cp.CheckpointJob(str(tmp_path), plan.ranks, 1, "dcp"))
    setup.build()
    try:
        end, error = setup.run(threading.Event(), lambda tick: None)
    finally:
        setup.close()
    assert error is None
    assert sorted((r, o) for r, o, _ in seen) == [(r, o) for r in (0, 1) for o in (0, 1, 2)]
    assert len({name for _, _, name in seen}) == 6
    assert [w.bytes for w in end.writes[0]] == [r.size for r in plan.ranks]
    names = sorted(os.listdir(os.path.join(str(tmp_path), "global_epoch1_step1")))
    assert names == [".metadata"] + [f"__{r}_{k}.distcp" for r in (0, 1) for k in (0, 1, 2)]


def test_a_closed_stdout_loses_no_file(tmp_path):
    """`| head -1`: the reader takes the first line and leaves while the tables are still coming (more than the pipe
    holds: a row for each of 100 checkpoints, about 9 KB, against a pipe shrunk to one page), so Rich meets the
    broken pipe and exits; the JSON is written all the same."""
    import fcntl
    import subprocess
    import sys

    out = tmp_path / "out"
    out.mkdir()
    model = ("custom", "--layers", "1", "--hidden", "64", "--ffn", "128", "--vocab", "256", "--heads", "2",
             "--kv-heads", "1", "--ranks", "2")  # fmt: skip
    command = [sys.executable, "-m", "xferscope.cli", "workload", "checkpoint", *model, "--checkpoints", "100",
               "--no-fsync", "--dir", str(tmp_path), "--json", str(out / "c.json")]  # fmt: skip
    read_end, write_end = os.pipe()
    assert fcntl.fcntl(write_end, fcntl.F_SETPIPE_SZ, 4096) == 4096
    proc = subprocess.Popen(command, stdout=write_end, stderr=subprocess.PIPE)
    os.close(write_end)
    assert proc.stderr is not None
    with os.fdopen(read_end, "rb") as reader:
        first = reader.readline()  # the reader leaves as the file closes
    err = proc.stderr.read()
    proc.wait(timeout=120)
    assert first.startswith(b"workload checkpoint custom by host"), err
    assert json.loads((out / "c.json").read_text())["status"] == "ok", err


# ------------------------------------------------------------------ from GPU memory (CUDA's host stand-ins)


def run_in_process(job):
    """``job`` run in this process: (its end, its error)."""
    import threading

    from xferscope.workloads.checkpoint import checkpoint_process as cp

    setup = cp.CheckpointSetup(job)
    setup.build()
    try:
        return setup.run(threading.Event(), lambda tick: None), setup.labels
    finally:
        setup.close()


@pytest.mark.parametrize(("path", "staged"), [("host", False), ("bounce", False), ("host", True), ("bounce", True)])
def test_states_in_gpu_memory_are_written_by_the_path_and_read_back_whole(sim_gpu, direct_dir, path, staged):
    """The states in (stand-in) GPU memory: host copies each request to pageable memory and writes through the page
    cache, bounce stages through pinned memory with O_DIRECT; --async copies the state first (timed: the GPUs
    blocked), then writes from the copy. Every byte read back into GPU memory is the pattern written, and the files
    hold each rank's bytes."""
    from xferscope.workloads.checkpoint import checkpoint_process as cp

    cm = checkpoint_model("custom", 3, layers=2, hidden=256, ffn=512, vocab=1000, heads=4, kv_heads=2)
    plan = CheckpointSpec(cm, checkpoints=2, directory=str(direct_dir)).plan()
    assert any(f.size % 4096 for r in plan.ranks for f in r.files)  # tails written with O_DIRECT cleared
    job = cp.CheckpointJob(
        str(direct_dir), plan.ranks, 2, "dlio", verify=True, rank_shift=1, path=path, on_gpu=True, staged=staged
    )
    (end, error), labels = run_in_process(job)
    assert error is None, error
    assert [[w.bytes for w in ws] for ws in end.writes] == [[r.size for r in plan.ranks]] * 2
    assert all((w.blocked_s > 0) == staged for ws in end.writes for w in ws)
    # the writes begin once every rank's copy is made: a save is durable no sooner than the slowest copy
    assert all(w.staged_s >= max(x.blocked_s for x in ws) for ws in end.writes for w in ws)
    assert [[r.wrote for r in rs] for rs in end.restores] == [[1, 2, 0]] * 2
    assert labels[0].startswith("GPU memory") and any("--async" in lab for lab in labels) == staged
    for k in (1, 2):
        for r in plan.ranks:
            for f in r.files:
                assert os.path.getsize(os.path.join(str(direct_dir), f"global_epoch1_step{k}", f.name)) == f.size


@pytest.mark.parametrize("offered", [True, False])
@pytest.mark.parametrize("staged", [False, True])
def test_the_gpu_paths_write_from_pinned_huge_pages_where_the_kernel_offers_them(
    sim_gpu, direct_dir, monkeypatch, staged, offered
):
    """As run's bounce paths pin theirs: a 16 MiB write from 4 KiB pages is split into many requests on disks that
    take few segments a request. Staging buffers and an --async copy alike; the record says which memory it was."""
    from xferscope.engines import host
    from xferscope.engines.gpu_native import PINNED_HUGE, PINNED_SMALL
    from xferscope.workloads.checkpoint import checkpoint_process as cp

    if not offered:
        monkeypatch.setattr(host, "huge_pages_offered", lambda: False)
    cm = checkpoint_model("custom", 2, layers=1, hidden=256, ffn=512, vocab=1024, heads=4, kv_heads=2)
    plan = CheckpointSpec(cm, checkpoints=1, directory=str(direct_dir)).plan()
    job = cp.CheckpointJob(str(direct_dir), plan.ranks, 1, "dlio", path="bounce", on_gpu=True, staged=staged)
    setup = cp.CheckpointSetup(job)
    try:
        setup.build()
        huge = offered and host.huge_pages_offered()
        assert setup.environment["pinned_buffers"] == (PINNED_HUGE if huge else PINNED_SMALL)
    finally:
        setup.close()


def test_an_async_save_writes_under_the_next_interval_and_the_next_save_waits_for_it(sim_gpu, direct_dir, monkeypatch):
    """With --async and --every, a save's writes go on while training does; the next copy of the states starts
    only once they are done (as DCP waits for the last async_save)."""
    import threading

    from xferscope.workloads.checkpoint import checkpoint_process as cp

    cm = checkpoint_model("custom", 2, layers=2, hidden=256, ffn=512, vocab=1024, heads=4, kv_heads=2)
    plan = CheckpointSpec(cm, checkpoints=3, directory=str(direct_dir)).plan()
    events: list[str] = []
    stage, save = cp.CheckpointSetup._stage, cp.CheckpointSetup._save

    def staged(self, i):
        events.append(f"stage {i} {threading.current_thread().name != 'MainThread'}")
        return stage(self, i)

    def saved(self, k, stop, *rest):
        events.append(f"save {k} begins")
        out = save(self, k, stop, *rest)
        events.append(f"save {k} ends")
        return out

    monkeypatch.setattr(cp.CheckpointSetup, "_stage", staged)
    monkeypatch.setattr(cp.CheckpointSetup, "_save", saved)
    job = cp.CheckpointJob(
        str(direct_dir), plan.ranks, 3, "dlio", verify=True, path="bounce", on_gpu=True, staged=True, every=0.01
    )
    (end, error), _ = run_in_process(job)
    assert error is None, error
    assert len(end.writes) == 3 and len(end.restores) == 3
    order = [e for e in events if not e.startswith("stage 1")]
    assert order == [
        "stage 0 True", "save 0 begins", "save 0 ends",
        "stage 0 True", "save 1 begins", "save 1 ends",
        "stage 0 True", "save 2 begins", "save 2 ends",
    ]  # fmt: skip


DLIO_CHECKPOINT_SUMMARY = {
    "num_accelerators": 8,
    "metric": {
        "save_checkpoint_io_mean_GB_per_second": 1.5,  # GiB/s: DLIO sums the checkpoint's size in GiB
        "save_checkpoint_duration_mean_seconds": 0.04,
        "load_checkpoint_io_mean_GB_per_second": 2.0,
        "load_checkpoint_duration_mean_seconds": 0.03,
        "checkpoint_size_GB": 0.06,
    },
}


def test_saved_checkpoint_runs_and_dlios_summary_are_ranked_together(cli, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    for name in ("a", "b"):
        r = cli("workload", "checkpoint", *SMALL_MODEL, "--checkpoints", "2", "--dir", str(tmp_path),
                "--json", str(out / f"{name}.json"))  # fmt: skip
        assert r.code == 0, r.err
    (out / "summary.json").write_text(json.dumps(DLIO_CHECKPOINT_SUMMARY))
    files = [str(out / n) for n in ("a.json", "b.json", "summary.json")]
    r = cli("workload", "compare", *files, "--json", str(out / "c.json"))
    assert r.code == 0, r.err
    d = json.loads((out / "c.json").read_text())
    assert d["kind"] == "workload-checkpoint-compare" and len(d["results"]) == 2
    by = {e["label"]: e for e in d["entries"]}
    assert by["summary.json"]["path"] == "dlio" and by["summary.json"]["value"] == 0.04
    assert by["summary.json"]["gb_per_s"] == pytest.approx(1.5 * (1 << 30) / 1e9)
    assert by["summary.json"]["beside"] == 0.03
    a = json.loads((out / "a.json").read_text())
    median = sorted(s["seconds"] for s in a["saves"])
    assert by["a.json"]["value"] == pytest.approx(sum(median) / 2)
    values = [e["value"] for e in d["entries"]]
    assert values == sorted(values) and "saved checkpoint runs" in r.out


def test_a_checkpoint_run_beside_another_workload_is_one_line(cli, tmp_path):
    out = tmp_path / "a.json"
    r = cli("workload", "checkpoint", *SMALL_MODEL, "--checkpoints", "1", "--dir", str(tmp_path), "--json", str(out))
    assert r.code == 0, r.err
    training = os.path.join(os.path.dirname(__file__), "data", "dlio-summary.json")
    r = cli("workload", "compare", str(out), training)
    assert r.code == 2 and "compare with checkpoint runs only" in r.err and len(r.err.strip().splitlines()) == 1


CHECKPOINT_PROFILE = """\
name = "checkpoint-small"
description = "a small custom model's checkpoints"
kind = "workload"

[workload]
workload = "checkpoint"
model = "llama3-8b"
ranks = 4
scale = 0.0005
checkpoints = 2
layout = "dcp"
path = "host"
rank-shift = 1
verify = true
"""


def test_a_checkpoint_profile_reads_writes_back_and_replays(cli, tmp_path):
    from xferscope.profiles.toml_format import dump_profile, parse_profile

    p = parse_profile(CHECKPOINT_PROFILE, "c.toml", "c")
    assert p.workload["rank_shift"] == 1 and p.workload["scale"] == 0.0005 and p.paths() == ["host"]
    assert parse_profile(dump_profile(p), "again.toml", "c").workload == p.workload
    profile = tmp_path / "checkpoint-small.toml"
    profile.write_text(CHECKPOINT_PROFILE)
    out = tmp_path / "out"
    out.mkdir()
    r = cli("replay", str(profile), "--dir", str(tmp_path), "--results", str(out / "r.json"))
    assert r.code == 0, r.err
    d = json.loads((out / "r.json").read_text())
    assert d["kind"] == "checkpoint" and d["verified"] is True and d["rank_shift"] == 1
    assert d["spec"]["layout"] == "dcp" and len(d["saves"]) == 2 and len(d["spec"]["ranks_here"]) == 4
    assert sorted(os.listdir(tmp_path)) == ["checkpoint-small.toml", "out"]
    refused = cli("replay", str(profile), "--duration", "5")
    assert refused.code == 2 and "--duration is not for a checkpoint profile" in refused.err


@pytest.mark.parametrize(
    ("text", "says"),
    [
        (CHECKPOINT_PROFILE + "preset = 'unet3d'\n", "no option --preset"),
        (CHECKPOINT_PROFILE.replace('model = "llama3-8b"\n', ""), "[workload] needs model"),
        (CHECKPOINT_PROFILE.replace('"dcp"', '"zarr"'), "layout: 'zarr'"),
    ],
)
def test_a_bad_checkpoint_profile_is_one_line(cli, tmp_path, text, says):
    """Its fields are the command's options, checked as the command checks them before anything is written."""
    profile = tmp_path / "bad.toml"
    profile.write_text(text)
    r = cli("replay", str(profile), "--dir", str(tmp_path))
    assert r.code == 2 and says in r.err and len(r.err.strip().splitlines()) == 1, r.err
    assert sorted(os.listdir(tmp_path)) == ["bad.toml"]


def test_the_bundled_checkpoint_profile_makes_a_valid_plan(cli, tmp_path):
    from xferscope.commands.profile_options import command_line, command_of
    from xferscope.commands.workload_kinds import command_named
    from xferscope.profiles import load_profile

    p = load_profile("checkpoint-llama3-8b-subset")
    fields = {k: v for k, v in p.workload.items() if k != "workload"}
    argv = command_line(command_of(command_named("checkpoint"), "checkpoint"), fields, "workload checkpoint")
    assert argv[0] == "llama3-8b" and {"--subset", "--verify"} <= set(argv) and "--rounds" not in argv
    assert argv[argv.index("--rank-shift") + 1] == "1" and argv[argv.index("--path") + 1] == "host"
    out = tmp_path / "plan.json"
    r = cli("workload", "checkpoint", *argv, "--plan", "--dir", str(tmp_path), "--json", str(out))
    assert r.code == 0, r.err
    plan = json.loads(out.read_text())
    assert plan["model"]["name"] == "llama3-8b" and plan["subset"] and len(plan["ranks_here"]) == 8
    assert plan["checkpoints"] == 4 and round(plan["bytes_a_checkpoint_here"] / (1 << 30), 1) == 5.2


def test_a_plan_checked_as_it_is_typed_is_placed_when_the_run_starts(tmp_path, monkeypatch):
    """The console checks its form without measuring the GPUs (a process of its own, too slow for each key); the
    run's session decides where the states live before anything is written (here in host memory: a machine with a
    GPU would put them there, so its GPUs are hidden)."""
    from xferscope.gpus import NO_GPU_ENV
    from xferscope.workloads.checkpoint.session import CheckpointRunOptions, CheckpointSession

    monkeypatch.setenv(NO_GPU_ENV, "1")

    cm = checkpoint_model("custom", 2, layers=2, hidden=256, ffn=512, vocab=1024, heads=4, kv_heads=2)
    typed = CheckpointSpec(cm, checkpoints=1, directory=str(tmp_path)).plan(place=False)
    assert not typed.placed and typed.state_in == ""
    session = CheckpointSession(typed, CheckpointRunOptions())
    session.prepare()
    assert session.plan.placed and session.plan.state_in.startswith("host memory")
    assert os.listdir(tmp_path) == []


def test_each_ranks_bytes_are_ticked_while_a_checkpoint_is_written(tmp_path, monkeypatch):
    """Ticks come while a checkpoint is being written, not only once it is saved: a rank part way through its
    files shows the bytes written so far, and the phase says when a file is being synced."""
    import threading
    import time

    from xferscope.workloads.checkpoint import checkpoint_process as cp
    from xferscope.workloads.common import storers

    body = storers.HostStorer.body

    def slow(self, fd, at, size, stop):
        n = body(self, fd, at, size, stop)
        time.sleep(0.2)  # a slow disk: the ticker runs in between
        return n

    sync = os.fsync

    def slow_sync(fd):
        sync(fd)
        time.sleep(0.2)  # so is its fsync: the ticks say so

    monkeypatch.setattr(storers.HostStorer, "body", slow)
    monkeypatch.setattr(storers.os, "fsync", slow_sync)
    plan = small_plan(tmp_path, checkpoints=1)
    setup = cp.CheckpointSetup(cp.CheckpointJob(str(tmp_path), plan.ranks, 1, "dlio", interval=0.005))
    ticks: list = []
    setup.build()
    try:
        _, error = setup.run(threading.Event(), ticks.append)
    finally:
        setup.close()
    assert error is None
    first = plan.ranks[0]
    during = [t.per_rank[0] for t in ticks if t.phase in ("writing", "fsync")]
    assert {"writing", "fsync"} <= {t.phase for t in ticks}
    assert first.files[0].size in during, "rank 0's first file written, its second not yet"
    assert during == sorted(during) and during[-1] <= first.size
    assert next(t for t in ticks if t.phase == "evicting").per_rank[0] == first.size


def test_the_host_path_sums_what_it_writes_as_torch_save_does(tmp_path):
    """DLIO's files are torch.save's: a zip whose records carry the CRC-32 of their bytes. The host path spends that
    CPU too (the DLIO layout), over exactly the bytes it writes; the other paths do not."""
    import threading
    import zlib

    from xferscope.workloads.common.fetchers import host_slot
    from xferscope.workloads.common.storers import make_storer

    slot = host_slot(3 << 20)
    try:
        assert slot.host is not None
        slot.host[:] = bytes(range(256)) * (len(slot.host) // 256)
        storer = make_storer("host", slot, None, None, checksum=True)
        n, _, _ = storer.store(str(tmp_path / "f.pt"), 100, (2 << 20) + 7, True, threading.Event())
        assert n == (2 << 20) + 7 and storer.crc == zlib.crc32((tmp_path / "f.pt").read_bytes())
        plain = make_storer("bounce", slot, None, None, checksum=True)  # a pinned copy, written with O_DIRECT
        assert not plain.checksum
    finally:
        slot.close()


def test_checkpoint_takes_every_workloads_output_options_csv_wide_and_interval(cli, tmp_path):
    """The shared output group: --csv (a row a checkpoint and a row a rank, of each run of a comparison), --wide,
    --interval (the live ticks), --seed and --keep, as the other workloads take them."""
    import csv

    out = tmp_path / "out"
    out.mkdir()
    r = cli("workload", "checkpoint", *SMALL_MODEL, "--path", "host,host", "--rounds", "1", "--checkpoints", "2",
            "--dir", str(tmp_path), "--csv", str(out / "c.csv"), "--json", str(out / "c.json"), "--wide",
            "--interval", "0.2", "--seed", "7")  # fmt: skip
    assert r.code == 0, r.err
    rows = list(csv.DictReader((out / "c.csv").open()))
    d = json.loads((out / "c.json").read_text())
    assert [row["row"] for row in rows if row["path"] == "host"][:2] == ["checkpoint 1", "checkpoint 2"]
    checkpoints = [row for row in rows if row["row"].startswith("checkpoint")]
    ranks = [row for row in rows if row["row"].startswith("rank")]
    assert len(checkpoints) == 2 * 2 and len(ranks) == 2 * 4, "each run's checkpoints, then its 4 ranks"
    saves = [s["seconds"] for res in d["results"] for s in res["saves"]]
    assert sorted(float(row["save_s"]) for row in checkpoints) == pytest.approx(sorted(saves))
    assert all(row["status"] == "ok" and float(row["restore_s"]) > 0 for row in checkpoints)
    assert sorted(os.listdir(tmp_path)) == ["out"]
    bad = cli("workload", "checkpoint", *SMALL_MODEL, "--csv", str(tmp_path / "no" / "c.csv"), "--dir", str(tmp_path))
    assert bad.code == 2 and "Traceback" not in bad.err, bad.err
