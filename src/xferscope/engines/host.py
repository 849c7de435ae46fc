"""host: storage -> CPU memory (gdsio CPUONLY, fio --direct=1).

psync (pread/pwrite, one operation in flight per worker) at queue depth 1;
io_uring at queue depth > 1 when the kernel allows it, psync otherwise, and
the output says which.
"""
from __future__ import annotations

from xferscope.engines.native import NativeEngine, uring_status


class HostEngine(NativeEngine):
    name = "host"
    xfer_type = "CPUONLY"
    description = "storage -> CPU memory (O_DIRECT)"
    native_mode = 0

    def use_uring(self) -> bool:
        if self.spec.iodepth <= 1:
            self.labels.append("psync")
            return False
        ok, why = uring_status()
        if ok:
            self.labels.append(f"io_uring qd{self.spec.iodepth}")
            return True
        self.labels.append(f"psync: io_uring unavailable ({why}), queue depth {self.spec.iodepth} not used")
        return False
