"""cuFile's statistics are switched on at most once per process and never off, and the mode probe that
reads them runs in a process of its own: no crash, in many processes, many times.

cuFile 1.15 in compat mode crashed (SIGSEGV) now and then when its statistics were switched on and off
around a probe read (``set_stats_level(3)``, ``stats_start``, ``stats_reset``, read, ``get_stats_l3``,
``stats_stop``, ``set_stats_level(old)``): 5 of 15 processes of 20 cycles each. Switched on once, never
off, with the counters read before and after each read, it did not crash. These tests keep that
pattern honest on every GPU machine the suite runs on: a future cuFile, cuda-bindings or xferscope
change that brings the crash back fails here.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest
from gpu_reasons import CUFILE_REASON

needs_cufile = [
    pytest.mark.gpu,
    pytest.mark.skipif(CUFILE_REASON is not None, reason=f"cuFile cannot run here: {CUFILE_REASON}"),
]

PROCESSES = 15
CYCLES = 20

# cuda-bindings alone, no xferscope code: what the probe does, many times in one process
STATISTICS_ONCE = textwrap.dedent("""
    import os, sys
    import numpy as np
    from cuda.bindings import cufile as cf
    from cuda.bindings import driver as cu

    def ok(result):
        assert result[0] == cu.CUresult.CUDA_SUCCESS, result[0]
        return result[1] if len(result) > 1 else None

    path, cycles, size = sys.argv[1], int(sys.argv[2]), 1 << 20
    ok(cu.cuInit(0))
    ok(cu.cuCtxSetCurrent(ok(cu.cuDevicePrimaryCtxRetain(ok(cu.cuDeviceGet(0))))))
    cf.driver_open()
    cf.set_stats_level(3)   # once for the process ...
    cf.stats_start()        # ... and never stopped
    fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    descr = cf.Descr()
    descr.type = cf.FileHandleType.OPAQUE_FD
    descr.handle.fd = fd
    descr.fs_ops = 0
    handle = cf.handle_register(descr.ptr)
    buf = int(ok(cu.cuMemAlloc(size)))
    cf.buf_register(buf, size, 0)

    def reads():
        st = np.zeros(1, dtype=cf.stats_level3_dtype)
        cf.get_stats_l3(st.ctypes.data)
        per = st["per_gpu_stats"][0][: int(st["num_gpus"][0])]
        return int(per["n_posix_reads"].sum() + per["n_nvfs_reads"].sum() + per["n_p2p_reads"].sum())

    for _ in range(cycles):
        before = reads()
        assert cf.read(handle, buf, size, 0, 0) == size
        after = reads()
        assert after > before, (before, after)
    sys.stdout.flush()
    os._exit(0)             # no stats_stop, no driver_close: the process ends
""")


@pytest.fixture
def data_file(direct_dir):
    path = direct_dir / "probe.dat"
    path.write_bytes(os.urandom(1 << 20))
    return path


def test_only_the_probe_process_touches_cufile_statistics():
    """Anywhere: cuFile's statistics calls appear in the probe's module alone (its own process, switched
    on once, never off), never in the code that runs in a measuring process."""
    import pathlib

    import xferscope

    root = pathlib.Path(xferscope.__file__).parent
    calls = ("set_stats_level", "stats_start", "stats_stop", "stats_reset")
    users = sorted(
        str(p.relative_to(root)) for p in root.rglob("*.py") if any(f".{c}(" in p.read_text() for c in calls)
    )
    assert users == ["engines/cufile_probe.py"], users
    probe = (root / "engines" / "cufile_probe.py").read_text()
    assert ".stats_stop(" not in probe and ".stats_reset(" not in probe


@needs_cufile[0]
@needs_cufile[1]
def test_statistics_switched_on_once_never_crash(data_file):
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", STATISTICS_ONCE, str(data_file), str(CYCLES)],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for _ in range(PROCESSES)
    ]
    outcomes = []
    for p in procs:
        out, _ = p.communicate(timeout=600)
        outcomes.append((p.returncode, out[-500:]))
    crashes = [(rc, out) for rc, out in outcomes if rc < 0]
    assert not crashes, f"{len(crashes)} of {PROCESSES} processes died by a signal: " + "; ".join(
        f"{signal.Signals(-rc).name}: {out}" for rc, out in crashes
    )
    assert all(rc == 0 for rc, _ in outcomes), outcomes


@needs_cufile[0]
@needs_cufile[1]
def test_the_mode_probe_in_its_own_process_never_crashes(data_file):
    """xferscope's probe, as every cuFile run and `doctor` use it, many times in a row."""
    from xferscope.engines import cufile_probe

    answers = [cufile_probe.probe_read_path(str(data_file), 1 << 20, 0) for _ in range(CYCLES * 3)]
    failed = [why for taken, why in answers if why]
    assert not failed, failed
    assert {taken for taken, _ in answers} <= {"posix", "nvfs", "p2p"}


def test_a_probe_that_crashes_is_tried_again_and_one_that_hangs_is_not(monkeypatch):
    """cuFile's mode probe: a crash (or an error) of its process is tried again in a fresh one, up to
    PROBE_ATTEMPTS; a probe killed for giving no answer in time (120 s) is not, and says why."""
    from xferscope import isolation
    from xferscope.engines import cufile_probe

    outcomes: list = []

    def fake_call(target, *args, **kw):
        outcome = outcomes.pop(0)
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    monkeypatch.setattr(isolation, "call", fake_call)
    crash = isolation.ChildDied("cuFile's mode probe", "SIGSEGV (segmentation fault)", "SIGSEGV")
    outcomes[:] = [crash, RuntimeError("INVALID_VALUE"), {"nvfs": 0, "p2p": 0, "posix": 1}]
    assert cufile_probe.probe_read_path("f", 1 << 20) == ("posix", None) and not outcomes
    hung = isolation.NoAnswer("cuFile's mode probe", "SIGKILL (no answer in time)", None, message="no answer")
    outcomes[:] = [hung, {"posix": 1}]
    assert cufile_probe.probe_read_path("f", 1 << 20) == (None, "no answer") and len(outcomes) == 1
    outcomes[:] = [crash] * cufile_probe.PROBE_ATTEMPTS
    taken, why = cufile_probe.probe_read_path("f", 1 << 20)
    assert taken is None and why == "the probe's process died by SIGSEGV (segmentation fault)" and not outcomes
