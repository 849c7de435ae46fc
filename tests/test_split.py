"""--split: one request of the block size as parallel sub-requests (KvikIO's task size).

The plan is a plain function (and the native core plans the same way); the paths that split run here
on real files: host directly, bounce and bounce-async with host stand-ins for CUDA, and cuFile's
calls through the native loop with a cuFile stand-in that proves the sub-requests of a block are in
flight together. The same through real cuFile (and --verify there) is tests/test_gpu_engines.py's."""

from __future__ import annotations

import json
import os

import pytest
from gpu_standins import run_engine

from xferscope import _gpusim, _iocore
from xferscope import target as targets
from xferscope.engines.native import GpuWorker
from xferscope.engines.split import MAX_LANES, lanes, plan_split, split_advice, split_label
from xferscope.errors import SpecError
from xferscope.run.runner import EngineRun
from xferscope.spec import RunSpec

K, M = 1 << 10, 1 << 20


# ------------------------------------------------------------------ the plan


def test_plan_of_a_block_that_divides():
    assert plan_split(16 * M, 4 * M) == [(0, 4 * M), (4 * M, 4 * M), (8 * M, 4 * M), (12 * M, 4 * M)]


def test_plan_of_a_block_that_does_not_divide():
    plan = plan_split(10 * M, 4 * M)
    assert plan == [(0, 4 * M), (4 * M, 4 * M), (8 * M, 2 * M)]
    assert sum(n for _, n in plan) == 10 * M


@pytest.mark.parametrize("split", [None, 0, 16 * M, 32 * M])
def test_no_split_is_one_request(split):
    assert plan_split(16 * M, split) == [(0, 16 * M)]


def test_plans_cover_the_block_in_order_and_match_the_native_core():
    for bs in (4 * K, 12 * K, 64 * K, M, 3 * M + 512, 16 * M, 17 * M):
        for split in (512, 4 * K, 8 * K, 64 * K, M, 4 * M, 16 * M):
            plan = plan_split(bs, split)
            assert plan == _iocore.split_plan(bs, split)
            ends = [o + n for o, n in plan]
            assert plan[0][0] == 0 and ends[-1] == bs
            assert all(o == e for (o, _), e in zip(plan[1:], ends))
            assert all(0 < n <= split for _, n in plan)


def test_lanes_are_capped():
    assert lanes(16 * M, 4 * M) == 4
    assert lanes(16 * M, 64 * K) == MAX_LANES == _iocore.MAX_LANES
    assert lanes(M, None) == 1


# ------------------------------------------------------------------ the spec and the command line


def spec(**kw) -> RunSpec:
    base = dict(path="cufile", block_size=16 * M, split=4 * M, file_size=64 * M)
    base.update(kw)
    return RunSpec(**base)


def test_result_name_shows_both_sizes():
    assert spec().validate().name == "cufile read 16M/4M w1"
    assert spec(split=None).validate().name == "cufile read 16M w1"
    assert spec(split=32 * M).validate().block_text == "16M"


@pytest.mark.parametrize(
    "kw, word",
    [
        (dict(path="cufile-batch"), "cufile-batch"),
        (dict(path="cufile-async"), "cufile-async"),
        (dict(path="host", iodepth=8), "io_uring"),
        (dict(split=4 * M + 100), "512"),
        (dict(split=256), "outside"),
    ],
)
def test_bad_split_is_refused_with_the_reason(kw, word):
    with pytest.raises(SpecError) as err:
        spec(**kw).validate()
    assert err.value.field == "split" and word in str(err.value)


def test_cli_split_on_host(cli, direct_dir):
    f = direct_dir / "s.dat"
    r = cli(
        "run",
        "--bs",
        "64K",
        "--split",
        "16K",
        "-s",
        "4M",
        "--total",
        "2M",
        "-f",
        str(f),
        "-w",
        "2",
        "--verify",
        "--format",
        "json",
    )
    assert r.code == 0, r.err
    d = json.loads(r.out)
    assert d["status"] == "ok" and d["bytes"] == 2 * M
    assert d["spec"]["split"] == 16 * K and d["environment"]["split"] == 16 * K
    assert d["environment"]["sub_requests_in_flight_per_worker"] == 4
    assert "each 64K request as 4 sub-requests of 16K, 4 in flight (--split)" in d["labels"]
    assert d["label"] == "host read 64K/16K w2"


def test_cli_split_table_shows_both_sizes(cli, direct_dir):
    r = cli("run", "--bs", "64K", "--split", "24K", "-s", "4M", "--total", "1M", "-f", str(direct_dir / "t.dat"))
    assert r.code == 0, r.err
    assert "64K request as 3 sub-requests of 24K, the last 16K" in r.out


