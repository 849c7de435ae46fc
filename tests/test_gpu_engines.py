"""The GPU paths on a real GPU: every path reads and writes, verification catches a corrupted
block, the cuFile mode is detected, GPU memory comes back after runs, failures and Ctrl-C,
workers spread over two GPUs, telemetry reads. Skipped, with the reason, where there is no GPU."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import pytest
from gpu_reasons import GPU_REASON, needs_cufile, needs_kvikio

from xferscope.errors import EnvironmentProblem, RunFailed
from xferscope.run.local_run import LocalRun
from xferscope.run.runner import EngineRun
from xferscope.spec import RunSpec

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(GPU_REASON is not None, reason=f"no GPU path here: {GPU_REASON}")]

ALL_PATHS = [
    "bounce",
    "bounce-async",
    pytest.param("cufile", marks=needs_cufile),
    pytest.param("cufile-batch", marks=needs_cufile),
    pytest.param("cufile-async", marks=needs_cufile),
    pytest.param("kvikio", marks=needs_kvikio),
]
VERIFY_PATHS = ["bounce", "bounce-async", pytest.param("cufile", marks=needs_cufile)]
MIB = 1 << 20


def spec_for(path: str, directory, **kw) -> RunSpec:
    base = dict(
        path=path,
        io="read",
        block_size=MIB,
        workers=2,
        iodepth=4,
        file_size=32 * MIB,
        duration=None,
        total_bytes=16 * MIB,
        directory=None,
        file=str(directory / "gpu.dat"),
        interval=0.05,
    )
    base.update(kw)
    return RunSpec(**base)


def gpu_used_here(gpu: int = 0, pid: int | None = None) -> int:
    """GPU memory this process (or ``pid``) holds on ``gpu``, as NVML counts it per process: other test workers'
    contexts on the same GPU do not count. Where NVML gives no per-process figure, the device's used memory."""
    import pynvml

    pynvml.nvmlInit()
    try:
        handle = pynvml.nvmlDeviceGetHandleByIndex(gpu)
        who = os.getpid() if pid is None else pid
        mine = [p for p in pynvml.nvmlDeviceGetComputeRunningProcesses(handle) if p.pid == who]
        if all(p.usedGpuMemory is not None for p in mine):
            return sum(p.usedGpuMemory for p in mine)
        info = pynvml.nvmlDeviceGetMemoryInfo(handle)
        return int(info.total - info.free)
    finally:
        pynvml.nvmlShutdown()


@pytest.fixture
def held_context():
    """Keep GPU 0's primary context alive, so free memory is comparable before and after a run."""
    from xferscope.engines.gpu_setup import GpuResources

    res = GpuResources()
    res.context(0)
    yield res
    res.release()


@pytest.mark.parametrize("io", ["read", "write", "randread", "randrw"])
@pytest.mark.parametrize("path", ALL_PATHS)
def test_each_path_reads_and_writes(path, io, direct_dir):
    result = EngineRun(spec_for(path, direct_dir, io=io)).execute()
    assert result.status == "ok", result.error
    assert result.bytes >= 16 * MIB and result.ops == result.bytes // MIB
    if io in ("read", "randread"):
        assert result.write_bytes == 0
    if io == "write":
        assert result.read_bytes == 0
    assert result.histogram.count == result.ops, "latency histogram counts every operation"
    assert result.latency_us.p50 > 0
    assert set(result.gpus) == {0} and result.gpus[0]["bytes"] == result.bytes
    assert result.environment["gpus"][0]["index"] == 0
    if path.startswith("cufile") or path == "kvikio":
        assert result.environment["cufile_mode"] in ("gds", "compat")
        assert any("cuFile" in label for label in result.labels)


@pytest.mark.parametrize("path", VERIFY_PATHS)
def test_verify_passes_on_good_data(path, direct_dir):
    spec = spec_for(path, direct_dir, verify=True, io="randrw", rwmix=50)
    assert EngineRun(spec).execute().status == "ok"
    assert EngineRun(spec.replace(io="read")).execute().status == "ok"


