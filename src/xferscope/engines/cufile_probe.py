"""cuFile's mode for a file, as a probe read finds it: ``file_mode`` here, the read in a short-lived process of
its own (``count_one_read``, through ``probe_read_path``).

One read of a file through cuFile, with cuFile's statistics switched on once for the
process and never off, and its per-GPU counters read before and after the read:
which of them moved tells the path cuFile took (nvidia-fs, PCI P2PDMA or POSIX).

Switching the statistics on and off (``set_stats_level``, ``stats_start``,
``stats_stop``) crashes cuFile 1.15 in compat mode now and then, at the start and
at the stop calls; switched on once and never off, with the counters read around
each read, it did not crash in 15 processes x 20 probes. This process is started
for the probe and leaves right after answering (``isolation.call``, no exit
handlers), so nothing here ever stops the statistics or closes the driver, and
the process that measures runs never has them on.
"""

from __future__ import annotations

import os
import threading

from xferscope.engines import cufile_driver, gpu_setup

#: held while a probe runs: one probe per block device at a time
_lock = threading.Lock()


def _counts(cf, np) -> dict[str, int]:
    st = np.zeros(1, dtype=cf.stats_level3_dtype)
    cf.get_stats_l3(st.ctypes.data)
    per = st["per_gpu_stats"][0][: int(st["num_gpus"][0])]
    return {name: int(per[field].sum()) for name, field in cufile_driver.PROBE_COUNTERS.items()}


def statistics_on(cf) -> None:
    """cuFile's statistics at level 3, for the rest of this process (never switched off)."""
    cf.set_stats_level(3)
    cf.stats_start()


def count_one_read(path: str, nbytes: int, gpu: int, fstype: str = "", register: bool = True) -> dict[str, int]:
    """How much each of cuFile's read counters moved during one ``nbytes`` read of ``path`` at offset 0
    into GPU ``gpu``'s memory."""
    import numpy as np

    cf = cufile_driver.module()
    cufile_driver.open_driver(gpu)
    statistics_on(cf)
    res = gpu_setup.GpuResources()  # never released: the process ends right after the answer
    fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    handle = cufile_driver.register_handle(res, fd, path, fstype)
    dev = res.device_memory(gpu, nbytes)
    if register:
        cufile_driver.register_buffer(res, gpu, dev, nbytes)
    before = _counts(cf, np)
    cf.read(handle, dev, nbytes, 0, 0)
    after = _counts(cf, np)
    return {name: after[name] - before[name] for name in after}


#: a probe that fails is tried again, in a fresh process: beside many other cuFile processes (a test suite of 32
#: workers), one probe in 60 failed once with INVALID_VALUE from cuFile (compat mode, cuFile 1.15)
PROBE_ATTEMPTS = 3


def probe_read_path(
    path: str, nbytes: int, gpu: int = 0, *, fstype: str = "", register: bool = True
) -> tuple[str | None, str | None]:
    """Which path cuFile took for one read of ``path`` ("nvfs", "p2p" or "posix"), from its own per-GPU
    counters, or (None, why not). Outside the timed region.

    cuFile 1.15 in compat mode crashes now and then when its statistics are switched on and off in
    a process (``set_stats_level``/``stats_start``/``stats_stop``). So the probe runs in a short-lived
    process of its own (``count_one_read``) that switches them on once, never off,
    reads the counters before and after one read, and leaves without tearing anything down: the
    process that measures never has statistics on, and a crash of the probe is only a probe that
    could not tell."""
    from xferscope.isolation import ChildDied, NoAnswer, call

    for attempt in range(PROBE_ATTEMPTS):
        try:
            counts = call(
                count_one_read,
                path,
                nbytes,
                gpu,
                fstype,
                register,
                what="cuFile's mode probe",
                timeout=120,
            )
            break
        except ChildDied as exc:
            if isinstance(exc, NoAnswer) or attempt == PROBE_ATTEMPTS - 1:  # a probe that hangs is not tried again
                return None, f"the probe's process died by {exc.how}" if exc.signal_name else str(exc)
        except Exception as exc:
            if attempt == PROBE_ATTEMPTS - 1:
                return None, f"the probe failed: {exc}"
    if not counts or not any(counts.values()):
        return None, "cuFile's counters did not move"
    return max(counts, key=counts.get), None


_probed: dict[int, str | None] = {}


def known_probes() -> dict[int, str | None]:
    """What the probes of this process found, per block device (to hand to the next run's process)."""
    with _lock:
        return dict(_probed)


def remember_probes(probes: dict[int, str | None]) -> None:
    """Take what earlier runs' probes found (one probe per block device and session)."""
    with _lock:
        _probed.update(probes)


def file_mode(
    path: str, nbytes: int, gpu: int = 0, device: int | None = None, *, fstype: str = "", register: bool = True
) -> cufile_driver.CufileMode:
    """The mode for one file: the driver's, corrected by a probe read's counters.

    The probe runs once per block device (``device``, the file's st_dev) and session: it costs a
    process start and a CUDA context (a second or so, outside the timed region)."""
    mode = cufile_driver.driver_mode()
    why = None
    with _lock:
        if device is not None and device in _probed:
            taken = _probed[device]
        else:
            taken, why = probe_read_path(path, nbytes, gpu, fstype=fstype, register=register)
            if device is not None and why is None:
                _probed[device] = taken
    if taken == "posix" and mode.mode == "gds":
        return cufile_driver.CufileMode("compat", "cuFile served this file through POSIX")
    if taken in ("nvfs", "p2p") and mode.mode == "compat":
        return cufile_driver.CufileMode("gds", "nvidia-fs" if taken == "nvfs" else "PCI P2PDMA")
    if taken == "posix":
        return cufile_driver.CufileMode("compat", mode.reason + ", confirmed by cuFile's counters")
    if why:
        return cufile_driver.CufileMode(mode.mode, f"{mode.reason}; not confirmed by cuFile's counters: {why}")
    return mode
