"""A model load by a library users run (``libraries.LOAD_LIBRARIES``), in a process of its own (``serve``), by
the same rules as xferscope's paths.

Set-up, outside the timer and timed on its own: torch and the library imported, the GPU's CUDA context made,
cuFile's driver opened for GDS, the library's loader built. Then the clock runs from the first call to the last
tensor on the GPU, ``torch.cuda.synchronize()`` before it stops: every tensor is touched, that is made a tensor of
its own the model could use (the Run:ai streamer's are cloned out of the buffers it reuses). Each shard's time runs
from its first read to its last tensor landed (a library that reads every shard at once starts them all at the
run's start). Afterwards, with ``verify``, every tensor's bytes against the file's.

The payload is the transfer runs' (``TransferEnd``), a job a shard, and the library's facts: version, settings,
the I/O it actually ran (fastsafetensors falls back from cuFile to its bounce buffers by itself, and says so only
in its log) and the set-up's seconds.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from xferscope.isolation import Channel
from xferscope.records import WorkloadEnvironment
from xferscope.units import format_bytes
from xferscope.workloads.common.libraries import LOAD_LIBRARIES, facts_of
from xferscope.workloads.common.process_host import serve_with
from xferscope.workloads.common.records import LibraryFacts
from xferscope.workloads.inference.transfer import JobDone, TransferEnd, TransferTick

#: fastsafetensors' defaults, passed as they are (its README's and its paper's settings)
FST_THREADS, FST_BOUNCE_KIB = 16, 16 * 1024
#: the Run:ai streamer's settings as its environment gives them, and its defaults on a file system
STREAMER_SETTINGS = {"RUNAI_STREAMER_CONCURRENCY": "16", "RUNAI_STREAMER_CHUNK_BYTESIZE": str(2 << 20)}


@dataclass
class LibraryLoadJob:
    path: str  # a key of LOAD_LIBRARIES
    files: list[str]  # the shards, in order
    tensors: list[list[tuple[str, int, int]]]  # per shard: each tensor's name and its bytes' span in the file
    gpu: int | None  # None: no GPU here, the tensors stop in host memory
    verify: bool = False

    @property
    def device(self) -> str:
        return "cpu" if self.gpu is None else f"cuda:{self.gpu}"


@dataclass
class LibraryLoadEnd(TransferEnd):
    facts: LibraryFacts | None = None


class _Fallbacks(logging.Handler):
    """fastsafetensors' warnings (a cuFile handle it could not set up, and the bounce buffers it took instead)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


