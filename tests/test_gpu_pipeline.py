"""The bounce paths' scheduling, checked without a GPU: the real engines and native loop, with host
stand-ins for CUDA (tests/gpu_standins.py). In the stand-ins' default (lazy) mode a copy lands only
once a later copy is issued on its stream or somebody waits for it, so the checks below do not depend
on how fast anything runs: a loop that waited for a copy it did not need would show it every time."""

from __future__ import annotations

import itertools

import pytest
from gpu_standins import EngineRun, run_engine

from xferscope import _iocore
from xferscope.spec import RunSpec

K, M = 1 << 10, 1 << 20
BLOCKS = [4 * K, 64 * K, M, 16 * M]


def spec_for(path: str, directory, bs: int, blocks: int = 8, **kw) -> RunSpec:
    base = dict(
        path=path,
        io="read",
        block_size=bs,
        workers=1,
        iodepth=1,
        file_size=max(bs * blocks, 4 * M),
        duration=None,
        total_bytes=bs * blocks,
        file=str(directory / "pipe.dat"),
        interval=0.05,
    )
    base.update(kw)
    return RunSpec(**base)


def run_until_tried(sim_gpu, copy_ns: int, spec_of_seconds) -> EngineRun:
    """A run of bounce-async's engine (copies of ``copy_ns``, landing at once) as long as its workers need to finish
    their trial, both ways measured: 0.6 s, then longer where a loaded machine's workers had not finished it in that
    (its phases run on the clock, and each must time a block)."""
    for seconds in (0.6, 2.4, 9.6):
        sim_gpu.reset()
        sim_gpu.configure(copy_ns=copy_ns, landing=sim_gpu.LAND_EAGER)
        run = run_engine(spec_of_seconds(seconds))
        assert run.error is None
        if all(u["one_buffer"] and u["taking_turns"] for u in run.environment["trial_us_a_block"]):
            break
    return run


def kept_one_buffer(trial: dict) -> bool:
    """The way a trial's figures choose: one buffer only where its block is 2% faster (its waits cost CPU)."""
    return trial["one_buffer"] < trial["taking_turns"] * 0.98


def group_of(bs: int) -> int:
    from xferscope.engines.bounce import copy_group

    return copy_group(bs)


@pytest.fixture
def turns(monkeypatch):
    """bounce-async with its groups taking turns from the first read (no trial of one buffer first)."""
    from xferscope.engines import bounce

    monkeypatch.setattr(bounce.BounceAsyncEngine, "turns", _iocore.TURNS_ALWAYS)