@pytest.mark.parametrize("path", VERIFY_PATHS)
def test_verify_catches_a_corrupted_block(path, direct_dir):
    verify_finds_corruption(
        spec_for(path, direct_dir, workers=1, keep=True, total_bytes=32 * MIB), direct_dir / "gpu.dat", 5 * MIB + 4096
    )


def verify_finds_corruption(spec: RunSpec, file, bad: int) -> None:
    """Run ``spec`` once to make (and keep) its file, spoil 4 KiB at ``bad``, then --verify must name it."""
    EngineRun(spec).execute()
    fd = os.open(file, os.O_WRONLY)
    try:
        os.pwrite(fd, b"\xa5" * 4096, bad)
        os.fsync(fd)
    finally:
        os.close(fd)
    with pytest.raises(RunFailed) as info:
        EngineRun(spec.replace(verify=True, keep=False)).execute()
    assert "verification failed" in str(info.value) and str(bad) in str(info.value)


SPLIT_PATHS = ["bounce", "bounce-async", pytest.param("cufile", marks=needs_cufile)]


@pytest.mark.parametrize("path", SPLIT_PATHS)
def test_split_requests_carry_the_right_data(path, direct_dir):
    """--split through the real GPU path: blocks of 5M as sub-requests of 2M, 2M and 1M, read and
    written with --verify (what reached the GPU is checked against the file's pattern)."""
    for io in ("randrw", "read"):
        spec = spec_for(
            path,
            direct_dir,
            io=io,
            rwmix=50,
            block_size=5 * MIB,
            split=2 * MIB,
            file_size=40 * MIB,
            total_bytes=20 * MIB,
            verify=True,
        )
        result = EngineRun(spec).execute()
        assert result.status == "ok", result.error
        assert "each 5M request as 3 sub-requests of 2M, the last 1M, 3 in flight (--split)" in result.labels
        assert result.environment["split"] == 2 * MIB


@pytest.mark.parametrize("path", SPLIT_PATHS)
def test_split_requests_catch_a_corrupted_sub_request(path, direct_dir):
    spec = spec_for(
        path,
        direct_dir,
        workers=1,
        block_size=5 * MIB,
        split=2 * MIB,
        file_size=40 * MIB,
        total_bytes=40 * MIB,
        keep=True,
    )
    verify_finds_corruption(spec, direct_dir / "gpu.dat", 3 * 5 * MIB + 4 * MIB + 4096)  # 4th block, 3rd sub-request


@pytest.mark.parametrize("path", ["bounce", "bounce-async"])
def test_bounce_buffers_on_huge_pages(path, direct_dir):
    from xferscope.engines.host import thp_mode

    if thp_mode() not in ("always", "madvise"):
        pytest.skip(f"transparent huge pages are off here ({thp_mode()})")
    result = EngineRun(spec_for(path, direct_dir, io="randrw", verify=True, huge_pages=True)).execute()
    assert result.status == "ok", result.error
    assert "pinned buffers on 2 MiB huge pages" in result.labels
    assert result.environment["pinned_buffers"].startswith("2 MiB")


