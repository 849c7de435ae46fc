"""host: storage -> CPU memory (gdsio CPUONLY, fio --direct=1).

psync (pread/pwrite, one operation in flight per worker) at queue depth 1;
io_uring at queue depth > 1 when the kernel allows it, psync otherwise, and
the output says which.
"""

from __future__ import annotations

from typing import Any

from xferscope import _iocore
from xferscope.engines.native import NativeEngine, NativeOptions, uring_status
from xferscope.errors import EnvironmentProblem
from xferscope.records import EngineEnvironment

THP_SETTING = "/sys/kernel/mm/transparent_hugepage/enabled"
#: the result's ``host_buffers``: which pages the buffers were on (" (default)" appended when not asked for)
HUGE_PAGE_BUFFERS, SMALL_PAGE_BUFFERS = "2 MiB transparent huge pages", "4 KiB pages"


def set_buffer_pages(env: EngineEnvironment, huge: bool, *, default: bool) -> None:
    """The pages a run's host buffers were on, in an engine's environment: ``host_buffers_huge`` to act on,
    ``host_buffers`` in words (with "(default)" when nobody asked)."""
    env["host_buffers"] = (HUGE_PAGE_BUFFERS if huge else SMALL_PAGE_BUFFERS) + (" (default)" if default else "")
    env["host_buffers_huge"] = huge


def thp_mode() -> str | None:
    """The transparent huge page mode in effect (always, madvise, never), or None where the kernel has none."""
    try:
        with open(THP_SETTING) as fh:
            text = fh.read()
    except OSError:
        return None
    start, end = text.find("["), text.find("]")
    return text[start + 1 : end] if 0 <= start < end else None


def huge_pages_offered() -> bool:
    """Whether a buffer can ask for transparent huge pages here (mode always or madvise)."""
    return thp_mode() in ("always", "madvise")


#: the paths whose reads land in host buffers of xferscope's own (host, and the bounce paths' pinned buffers)
PATHS_WITH_HOST_BUFFERS = ("host", "bounce", "bounce-async")


def host_buffers_on_huge_pages(spec) -> bool:
    """Whether ``spec``'s host buffers sit on 2 MiB pages: as asked, or by default for the paths that have them
    where the kernel offers them. On virtual machines the 4 KiB pages a process happens to get decide how fast
    O_DIRECT reads into them go (run to run, the same read varies by a third), and a read into many of them can
    be split into several requests (the queue's segment limit, see doctor), so xferscope does not measure that
    by default; ``--4k-pages`` (``huge_pages=False``) measures it, as fio's malloc'd buffers and CUDA's pinned
    allocation do."""
    if spec.huge_pages is None:
        return spec.path in PATHS_WITH_HOST_BUFFERS and huge_pages_offered()
    return bool(spec.huge_pages)


def require_huge_pages() -> None:
    """Raise EnvironmentProblem, with the fix, where transparent huge pages cannot be had (--huge-pages)."""
    mode = thp_mode()
    if mode not in ("always", "madvise"):
        raise EnvironmentProblem(
            f"--huge-pages: transparent huge pages are off on this machine ({THP_SETTING}: "
            f"{mode or 'absent'}); as root: echo madvise > {THP_SETTING}"
        )


#: ``HostEngine.pinned_memory``: the memory a worker's buffers are in where not its own mapping, in words
PINNED_MEMORY = {
    "registered": "2 MiB transparent huge pages registered with CUDA (cuMemHostRegister), as the bounce paths' buffers",
    "allocated": "CUDA's own pinned allocation (cuMemHostAlloc, 4 KiB pages)",
}


class HostEngine(NativeEngine):
    name = "host"
    xfer_type = "CPUONLY"
    description = "storage -> CPU memory (O_DIRECT)"
    native_mode = _iocore.MODE_HOST
    #: psync: buffers each worker reads into in turn (doctor's buffer-set probe; runs read into one)
    buffers_in_turn = 1
    #: the memory the workers read into (doctor's pinned-memory probe): None, a mapping of each worker's own;
    #: a key of PINNED_MEMORY, pinned memory of CUDA's on the run's GPUs (no copy: what pinning costs a read)
    pinned_memory: str | None = None
    _resources: Any = None  # the CUDA resources the pinned memory is of

    def native_options(self) -> NativeOptions:
        options: NativeOptions = {"host_buffers": self.buffers_in_turn} if self.buffers_in_turn > 1 else {}
        if self.pinned_memory is not None:
            options["host_memory"] = self._pinned_buffers()
        return options

    def _pinned_buffers(self) -> list[int]:
        """Each worker's buffers in pinned memory of ``pinned_memory``'s kind, on the GPUs of the run in turn."""
        from xferscope.engines import gpu_setup

        kind = self.pinned_memory
        if kind not in PINNED_MEMORY:
            raise ValueError(f"pinned_memory: {kind!r}, not one of {', '.join(PINNED_MEMORY)}")
        self._resources = res = gpu_setup.GpuResources()
        nbufs = self.spec.iodepth if self.io_engine == "io_uring" else self.buffers_in_turn
        size = -(-nbufs * self.spec.block_size // (2 << 20)) * (2 << 20)
        out = []
        for gpu in gpu_setup.assign_gpus(self.spec.gpus, self.spec.workers):
            out.append(res.pinned_huge_memory(gpu, size) if kind == "registered" else res.pinned_memory(gpu, size))
        self.labels.append(f"buffers in {PINNED_MEMORY[kind]}")
        return out

    def release_gpu(self) -> None:
        res, self._resources = self._resources, None
        if res is not None:
            res.release()

    def huge_pages(self) -> bool:
        if self.pinned_memory is not None:  # the pinned memory's own pages (its label says which)
            return False
        if not host_buffers_on_huge_pages(self.spec):
            if self.spec.huge_pages is None:
                self.labels.append(f"buffers on 4 KiB pages (transparent huge pages {thp_mode() or 'absent'})")
            return False
        require_huge_pages()
        self.labels.append("buffers on 2 MiB huge pages")
        return True

    def environment(self):
        env = super().environment()
        if self.pinned_memory in PINNED_MEMORY:
            env["host_buffers"] = PINNED_MEMORY[self.pinned_memory]
            env["host_buffers_huge"] = self.pinned_memory == "registered"
            return env
        set_buffer_pages(env, host_buffers_on_huge_pages(self.spec), default=self.spec.huge_pages is None)
        return env

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