def test_cli_bad_split_is_one_line(cli, direct_dir):
    r = cli("run", "--path", "cufile-batch", "--split", "4M", "--bs", "16M", "-f", str(direct_dir / "u.dat"))
    assert r.code != 0
    lines = r.err.strip().splitlines()
    assert len(lines) == 1 and "split" in lines[0] and "Traceback" not in r.err
    r = cli("run", "--split", "lots", "-f", str(direct_dir / "u.dat"))
    assert r.code != 0 and len(r.err.strip().splitlines()) == 1


# ------------------------------------------------------------------ the engines


def test_host_split_reads_and_writes_the_right_data(direct_dir):
    for io in ("randrw", "read"):
        r = EngineRun(
            RunSpec(
                path="host",
                io=io,
                block_size=40 * K,
                split=16 * K,
                workers=2,
                file_size=4 * M,
                duration=None,
                total_bytes=4 * M,
                verify=True,
                file=str(direct_dir / "h.dat"),
                keep=io == "randrw",
            )
        ).execute()
        assert r.status == "ok" and r.bytes == 4 * M // (40 * K) * 40 * K // 2 * 2


@pytest.mark.parametrize("path", ["bounce", "bounce-async"])
def test_bounce_split_moves_the_right_data_in_parallel_sub_requests(sim_gpu, direct_dir, path):
    s = RunSpec(
        path=path,
        io="randrw",
        rwmix=60,
        block_size=40 * K,
        split=16 * K,
        workers=2,
        iodepth=2,
        file_size=4 * M,
        duration=None,
        total_bytes=2 * M,
        verify=True,
        file=str(direct_dir / "b.dat"),
    )
    run = run_engine(s)
    assert run.error is None
    for w in run.timelines:
        subs = [r for r in w if r.kind in (_iocore.TL_SUB_READ, _iocore.TL_SUB_WRITE)]
        blocks = {}
        for r in subs:
            blocks.setdefault(r.off - r.off % (40 * K), []).append(r)
        assert blocks
        for base, parts in blocks.items():
            if len(parts) != 3:  # a random pattern may touch one block twice
                continue
            assert sorted((r.off - base, r.bytes) for r in parts) == plan_split(40 * K, 16 * K)
        assert {r.lane for r in subs} > {0}, "helper lanes took sub-requests"


def cufile_job(path: str, fd: int, seed: int, bs: int, split: int, blocks: int, **kw):
    """A cufile Job of the native core on the stand-ins: one worker, cuFileRead of its blocks."""
    dev = _gpusim.alloc(bs)
    worker = GpuWorker(ctx=1, stream=_gpusim.stream(), dev=dev, handle=_gpusim.file(fd))
    job = _iocore.Job(
        [fd],
        [0],
        [bs * blocks],
        bs,
        mode=_iocore.MODE_CUFILE,
        bytes_limit=bs * blocks,
        pattern_seeds=[seed],
        gpu_functions=_gpusim.functions(),
        gpu_workers=[worker],
        split=split,
        timeline=1024,
        **kw,
    )
    return job, dev


def prepared_file(directory, size: int):
    s = RunSpec(
        path="host",
        file=str(directory / "c.dat"),
        file_size=size,
        block_size=4 * K,
        duration=None,
        total_bytes=size,
        keep=True,
    )
    t = targets.plan(s.validate())
    targets.materialize(t)
    return t


@pytest.mark.parametrize(
    "bs, split", [(16 * M, 4 * M), (40 * K, 16 * K), (M, 4 * M)], ids=["divides", "does-not-divide", "no-split"]
)
def test_cufile_sub_requests_are_in_flight_together(sim_gpu, direct_dir, bs, split):
    blocks = 4
    t = prepared_file(direct_dir, bs * blocks)
    plan = plan_split(bs, split)
    # each cuFileRead waits until len(plan) of them are inside at once: serial sub-requests never meet
    sim_gpu.configure(gather=len(plan), gather_timeout_s=10)
    fd = os.open(t.files[0].path, os.O_RDONLY | os.O_DIRECT)
    try:
        job, dev = cufile_job(t.files[0].path, fd, t.files[0].pattern_seed, bs, split, blocks, verify=True)
        job.start()
        assert job.wait(60)
        snap = job.snapshot()
    finally:
        os.close(fd)
        targets.cleanup(t, keep=False)
    assert snap["error"] is None
    calls = [c for c in _gpusim.log() if c[0] == "cufile_read"]
    assert len(calls) == blocks * len(plan)
    assert all(c[7] for c in calls), "every sub-request met the others of its block"
    for b in range(blocks):
        got = sorted((c[3] - b * bs, c[4], c[2] - dev) for c in calls if b * bs <= c[3] < (b + 1) * bs)
        assert got == [(o, n, o) for o, n in plan], "file offsets, sizes and GPU offsets follow the plan"
    ops = sum(w[0] for w in snap["workers"])
    assert ops == blocks, "the latency histogram counts requests, not sub-requests"


