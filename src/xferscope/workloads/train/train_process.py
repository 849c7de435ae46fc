"""A training-input run in the engine's own process (started by ``train_run.TrainRun``, over
``process_host``'s channel): the job is a ``TrainJob`` (spec, data), the payload at the end a ``TrainEnd`` (seconds,
each accelerator's run).

Set-up (GPU memory checked, batch buffers, pinned buffers, streams, the kernel) happens before "ready",
outside the timed region.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from typing import Any

from xferscope.engines import gpu_setup
from xferscope.engines.gpu_native import gpu_environment
from xferscope.engines.host import huge_pages_offered
from xferscope.errors import SpecError
from xferscope.isolation import Channel
from xferscope.packages import installed_version
from xferscope.records import WorkloadEnvironment
from xferscope.target import memory_available
from xferscope.units import format_bytes
from xferscope.workloads.common.fetchers import Slot, host_slot, make_fetcher, slot_capacity
from xferscope.workloads.common.gpu_memory import MEMORY_SHARE
from xferscope.workloads.common.libraries import TRAIN_LIBRARIES
from xferscope.workloads.common.process_host import serve_with
from xferscope.workloads.train.accelerators import Accelerator, run_accelerators, step_limit
from xferscope.workloads.train.compute import SleepCompute
from xferscope.workloads.train.dataloader import DataLoaderAccelerator, evict, loader_settings
from xferscope.workloads.train.train_data import TrainData
from xferscope.workloads.train.train_record import AcceleratorRun, TrainEnd
from xferscope.workloads.train.train_spec import TrainSpec

#: share of the free memory (host MemAvailable, or a GPU's free memory) the batch buffers may take


class TrainSetup:
    """The accelerators of a run with everything they hold; ``close()`` frees it all (also after a failure)."""

    def __init__(self, spec: TrainSpec, data: TrainData):
        self.spec, self.data = spec, data
        self.accelerators: list[Accelerator] = []
        self.labels: list[str] = []
        self.environment: WorkloadEnvironment = {}
        self.resources: Any = None  # GpuResources where a GPU is used
        self._host_slots: list = []

    def build(self) -> None:
        spec, data = self.spec, self.data
        capacity = slot_capacity([x.length for x in data.samples], spec.batch)
        limit = step_limit(spec, data)
        self.labels.append("O_DIRECT" if data.direct else "buffered (page cache)")
        self.environment["batch_buffer_bytes"] = capacity
        self.environment["batch_buffers_per_accelerator"] = spec.slots
        if spec.uses_gpu:
            self._gpu_setup(capacity)
        else:
            check_memory(spec, capacity, {})
        modules: dict = {}
        for i in range(spec.accelerators):
            gpu = spec.gpu_of(i)
            compute: Any
            if spec.compute == "gpu":
                from xferscope.workloads.train.compute import GpuCompute

                assert gpu is not None
                compute = GpuCompute(gpu, self.resources, modules)
            else:
                compute = SleepCompute()
            bind = (lambda g=gpu: self.resources.context(g)) if gpu is not None else (lambda: None)
            if spec.path in TRAIN_LIBRARIES:
                self.accelerators.append(DataLoaderAccelerator(i, spec, data, gpu, compute, limit, bind))
                continue
            if spec.lands_in_gpu:
                assert gpu is not None
                slots = [self._dev_slot(gpu, capacity) for _ in range(spec.slots)]
            else:
                slots = [host_slot(capacity) for _ in range(spec.slots)]
                self._host_slots += slots
            fetchers = [
                make_fetcher(spec.path, data, spec.block_size, gpu, self.resources) for _ in range(spec.read_threads)
            ]
            self.accelerators.append(Accelerator(i, spec, data, gpu, fetchers, compute, slots, limit, bind))
        self.labels.append(self.accelerators[0].compute.label)
        if spec.path in TRAIN_LIBRARIES:
            self._loader_labels()
            return

        pages = "2 MiB huge pages" if huge_pages_offered() else "4 KiB pages"
        if spec.lands_in_gpu:
            self.labels.append(f"batches land in GPU memory ({spec.path})")
            if spec.path == "cufile":
                from xferscope.engines import cufile_driver

                self.labels.append(cufile_driver.driver_mode().label + ", GPU buffers not registered")
            else:
                self.labels.append(f"pinned buffers of {spec.block_size >> 10} KiB on {pages}")
        else:
            self.labels.append(f"batches stop in host memory (as DLIO), on {pages}")

    def _loader_labels(self) -> None:
        """What the DataLoader path runs with: its settings and torch's version (imported here, before the
        clock), the data set's pages evicted first."""
        import multiprocessing

        import torch

        settings = {k: str(v) for k, v in loader_settings(self.spec).items()}
        settings["start_method"] = multiprocessing.get_start_method()
        self.environment["loader_settings"] = settings
        self.environment["library"] = f"torch {installed_version('torch') or torch.__version__}"
        held = evict(self.data)
        said = ", ".join(f"{k}={v}" for k, v in settings.items())
        self.labels.append(f"batches from torch.utils.data.DataLoader({said}), each .cuda(non_blocking=True)")
        self.labels.append(
            "buffered reads (the data set's pages evicted first"
            + (f": {held:.0%} stayed" if held else "")
            + "), the loader's workers started with the clock"
        )

    def _gpu_setup(self, capacity: int) -> None:

        reason = gpu_setup.unavailable_reason()
        if reason:
            raise SpecError("path", f"{self.spec.path} with --compute {self.spec.compute} needs a GPU: {reason}")
        self.resources = gpu_setup.GpuResources()
        spec = self.spec
        if not spec.lands_in_gpu:
            check_memory(spec, capacity, {})
            return
        gpus = sorted({spec.accelerator_gpu(i) for i in range(spec.accelerators)})
        free = {}
        for g in gpus:
            self.resources.context(g)
            free[g] = gpu_setup.memory_info(g)[0]
        check_memory(spec, capacity, free)

        self.environment.update(gpu_environment(gpus))

    def _dev_slot(self, gpu: int, capacity: int):

        return Slot(capacity, dev=self.resources.device_memory(gpu, capacity))

    def run(self, stop: threading.Event, on_tick: Callable[[Any], None]) -> tuple[Any, BaseException | None]:
        seconds = run_accelerators(self.accelerators, self.spec, stop, on_tick)
        runs = [
            AcceleratorRun(a.record.index, a.record.gpu, a.record.steps, a.record.bytes_read, a.record.cpu_s)
            for a in self.accelerators
        ]
        failed = next((a.record.error for a in self.accelerators if a.record.error is not None), None)
        return TrainEnd(seconds, runs), failed

    def close(self) -> None:
        for a in self.accelerators:
            if isinstance(a, DataLoaderAccelerator):
                a.close()
            for f in a.fetchers:
                try:
                    f.close()
                except Exception as exc:
                    print(f"xferscope: closing a reader failed: {exc!r}", file=sys.stderr)
        for s in self._host_slots:
            s.close()
        self._host_slots.clear()
        if self.resources is not None:
            self.resources.release()