def test_bounce_async_timeline_on_the_gpu(direct_dir):
    """Groups taking turns on a real GPU: 16 MiB blocks, a copy each, issued right after its read and before the
    next; while PCIe outruns the disk two buffers take turns, and the reads never wait for a copy."""
    from xferscope import _iocore
    from xferscope import target as targets
    from xferscope.engines.bounce import BounceAsyncEngine

    spec = spec_for(
        "bounce-async", direct_dir, workers=1, block_size=16 * MIB, file_size=128 * MIB, total_bytes=128 * MIB
    ).validate()
    target = targets.plan(spec)
    targets.materialize(target)
    engine = BounceAsyncEngine(spec, target)
    engine.turns = _iocore.TURNS_ALWAYS
    engine.timeline_records = 1024
    try:
        engine.prepare()
        engine.start()
        assert engine.wait(120)
        (worker,) = engine.timeline()
    finally:
        engine.close()
        targets.cleanup(target, keep=False)
    recs = worker["records"]
    reads = [r for r in recs if r[0] == _iocore.TL_READ]
    copies = [r for r in recs if r[0] == _iocore.TL_COPY]
    assert len(reads) == len(copies) == 8
    assert [r[2] for r in reads] == [n % 2 for n in range(8)]
    assert all(c[3] >= r[4] for r, c in zip(reads, copies)), "each copy after its read"
    assert all(c[4] <= nxt[3] for c, nxt in zip(copies, reads[1:])), "and before the next"
    assert not [r for r in recs if r[0] == _iocore.TL_WAIT and r[3] < reads[-1][4]]


def test_bounce_async_measures_both_ways_and_says_which_it_kept(direct_dir):
    """On a real GPU each worker's trial times a block on one buffer and with groups taking turns, keeps the
    faster, and the result says which, with the figures."""
    spec = spec_for("bounce-async", direct_dir, workers=2, duration=1.0, total_bytes=None, file_size=256 * MIB)
    result = EngineRun(spec).execute()
    assert result.status == "ok", result.error
    env = result.environment
    from xferscope import _iocore

    keep_one = 1 - _iocore.SERIAL_WINS_PCT / 100  # one buffer is kept only when this much faster: its waits cost CPU
    for trial, serial in zip(env["trial_us_a_block"], env["reads_on_one_buffer"]):
        one, turns = trial["one_buffer"], trial["taking_turns"]
        assert one and turns, trial
        if abs(one - turns * keep_one) > 0.1:  # the figures are rounded to 0.1 us
            assert serial == (one < turns * keep_one), (trial, serial)
    assert any("us a block" in label and "(measured as it ran)" in label for label in result.labels)


@needs_cufile
def test_cufile_mode_is_detected_and_shown(direct_dir):
    from xferscope.engines import cufile_driver

    result = EngineRun(spec_for("cufile", direct_dir)).execute()
    mode = result.environment["cufile_mode"]
    if cufile_driver.nvidia_fs_version() is None and not cufile_driver._param_bool("USE_PCIP2PDMA"):
        assert mode == "compat", "without nvidia-fs or P2PDMA cuFile can only run in compat mode"
    labels = " ".join(result.labels)
    assert ("compat mode" in labels) == (mode == "compat")
    from xferscope.report import compare_rows

    assert compare_rows([result])[0][0] == ("cufile (compat)" if mode == "compat" else "cufile")


@pytest.mark.parametrize("io", ["read", "write"])
@pytest.mark.parametrize("path", ["cufile", "cufile-batch", "cufile-async", pytest.param("kvikio", marks=needs_kvikio)])
@needs_cufile
def test_page_cache_use_is_probed_and_labelled(path, io, direct_dir):
    """A cuFile path that reads or writes through the page cache (compat batch does) must say so:
    the run's label and io_mode agree with what the kernel holds in the cache after the run."""
    from xferscope.engines import page_cache
    from xferscope.report import compare_rows

    spec = spec_for(path, direct_dir, io=io, workers=1, keep=True)
    assert EngineRun(spec.replace(io="read", total_bytes=MIB)).execute().status == "ok"  # the file exists
    page_cache.evict(spec.file)
    result = EngineRun(spec).execute()
    assert result.status == "ok", result.error
    cached = page_cache.resident_bytes(spec.file)
    seen = result.environment["page_cache_probe"][io]
    assert seen is not None, "the probe can tell on a filesystem where O_DIRECT works"
    assert seen == (cached > 0), f"probe said {seen}, the cache holds {cached} bytes after the run"
    assert (result.environment["io_mode"] == "buffered") == seen
    assert any(label.startswith("page cache") for label in result.labels) == seen
    assert ("O_DIRECT" in result.labels) != seen
    assert ("page cache" in compare_rows([result])[0][0]) == seen