def test_a_failing_sub_request_fails_the_run_with_its_offset(sim_gpu, direct_dir):
    t = prepared_file(direct_dir, 4 * M)
    fd = os.open(t.files[0].path, os.O_RDONLY)
    os.close(fd)  # the stand-in's reads now fail (EBADF)
    try:
        job, _ = cufile_job(t.files[0].path, fd, 0, M, 256 * K, 4)
        job.start()
        assert job.wait(60)
        err = job.snapshot()["error"]
    finally:
        targets.cleanup(t, keep=False)
    assert err is not None
    message, offset = err
    assert "cuFileRead of a sub-request at offset" in message and offset % (256 * K) == 0


# ------------------------------------------------------------------ the advice


def test_advice_for_large_cufile_blocks_in_compat_mode():
    line = split_advice("cufile", 16 * M, None, "compat")
    assert line and "--split 4M" in line and "compat" in line


@pytest.mark.parametrize(
    "args",
    [
        ("cufile", 16 * M, 4 * M, "compat"),  # already split
        ("cufile", 1 * M, None, "compat"),  # small blocks
        ("cufile", 16 * M, None, "gds"),  # true GDS: no evidence that splitting helps
        ("cufile", 16 * M, None, None),  # mode unknown
        ("bounce", 16 * M, None, None),
        ("cufile-batch", 16 * M, None, "compat"),
    ],
)
def test_no_advice_where_no_clear_gain(args):
    assert split_advice(*args) is None


def test_split_label_says_when_it_is_not_used():
    assert split_label(M, 4 * M) == "--split 4M not used: blocks of 1M are not larger"
    assert split_label(M, None) is None


def test_compare_note_gives_the_advice_once():
    """The compare table's note: one line per distinct advice, from the runs' specs and cuFile mode."""
    from types import SimpleNamespace

    from xferscope.report import advice_notes

    def result(path, bs, split=None, mode=None):
        return SimpleNamespace(
            spec=RunSpec(path=path, block_size=bs, split=split, file_size=64 * M),
            environment={"cufile_mode": mode} if mode else {},
        )

    assert advice_notes(
        [result("host", 16 * M), result("cufile", 16 * M, mode="compat"), result("cufile", 16 * M, mode="compat")]
    ) == [split_advice("cufile", 16 * M, None, "compat")]
    assert advice_notes([result("cufile", 16 * M, 4 * M, "compat"), result("cufile", M, mode="compat")]) == []


def test_lanes_cpu_is_counted_beside_the_workers(direct_dir):
    """The lanes' CPU time goes into the engine's figures, and the busiest thread can be a lane."""
    from xferscope.engines.base import Snapshot

    t = prepared_file(direct_dir, 4 * M)
    fd = os.open(t.files[0].path, os.O_RDONLY)  # through the page cache: the lanes spend CPU copying
    try:
        job = _iocore.Job([fd], [0], [4 * M], 256 * K, duration_ns=300_000_000, split=16 * K)
        job.start()
        assert job.wait(60)
        (w,) = Snapshot.from_native(job.snapshot()).workers
        assert len(job.tids()) == 1 + 15 and all(job.tids())
    finally:
        os.close(fd)
        targets.cleanup(t, keep=False)
    assert w.lanes_usr_us + w.lanes_sys_us > 0
    assert 0 < w.lane_max_us <= w.lanes_usr_us + w.lanes_sys_us


def test_a_path_is_qualified_compat_from_its_measured_mode_not_its_labels():
    """The compare table's "compat" after a path's name comes from the mode cuFile's counters confirmed
    (``environment["cufile_mode"]``), whatever the labels' words."""
    from types import SimpleNamespace

    from xferscope.report import path_qualifiers

    def result(mode, labels):
        return SimpleNamespace(spec=RunSpec(path="cufile"), environment={"cufile_mode": mode}, labels=labels)

    assert path_qualifiers(result("compat", ["O_DIRECT"])) == ["compat"]
    assert path_qualifiers(result("gds", ["cuFile GDS (not compat: nvidia-fs 2.26)"])) == []