def check_memory(spec: TrainSpec, capacity: int, free_gpu: dict[int, int]) -> None:
    """The batch buffers fit: in each GPU's free memory (``free_gpu``) where batches land in GPU memory, else
    in the host's available memory. Raises SpecError naming --prefetch."""

    if spec.lands_in_gpu:
        per_gpu: dict[int, int] = {}
        for i in range(spec.accelerators):
            g = spec.accelerator_gpu(i)
            per_gpu[g] = per_gpu.get(g, 0) + 1
        for g, n in sorted(per_gpu.items()):
            need, free = n * spec.slots * capacity, free_gpu.get(g)
            if free is not None and need > free * MEMORY_SHARE:
                raise SpecError(
                    "prefetch",
                    f"{n} accelerator{'s' * (n != 1)} on GPU {g} need{'s' * (n == 1)} {format_bytes(need)} of batch buffers "
                    f"({spec.slots} each of {format_bytes(capacity)}: --prefetch buffers, each for the "
                    f"{spec.batch} largest samples), more than its free memory allows ({format_bytes(free)} "
                    "free): lower --prefetch, --batch or --accelerators",
                )
        return
    need, avail = spec.accelerators * spec.slots * capacity, memory_available()
    if avail is not None and need > avail * MEMORY_SHARE:
        raise SpecError(
            "prefetch",
            f"{spec.accelerators} accelerator{'s' * (spec.accelerators != 1)} need{'s' * (spec.accelerators == 1)} {format_bytes(need)} of batch "
            f"buffers in host memory ({spec.slots} each of {format_bytes(capacity)}), more than is available "
            f"({format_bytes(avail)}): lower --prefetch, --batch or --accelerators",
        )


def serve(channel: Channel) -> None:
    serve_with(channel, lambda job: TrainSetup(job.spec, job.data))
