"""The host engine on real files: every pattern, accounting, percentiles, verification, sampling."""

import json
import os

import pytest
from test_engine_process import wait_until

from xferscope.errors import RunFailed
from xferscope.run.runner import EngineRun
from xferscope.spec import RunSpec
from xferscope.target import read_sidecar

MIB = 1 << 20


def run(tmp, **kw):
    kw.setdefault("file_size", 16 * MIB)
    kw.setdefault("duration", 0.4)
    kw.setdefault("block_size", 4096)
    return EngineRun(RunSpec(file=str(tmp / "x.dat"), **kw)).execute()


@pytest.mark.parametrize("io", ["read", "write", "randread", "randwrite", "randrw", "rw"])
def test_each_pattern_accounts_bytes_and_ops(direct_dir, io):
    r = run(direct_dir, io=io, workers=2)
    assert r.status == "ok"
    assert r.ops > 0
    assert r.bytes == r.ops * 4096
    assert r.read_bytes + r.write_bytes == r.bytes
    if io in ("read", "randread"):
        assert r.write_ops == 0
    if io in ("write", "randwrite"):
        assert r.read_ops == 0
    if io in ("randrw", "rw"):
        assert r.read_ops > r.write_ops > 0  # 70 % reads
        assert r.read_latency_us is not None and r.write_latency_us is not None
    lat = r.latency_us
    assert 0 < lat.min <= lat.p50 <= lat.p90 <= lat.p99 <= lat.p999 <= lat.max
    assert lat.min <= lat.mean <= lat.max
    assert sum(w.bytes for w in r.workers) == r.bytes
    assert not os.path.exists(direct_dir / "x.dat"), "the scratch file this run created must be removed"


def test_total_bytes_mode_stops_at_the_total(direct_dir):
    r = run(direct_dir, io="read", duration=None, total_bytes=8 * MIB, block_size=64 * 1024, workers=2)
    assert r.bytes == 8 * MIB and r.ops == 128
    assert r.first_done is not None and r.last_done is not None
    assert r.first_done.seconds <= r.last_done.seconds
    assert r.first_done.bytes <= r.last_done.bytes == r.bytes


@pytest.mark.parametrize("bs", [512, 4096, 1 << 20])
def test_block_size_boundaries(direct_dir, bs):
    from xferscope.target import filesystem_of

    if bs % filesystem_of(str(direct_dir)).logical_block:
        pytest.skip("device's logical block is larger than 512 bytes")
    r = run(direct_dir, io="randread", block_size=bs, file_size=4 * MIB, duration=0.2)
    assert r.bytes == r.ops * bs > 0


def test_block_equal_to_file_size(direct_dir):
    r = run(direct_dir, io="read", block_size=MIB, file_size=MIB, duration=0.2)
    assert r.ops > 0 and r.bytes == r.ops * MIB


def test_queue_depth_uses_io_uring_or_says_psync(direct_dir):
    r = run(direct_dir, io="randread", iodepth=8)
    assert any(label.startswith("io_uring qd8") or "io_uring unavailable" in label for label in r.labels)
    assert r.environment["io_engine"] in ("io_uring", "psync")
    assert r.bytes == r.ops * 4096


def test_samples_stream_at_the_interval_and_add_up(direct_dir):
    spec = RunSpec(
        file=str(direct_dir / "x.dat"), file_size=8 * MIB, duration=1.0, block_size=4096, io="randread", interval=0.1
    )
    r = EngineRun(spec).execute()
    # a sample at each tick of the interval, never before it; a loaded machine may be late to one, and one
    # late by more than an interval skips a tick rather than bursting: so at most one a tick, none early
    ticks = [s.t / spec.interval for s in r.samples[:-1]]  # the last one comes when the run ends
    assert 2 <= len(r.samples) <= r.seconds / spec.interval + 1, [s.t for s in r.samples]
    assert all(t >= i + 1 - 0.01 for i, t in enumerate(ticks)), [s.t for s in r.samples]
    assert r.samples[-1].t == pytest.approx(r.seconds, abs=0.01)
    assert sum(s.bytes for s in r.samples) == r.bytes
    assert r.samples[-1].total_bytes == r.bytes
    assert all(s.throughput_gib_s >= 0 for s in r.samples)
    assert r.environment["io_mode"] == "O_DIRECT"
    assert r.cpu["cpu_seconds"] >= 0 and "usr_pct" in r.cpu
    # the worker threads' own CPU, told apart from the sampler's
    assert 0 < r.cpu["engine_cpu_seconds"] <= r.seconds * spec.workers * 1.05
    assert any(s.engine_sys_pct >= 0 for s in r.samples)
    # the busiest worker thread, against one core (one worker here: all of the engine's CPU)
    assert r.cpu["engine_busiest_thread_pct"] == pytest.approx(
        r.cpu["engine_usr_pct"] + r.cpu["engine_sys_pct"], rel=0.05
    )