@pytest.mark.parametrize("bs", BLOCKS, ids=["4K", "64K", "1M", "16M"])
def test_groups_take_turns_a_copy_a_group_while_the_next_is_read(sim_gpu, direct_dir, bs, turns):
    """Groups of up to 256 KiB: once a group's last block is read, the group goes to the GPU in one copy, which
    lands while the next group is read. So a copy call sits between two reads once a group, and the other gaps
    hold none; and while copies keep up, two groups take turns and no more are read into."""
    group = group_of(bs)
    blocks = 3 * group + 2
    run = run_engine(spec_for("bounce-async", direct_dir, bs, blocks=blocks))
    assert run.error is None and run.bytes == blocks * bs
    assert run.environment["blocks_per_copy"] == group
    reads, copies = run.reads(), run.copies_from()
    assert len(reads) == blocks and len(copies) == -(-blocks // group)
    whole = [group * bs] * (blocks // group)
    assert [c.bytes for c in copies] == whole + ([blocks % group * bs] if blocks % group else [])
    for a, b in itertools.pairwise(reads):
        assert a.t1 <= b.t0, "one read in flight at a time"
    for n, c in enumerate(copies[:-1]):  # the last one is copied when the run ends
        last, following = reads[(n + 1) * group - 1], reads[(n + 1) * group]
        assert last.t1 <= c.issued <= following.t0, f"group {n} is not copied right after its last block"
        assert c.landed >= following.t1, "it lands while the next group is read"
    copy_calls = [r for r in run.timelines[0] if r.kind == _iocore.TL_COPY]
    gaps_with_a_copy = [
        n for n, (a, b) in enumerate(itertools.pairwise(reads)) if any(a.t1 <= c.t0 < b.t0 for c in copy_calls)
    ]
    assert gaps_with_a_copy == [n for n in range(blocks - 1) if n % group == group - 1]
    # copies that land once the next one is issued (the stand-ins' lazy mode) keep up: two groups take turns
    assert [r.buf for r in reads] == [n % (2 * group) for n in range(blocks)]
    assert run.environment["read_buffers_per_worker"] == [min(blocks, 2 * group)]


@pytest.mark.parametrize("bs", BLOCKS, ids=["4K", "64K", "1M", "16M"])
def test_a_group_is_read_into_only_once_its_copy_has_landed(sim_gpu, direct_dir, bs, turns):
    """A device slower than any storage (a copy lands only when waited for): more groups come into play, up to the
    buffers there are; the reads then come round to a group still in flight and wait for it, once each time round,
    and never read into memory still being copied."""
    sim_gpu.configure(landing=sim_gpu.LAND_ON_WAIT)
    group = group_of(bs)
    run0 = run_engine(spec_for("bounce-async", direct_dir, bs, blocks=1))
    slots = len(run0.host_buffers[0])
    blocks = 2 * slots + group
    run = run_engine(spec_for("bounce-async", direct_dir, bs, blocks=blocks, iodepth=1))
    assert run.error is None and run.bytes == blocks * bs
    reads = run.reads()
    assert {r.buf for r in reads} == set(range(slots)), "every group in play while copies fall behind"
    starts = {addr: i for i, addr in enumerate(run.host_buffers[0])}
    copies = sorted((c for c in run.copies if c.kind == "htod" and c.src in starts), key=lambda c: c.issued)
    for r in reads:
        g = r.buf // group
        earlier = [c for c in copies if starts[c.src] // group == g and c.issued < r.t0]
        assert not earlier or earlier[-1].landed <= r.t0, f"slot {r.buf} read into while its group was in flight"
    waits = [w for w in run.timelines[0] if w.kind == _iocore.TL_WAIT and w.t0 < reads[-1].t1]
    assert len(waits) == (blocks - slots) // group  # each time the reads come round to a group after the first lap


@pytest.mark.parametrize("bs", [64 * K, M], ids=["64K", "1M"])
def test_each_worker_tries_both_ways_and_keeps_the_faster(sim_gpu, direct_dir, bs):
    """Copies that take 2 ms (a slow link) against reads of well under that (from the page cache: a loaded virtual
    disk's 1M reads took 3 ms and more, slower into many buffers): a worker that waits for each copy spends most of
    its time waiting, so its trial (six phases of 40 ms) finds the groups taking turns faster, goes on with them,
    and says so with the figures it measured. On a CPU so starved that a read takes as long as a copy, the way its
    figures say is the one kept."""
    run = run_until_tried(
        sim_gpu,
        2_000_000,
        lambda s: spec_for(
            "bounce-async", direct_dir, bs, workers=2, total_bytes=None, duration=s, file_size=64 * M, source="cache"
        ),
    )
    env = run.environment
    for u, on_one in zip(env["trial_us_a_block"], env["reads_on_one_buffer"], strict=True):
        assert u["one_buffer"] >= 2_000 and u["taking_turns"] > 0, u  # a block on one buffer waits for its copy
        assert on_one == kept_one_buffer(u), u  # the faster way by its own figures: groups, but on a starved CPU
    label = run.labels[-1]
    assert " read into " in label and "taking turns" in label and "us a block" in label, label
    # one buffer first (the trial), then groups: the reads went into one buffer and then a few groups' worth
    reads = run.reads()
    assert reads[0].buf == 0 and {r.buf for r in reads} - {0}


def test_a_trial_times_cycles_longer_than_half_a_phase(sim_gpu, direct_dir):
    """Copies of 25 ms: a block on one buffer takes most of a trial's 40 ms phase, and the first after the switch
    waits for the groups in flight as well, so no block on one buffer begins and ends within a phase (a loaded
    machine's slow reads do the same). A cycle is timed by the phase it began in, and a phase lasts until it has
    timed one: so the trial still measures both ways, and keeps the faster."""
    run = run_until_tried(
        sim_gpu,
        25_000_000,
        lambda s: spec_for(
            "bounce-async", direct_dir, 64 * K, total_bytes=None, duration=s, file_size=16 * M, source="cache"
        ),
    )
    (trial,) = run.environment["trial_us_a_block"]
    assert trial["one_buffer"] >= 25_000 and trial["taking_turns"] > 0, trial
    assert run.environment["reads_on_one_buffer"] == [kept_one_buffer(trial)], trial


@pytest.mark.parametrize("bs", [4 * K, 64 * K, M], ids=["4K", "64K", "1M"])
def test_the_buffers_read_into_stay_within_what_the_label_states(sim_gpu, direct_dir, bs):
    """Whichever way a worker went, the distinct buffers its reads landed in are no more than the label says."""
    import re

    sim_gpu.configure(copy_ns=200_000, landing=sim_gpu.LAND_EAGER)
    run = run_engine(spec_for("bounce-async", direct_dir, bs, blocks=120))
    assert run.error is None
    label = run.labels[-1]
    used = {r.buf for r in run.reads()}
    stated = re.search(r"\((\d+) pinned buffers at most", label)
    limit = int(stated.group(1)) if stated else 1
    assert "1 pinned buffer, each copy waited for" in label or stated, label
    assert len(used) <= limit, (label, sorted(used))
    assert run.environment["read_buffers_per_worker"] == [len(used)]


@pytest.mark.parametrize("path, bs, copy_ms", [("bounce", 4 * K, 10), ("bounce-async", 4 * M, 40)])
def test_a_copy_is_waited_for_without_spinning_through_it(sim_gpu, direct_dir, path, bs, copy_ms, monkeypatch):
    """Copies that take 10 ms each (40 ms for 4 MiB blocks, whose O_DIRECT reads cost the kernel CPU of their own,
    more on a loaded machine), against reads of a few milliseconds at most: the worker spends most of the run
    waiting for copies, and little of it on the CPU (it sleeps until a copy is due, then asks). A worker that
    waited in cuStreamSynchronize or cuEventSynchronize as CUDA does by default would spin the whole time."""
    from xferscope.engines import bounce

    monkeypatch.setattr(bounce.BounceAsyncEngine, "groups", 2)  # two groups in flight at most: mostly waiting
    sim_gpu.configure(copy_ns=copy_ms * 1_000_000, landing=sim_gpu.LAND_EAGER)
    run = run_engine(spec_for(path, direct_dir, bs, blocks=40, iodepth=1))
    assert run.error is None and run.bytes == 40 * bs
    ran_s = run.worker_done_s[0]
    assert ran_s >= 0.1, f"the run took {ran_s:.3f} s: too short for the copies to have been waited for"
    assert run.worker_cpu_s[0] < 0.25 * ran_s, (run.worker_cpu_s[0], ran_s)
    assert [w for w in run.timelines[0] if w.kind == _iocore.TL_WAIT], "the timeline shows the waits"


@pytest.mark.parametrize("io", ["read", "write", "randrw"])
@pytest.mark.parametrize("path", ["bounce", "bounce-async"])
def test_data_reaches_the_gpu_intact(sim_gpu, direct_dir, path, io):
    """--verify compares what landed in "GPU" memory with the file's pattern, and writes carry it."""
    spec = spec_for(
        path,
        direct_dir,
        64 * K,
        blocks=24,
        io=io,
        rwmix=50,
        verify=True,
        iodepth=4,
        workers=2,
        file_size=4 * M,
        total_bytes=48 * 64 * K,
    )
    run = run_engine(spec)
    assert run.error is None
    assert run.bytes == 48 * 64 * K


def test_verify_through_the_standins_catches_spoiled_data(sim_gpu, direct_dir):
    """What lands in the stand-ins' "GPU" memory is what was read: 8 spoiled bytes in the file reach it as they
    are, and --verify reports their offset."""
    path = direct_dir / "pipe.dat"
    run_engine(spec_for("bounce-async", direct_dir, 64 * K, keep=True))  # make the file
    with open(path, "r+b") as fh:
        fh.seek(3 * 64 * K + 128)
        fh.write(b"\0" * 8)
    run = run_engine(spec_for("bounce-async", direct_dir, 64 * K, verify=True))
    assert run.error is not None and run.error[1] == 3 * 64 * K + 128
    path.unlink()
    (direct_dir / "pipe.dat.xferscope").unlink(missing_ok=True)


def test_huge_page_buffers_for_bounce_paths(sim_gpu, direct_dir):
    from xferscope.engines.host import thp_mode

    if thp_mode() not in ("always", "madvise"):
        pytest.skip(f"transparent huge pages are off here ({thp_mode()})")
    run = run_engine(spec_for("bounce-async", direct_dir, M, huge_pages=True, verify=True, iodepth=2))
    assert run.error is None
    assert "pinned buffers on 2 MiB huge pages" in run.labels
    assert all(addr % 4096 == 0 for addr in run.host_buffers[0])
    assert run.host_buffers[0][0] % (2 << 20) == 0


def test_bounce_buffers_are_on_huge_pages_by_default_and_on_cuda_s_pages_with_4k_pages(sim_gpu, direct_dir):
    from xferscope.engines.host import huge_pages_offered

    if not huge_pages_offered():
        pytest.skip("transparent huge pages are off here")
    run = run_engine(spec_for("bounce", direct_dir, M, verify=True))
    assert run.error is None and "pinned buffers on 2 MiB huge pages" in run.labels
    assert run.host_buffers[0][0] % (2 << 20) == 0
    small = run_engine(spec_for("bounce-async", direct_dir, M, verify=True, huge_pages=False))
    assert small.error is None and "pinned buffers from cuMemHostAlloc (4 KiB pages, --4k-pages)" in small.labels
    env = run.environment
    assert env["pinned_buffers"].startswith("2 MiB transparent huge pages, cuMemHostRegister")
    assert env["host_buffers"] == "2 MiB transparent huge pages (default)", "named as the host path names its own"
    assert small.environment["host_buffers"] == "4 KiB pages"


def test_a_refused_registration_falls_back_to_cuda_s_pinned_memory_and_says_why(sim_gpu, direct_dir, monkeypatch):
    from gpu_standins import SimResources

    from xferscope.engines.host import huge_pages_offered
    from xferscope.errors import EnvironmentProblem

    if not huge_pages_offered():
        pytest.skip("transparent huge pages are off here")

    def refused(self, gpu, size):
        raise EnvironmentProblem("cannot pin 3 MiB of host memory on huge pages (cuMemHostRegister: ...)")

    monkeypatch.setattr(SimResources, "pinned_huge_memory", refused)
    run = run_engine(spec_for("bounce-async", direct_dir, M, verify=True, workers=2))
    assert run.error is None and run.bytes == 8 * M
    assert "pinned buffers from cuMemHostAlloc (4 KiB pages): cannot pin 3 MiB of host memory on huge pages" in (
        " ".join(run.labels)
    )
    with pytest.raises(EnvironmentProblem, match="cannot pin"):  # asked for by name: no quiet fallback
        run_engine(spec_for("bounce-async", direct_dir, M, huge_pages=True))
