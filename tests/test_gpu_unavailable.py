"""Where the GPU paths cannot run: one clear line and exit 3 through the real CLI, never a
traceback; GPU telemetry degrades to "no GPU"; cuFile's failures are explained in the
user's terms. These run on any machine: CUDA is hidden or cuda-python blocked on purpose."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

GPU_PATHS = ("bounce", "bounce-async", "cufile", "cufile-batch", "cufile-async")
# how each way of "not here" reads, whichever applies on the machine running the tests
REASONS = ("no GPU", "cuda-python not installed", "libcufile not found", "cuda-python has no cuFile bindings")

# cuda-python made unimportable in every process the CLI starts (the engines and the checks run in processes
# of their own), through a sitecustomize module found first on PYTHONPATH
BLOCK_CUDA_PYTHON = "import sys\nsys.modules['cuda'] = None\nsys.modules['cuda.bindings'] = None\n"


def _one_line_unavailable(r, path: str) -> str:
    assert r.code == 3, (r.code, r.err)
    lines = [ln for ln in r.err.splitlines() if ln.strip()]
    assert len(lines) == 1, r.err
    assert "Traceback" not in r.err and r.out == ""
    assert lines[0].startswith(f"xferscope: {path}: unavailable: "), lines[0]
    return lines[0]


@pytest.mark.parametrize("path", GPU_PATHS)
def test_cli_says_unavailable_when_cuda_sees_no_gpu(cli, direct_dir, path):
    r = cli(
        "run",
        "--path",
        path,
        "-T",
        "0.5",
        "-s",
        "4M",
        "--file",
        str(direct_dir / "x.dat"),
        env={"CUDA_VISIBLE_DEVICES": ""},
    )
    line = _one_line_unavailable(r, path)
    assert any(reason in line for reason in REASONS), line
    assert not (direct_dir / "x.dat").exists(), "nothing is created for a path that cannot run"


@pytest.mark.parametrize("path", ["bounce", "cufile"])
def test_cli_says_cuda_python_is_missing(direct_dir, tmp_path, path):
    blocker = tmp_path / "no-cuda-python"
    blocker.mkdir()
    (blocker / "sitecustomize.py").write_text(BLOCK_CUDA_PYTHON)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(blocker), os.environ.get("PYTHONPATH")) if p)}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "xferscope.cli",
            "run",
            "--path",
            path,
            "-T",
            "0.5",
            "-s",
            "4M",
            "--file",
            str(direct_dir / "y.dat"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )

    class R:
        code, out, err = proc.returncode, proc.stdout, proc.stderr

    line = _one_line_unavailable(R, path)
    assert "cuda-python not installed (pip install cuda-python)" in line


@pytest.mark.parametrize(
    "command",
    [
        ["run", "--path", "kvikio", "-T", "0.5", "-s", "4M"],
        ["compare", "--paths", "cufile,kvikio", "-T", "0.5", "-s", "4M"],
        ["saturate", "--path", "kvikio", "-s", "4M"],
    ],
    ids=["run", "compare", "saturate"],
)
def test_kvikio_without_its_package_is_refused_in_one_line(command, direct_dir, tmp_path):
    """The kvikio path where KvikIO cannot be imported (made so on purpose, as on a machine without it): one line
    naming the package to install, exit 2, before anything runs or is created."""
    blocker = tmp_path / "no-kvikio"
    blocker.mkdir()
    (blocker / "sitecustomize.py").write_text("import sys\nsys.modules['kvikio'] = None\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(blocker), os.environ.get("PYTHONPATH")) if p)}
    target = direct_dir / "kv.dat"
    proc = subprocess.run(
        [sys.executable, "-m", "xferscope.cli", *command, "--file", str(target)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode == 2 and len(lines) == 1 and proc.stdout == "", (proc.returncode, proc.stdout, proc.stderr)
    assert "kvikio needs kvikio-cu13, which is not installed: pip install kvikio-cu13" in lines[0], lines[0]
    assert not target.exists() and not any(p.name.startswith("xferscope") for p in direct_dir.iterdir())


def test_gdsio_transfer_numbers_reach_the_gpu_paths(cli, direct_dir):
    r = cli(
        "run", "-x", "0", "-T", "0.5", "-s", "4M", "--file", str(direct_dir / "z.dat"), env={"CUDA_VISIBLE_DEVICES": ""}
    )
    _one_line_unavailable(r, "cufile")


def test_availability_lists_every_gpu_path_with_a_reason():
    code = "from xferscope.engines.registry import availability; import json; print(json.dumps(availability()))"
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env={**__import__("os").environ, "CUDA_VISIBLE_DEVICES": ""},
    )
    import json

    avail = json.loads(proc.stdout)
    assert avail["host"] is None
    for path in GPU_PATHS:
        assert avail[path] and any(reason in avail[path] for reason in REASONS), (path, avail[path])


# ------------------------------------------------------------------ telemetry degrades


def test_gpu_meter_without_gpu_reads_nothing_and_says_why(no_gpu):
    from xferscope.engines.link_ceiling import measure_link_ceiling
    from xferscope.telemetry.gpu import GpuMeter, gpu_inventory, no_gpu_reason

    meter = GpuMeter([0, 1])
    assert meter.read() == [] and not meter.available
    assert meter.reason.startswith("no GPU")
    meter.close()
    meter.close()  # idempotent
    assert gpu_inventory() == []
    assert measure_link_ceiling(0) is None
    assert no_gpu_reason().startswith("no GPU")


def test_host_run_is_untouched_by_missing_gpu_telemetry(no_gpu, direct_dir):
    from xferscope.run.runner import EngineRun
    from xferscope.spec import RunSpec

    result = EngineRun(
        RunSpec(
            path="host",
            file=str(direct_dir / "h.dat"),
            file_size=4 << 20,
            block_size=1 << 20,
            duration=None,
            total_bytes=4 << 20,
        )
    ).execute()
    assert result.status == "ok" and result.gpus == {} and all(not s.gpu for s in result.samples)


def test_engine_reports_unavailable_through_the_runner(no_gpu, direct_dir):
    from xferscope.errors import EngineUnavailable
    from xferscope.run.runner import EngineRun
    from xferscope.spec import RunSpec

    with pytest.raises(EngineUnavailable) as info:
        EngineRun(RunSpec(path="bounce-async", file=str(direct_dir / "b.dat"), file_size=4 << 20)).execute()
    assert str(info.value).startswith("bounce-async: unavailable: no GPU")  # said by the engine's own process
    assert info.value.exit_code == 3 and info.value.engine == "bounce-async"
    assert not (direct_dir / "b.dat").exists()


# ------------------------------------------------------------------ cuFile explained


def test_udev_failure_is_explained_with_its_fix(tmp_path):
    from xferscope.engines.cufile_driver import block_device, explain_registration

    f = tmp_path / "f.dat"
    f.write_bytes(b"x" * 4096)
    log = (
        "22-11-2026 10:00:00:001 [pid:7 tid:7] ERROR  cufio-fs:408 udev property not found: ID_FS_USAGE vda\n"
        "22-11-2026 10:00:00:002 [pid:7 tid:7] ERROR  cufio-obj:217 unable to get volume attributes for fd 5\n"
    )
    text = explain_registration(RuntimeError("HANDLE_NOT_REGISTERED"), log, str(f), "xfs")
    major, minor = block_device(str(f))
    assert f"/run/udev/data/b{major}:{minor}" in text and "E:ID_FS_TYPE=xfs" in text and "as root" in text


@pytest.mark.parametrize(
    "fstype, words", [("tmpfs", "cannot register files on tmpfs"), ("ext4", "HANDLE_NOT_REGISTERED")]
)
def test_other_registration_failures(tmp_path, fstype, words):
    from xferscope.engines.cufile_driver import explain_registration

    f = tmp_path / "f.dat"
    f.write_bytes(b"x")
    text = explain_registration(RuntimeError("HANDLE_NOT_REGISTERED"), "", str(f), fstype)
    assert words in text and "\n" not in text


def test_o_direct_refusal_is_explained(tmp_path):
    from xferscope.engines.cufile_driver import explain_registration

    f = tmp_path / "f.dat"
    f.write_bytes(b"x")
    text = explain_registration(
        RuntimeError("DIO_NOT_SET"), "ERROR cufio:1 file not opened with O_DIRECT", str(f), "ext4"
    )
    assert "O_DIRECT" in text and "--dir" in text


def test_cufile_json_with_comments_parses():
    from xferscope.engines.cufile_driver import strip_json_comments

    text = '{\n // a comment\n "logging": {"dir": "/var/log//x", /* inline */ "level": "ERROR",},\n}\n'
    import json

    assert json.loads(strip_json_comments(text)) == {"logging": {"dir": "/var/log//x", "level": "ERROR"}}


def test_buffered_cufile_is_refused_with_the_alternative():
    from xferscope.engines.cufile import _reject_buffered
    from xferscope.errors import SpecError
    from xferscope.spec import RunSpec

    with pytest.raises(SpecError, match="--path bounce --buffered"):
        _reject_buffered(RunSpec(path="cufile", buffered=True))


def test_a_stalled_cufile_batch_fails_and_is_cancelled_instead_of_hanging(monkeypatch):
    """cuFile's compat batches were seen to stop completing (8 workers x batch 16): the worker
    must give up, cancel the batch and fail the run with advice, not hang the process."""
    np = pytest.importorskip("numpy")
    import ctypes
    from types import SimpleNamespace

    from xferscope.engines import cufile, cufile_driver, threaded
    from xferscope.errors import RunFailed
    from xferscope.spec import RunSpec

    def nothing_completes(batch, min_nr, nr_address, events, timeout):
        ctypes.c_uint.from_address(nr_address).value = 0

    cancelled = []
    fake = SimpleNamespace(
        Opcode=SimpleNamespace(READ=0, WRITE=1),
        Status=SimpleNamespace(COMPLETE=16),
        batch_io_submit=lambda *a: None,
        batch_io_get_status=nothing_completes,
        batch_io_cancel=cancelled.append,
    )
    monkeypatch.setattr(cufile_driver, "module", lambda: fake)
    monkeypatch.setattr(cufile, "BATCH_STALL_S", 0.05)
    batch = [("dev_ptr_base", "<i8"), ("file_offset", "<i8"), ("dev_ptr_offset", "<i8"), ("size_", "<u8")]
    params = np.zeros(
        4, dtype=[("mode", "<i4"), ("u", [("batch", batch)]), ("fh", "<i8"), ("opcode", "<i4"), ("cookie", "<i8")]
    )
    events = np.zeros(4, dtype=[("cookie", "<i8"), ("status", "<i4"), ("ret", "<u8")])
    spec = RunSpec(path="cufile-batch", workers=2, iodepth=4, block_size=1 << 20)
    engine = cufile.CufileBatchEngine(spec, target=None)
    cursor = threaded.Cursor(spec, 0, 64 << 20, 0)
    worker = threaded.ThreadWorker(0, 0, 0, cursor, batch=1234, params=params, batch_events=events)
    with pytest.raises(RunFailed, match=r"stalled: 4 of 4 operations .*\(2 workers x batch size 4 = 8 in flight\)"):
        engine.run_worker(0, worker)
    assert cancelled == [1234]
    engine.check_stall(0.01, 4, 4)  # not yet stalled: no error


def test_running_on_binds_this_thread_and_restores_it():
    """Pinned buffers are allocated inside ``running_on``: their pages follow the CPUs it binds."""
    from xferscope.engines.gpu_setup import running_on

    before = os.sched_getaffinity(0)
    one = min(before)
    with running_on([one]):
        assert os.sched_getaffinity(0) == {one}
    assert os.sched_getaffinity(0) == before
    with running_on(None):
        assert os.sched_getaffinity(0) == before
    with pytest.raises(RuntimeError), running_on([one]):
        raise RuntimeError("allocation failed")
    assert os.sched_getaffinity(0) == before  # restored after a failure too


@pytest.mark.parametrize(
    "given, nodes, expect, where",
    [
        ({}, [0], None, None),  # one node: nothing to place
        ({}, [0, 1], [8, 9], "the GPU's NUMA node (1)"),  # several: the GPU's CPUs
        ({"cpus": [3, 5]}, [0, 1], [5], "each worker's CPU (--cpus)"),  # worker 1 runs on CPU 5
    ],
)
def test_pinned_buffers_are_placed_near_whoever_uses_them(monkeypatch, given, nodes, expect, where):
    from xferscope.engines import bounce, gpu_setup
    from xferscope.spec import RunSpec

    monkeypatch.setattr(gpu_setup, "numa_nodes", lambda: nodes)
    monkeypatch.setattr(gpu_setup, "gpu_local_cpus", lambda gpu: (1, [8, 9]))
    engine = bounce.BounceAsyncEngine(RunSpec(path="bounce-async", workers=2, **given), target=None)
    assert engine.pinned_cpus(1, 0) == expect
    assert engine.pinned_placement == where


def test_a_runs_gpu_readings_add_up_to_means_against_the_link():
    """The per-run PCIe evidence a scaling sweep keeps per point, from NVML readings (no GPU needed)."""
    from xferscope.sweep.stats import io_stats
    from xferscope.telemetry.gpu import run_means

    ceiling = {"link_ceiling_h2d_gb_s": 50.0, "link_ceiling_d2h_gb_s": 40.0}
    samples = [
        [
            {
                "index": 0,
                "pcie_rx_mb_s": 1000.0,
                "pcie_tx_mb_s": 10.0,
                "util_pct": 0.0,
                "mem_used_mib": 900.0,
                **ceiling,
            },
            {"index": 1, "pcie_rx_mb_s": 500.0},
        ],
        [
            {
                "index": 0,
                "pcie_rx_mb_s": 3000.0,
                "pcie_tx_mb_s": 30.0,
                "util_pct": 10.0,
                "mem_used_mib": 1100.0,
                **ceiling,
            }
        ],
        [],
    ]
    means = run_means(samples)
    assert means[0]["pcie_rx_mb_s"] == 2000.0 and means[0]["pcie_tx_mb_s"] == 20.0
    assert means[0]["util_pct"] == 5.0 and means[0]["mem_used_mib_max"] == 1100.0 and means[0]["readings"] == 2
    assert means[0]["pcie_rx_pct_of_link"] == pytest.approx(4.0)  # 2000 MB/s of 50 GB/s
    assert means[0]["pcie_tx_pct_of_link"] == pytest.approx(0.05)
    assert means[0]["link_ceiling_h2d_gb_s"] == 50.0, "the ceiling itself, for verdicts that sum it over GPUs"
    assert means[1] == {"readings": 1.0, "pcie_rx_mb_s": 500.0}, "no ceiling measured: no percentage"
    assert run_means([]) == {}

    reps = [
        {"status": "ok", "throughput_mib_s": 1.0, "per_gpu": {"0": means[0], "1": means[1]}},
        {"status": "ok", "throughput_mib_s": 1.0, "per_gpu": {"0": {"pcie_rx_mb_s": 1500.0}}},
    ]
    st = io_stats(reps)
    assert st["pcie_rx_mb_s"]["median"] == 2000.0, "a point's RX is the sum over its GPUs, median over repetitions"
    assert io_stats([{"status": "ok", "throughput_mib_s": 1.0}])["pcie_rx_mb_s"]["n"] == 0
