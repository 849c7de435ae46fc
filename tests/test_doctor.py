"""`xferscope doctor`: every check says ok/warn/fail with a detail and, when wrong, the fix;
it works without a GPU and says so; it prints the udev fix and never applies it."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from xferscope import doctor
from xferscope.doctor import checks as doctor_checks


def by_name(report, name):
    return next(c for c in report["checks"] if c["name"] == name)


def test_report_shape_and_statuses(tmp_path):
    report = doctor.run_checks(str(tmp_path), probes=False)
    assert report["schema"] == "xferscope.doctor/1" and report["directory"] == str(tmp_path)
    names = [c["name"] for c in report["checks"]]
    for name in (
        "NVIDIA driver",
        "cuda-python",
        "cuFile library",
        "cufile.json",
        "nvidia-fs",
        "filesystem",
        "O_DIRECT",
        "free space",
        "IOMMU",
    ):
        assert name in names
    for c in report["checks"]:
        assert c["status"] in ("ok", "warn", "fail") and c["detail"]
        if c["status"] == "fail":
            assert c["fix"], c
    assert sum(report["summary"].values()) == len(report["checks"])


def test_without_gpu_it_works_and_says_so(no_gpu, tmp_path):
    report = doctor.run_checks(str(tmp_path), probes=False)
    assert report["gpu"] is False
    driver = by_name(report, "NVIDIA driver")
    assert driver["status"] == "warn" and "host and memory paths work" in driver["detail"]
    assert "no GPU here" in doctor.format_report(report)
    assert report["summary"]["fail"] == 0 or all(c["fix"] for c in report["checks"] if c["status"] == "fail")


def test_cli_json_and_exit_status(cli, tmp_path):
    r = cli("doctor", "--dir", str(tmp_path), "--json", "--quick")
    data = json.loads(r.out)
    assert r.code == (1 if data["summary"]["fail"] else 0)
    assert data["checks"] and data["directory"] == str(tmp_path)
    text = cli("doctor", "--dir", str(tmp_path), "--quick")
    assert text.out.startswith(f"xferscope doctor: {tmp_path}") and "Traceback" not in text.err


def test_cli_bad_directory_is_one_line(cli, tmp_path):
    r = cli("doctor", "--dir", str(tmp_path / "nope"))
    assert r.code == 2 and r.err.strip().count("\n") == 0 and "is not a directory" in r.err


def test_missing_udev_record_prints_the_fix_and_leaves_it_undone(no_gpu, tmp_path, monkeypatch):
    from xferscope.engines import cufile_driver

    if os.major(os.stat(tmp_path).st_dev) == 0:
        pytest.skip("the temporary directory is not on a block device")
    record = tmp_path / "udev" / "b1:2"
    monkeypatch.setattr(cufile_driver, "udev_record_path", lambda path: str(record))
    check = by_name(doctor.run_checks(str(tmp_path), probes=False), "udev record")
    assert check["status"] in ("warn", "fail")
    assert "mkdir -p /run/udev/data && printf 'E:ID_FS_USAGE=filesystem" in check["fix"]
    assert not record.exists()
    record.parent.mkdir()
    record.write_text("E:ID_FS_USAGE=filesystem\nE:ID_FS_TYPE=ext4\n")
    assert by_name(doctor.run_checks(str(tmp_path), probes=False), "udev record")["status"] == "ok"


def test_cufile_json_with_comments_and_its_key_settings(no_gpu, tmp_path, monkeypatch):
    cfg = tmp_path / "cufile.json"
    cfg.write_text(
        '{\n  // cuFile settings\n  "properties": {\n    "max_direct_io_size_kb": 16384,\n'
        '    "allow_compat_mode": true, /* VMs */\n    "use_poll_mode": false,\n  },\n'
        '  "logging": {"level": "ERROR"}\n}\n'
    )
    monkeypatch.setenv("CUFILE_ENV_PATH_JSON", str(cfg))
    check = by_name(doctor.run_checks(str(tmp_path), probes=False), "cufile.json")
    assert check["status"] == "ok"
    for words in ("allow_compat_mode=true", "max_direct_io_size_kb=16384", "use_poll_mode=false", "level=ERROR"):
        assert words in check["detail"]


def test_compat_mode_off_without_nvidia_fs_fails_with_a_fix(no_gpu, tmp_path, monkeypatch):
    from xferscope.engines import cufile_driver

    cfg = tmp_path / "cufile.json"
    cfg.write_text('{"properties": {"allow_compat_mode": false}}')
    monkeypatch.setenv("CUFILE_ENV_PATH_JSON", str(cfg))
    monkeypatch.setattr(cufile_driver, "nvidia_fs_version", lambda: None)
    report = doctor.run_checks(str(tmp_path), probes=False)
    check = by_name(report, "cufile.json")
    assert check["status"] == "fail" and "allow_compat_mode" in check["fix"]
    nvfs = by_name(report, "nvidia-fs")
    assert nvfs["status"] == "warn" and "compat mode" in nvfs["detail"] and "modprobe nvidia_fs" in nvfs["fix"]


def test_unreadable_cufile_json_fails(no_gpu, tmp_path, monkeypatch):
    cfg = tmp_path / "cufile.json"
    cfg.write_text('{"properties": ')
    monkeypatch.setenv("CUFILE_ENV_PATH_JSON", str(cfg))
    check = by_name(doctor.run_checks(str(tmp_path), probes=False), "cufile.json")
    assert check["status"] == "fail" and str(cfg) in check["fix"]


def test_o_direct_refused_fails_with_the_alternative(no_gpu, tmp_path, monkeypatch):
    import xferscope.target

    monkeypatch.setattr(xferscope.target, "probe_direct_io", lambda d: (False, "the filesystem refuses O_DIRECT"))
    check = by_name(doctor.run_checks(str(tmp_path), probes=False), "O_DIRECT")
    assert check["status"] == "fail" and "--buffered" in check["fix"]


@pytest.mark.parametrize("mode", ["madvise", "never"])
def test_host_buffers_say_which_pages_the_host_path_gets(no_gpu, tmp_path, monkeypatch, mode):
    from xferscope.engines import host

    monkeypatch.setattr(host, "thp_mode", lambda: mode)
    check = by_name(doctor.run_checks(str(tmp_path), probes=False), "host buffers")
    if mode == "madvise":
        assert check["status"] == "ok" and "2 MiB" in check["detail"] and "madvise" in check["detail"]
    else:
        assert check["status"] == "warn" and "4 KiB" in check["detail"] and "never" in check["detail"]
        assert "echo madvise >" in check["fix"]


def test_a_broken_check_is_reported_and_the_rest_still_run(no_gpu, tmp_path, monkeypatch):
    def broken(facts):
        raise OSError("sysfs went away")

    monkeypatch.setattr(doctor.run, "CHECKS", (broken,) + doctor_checks.CHECKS)
    report = doctor.run_checks(str(tmp_path), probes=False)
    assert report["checks"][0]["status"] == "warn" and "sysfs went away" in report["checks"][0]["detail"]
    assert len(report["checks"]) > 5


def fake_queue(root, directory, *, segments: int, segment: int, sectors_kb: int, partition: bool = False) -> None:
    """A sysfs tree holding the queue limits of the block device under ``directory`` (of its disk, for a
    partition)."""
    st = os.stat(directory)
    dev = root / "dev" / "block" / f"{os.major(st.st_dev)}:{os.minor(st.st_dev)}"
    disk = root / "devices" / "vdz"
    node = disk / "vdz1" if partition else disk
    queue = disk / "queue"
    queue.mkdir(parents=True)
    node.mkdir(parents=True, exist_ok=True)
    for name, value in (("max_segments", segments), ("max_segment_size", segment), ("max_sectors_kb", sectors_kb)):
        (queue / name).write_text(f"{value}\n")
    dev.parent.mkdir(parents=True)
    dev.symlink_to(node)


@pytest.mark.parametrize("partition", [False, True], ids=["disk", "partition"])
def test_queue_limits_say_which_reads_are_split_by_the_pages_of_the_buffer(tmp_path, monkeypatch, partition):
    """The development VM's disk: 128 segments of at most 64 KiB, 1280 KiB a request. A read into scattered 4 KiB
    pages needs a segment per page: over 512 KiB it is split; 2 MiB pages fill 64 KiB segments: 1280 KiB."""
    if os.major(os.stat(tmp_path).st_dev) == 0:
        pytest.skip("the temporary directory is not on a block device here")
    from xferscope.engines import host

    root = tmp_path / "sys"
    fake_queue(root, tmp_path, segments=128, segment=64 << 10, sectors_kb=1280, partition=partition)
    monkeypatch.setattr(doctor_checks, "SYSFS", str(root))
    monkeypatch.setattr(host, "thp_mode", lambda: "madvise")
    (check,) = doctor_checks.check_queue_limits(doctor_checks.Facts(str(tmp_path), []))
    assert check.status == "ok"
    assert check.detail == (
        "vdz: 128 segments a request (64 KiB each), at most 1280 KiB a request: a read over 512 KiB into 4 KiB "
        "pages is split here; into 2 MiB pages one request holds 1280 KiB. xferscope's buffers are on 2 MiB pages"
    )
    monkeypatch.setattr(host, "thp_mode", lambda: "never")
    (check,) = doctor_checks.check_queue_limits(doctor_checks.Facts(str(tmp_path), []))
    assert check.status == "warn" and "4 KiB pages here" in check.detail and "echo madvise" in check.fix


def test_queue_limits_where_pages_make_no_difference(tmp_path, monkeypatch):
    if os.major(os.stat(tmp_path).st_dev) == 0:
        pytest.skip("the temporary directory is not on a block device here")
    root = tmp_path / "sys"
    fake_queue(root, tmp_path, segments=256, segment=4096, sectors_kb=512)
    monkeypatch.setattr(doctor_checks, "SYSFS", str(root))
    (check,) = doctor_checks.check_queue_limits(doctor_checks.Facts(str(tmp_path), []))
    assert check.status == "ok" and "the pages of a buffer make no difference here" in check.detail
    monkeypatch.setattr(doctor_checks, "SYSFS", str(tmp_path / "nothing"))
    (check,) = doctor_checks.check_queue_limits(doctor_checks.Facts(str(tmp_path), []))
    assert check.status == "ok" and "no block device queue" in check.detail


def test_ceilings_measure_each_path_from_the_page_cache(cli, tmp_path):
    r = cli("doctor", "--dir", str(tmp_path), "--ceilings", "--json", "--quick", env={"XFERSCOPE_NO_GPU": "1"})
    report = json.loads(r.out)
    host = by_name(report, "ceiling host")
    assert host["status"] == "ok" and "GiB/s from the page cache (1M x 4 workers, 2 s;" in host["detail"]
    assert float(host["detail"].split(" GiB/s")[0]) > 0
    for path in ("bounce", "bounce-async"):
        assert by_name(report, f"ceiling {path}")["detail"].startswith("not measured: no GPU")
    assert os.listdir(tmp_path) == [], "the file it read is gone"


def test_the_buffer_set_probe_reads_into_each_set_and_gives_its_ratio(cli, direct_dir, tmp_path_factory, monkeypatch):
    """doctor (without --quick) measures reads into 1, 16 and 64 buffers a worker, O_DIRECT, and says what 16
    cost against one; its scratch file goes. (Where there is a GPU the pinned-memory probe runs too, and keeps
    what it measured in the cache directory: the test's own.)"""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("cache")))  # apart: direct_dir may be tmp_path
    r = cli("doctor", "--dir", str(direct_dir), "--json")
    check = by_name(json.loads(r.out), "buffer set")
    assert check["status"] in ("ok", "warn"), check
    ratios = dict(re.findall(r"into (\d+) ([0-9.]+)x", check["detail"]))
    assert set(ratios) == {"16", "64"} and all(float(v) > 0 for v in ratios.values()), check["detail"]
    assert "a data loader keeping 16 batches in flight reads" in check["detail"]
    assert not list(direct_dir.iterdir()), "the probe's file is removed"


def test_the_probe_reads_into_the_buffers_it_names(direct_dir):
    """Each set is measured by the host engine reading into that many buffers a worker in turn: one run per set
    and round, its read time and MiB/s from the engine's own counters."""
    from xferscope.doctor import buffer_probe

    probe = buffer_probe.measure(str(direct_dir), rounds=1, seconds=0.1)
    assert set(probe.read_us) == set(buffer_probe.SETS) and probe.rounds == 1
    assert all(v > 0 for v in probe.read_us.values()) and all(v > 0 for v in probe.mib_s.values())
    assert probe.ratio(1) == 1.0


def test_the_host_engine_reads_into_each_of_its_buffers_in_turn(direct_dir):
    """What the probe's sets are: a host worker given 16 buffers reads into every one of them, in turn."""
    import threading

    from xferscope import target as targets
    from xferscope.engines.host import HostEngine
    from xferscope.spec import RunSpec

    spec = RunSpec(
        path="host", file=str(direct_dir / "b.dat"), file_size=8 << 20, block_size=64 << 10, workers=1,
        duration=None, total_bytes=40 * (64 << 10),
    ).validate()  # fmt: skip
    target = targets.plan(spec)
    targets.materialize(target, threading.Event(), None)
    engine = HostEngine(spec, target)
    engine.buffers_in_turn, engine.timeline_records = 16, 1024
    try:
        snap = engine.run_to_end()
        (worker,) = engine.timeline()
    finally:
        engine.close()
        targets.cleanup(target, keep=False)
    assert snap.error is None
    bufs = [r[2] for r in worker["records"]]
    assert bufs == [n % 16 for n in range(40)]


def test_killing_the_checks_process_mid_probe_fails_that_check_and_leaves_nothing(direct_dir):
    """SIGKILL into doctor's native side (its call process) while the buffer-set probe reads its 256 MiB file:
    that check fails naming the signal, and neither the probe's file (removed by
    the janitor of the process that made it) nor any process of doctor's is left."""
    import subprocess
    import sys

    import psutil
    from conftest import child_has_read
    from test_engine_process import gone, scratch_left, wait_until

    calls = "xferscope.isolation:_serve_calls"
    proc = subprocess.Popen(
        [sys.executable, "-m", "xferscope.cli", "doctor", "--dir", str(direct_dir), "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "XFERSCOPE_NO_GPU": "1"},
    )
    try:
        me = psutil.Process(proc.pid)
        reading = child_has_read(calls, 16 << 20)  # the probe's file written, and read with O_DIRECT
        wait_until(lambda: reading(me) or proc.poll() is not None, timeout=120, what="the probe's reads")
        assert proc.poll() is None, proc.communicate()
        [side] = [c for c in me.children(recursive=True) if calls in " ".join(c.cmdline())]
        assert "xferscope-buffer-probe.dat" in scratch_left(direct_dir)
        side.kill()
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    report = json.loads(out)
    assert proc.returncode == 1 and "Traceback" not in err, err
    check = by_name(report, "buffer set")
    assert check["status"] == "fail" and "SIGKILL" in check["detail"], check
    assert gone(side.pid)
    wait_until(lambda: not scratch_left(direct_dir), what="the probe's file to be removed")

    def janitors_of_the_killed_process():
        return [
            p.pid
            for p in psutil.process_iter(["cmdline"])
            if f"xferscope.janitor:serve {side.pid} " in " ".join(p.info["cmdline"] or [])
        ]

    wait_until(lambda: not janitors_of_the_killed_process(), what="the killed process's janitor to leave")


@pytest.mark.parametrize("memory", ["registered", "allocated"])
def test_the_host_engine_reads_into_the_pinned_memory_it_is_given_and_frees_it(
    direct_dir, sim_gpu, monkeypatch, memory
):
    """The pinned-memory probe's ways: a host worker reads, with no copy, into pinned memory of CUDA's (here its
    host stand-ins), the kind named; the bytes land there, the record says which memory, and close frees it."""
    import ctypes
    import threading

    from gpu_standins import SimResources

    from xferscope import target as targets
    from xferscope.engines.host import PINNED_MEMORY, HostEngine
    from xferscope.spec import RunSpec

    given: list[tuple[str, int]] = []
    made: list[SimResources] = []
    for kind, method in (("allocated", "pinned_memory"), ("registered", "pinned_huge_memory")):
        real = getattr(SimResources, method)

        def recorded(self, gpu, size, real=real, kind=kind):
            given.append((kind, real(self, gpu, size)))
            made.append(self)
            return given[-1][1]

        monkeypatch.setattr(SimResources, method, recorded)
    spec = RunSpec(path="host", file=str(direct_dir / "p.dat"), file_size=8 << 20, block_size=1 << 20, workers=2,
                   duration=None, total_bytes=2 << 20, verify=True).validate()  # fmt: skip
    target = targets.plan(spec)
    targets.materialize(target, threading.Event(), None)
    engine = HostEngine(spec, target)
    engine.pinned_memory = memory
    try:
        snap = engine.run_to_end()
        env = engine.environment()
        landed = [ctypes.string_at(at, 1 << 20) for _, at in given]
    finally:
        engine.close()
        data = [Path(target.files[target.worker_files[i]].path).read_bytes() for i in range(2)]
        expected = [d[start : start + (1 << 20)] for d, (start, _) in zip(data, target.worker_regions)]
        targets.cleanup(target, keep=False)
    assert snap.error is None and snap.bytes == 2 << 20
    assert [k for k, _ in given] == [memory, memory], "a worker's buffers each, of the kind named"
    assert landed == expected, "each worker's read landed in its pinned memory"
    assert env["host_buffers"] == PINNED_MEMORY[memory] and f"buffers in {PINNED_MEMORY[memory]}" in engine.labels
    assert made and all(r.live == 0 for r in made), "the pinned memory freed at close"


def test_the_pinned_memory_probe_says_what_a_read_into_each_memory_costs(direct_dir, sim_gpu):
    from xferscope.doctor import pinned_probe

    probe = pinned_probe.measure(str(direct_dir), rounds=1, seconds=0.1)
    assert set(probe.gb_s) == {"own", "registered", "allocated"} and probe.rounds == 1
    assert all(v > 0 for v in probe.gb_s.values()) and all(v > 0 for v in probe.read_us.values())
    assert probe.cost("own") == 0.0
    assert "a read into pinned memory costs" in probe.sentence() and "cuMemHostAlloc" in probe.sentence()
    assert not list(direct_dir.iterdir()), "the probe's file is removed"


def test_doctors_pinned_memory_check_says_the_cost_and_keeps_it_for_compare(direct_dir, sim_gpu, monkeypatch, tmp_path):
    import functools

    from xferscope.doctor import checks, pinned_probe
    from xferscope.engines import pinned_cost

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(pinned_probe, "measure", functools.partial(pinned_probe.measure, rounds=1, seconds=0.1))
    facts = checks.Facts(directory=str(direct_dir), gpus=[None])  # type: ignore[list-item]
    [check] = checks.check_pinned_memory(facts)
    assert check.name == "pinned memory" and "a read into pinned memory costs" in check.detail
    kept = pinned_cost.recalled(os.stat(direct_dir).st_dev)
    assert kept is not None and f"{kept.registered:.1%} here" in check.detail
    assert checks.check_pinned_memory(checks.Facts(directory=str(direct_dir), gpus=[])) == [], "no GPU: no probe"