def test_stop_keeps_what_was_measured(direct_dir):
    run_ = EngineRun(RunSpec(file=str(direct_dir / "x.dat"), file_size=8 * MIB, duration=30, block_size=4096))
    run_.prepare()
    run_.start()
    wait_until(lambda: run_.samples, what="a sample measured")
    run_.stop()
    assert run_.join(60.0), "the workers stop"
    run_.close()
    r = run_.finish()
    assert r.status == "interrupted"
    assert r.bytes > 0 and r.seconds < 30
    assert not (direct_dir / "x.dat").exists()


def test_verification_passes_on_good_data_and_catches_corruption(direct_dir):
    path = direct_dir / "v.dat"
    keep = dict(file=str(path), file_size=4 * MIB, block_size=4096, keep=True, duration=0.3)
    assert EngineRun(RunSpec(io="randwrite", verify=True, **keep)).execute().status == "ok"
    assert read_sidecar(str(path))["pattern_intact"] is True
    assert EngineRun(RunSpec(io="read", verify=True, **keep)).execute().status == "ok"
    with open(path, "r+b") as fh:  # corrupt one block in the middle
        fh.seek(123 * 4096 + 40)
        fh.write(b"\xff" * 8)
    with pytest.raises(RunFailed, match=r"verification failed: data at offset 503848 ") as exc:
        EngineRun(
            RunSpec(
                io="read",
                verify=True,
                total_bytes=4 * MIB,
                duration=None,
                **{k: v for k, v in keep.items() if k != "duration"},
            )
        ).execute()
    assert exc.value.result.status == "failed"


def test_write_without_verify_marks_the_pattern_gone_and_verify_refills(direct_dir):
    path = direct_dir / "w.dat"
    base = dict(file=str(path), file_size=2 * MIB, block_size=4096, keep=True, duration=0.2)
    EngineRun(RunSpec(io="write", **base)).execute()
    assert read_sidecar(str(path))["pattern_intact"] is False
    assert EngineRun(RunSpec(io="randread", verify=True, **base)).execute().status == "ok"
    assert read_sidecar(str(path))["pattern_intact"] is True


def test_directory_mode_has_one_file_per_worker(direct_dir):
    spec = RunSpec(directory=str(direct_dir), file_size=2 * MIB, block_size=4096, workers=3, duration=0.2, keep=True)
    r = EngineRun(spec).execute()
    files = sorted(p.name for p in direct_dir.iterdir() if p.suffix == ".dat")
    assert len(files) == 3 and r.bytes > 0
    assert all(w.bytes > 0 for w in r.workers)


def test_buffered_mode_is_labelled(tmp_path):
    r = EngineRun(
        RunSpec(file=str(tmp_path / "b.dat"), file_size=2 * MIB, block_size=4096, buffered=True, duration=0.2)
    ).execute()
    assert r.environment["io_mode"] == "buffered"
    assert any("buffered" in label for label in r.labels)
    from xferscope.report import compare_rows

    assert compare_rows([r])[0][0] == "host (buffered)"


def test_compare_rows_say_when_the_page_cache_was_not_asked_for(tmp_path):
    """A path that went through the page cache on its own (cuFile's compat batch does) reads so in the
    table's path column, next to one that was asked to."""
    from xferscope.report import compare_rows

    r = EngineRun(
        RunSpec(file=str(tmp_path / "b.dat"), file_size=2 * MIB, block_size=4096, buffered=True, duration=0.2)
    ).execute()
    r.spec = r.spec.replace(buffered=False)
    r.environment["cufile_mode"] = "compat"  # as cuFile's compat batch reports it
    assert compare_rows([r])[0][0] == "host (page cache, compat)"


