"""cuFile's mode probe, run in a short-lived process of its own (``cufile_driver.probe_read_path``).

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

from xferscope.engines import cufile_driver, gpu_setup


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