@needs_kvikio
def test_kvikio_states_its_settings_and_keeps_blocks_in_flight(cli, direct_dir):
    """KvikIO's pool has a thread for every block in flight, its task is one block, it reads through cuFile, and
    the run says so, with how its samples are taken; every block is counted once, live."""
    r = cli(
        "run", "--path", "kvikio", "-s", "64M", "--bs", "1M", "-w", "2", "--iodepth", "3", "-T", "1",
        "--interval", "0.1",
        "--file", str(direct_dir / "k.dat"), "--format", "json",
    )  # fmt: skip
    assert r.code == 0, r.err
    data = json.loads(r.out)
    settings = data["environment"]["kvikio"]
    assert settings["threads"] == "6" and settings["task_size"] == str(MIB), settings
    assert settings["compat_mode"] == "OFF" and settings["gds_threshold"] == "0" and settings["version"]
    assert settings["samples"].startswith("live")
    assert any(label.startswith("KvikIO ") and "6 threads" in label for label in data["labels"]), data["labels"]
    assert data["environment"]["cufile_mode"] in ("gds", "compat") and data["environment"]["queue_depth"] == 3
    assert data["ops"] * MIB == data["bytes"] > 0 and sum(data["latency_histogram_ns"].values()) == data["ops"]


@needs_cufile
def test_cli_json_says_which_cufile_mode(cli, direct_dir):
    r = cli(
        "run", "--path", "cufile", "-s", "16M", "-T", "0.5", "--file", str(direct_dir / "c.dat"), "--format", "json"
    )
    assert r.code == 0, r.err
    data = json.loads(r.out)
    assert data["environment"]["cufile_mode"] in ("gds", "compat")
    assert any("cuFile" in label for label in data["labels"])
    assert data["environment"]["cufile_mode"] == "compat" or "compat" not in " ".join(data["labels"])


def test_bounce_buffered_is_labelled(direct_dir):
    result = EngineRun(spec_for("bounce", direct_dir, buffered=True)).execute()
    assert "CPU_CACHED_GPU (gdsio -x 4)" in result.labels and result.environment["io_mode"] == "buffered"
    assert result.spec.xfer_type == "CPU_CACHED_GPU"


# ------------------------------------------------------------------ GPU memory comes back

LEAK_SLACK = 8 * MIB  # allocation granularity and driver bookkeeping


@pytest.mark.parametrize(
    "path",
    ["bounce-async", pytest.param("cufile", marks=needs_cufile), pytest.param("cufile-batch", marks=needs_cufile)],
)
def test_gpu_memory_returns_after_run_and_stop(path, direct_dir, held_context):
    if path.startswith("cufile"):
        # cuFile's driver keeps buffers of its own for the life of the process once it is opened, and its compat
        # mode's pool grows with the requests in flight: run the same shape first, in this process, so that what
        # is measured below is the run's (a test process that ran no cuFile path before, or a smaller one, would
        # count the driver's pool as a leak: 12 MiB for cufile-batch at 4 workers x 4 in flight on the H100)
        warm = dict(block_size=16 * MIB, workers=4, iodepth=4, file_size=128 * MIB, duration=None)
        LocalRun(spec_for(path, direct_dir, total_bytes=64 * MIB, **warm)).execute()
    spec = spec_for(
        path,
        direct_dir,
        block_size=16 * MIB,
        workers=4,
        iodepth=4,
        file_size=128 * MIB,
        total_bytes=None,
        duration=30.0,
    )
    before = gpu_used_here()
    run = LocalRun(spec)  # in this process: its GPU resources are counted here
    run.prepare()
    held_context.context(0)
    during = gpu_used_here()
    assert during - before >= 4 * 16 * MIB, "the engine's buffers show up as used GPU memory"
    run.start()
    threading.Timer(0.3, run.stop).start()  # what Ctrl-C does in `run`: stop, keep what was measured
    run.join()
    run.close()
    assert run.finish().status == "interrupted"
    assert run.engine.resources.live == 0
    held_context.context(0)
    assert gpu_used_here() <= before + LEAK_SLACK


