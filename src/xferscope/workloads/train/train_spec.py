"""TrainSpec: one training-input run, validated once, with errors that name the option and the fix."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from xferscope.errors import SpecError
from xferscope.workloads.common.libraries import TRAIN_LIBRARIES, check_installed
from xferscope.workloads.common.run_options import RunOptions
from xferscope.workloads.train.presets import computation_time, preset

#: paths a training run can read by: host stops in host memory (as DLIO), the others land in GPU memory;
#: dataloader is a PyTorch DataLoader's (``train.dataloader``), where torch is installed
TRAIN_PATHS = ("host", "bounce", "bounce-async", "cufile", *TRAIN_LIBRARIES)
COMPUTE_KINDS = ("gpu", "sleep")
DEFAULT_BLOCK = 4 << 20
MAX_ACCELERATORS = 1024


@dataclass(frozen=True)
class TrainSpec(RunOptions):
    preset: str
    accelerator_type: str
    sample_size: int
    sample_sd: int
    samples_per_file: int
    files: int
    batch: int
    read_threads: int
    computation_time: float
    au_threshold: float
    accelerators: int = 1
    compute: str = "sleep"
    prefetch: int = 0  # batch buffers per accelerator, the one being computed on included; 0: read threads + 1
    steps: int | None = None
    duration: float | None = None
    epochs: int | None = None
    data: str | None = None  # the user's own files, read as they are
    block_size: int = DEFAULT_BLOCK
    buffered: bool = False
    #: across the ranks of an MPI job (``--mpi``): the accelerators of all ranks, and this rank's first one's
    #: number among them; the data set is sharded over all of them, as DLIO shards by global rank (0: this run's)
    world_accelerators: int = 0
    first_accelerator: int = 0

    @property
    def sharded_over(self) -> int:
        """How many accelerators share each epoch's samples: this run's, or every rank's under MPI."""
        return self.world_accelerators or self.accelerators

    @property
    def slots(self) -> int:
        """Batch buffers per accelerator (the prefetch depth): the one being computed on and those filled ahead."""
        return self.prefetch or self.read_threads + 1

    @property
    def lands_in_gpu(self) -> bool:
        return self.path != "host"

    @property
    def uses_gpu(self) -> bool:
        """Batches land in GPU memory, or the computation runs there."""
        return self.lands_in_gpu or self.compute == "gpu"

    def accelerator_gpu(self, index: int) -> int:
        return self.gpus[index % len(self.gpus)]

    def gpu_of(self, index: int) -> int | None:
        """The GPU accelerator ``index`` uses (round-robin over --gpu), None where the run uses none."""
        return self.accelerator_gpu(index) if self.uses_gpu else None

    def with_accelerators(self, n: int) -> TrainSpec:
        return dataclasses.replace(self, accelerators=n).validate()

    def validate(self) -> TrainSpec:
        def positive(name: str, value: float | None, option: str) -> None:
            if value is not None and value <= 0:
                raise SpecError(option, f"must be positive, got {value:g}")

        if self.accelerators < 1:
            raise SpecError("accelerators", f"must be at least 1, got {self.accelerators}")
        if self.accelerators > MAX_ACCELERATORS:
            raise SpecError("accelerators", f"at most {MAX_ACCELERATORS}, got {self.accelerators}")
        if self.path not in TRAIN_PATHS:
            raise SpecError(
                "path", f"unknown path {self.path!r} for a training run; choose one of {', '.join(TRAIN_PATHS)}"
            )
        check_installed(self.path, TRAIN_LIBRARIES)
        if self.compute not in COMPUTE_KINDS:
            raise SpecError("compute", f"unknown compute {self.compute!r}; choose gpu (a kernel on the GPU) or sleep")
        positive("sample_size", self.sample_size, "sample-size")
        positive("samples_per_file", self.samples_per_file, "samples-per-file")
        positive("files", self.files, "files")
        positive("batch", self.batch, "batch")
        positive("read_threads", self.read_threads, "read-threads")
        positive("steps", self.steps, "steps")
        positive("duration", self.duration, "duration")
        positive("epochs", self.epochs, "epochs")
        positive("interval", self.interval, "interval")
        if self.sample_sd < 0:
            raise SpecError("sample-sd", f"must be 0 or more, got {self.sample_sd}")
        if self.computation_time < 0:
            raise SpecError("computation-time", f"must be 0 or more seconds, got {self.computation_time:g}")
        if not 0 < self.au_threshold <= 1:
            raise SpecError("au-threshold", f"a share between 0 and 1 (0.9 for 90%), got {self.au_threshold:g}")
        if self.prefetch < 0:
            raise SpecError("prefetch", f"must be 0 (read threads + 1) or more, got {self.prefetch}")
        if self.block_size < 4096 or self.block_size % 4096:
            raise SpecError("bs", f"a multiple of 4 KiB, got {self.block_size} bytes")
        if self.data is not None and self.directory is not None:
            raise SpecError(
                "data", "--data reads your files as they are; --dir is where a generated set goes: give one"
            )
        if not self.gpus:
            raise SpecError("gpu", "no GPU given")
        if self.world_accelerators and not 0 <= self.first_accelerator <= self.world_accelerators - self.accelerators:
            raise SpecError("accelerators", "this rank's accelerators are not within the job's")
        return self


def train_spec(name: str, accelerator_type: str = "h100", **overrides) -> TrainSpec:
    """The preset's spec with the user's overrides (None: the preset's value), validated."""
    p = preset(name)
    values: dict[str, Any] = {
        "sample_size": p.sample_size,
        "sample_sd": p.sample_sd,
        "samples_per_file": p.samples_per_file,
        "files": p.files,
        "batch": p.batch,
        "read_threads": p.read_threads,
        "au_threshold": p.au_threshold,
    }
    given = {k: v for k, v in overrides.items() if v is not None}
    if "computation_time" not in given:
        values["computation_time"] = computation_time(p, accelerator_type)
    values.update(given)
    return TrainSpec(preset=name, accelerator_type=accelerator_type, **values).validate()
