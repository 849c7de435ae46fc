"""RunSpec: what to run, validated once, with errors that name the field and the fix.

A RunSpec is built by the CLI, the console's form or a profile. ``validate()``
checks what can be checked without touching the machine; ``xferscope.target``
then checks the filesystem (directory exists, O_DIRECT, free space) before
anything is created.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from xferscope.errors import SpecError
from xferscope.packages import KVIKIO, package_refusal
from xferscope.units import format_size

#: Transfer paths, with the gdsio ``-x`` number and the name gdsio prints as XferType (KvikIO's has no gdsio number).
PATHS: dict[str, tuple[int | None, str]] = {
    "cufile": (0, "GPUD"),
    "host": (1, "CPUONLY"),
    "bounce": (2, "CPU_GPU"),
    "bounce-async": (3, "CPU_ASYNC_GPU"),
    "cufile-async": (5, "GPU_DIRECT_ASYNC"),
    "cufile-batch": (6, "GPU_BATCH"),
    "kvikio": (None, "KVIKIO"),
}
GDSIO_XFER = {number: name for name, (number, _) in PATHS.items() if number is not None}
GPU_PATHS = frozenset(p for p in PATHS if p != "host")
#: paths whose requests --split can split (one synchronous request at a time per worker)
SPLIT_PATHS = ("host", "bounce", "bounce-async", "cufile")

#: what a run's request shape is called in its records, in their order (the summary's columns, a point's identity)
SHAPE_FIELDS = ("path", "io", "block_size", "workers", "iodepth", "rwmix")

#: I/O patterns, with gdsio's ``-I`` number where gdsio has one.
IO_PATTERNS = ("read", "write", "randread", "randwrite", "randrw", "rw")
GDSIO_IO = {0: "read", 1: "write", 2: "randread", 3: "randwrite"}
GDSIO_IO_NAME = {
    "read": "READ",
    "write": "WRITE",
    "randread": "RANDREAD",
    "randwrite": "RANDWRITE",
    "randrw": "RANDRW",
    "rw": "RW",
}

DEFAULT_BLOCK = 1 << 20
DEFAULT_FILE_SIZE = 1 << 30
#: where the data comes from: the storage under the file (O_DIRECT by default), or the file held in the page cache,
#: so that storage drops out and each path shows its own ceiling
SOURCES = ("storage", "cache")
MIN_BLOCK = 512
MAX_BLOCK = 1 << 30
MAX_WORKERS = 1024
MAX_IODEPTH = 4096


@dataclass
class RunSpec:
    """One run of one transfer path. Sizes are bytes, times seconds."""

    path: str = "host"
    io: str = "read"
    block_size: int = DEFAULT_BLOCK
    workers: int = 1
    iodepth: int = 1
    file_size: int = DEFAULT_FILE_SIZE
    duration: float | None = 10.0
    total_bytes: int | None = None
    file: str | None = None
    directory: str | None = None
    rwmix: int = 70
    gpus: list[int] = field(default_factory=lambda: [0])
    numa_node: int | None = None
    cpus: list[int] | None = None
    verify: bool = False
    buffered: bool = False
    source: str = "storage"  # one of SOURCES; "cache" reads buffered from a file held resident in the page cache
    # host and bounce buffers: on 2 MiB transparent huge pages (True), on 4 KiB pages (False), or the default
    # (None: on huge pages where the kernel offers them; the bounce paths pin them with cuMemHostRegister, and
    # fall back to CUDA's own pinned allocation where that is refused, saying so)
    huge_pages: bool | None = None
    split: int | None = None  # one request of block_size as parallel sub-requests of this size (KvikIO's task size)
    register_buffers: bool = (
        True  # cuFile buf_register of the GPU buffers (gdsio does it; compat mode may read faster without)
    )
    force: bool = False
    keep: bool = False
    seed: int = 0x5EED
    interval: float = 0.1
    label: str | None = None

    # ------------------------------------------------------------------ derived
    @property
    def is_random(self) -> bool:
        return self.io.startswith("rand")

    @property
    def read_pct(self) -> int:
        """Share of operations that are reads."""
        return {"read": 100, "randread": 100, "write": 0, "randwrite": 0}.get(self.io, self.rwmix)

    @property
    def writes(self) -> bool:
        return self.read_pct < 100

    @property
    def through_page_cache(self) -> bool:
        """Reads and writes go through the page cache (no O_DIRECT): --buffered, or --source cache."""
        return self.buffered or self.source == "cache"

    @property
    def uses_gpu(self) -> bool:
        return self.path in GPU_PATHS

    @property
    def xfer_type(self) -> str:
        if self.path == "bounce" and self.buffered:
            return "CPU_CACHED_GPU"  # gdsio -x 4
        return PATHS[self.path][1]

    @property
    def name(self) -> str:
        """A short label such as ``host randread 4K w4 qd32``."""
        if self.label:
            return self.label
        parts = [self.path + (" buffered" if self.buffered else ""), self.io, self.block_text, f"w{self.workers}"]
        if self.iodepth > 1:
            parts.append(f"qd{self.iodepth}")
        return " ".join(parts)

    @property
    def block_text(self) -> str:
        """The block size, and the sub-request size when split: ``16M`` or ``16M/4M``."""
        if self.split and self.split < self.block_size:
            return f"{format_size(self.block_size)}/{format_size(self.split)}"
        return format_size(self.block_size)

    # --------------------------------------------------------------- validation
    def validate(self) -> RunSpec:
        """Check every field that can be checked without the machine. Returns self."""
        if self.path not in PATHS:
            raise SpecError("path", f"unknown transfer path {self.path!r}; choose one of {', '.join(PATHS)}")
        if self.io not in IO_PATTERNS:
            raise SpecError("io", f"unknown I/O pattern {self.io!r}; choose one of {', '.join(IO_PATTERNS)}")
        if not 0 <= self.rwmix <= 100:
            raise SpecError("rwmix", f"read share must be 0..100 percent, got {self.rwmix}")
        if not MIN_BLOCK <= self.block_size <= MAX_BLOCK:
            raise SpecError("block_size", f"{self.block_size} bytes is outside {MIN_BLOCK} B .. 1 GiB")
        if not self.through_page_cache and self.block_size % MIN_BLOCK:
            raise SpecError(
                "block_size",
                f"{self.block_size} bytes is not a multiple of 512 as O_DIRECT needs; "
                "use a multiple of 4K, or --buffered",
            )
        if not 1 <= self.workers <= MAX_WORKERS:
            raise SpecError("workers", f"must be 1..{MAX_WORKERS}, got {self.workers}")
        if not 1 <= self.iodepth <= MAX_IODEPTH:
            raise SpecError("iodepth", f"must be 1..{MAX_IODEPTH}, got {self.iodepth}")
        if self.file and self.directory:
            raise SpecError("file", "give either --file or --dir, not both")
        if self.duration is None and self.total_bytes is None:
            raise SpecError("duration", "give a duration (seconds) or a total size to transfer")
        if self.duration is not None and not 0 < self.duration <= 7 * 86400:
            raise SpecError("duration", f"must be a positive number of seconds, got {self.duration}")
        if self.total_bytes is not None and self.total_bytes < self.block_size:
            raise SpecError("total_bytes", "must be at least one block")
        if self.file_size < self.block_size:
            raise SpecError(
                "file_size",
                f"{self.file_size} bytes is smaller than one block "
                f"({self.block_size} bytes); raise --size or lower --bs",
            )
        # a file size that is not a whole number of blocks: sequential runs wrap at the last whole block, as gdsio
        if not self.gpus or any(g < 0 for g in self.gpus):
            raise SpecError("gpus", f"GPU indices must be 0 or more, got {self.gpus}")
        if self.cpus is not None and (not self.cpus or any(c < 0 for c in self.cpus)):
            raise SpecError("cpus", f"CPU numbers must be 0 or more, got {self.cpus}")
        if not 0.01 <= self.interval <= 10:
            raise SpecError("interval", f"sample interval must be 0.01..10 s, got {self.interval}")
        self._check_split()
        self._check_source()
        if self.path == KVIKIO.path:
            self._check_kvikio()
        if self.verify and self.path in ("cufile-batch", "cufile-async", "kvikio"):
            raise SpecError(
                "verify", f"--verify is supported on host, bounce, bounce-async and cufile, not {self.path}"
            )
        return self

    def _check_kvikio(self) -> None:
        """kvikio: its package there, reading or writing with O_DIRECT into GPU memory, as cufile."""
        why = package_refusal(KVIKIO, self.path)
        if why:
            raise SpecError("path", why)
        if self.buffered:
            raise SpecError(
                "buffered", "kvikio reads through cuFile with O_DIRECT; --buffered applies to host and bounce"
            )

    def _check_split(self) -> None:
        """--split: on a path that splits, at a size O_DIRECT and the lanes can take."""
        if self.split is None:
            return
        if self.path not in SPLIT_PATHS:
            raise SpecError(
                "split",
                f"--split applies to {', '.join(SPLIT_PATHS)}, not {self.path} "
                "(it queues its own requests: use --iodepth)",
            )
        if self.path == "host" and self.iodepth > 1:
            raise SpecError(
                "split",
                "--split splits one request at a time (psync); host at --iodepth > 1 "
                "queues whole blocks through io_uring: use one or the other",
            )
        if not MIN_BLOCK <= self.split <= MAX_BLOCK:
            raise SpecError("split", f"{self.split} bytes is outside {MIN_BLOCK} B .. 1 GiB")
        if not self.through_page_cache and self.split % MIN_BLOCK:
            raise SpecError(
                "split", f"{self.split} bytes is not a multiple of 512 as O_DIRECT needs; use a multiple of 4K"
            )
        if self.split % 8:
            raise SpecError("split", f"{self.split} bytes is not a multiple of 8")

    def _check_source(self) -> None:
        """--source: storage, or the page cache for reads on a path that can read through it."""
        if self.source not in SOURCES:
            raise SpecError("source", f"unknown source {self.source!r}; choose one of {', '.join(SOURCES)}")
        if self.source == "cache":
            if self.writes:
                raise SpecError(
                    "source",
                    f"--source cache reads a file held in memory; --io {self.io} writes, and its writes would go to "
                    "storage: use --io read or randread",
                )
            if self.path.startswith("cufile") or self.path == KVIKIO.path:
                raise SpecError(
                    "source",
                    f"{self.path} reads with O_DIRECT into GPU memory; --source cache applies to host, bounce and "
                    "bounce-async",
                )

    # ------------------------------------------------------------- conversions
    def shape(self) -> dict[str, Any]:
        """The request shape as the records name it (``SHAPE_FIELDS``: rwmix is the read share)."""
        return {
            "path": self.path,
            "io": self.io,
            "block_size": self.block_size,
            "workers": self.workers,
            "iodepth": self.iodepth,
            "rwmix": self.read_pct,
        }

    def replace(self, **changes: Any) -> RunSpec:
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def field_names(cls) -> list[str]:
        return [f.name for f in dataclasses.fields(cls)]


def parse_int_list(text: str, field_name: str, *, allow_all: int | None = None) -> list[int]:
    """Parse '0,1,4-7' (and 'all' when ``allow_all`` gives the count) into a list of ints."""
    text = str(text).strip()
    if allow_all is not None and text.lower() == "all":
        return list(range(allow_all))
    out: list[int] = []
    try:
        for part in text.split(","):
            part = part.strip()
            if not part:
                continue
            if "-" in part:
                lo, hi = part.split("-", 1)
                lo_i, hi_i = int(lo), int(hi)
                if hi_i < lo_i:
                    raise ValueError
                out.extend(range(lo_i, hi_i + 1))
            else:
                out.append(int(part))
    except ValueError:
        raise SpecError(field_name, f"not a list of numbers: {text!r} (e.g. 0,1 or 0-3)") from None
    if not out:
        raise SpecError(field_name, f"empty list: {text!r}")
    return out