def test_workers_that_ignore_a_stop_are_left_behind_with_their_figures(direct_dir, monkeypatch):
    """A driver call that never returns (seen with cuFile's batch API) must not hang Ctrl-C: in the
    engine's own process (``LocalRun``), the workers are left behind with what they measured."""
    import _thread
    import threading
    import time

    import xferscope.run.local_run as runner_mod
    from xferscope.run.local_run import LocalRun as EngineRun

    monkeypatch.setattr(runner_mod, "STOP_GRACE_S", 0.5)
    real, closed = {}, []
    original_prepare = EngineRun.prepare

    def prepare(self, progress=None):
        original_prepare(self, progress)
        engine = self.engine
        real.update(stop=engine.stop, close=engine.close)
        engine.stop = lambda: None  # the workers ignore the request ...
        engine.wait = lambda timeout: (time.sleep(min(timeout, 0.05)), False)[1]  # ... and never finish
        engine.close = lambda: closed.append(True)

    monkeypatch.setattr(EngineRun, "prepare", prepare)
    run_ = EngineRun(RunSpec(file=str(direct_dir / "x.dat"), file_size=4 * MIB, duration=30, block_size=4096))

    def ctrl_c_once_measuring() -> None:
        wait_until(lambda: run_.samples, what="a sample")
        _thread.interrupt_main()

    threading.Thread(target=ctrl_c_once_measuring, daemon=True).start()
    try:
        # it returns at all: the workers never finish, so the run gave them STOP_GRACE_S and left them
        r = run_.execute()
        assert run_.stuck and r.status == "interrupted" and "did not stop" in r.error
        assert r.bytes > 0
        assert not closed, "a stuck engine is not joined"
        assert not (direct_dir / "x.dat").exists(), "the scratch file is removed all the same"
    finally:
        real["stop"]()
        real["close"]()


def _anon_huge_kib() -> int:
    with open("/proc/self/smaps_rollup") as fh:
        return next(int(line.split()[1]) for line in fh if line.startswith("AnonHugePages:"))


@pytest.mark.parametrize("iodepth", [1, 8])
def test_huge_pages_back_the_host_buffers_when_asked(direct_dir, iodepth):
    """--huge-pages: the workers' buffers sit on 2 MiB pages while they run, and the result says so."""
    from xferscope.engines.host import thp_mode

    if thp_mode() not in ("always", "madvise"):
        pytest.skip(f"transparent huge pages are off here ({thp_mode()})")
    spec = RunSpec(
        file=str(direct_dir / "x.dat"),
        file_size=64 << 20,
        block_size=1 << 20,
        workers=2,
        iodepth=iodepth,
        duration=1.0,
        huge_pages=True,
    )
    seen = []
    from xferscope.run.local_run import LocalRun  # in this process, to read its own page sizes

    result = LocalRun(spec).execute(on_sample=lambda sample: seen.append(_anon_huge_kib()))
    assert result.status == "ok" and result.bytes > 0
    assert seen and max(seen) >= 2 * 2048, seen  # a 2 MiB page at least under each worker's buffers
    assert "buffers on 2 MiB huge pages" in result.labels
    assert result.environment["host_buffers"] == "2 MiB transparent huge pages"
    assert result.environment["host_buffers_huge"] is True  # what code acts on: never the words
    plain = run(
        direct_dir, file_size=64 << 20, block_size=1 << 20, total_bytes=8 << 20, duration=None, huge_pages=False
    )
    assert plain.environment["host_buffers"] == "4 KiB pages" and plain.status == "ok"
    assert plain.environment["host_buffers_huge"] is False
    assert not any("huge" in label or "4 KiB" in label for label in plain.labels)


def test_host_buffers_are_on_huge_pages_by_default_where_the_kernel_offers_them(direct_dir):
    from xferscope.engines.host import huge_pages_offered

    if not huge_pages_offered():
        pytest.skip("transparent huge pages are off here")
    seen = []
    from xferscope.run.local_run import LocalRun

    spec = RunSpec(file=str(direct_dir / "x.dat"), file_size=64 << 20, block_size=1 << 20, workers=2, duration=1.0)
    result = LocalRun(spec).execute(on_sample=lambda sample: seen.append(_anon_huge_kib()))
    assert result.status == "ok" and seen and max(seen) >= 2 * 2048, seen
    assert "buffers on 2 MiB huge pages" in result.labels
    assert result.environment["host_buffers"] == "2 MiB transparent huge pages (default)"