def test_gpu_memory_returns_after_a_failed_setup(direct_dir, held_context, monkeypatch):
    from xferscope.engines import gpu_setup

    calls = {"n": 0}
    real = gpu_setup.GpuResources.event

    def failing_event(self, gpu, timing=False, blocking=False):
        calls["n"] += 1
        if calls["n"] == 5:
            raise EnvironmentProblem("injected failure half-way through set-up")
        return real(self, gpu, timing, blocking)

    monkeypatch.setattr(gpu_setup.GpuResources, "event", failing_event)
    before = gpu_used_here()
    run = LocalRun(spec_for("bounce-async", direct_dir, block_size=16 * MIB, workers=4))
    with pytest.raises(EnvironmentProblem, match="injected"):
        run.execute()
    assert run.engine.resources.live == 0
    held_context.context(0)
    assert gpu_used_here() <= before + LEAK_SLACK


@pytest.mark.parametrize("alloc, pages", [("pinned_huge_memory", None), ("pinned_memory", False)], ids=["huge", "4k"])
def test_gpu_memory_returns_after_ctrl_c_during_setup(direct_dir, held_context, monkeypatch, alloc, pages):
    from xferscope.engines import gpu_setup
    from xferscope.engines.host import huge_pages_offered
    from xferscope.target import Interrupted

    if pages is None and not huge_pages_offered():
        pytest.skip("transparent huge pages are off here: the default buffers are cuMemHostAlloc's")
    real = getattr(gpu_setup.GpuResources, alloc)
    calls = {"n": 0}

    def interrupted(self, gpu, size):
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt
        return real(self, gpu, size)

    monkeypatch.setattr(gpu_setup.GpuResources, alloc, interrupted)
    before = gpu_used_here()
    run = LocalRun(spec_for("bounce", direct_dir, block_size=16 * MIB, workers=4, huge_pages=pages))
    with pytest.raises(Interrupted):
        run.execute()
    assert run.engine.resources.live == 0
    held_context.context(0)
    assert gpu_used_here() <= before + LEAK_SLACK


@pytest.mark.parametrize(
    "path", ["bounce-async", pytest.param("cufile", marks=needs_cufile), pytest.param("kvikio", marks=needs_kvikio)]
)
def test_gpu_memory_returns_after_the_engine_process_is_killed(path, direct_dir, held_context):
    """The engine's process dies mid-run (SIGKILL: no clean-up of its own): its GPU memory comes back, its
    scratch file goes, and what it measured is kept."""
    import os
    import signal

    spec = spec_for(
        path, direct_dir, block_size=16 * MIB, workers=4, file_size=128 * MIB, total_bytes=None, duration=30.0
    )
    run = EngineRun(spec)
    run.prepare()
    run.start()
    deadline = time.monotonic() + 30
    while len(run.samples) < 5 and time.monotonic() < deadline:
        time.sleep(0.05)
    engine = run._child.pid
    assert gpu_used_here(pid=engine) >= 4 * 16 * MIB, "the engine process's buffers, as NVML counts them"
    os.kill(engine, signal.SIGKILL)
    run.join(30)
    run.close()
    result = run.finish()
    assert result.status == "failed" and "SIGKILL" in result.error and result.bytes > 0
    assert not any(p.name.startswith("xferscope") for p in direct_dir.iterdir())
    deadline = time.monotonic() + 10  # the driver frees a dead process's memory as it reaps it
    while gpu_used_here(pid=engine) > 0 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert gpu_used_here(pid=engine) == 0, "nothing of the dead engine's left on the GPU"


