"""LoadSpec: one model load (``workload load``), validated once."""

from __future__ import annotations

from dataclasses import dataclass

from xferscope.errors import SpecError
from xferscope.workloads.common.libraries import LOAD_LIBRARIES, check_installed
from xferscope.workloads.common.run_options import RunOptions
from xferscope.workloads.inference.models import ModelShape

#: xferscope's own: host mapped and copied from pageable memory, as ``safetensors`` does; the others as everywhere
ENGINE_LOAD_PATHS = ("host", "bounce", "bounce-async", "cufile")
#: the libraries users load with, run as they run (``library_load``), where their package is installed
LOAD_PATHS = ENGINE_LOAD_PATHS + tuple(LOAD_LIBRARIES)
CACHE_STATES = ("cold", "warm")
DEFAULT_SHARD = 5_000_000_000  # Hugging Face's max_shard_size="5GB"
#: the request shape where the user gave none and the probe cannot run (load_shape)
DEFAULT_SPLIT, DEFAULT_THREADS = 16 << 20, 8


@dataclass(frozen=True)
class LoadSpec(RunOptions):
    files: str | None = None  # a pattern of the user's .safetensors shards
    model: ModelShape | None = None  # or shards generated with this model's tensors
    shard_size: int = DEFAULT_SHARD
    threads: int | None = None  # reader threads (None: chosen by a probe, load_shape)
    split: int | None = None  # tensors are cut into pieces of at most this, read in parallel (None: by the probe)
    cache: str = "cold"
    verify: bool = False

    #: set by the session: whether the host path's copies go to a GPU (one is present)
    host_to_gpu: bool = False
    #: under MPI (``--share tp``): this rank's tensor-parallel share (its number, and the job's ranks); (0, 1): all
    part: tuple[int, int] = (0, 1)

    @property
    def by_library(self) -> bool:
        return self.path in LOAD_LIBRARIES

    @property
    def lands_in_gpu(self) -> bool:
        return (self.path != "host" and not self.by_library) or self.host_to_gpu

    @property
    def engine_path(self) -> str:
        return "mmap" if self.path == "host" else self.path

    def validate(self) -> LoadSpec:
        if (self.files is None) == (self.model is None):
            raise SpecError(
                "files", "give --files PATTERN (your .safetensors shards) or --model NAME (generated shards)"
            )
        if self.model is not None and not self.model.has_weights:
            raise SpecError(
                "model",
                f"{self.model.name}: the shapes of its weights are not modelled here; load its shards with --files",
            )
        if self.path not in LOAD_PATHS:
            raise SpecError("path", f"unknown path {self.path!r} for load; choose one of {', '.join(LOAD_PATHS)}")
        if self.cache not in CACHE_STATES:
            raise SpecError(
                "cache", f"cold (the page cache emptied of the shards, or O_DIRECT) or warm, got {self.cache!r}"
            )
        if self.threads is not None and self.threads < 1:
            raise SpecError("threads", f"must be at least 1, got {self.threads}")
        if self.split is not None and (self.split < 4096 or self.split % 4096):
            raise SpecError("split", f"a multiple of 4 KiB, got {self.split} bytes")
        if self.shard_size < 1 << 20:
            raise SpecError("shard-size", f"at least 1 MiB, got {self.shard_size} bytes")
        if not self.gpus:
            raise SpecError("gpu", "no GPU given")
        if self.by_library:
            check_installed(self.path, LOAD_LIBRARIES)
            if len(self.gpus) > 1 or self.part[1] > 1:
                raise SpecError(
                    "gpu",
                    f"{self.path} loads a model into one GPU per process here: its tensor-parallel split needs a "
                    "process group (torch.distributed), which xferscope does not start; give it one GPU",
                )
        return self
