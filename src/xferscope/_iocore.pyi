"""Types of the C extension xferscope._iocore (src/xferscope/_native/iocore.c): the I/O hot loop."""

from typing import Any

from typing_extensions import Buffer

from xferscope.engines.native import GpuWorker

# what a Job's workers do
MODE_HOST: int
MODE_BOUNCE: int
MODE_BOUNCE_PIPE: int
MODE_CUFILE: int
# bounce-async: reads into one buffer, groups taking turns, or a trial of both
TURNS_AUTO: int
TURNS_ALWAYS: int
TURNS_NEVER: int
#: the trial keeps one buffer unless taking turns is this many percent faster
SERIAL_WINS_PCT: int
HIST_SUB: int
HIST_NBUCKETS: int
MAX_SLOTS: int
MAX_PIPE: int
MAX_LANES: int
# the kinds of a timeline's intervals
TL_READ: int
TL_WRITE: int
TL_COPY: int
TL_WAIT: int
TL_SUB_READ: int
TL_SUB_WRITE: int

class Job:
    """The workers of one run: files, offsets, request shape and mode in; counters out."""

    def __init__(
        self,
        fds: list[int],
        starts: list[int],
        lengths: list[int],
        block_size: int,
        mode: int = ...,
        read_pct: int = ...,
        random: int = ...,
        iodepth: int = ...,
        duration_ns: int = ...,
        bytes_limit: int = ...,
        seed: int = ...,
        verify: int = ...,
        pattern_seeds: list[int] | None = ...,
        cpus: list[int] | None = ...,
        use_uring: int = ...,
        gpu_functions: dict[str, int] | None = ...,
        gpu_workers: list[GpuWorker] | None = ...,
        huge_pages: int = ...,
        split: int = ...,
        timeline: int = ...,
        copy_batch: int = ...,
        turns: int = ...,
        host_buffers: int = ...,
        host_memory: list[int] | None = ...,
    ) -> None: ...
    def start(self) -> None: ...
    def stop(self) -> None: ...
    def wait(self, timeout: float = ...) -> bool: ...
    def snapshot(self) -> dict[str, Any]: ...
    def buffer_use(self) -> list[tuple[int, bool, int, int]]: ...
    def tids(self) -> list[int]: ...
    def timeline(self) -> list[list[tuple[int, int, int, int, int, int, int]]]: ...

class Stager:
    """bounce-async's reads and copies, one request at a time, for a caller that is not a Job (the workloads)."""

    def __init__(
        self,
        gpu_functions: dict[str, int],
        ctx: int,
        stream: int,
        host: list[int],
        events: list[int],
        block_size: int,
        copy_batch: int = ...,
        turns: int = ...,
        prompt: bool = ...,
    ) -> None: ...
    def read(self, fd: int, offset: int, length: int, dst: int, need: int = ...) -> int: ...
    def drain(self) -> None: ...
    def use(self) -> tuple[int, bool, int, int]: ...

def fill_pattern(buffer: Buffer, file_offset: int, seed: int) -> None: ...
def check_pattern(buffer: Buffer, file_offset: int, seed: int) -> int | None: ...
def bucket_index(latency_ns: int) -> int: ...
def uring_probe() -> int: ...
def split_plan(block_size: int, split: int) -> list[tuple[int, int]]: ...