class LibraryLoadSetup:
    def __init__(self, job: LibraryLoadJob):
        self.job = job
        self.lib = LOAD_LIBRARIES[job.path]
        self.labels: list[str] = []
        self.environment: WorkloadEnvironment = {}
        self.setup_s: dict[str, float] = {}
        self.settings: dict[str, str] = {}
        self.io_mode = ""
        self.kept: dict[str, Any] = {}  # the loaded tensors, by name, until close
        self._loader: Any = None
        self._buffers: Any = None
        self._fallbacks = _Fallbacks()

    # ---------------------------------------------------------------- set-up, outside the timer

    def build(self) -> None:
        job = self.job
        t0 = time.perf_counter()
        import torch

        importlib.import_module(self.lib.module)
        self.setup_s["import"] = time.perf_counter() - t0
        if job.gpu is not None:
            t0 = time.perf_counter()
            torch.cuda.set_device(job.gpu)
            torch.empty(1, device=job.device)
            torch.cuda.synchronize(job.gpu)
            self.setup_s["cuda_context"] = time.perf_counter() - t0
            from xferscope.engines.gpu_native import gpu_environment

            with contextlib.suppress(Exception):
                self.environment.update(gpu_environment([job.gpu]))
        {
            "safetensors": self._build_safetensors,
            "fastsafetensors": self._build_fastsafetensors,
            "fastsafetensors-gds": self._build_fastsafetensors_gds,
            "runai-streamer": self._build_runai_streamer,
        }[job.path]()
        self.labels.append(self.lib.call)
        set_up = ", ".join(f"{k.replace('_', ' ')} {v:.2f} s" for k, v in self.setup_s.items())
        self.labels.append(f"set-up outside the timer: {set_up}")

    def _build_safetensors(self) -> None:
        self.io_mode = "mmap of each shard, its pages faulted in from the page cache under the copy to the device"

    def _build_fastsafetensors(self, gds: bool = False) -> None:
        from fastsafetensors import SafeTensorsFileLoader, SingleGroup

        logging.getLogger("fastsafetensors").addHandler(self._fallbacks)
        t0 = time.perf_counter()
        self._loader = SafeTensorsFileLoader(
            SingleGroup(), self.job.device, nogds=not gds, max_threads=FST_THREADS, bbuf_size_kb=FST_BOUNCE_KIB
        )
        self.setup_s["loader"] = time.perf_counter() - t0
        self.settings = {"nogds": str(not gds), "max_threads": str(FST_THREADS), "bbuf_size_kb": str(FST_BOUNCE_KIB)}
        copier = getattr(getattr(self._loader, "copier_class", None), "__name__", "?")
        self.settings["copier"] = copier
        if not gds:
            self.io_mode = (
                f"buffered pread by {FST_THREADS} threads into pinned bounce buffers of "
                f"{format_bytes(FST_BOUNCE_KIB << 10)}, then copies"
            )

    def _build_fastsafetensors_gds(self) -> None:
        mode = "cuFile's mode unknown"
        if self.job.gpu is not None:
            t0 = time.perf_counter()
            with contextlib.suppress(Exception):
                from xferscope.engines import cufile_driver

                cufile_driver.open_driver(self.job.gpu)
                mode = cufile_driver.driver_mode().label
                if self.job.files and not cufile_driver.udev_record_ok(self.job.files[0]):
                    mode += "; no udev record for its disk: cuFile cannot register the files"
            self.setup_s["cufile_driver"] = time.perf_counter() - t0
        self._build_fastsafetensors(gds=True)
        copier = self.settings["copier"]
        if copier == "GdsFileCopier":
            self.io_mode = f"cuFile reads into GPU memory ({mode})"
        else:  # asked for cuFile, fastsafetensors found none it could use
            self.io_mode = f"asked for cuFile (nogds=False), fastsafetensors runs its {copier} instead ({mode})"

    def _build_runai_streamer(self) -> None:
        self.settings = {k: os.environ.get(k, default) for k, default in STREAMER_SETTINGS.items()}
        threads, chunk = self.settings.values()
        self.io_mode = (
            f"buffered read by {threads} threads in chunks of {format_bytes(int(chunk))} into host memory, then "
            ".to(device) a chunk at a time"
        )

    # ---------------------------------------------------------------- the timed load

    def run(self, stop: threading.Event, on_tick: Callable[[Any], None]) -> tuple[Any, BaseException | None]:
        clock0 = time.perf_counter()
        done: list[JobDone] = []

        def landed(shard: int, start: float) -> None:
            """Shard ``shard``'s tensors are all on the device (synchronised): its job done, and a tick."""
            self._sync()
            now = time.perf_counter() - clock0
            nbytes = sum(end - begin for _, begin, end in self.job.tensors[shard])
            done.append(JobDone(shard, 0, self.job.gpu, start, now - start, nbytes))
            on_tick(TransferTick(now, [done[-1]], len(done)))

        error: BaseException | None = None
        try:
            load = {"safetensors": self._load_safetensors, "runai-streamer": self._load_runai_streamer}
            load.get(self.job.path, self._load_fastsafetensors)(stop, landed)
        except Exception as exc:
            error = exc
        seconds = time.perf_counter() - clock0
        end = LibraryLoadEnd(seconds, done, [])
        if self._fallbacks.lines:
            self.io_mode += f"; it fell back: {self._fallbacks.lines[0]}"
        if self.job.verify and error is None and not stop.is_set():
            end.verified = self._verify()
        end.facts = self._facts()
        return end, error

    def _sync(self) -> None:
        if self.job.gpu is not None:
            import torch

            torch.cuda.synchronize(self.job.gpu)

    def _load_safetensors(self, stop: threading.Event, landed: Callable[[int, float], None]) -> None:
        from safetensors.torch import load_file

        clock0 = time.perf_counter()
        for s, path in enumerate(self.job.files):
            if stop.is_set():
                return
            start = time.perf_counter() - clock0
            tensors = load_file(path, device=self.job.device)
            if self.job.gpu is None:  # in host memory its tensors map the file: touched, they are read
                tensors = {name: t.clone() for name, t in tensors.items()}
            self.kept.update(tensors)
            landed(s, start)

    def _load_fastsafetensors(self, stop: threading.Event, landed: Callable[[int, float], None]) -> None:
        self._loader.add_filenames({0: list(self.job.files)})
        self._buffers = self._loader.copy_files_to_device()
        for s, tensors in enumerate(self.job.tensors):
            for name, _, _ in tensors:
                self.kept[name] = self._buffers.get_tensor(name)
            landed(s, 0.0)

    def _load_runai_streamer(self, stop: threading.Event, landed: Callable[[int, float], None]) -> None:
        from runai_model_streamer import SafetensorsStreamer

        shard_of = {name: s for s, tensors in enumerate(self.job.tensors) for name, _, _ in tensors}
        left = [len(tensors) for tensors in self.job.tensors]
        with SafetensorsStreamer() as streamer:
            streamer.stream_files(list(self.job.files), device=self.job.device)
            for name, tensor in streamer.get_tensors():
                self.kept[name] = tensor.clone()  # out of the buffer the streamer reuses
                s = shard_of[name]
                left[s] -= 1
                if left[s] == 0:
                    landed(s, 0.0)
                if stop.is_set():
                    return

    # ---------------------------------------------------------------- after the timer

    def _verify(self) -> tuple[int, int, str | None]:
        """(tensors checked, tensors whose bytes differ from the file's, the first of them)."""
        import torch

        checked = bad = 0
        first = None
        for path, tensors in zip(self.job.files, self.job.tensors):
            fd = os.open(path, os.O_RDONLY)
            try:
                for name, begin, end in tensors:
                    checked += 1
                    tensor = self.kept.get(name)
                    got = b"" if tensor is None else tensor.reshape(-1).view(torch.uint8).cpu().numpy().tobytes()
                    if got != os.pread(fd, end - begin, begin):
                        bad += 1
                        first = first or f"{os.path.basename(path)} {name}"
            finally:
                os.close(fd)
        return checked, bad, first

    def _facts(self) -> LibraryFacts:
        return facts_of(self.lib, self.settings, self.io_mode, self.setup_s)

    def close(self) -> None:
        self.kept.clear()
        for thing in (self._buffers, self._loader):
            if thing is not None:
                with contextlib.suppress(Exception):
                    thing.close()
        self._buffers = self._loader = None
        if self.job.gpu is not None:
            with contextlib.suppress(Exception):
                import torch

                torch.cuda.empty_cache()


def serve(channel: Channel) -> None:
    serve_with(channel, LibraryLoadSetup)