@needs_cufile
def test_registration_failure_is_explained(direct_dir, monkeypatch):
    from xferscope.engines import cufile_driver

    def refuse(exc_text):
        raise EnvironmentProblem(
            cufile_driver.explain_registration(
                RuntimeError(exc_text),
                "ERROR cufio-fs:408 udev property not found: ID_FS_USAGE vda",
                str(direct_dir / "gpu.dat"),
                "ext4",
            )
        )

    monkeypatch.setattr(cufile_driver, "register_handle", lambda *a, **k: refuse("HANDLE_NOT_REGISTERED (5027)"))
    with pytest.raises(EnvironmentProblem) as info:
        LocalRun(spec_for("cufile", direct_dir)).execute()  # in this process, where the refusal is patched in
    assert "/run/udev/data/b" in str(info.value) and "ID_FS_USAGE=filesystem" in str(info.value)


# ------------------------------------------------------------------ several GPUs, telemetry


def _gpu_count() -> int:
    from xferscope.engines.gpu_setup import cuda_status

    return cuda_status()[1]


@pytest.mark.skipif(_gpu_count() < 2, reason="needs two GPUs")
@pytest.mark.parametrize("path", ["bounce", pytest.param("cufile", marks=needs_cufile)])
def test_two_workers_on_two_gpus(path, direct_dir):
    result = EngineRun(spec_for(path, direct_dir, gpus=[0, 1], workers=2)).execute()
    assert [w.gpu for w in result.workers] == [0, 1]
    assert set(result.gpus) == {0, 1} and all(g["bytes"] > 0 for g in result.gpus.values())
    assert "GPUs 0,1 round-robin" in result.labels


def test_gpu_telemetry_reads_and_the_ceiling_is_measured(direct_dir, monkeypatch, tmp_path):
    from xferscope import gpus
    from xferscope.engines.link_ceiling import measure_link_ceiling
    from xferscope.gpus import cache_file
    from xferscope.telemetry.gpu import GpuMeter, gpu_inventory

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(gpus, "_session_ceilings", {})  # measure now, not from an earlier test
    ceiling = measure_link_ceiling(0)
    assert ceiling["link_ceiling_h2d_gb_s"] > 0.5 and ceiling["link_ceiling_d2h_gb_s"] > 0.5
    assert json.loads(Path(cache_file()).read_text())["gpus"], "kept for this boot"
    inv = gpu_inventory()
    assert inv and inv[0]["index"] == 0 and inv[0]["name"] and "link_width_max" in inv[0]
    meter = GpuMeter([0])
    try:
        assert meter.wait_first(), "the meter's thread reads the GPU at once"
        (reading,) = meter.read()
        for key in (
            "index",
            "name",
            "util_pct",
            "mem_used_mib",
            "mem_total_mib",
            "pcie_rx_mb_s",
            "pcie_tx_mb_s",
            "sm_clock_mhz",
            "link_gen",
            "link_gen_max",
            "link_width",
            "link_width_max",
            "link_ceiling_h2d_gb_s",
            "link_ceiling_d2h_gb_s",
        ):
            assert key in reading, key
    finally:
        meter.close()
    # a run long enough for any load on the machine, stopped once a sample carries a GPU reading
    run = EngineRun(spec_for("bounce", direct_dir, total_bytes=None, duration=300))
    result = run.execute(on_sample=lambda s: run.stop() if s and s.gpu and not run.stopped_by_user else None)
    assert run.stopped_by_user, "a sample carried GPU telemetry before the 300 s ran out"
    assert any(s.gpu and s.gpu[0]["index"] == 0 for s in result.samples), "samples carry GPU telemetry"
    g = result.gpus[0]
    assert g["readings"] >= 1 and g["pcie_rx_mb_s"] >= 0 and g["mem_used_mib_max"] > 0, g
    assert "pcie_rx_pct_of_link" in g, "the run's mean RX is set against the measured ceiling"
    from xferscope.report import extras_line

    assert "PCIe (NVML, mean): GPU 0 RX" in extras_line(result)