def test_host_buffers_fall_back_to_4k_pages_by_default_where_the_kernel_has_huge_pages_off(direct_dir, monkeypatch):
    from xferscope.engines import host
    from xferscope.run.local_run import LocalRun

    monkeypatch.setattr(host, "thp_mode", lambda: "never")
    result = LocalRun(RunSpec(file=str(direct_dir / "x.dat"), file_size=8 << 20, duration=0.2)).execute()
    assert result.status == "ok"
    assert "buffers on 4 KiB pages (transparent huge pages never)" in result.labels
    assert result.environment["host_buffers"] == "4 KiB pages (default)"


def test_the_4k_pages_flag_and_the_default_reach_the_host_engine(cli, direct_dir):
    from xferscope.engines.host import huge_pages_offered

    common = ["run", "--path", "host", "-f", str(direct_dir / "x.dat"), "-s", "8M", "--total", "4M", "--format", "json"]
    small = json.loads(cli(*common, "--4k-pages").out)
    assert small["environment"]["host_buffers"] == "4 KiB pages"
    default = json.loads(cli(*common).out)["environment"]["host_buffers"]
    assert default == ("2 MiB transparent huge pages (default)" if huge_pages_offered() else "4 KiB pages (default)")


def test_huge_pages_refused_plainly_where_the_kernel_has_them_off(direct_dir, monkeypatch):
    from xferscope.engines import host
    from xferscope.run.local_run import LocalRun  # the engine in this process, where the kernel's answer is patched

    monkeypatch.setattr(host, "thp_mode", lambda: "never")
    with pytest.raises(Exception, match=r"--huge-pages: transparent huge pages are off on this machine"):
        LocalRun(RunSpec(file=str(direct_dir / "x.dat"), file_size=8 << 20, duration=0.2, huge_pages=True)).execute()


@pytest.mark.parametrize("iodepth", [1, 4], ids=["psync", "io_uring"])
def test_host_records_the_same_timeline_as_the_bounce_paths(direct_dir, iodepth):
    """Every read of a host worker, with the fields and clock of the bounce paths' timeline (bench/bounce_timeline.py
    sets them side by side): one interval per operation, in the file, on time.monotonic_ns()'s clock."""
    import time

    from gpu_standins import run_engine

    from xferscope import _iocore

    before = time.monotonic_ns()
    run = run_engine(
        RunSpec(
            path="host",
            io="read",
            block_size=64 << 10,
            iodepth=iodepth,
            file_size=4 << 20,
            duration=None,
            total_bytes=2 << 20,
            file=str(direct_dir / "tl.dat"),
        )
    )
    after = time.monotonic_ns()
    assert run.error is None
    reads = run.reads()
    assert len(reads) == run.bytes // (64 << 10) >= 32 and all(r.kind == _iocore.TL_READ for r in reads)
    assert all(before <= r.t0 <= r.t1 <= after for r in reads)
    assert all(r.bytes == 64 << 10 and r.off % (64 << 10) == 0 and r.off < 4 << 20 for r in reads)
    if iodepth > 1 and any("io_uring" in label for label in run.labels):  # one interval per slot in flight
        assert {r.buf for r in reads} == set(range(iodepth))


def test_the_path_s_cpu_leaves_out_xferscope_s_own_sampling(direct_dir):
    """CPU-s/GiB is the engine process's CPU less its sampling threads (measured), which the result keeps apart."""
    result = EngineRun(RunSpec(path="host", file=str(direct_dir / "c.dat"), file_size=8 << 20, duration=0.5)).execute()
    cpu, gib = result.cpu, result.bytes / (1 << 30)
    assert cpu["telemetry_cpu_seconds"] > 0, "the sampler ran on the CPU for 0.5 s"
    assert result.cpu_seconds_per_gib == pytest.approx((cpu["cpu_seconds"] - cpu["telemetry_cpu_seconds"]) / gib)
    assert cpu["cpu_s_per_gib"] == pytest.approx(result.cpu_seconds_per_gib)
