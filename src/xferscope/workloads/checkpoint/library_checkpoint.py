"""A rank's checkpoints saved and restored by a library users save with (``libraries.CHECKPOINT_LIBRARIES``), in a
process of its own (``serve``), one process a rank as DLIO and DCP run them, by the rules of xferscope's paths
(``checkpoint_process``), whose job, ticks and payload it shares.

Set-up, outside the timer and timed on its own: torch imported, the rank's CUDA context made, DCP's process group
joined (gloo, over a file store in the run's directory), the rank's state made where it lives: a tensor a file of
the plan, each holding its share of the rank's data pattern (so ``--verify`` checks every byte), and for DCP the
tensors it restores into. Then checkpoint after checkpoint, each begun at a meeting of the ranks:

* ``torch-save``: ``torch.save({holds: tensor}, file)`` for each of the rank's files (DLIO's names), then
  ``os.fsync`` (timed apart: torch.save never syncs);
* ``dcp``: ``dcp.save`` with ``FileSystemWriter(thread_count, sync_files)``: its fsyncs are inside its time;
  ``--async``: ``dcp.async_save``, its return the time the GPUs are blocked (the staging copy), its future's end
  the time until durable, awaited before the next checkpoint as DCP's users do.

After the last, the rank's files are evicted from the page cache (the share still resident measured) and, at a
meeting for each checkpoint, the rank restores the files of the rank it reads back (``sources``): ``torch.load``
(``map_location`` its device, ``weights_only``, ``mmap``) or ``dcp.load`` into its tensors, with
``torch.cuda.synchronize()`` before the clock stops.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from xferscope import _iocore
from xferscope.engines import page_cache
from xferscope.errors import RunFailed
from xferscope.isolation import Channel
from xferscope.records import WorkloadEnvironment
from xferscope.workloads.checkpoint.checkpoint_process import (
    CheckpointEnd,
    CheckpointJob,
    CheckpointTick,
    RankRead,
    RankWrite,
    checkpoint_dir,
    mismatch,
)
from xferscope.workloads.checkpoint.layout import Rank, aligned
from xferscope.workloads.common.libraries import CHECKPOINT_LIBRARIES, facts_of
from xferscope.workloads.common.process_host import serve_with
from xferscope.workloads.common.records import LibraryFacts

if TYPE_CHECKING:
    import torch

#: the file, in the run's directory, through which DCP's ranks form their process group
STORE_NAME = ".xferscope-dcp-store"


def _key(rank: int, i: int) -> str:
    """The state key of ``rank``'s ``i``-th file's tensor (DCP saves a key once: each rank's are its own)."""
    return f"rank{rank}.part{i}"


class LibraryCheckpointSetup:
    def __init__(self, job: CheckpointJob):
        if len(job.ranks) != 1:
            raise RunFailed(f"{job.path} runs one process a rank, here given {len(job.ranks)}")
        self.job = job
        self.rank: Rank = job.ranks[0]
        self.lib = CHECKPOINT_LIBRARIES[job.path]
        self.labels: list[str] = []
        self.environment: WorkloadEnvironment = {"checkpoint_layout": job.layout}
        self.setup_s: dict[str, float] = {}
        self.settings: dict[str, str] = {}
        self.tensors: list[Any] = []  # the rank's state: a tensor a file
        self.restored: dict[str, torch.Tensor] = {}  # what the last restore holds, by key
        self._into: dict[str, torch.Tensor] = {}  # dcp: the tensors a restore fills
        self.meet: Callable[[str], bool] = lambda what: True
        self._group = False

    @property
    def device(self) -> str:
        return f"cuda:{self.job.gpus[0]}" if self.job.on_gpu else "cpu"

    def meet_with(self, meet: Callable[[str], bool]) -> None:
        if self.job.meets:
            self.meet = meet

    def seed_of(self, rank: Rank) -> int:
        return self.job.seed * 1_000_003 + rank.rank  # as xferscope's paths make a rank's state

    # ---------------------------------------------------------------- set-up, outside the timer

    def build(self) -> None:
        job = self.job
        t0 = time.perf_counter()
        import torch

        if job.path == "dcp":
            import torch.distributed as dist
            import torch.distributed.checkpoint
        self.setup_s["import"] = time.perf_counter() - t0
        if job.on_gpu:
            t0 = time.perf_counter()
            torch.cuda.set_device(job.gpus[0])
            torch.empty(1, device=self.device)
            torch.cuda.synchronize()
            self.setup_s["cuda_context"] = time.perf_counter() - t0
            from xferscope.engines.gpu_native import gpu_environment

            with contextlib.suppress(Exception):
                self.environment.update(gpu_environment([job.gpus[0]]))
        if job.path == "dcp":
            t0 = time.perf_counter()
            index, size = job.group
            store = dist.FileStore(os.path.join(job.directory, STORE_NAME), size)
            dist.init_process_group("gloo", store=store, rank=index, world_size=size)
            self._group = True
            self.setup_s["process_group"] = time.perf_counter() - t0
            self.settings = {"thread_count": str(len(self.rank.files)), "sync_files": str(job.fsync)}
        t0 = time.perf_counter()
        self._make_state(torch)
        if job.path == "dcp":
            writer = self._writer_of()
            self._into = {
                _key(writer.rank, i): torch.empty(f.size, dtype=torch.uint8, device=self.device)
                for i, f in enumerate(writer.files)
            }
        self.setup_s["state"] = time.perf_counter() - t0
        where = "GPU memory" if job.on_gpu else "host memory (as DLIO's CPU tensors)"
        self.labels = [
            f"{job.path}: {self.lib.call}",
            f"the rank's state in {where}, a tensor a file, one process a rank",
        ]
        if job.path == "dcp":
            self.labels.append(
                f"DCP's fsyncs (sync_files={job.fsync}) inside its save's time"
                + (
                    "; --async: dcp.async_save, the GPUs blocked until it returns (its copy of the state), "
                    "durable when its future ends"
                    if job.staged
                    else ""
                )
            )
        else:
            self.labels.append("fsync per file, added (timed apart)" if job.fsync else "no fsync")
        # the set-up's seconds differ from rank to rank: the record's (``library.setup_s``), not a label

    def _make_state(self, torch: Any) -> None:
        """A tensor a file, holding the rank's data pattern from state offset 0 (as xferscope's paths write it)."""
        r = self.rank
        pattern = bytearray(-(-max(1, r.size) // 8) * 8)
        _iocore.fill_pattern(pattern, 0, self.seed_of(r))
        at = 0
        for f in r.files:
            host = torch.frombuffer(pattern, dtype=torch.uint8, count=f.size, offset=at)
            self.tensors.append(host.to(self.device) if self.job.on_gpu else host.clone())
            at += f.size
        del pattern
        self._sync()

    def _writer_of(self) -> Rank:
        return self.job.sources[0][0] if self.job.sources else self.rank

    def _sync(self) -> None:
        if self.job.on_gpu:
            import torch

            torch.cuda.synchronize()

    # ---------------------------------------------------------------- the timed saves and restores

    def run(self, stop: threading.Event, on_tick: Callable[[Any], None]) -> tuple[Any, BaseException | None]:
        end = CheckpointEnd()
        error: BaseException | None = None
        try:
            self._saves(stop, on_tick, end)
            if not stop.is_set():
                self._restores(stop, on_tick, end)
        except Exception as exc:
            error = exc
        end.facts = self._facts()
        return end, error

    def _saves(self, stop: threading.Event, on_tick: Callable[[Any], None], end: CheckpointEnd) -> None:
        job, written = self.job, 0
        pending: tuple[Any, float, float, str] | None = None  # dcp --async: the future, its start, blocked, where
        for k in range(job.checkpoints):
            if k and job.every and stop.wait(job.every):
                break
            if pending is not None:
                end.add_save([self._durable(*pending)], None)
                pending = None
            if stop.is_set() or not self.meet(f"checkpoint {k + 1}"):
                break
            directory = checkpoint_dir(job.directory, k)
            os.makedirs(directory, exist_ok=True)  # one directory a checkpoint, made by whichever rank comes first
            on_tick(CheckpointTick("writing", k + 1, written, (written,)))
            if job.path == "torch-save":
                write = self._torch_save(directory, stop)
            elif job.staged:
                started = time.perf_counter()
                future = self._dcp_save(directory, staged=True)
                pending = (future, started, time.perf_counter() - started, directory)
                if not (job.every and k + 1 < job.checkpoints):
                    end.add_save([self._durable(*pending)], None)
                    pending = None
                written += sum(f.size for f in self.rank.files)
                continue
            else:
                t0 = time.perf_counter()
                self._dcp_save(directory)
                write = RankWrite(self.rank.rank, self._bytes(directory), time.perf_counter() - t0, 0.0)
            written += write.bytes
            end.add_save([write], None)
            on_tick(CheckpointTick("writing", k + 1, written, (written,)))
        if pending is not None:
            end.add_save([self._durable(*pending)], None)

    def _durable(self, future: Any, started: float, blocked: float, directory: str) -> RankWrite:
        """dcp --async: the save's future awaited; blocked until async_save returned, durable when it ends."""
        future.result()
        after = time.perf_counter() - started - blocked
        return RankWrite(self.rank.rank, self._bytes(directory), after, 0.0, blocked, blocked)

    def _bytes(self, directory: str) -> int:
        """The bytes of this rank's files in ``directory``, as the library wrote them (0 where not there yet)."""
        return sum(os.path.getsize(p) for p in self._files_in(directory) if os.path.exists(p))

    def _files_in(self, directory: str) -> list[str]:
        """This rank's files of one checkpoint (the plan's names: DLIO's, or DCP's ``__{rank}_{k}.distcp``)."""
        return [os.path.join(directory, f.name) for f in self.rank.files]

    def _torch_save(self, directory: str, stop: threading.Event) -> RankWrite:
        import torch

        nbytes, write_s, fsync_s = 0, 0.0, 0.0
        for f, tensor in zip(self.rank.files, self.tensors):
            if stop.is_set():
                break
            path = os.path.join(directory, f.name)
            t0 = time.perf_counter()
            torch.save({f.holds: tensor}, path)
            t1 = time.perf_counter()
            if self.job.fsync:
                fd = os.open(path, os.O_RDONLY)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
            write_s, fsync_s = write_s + t1 - t0, fsync_s + time.perf_counter() - t1
            nbytes += os.path.getsize(path)
        return RankWrite(self.rank.rank, nbytes, write_s, fsync_s)

    def _dcp_save(self, directory: str, staged: bool = False) -> Any:
        import torch.distributed.checkpoint as dcp
        from torch.distributed.checkpoint import FileSystemWriter

        state = {_key(self.rank.rank, i): t for i, t in enumerate(self.tensors)}
        writer = FileSystemWriter(
            directory, thread_count=len(self.rank.files), sync_files=self.job.fsync, single_file_per_rank=True
        )
        if staged:
            return dcp.async_save(state, storage_writer=writer)
        dcp.save(state, storage_writer=writer)
        return None

    def _restores(self, stop: threading.Event, on_tick: Callable[[Any], None], end: CheckpointEnd) -> None:

        job = self.job
        written = sum(w.bytes for saved in end.writes for w in saved)  # the rank's bytes, as its ticks said them
        on_tick(CheckpointTick("evicting", job.checkpoints, written, (written,)))
        dirs = [checkpoint_dir(job.directory, k) for k in range(len(end.writes))]
        mine = [p for d in dirs for p in self._files_in(d)]
        if job.path == "dcp" and self.rank.rank == 0:
            mine += [os.path.join(d, ".metadata") for d in dirs]
        end.resident_share = page_cache.evict_files([p for p in mine if os.path.exists(p)])
        writer, where = self.job.sources[0] if self.job.sources else (self.rank, job.directory)
        for k in range(len(end.writes)):
            if stop.is_set() or not self.meet(f"restore {k + 1}"):
                return
            on_tick(CheckpointTick("restoring", k + 1, written, (written,)))
            directory = checkpoint_dir(where, k)
            t0 = time.perf_counter()
            if job.path == "torch-save":
                self._torch_load(writer, directory)
            else:
                self._dcp_load(directory)
            self._sync()
            end.restores.append([RankRead(self.rank.rank, writer.rank, writer.size, time.perf_counter() - t0)])
            if job.verify:
                self._verify(writer)

    def _torch_load(self, writer: Rank, directory: str) -> None:
        import torch

        self.restored.clear()
        for i, f in enumerate(writer.files):
            loaded = torch.load(os.path.join(directory, f.name), map_location=self.device, weights_only=True, mmap=True)
            tensor = loaded[f.holds]
            # in host memory a mapped tensor's pages are read only when touched: touched, as the GPU's copy does
            self.restored[_key(writer.rank, i)] = tensor if self.job.on_gpu else tensor.clone()

    def _dcp_load(self, directory: str) -> None:
        import torch.distributed.checkpoint as dcp
        from torch.distributed.checkpoint import FileSystemReader

        dcp.load(self._into, storage_reader=FileSystemReader(directory))
        self.restored = self._into

    def _verify(self, writer: Rank) -> None:
        """Every byte restored against ``writer``'s pattern (``checkpoint_process.mismatch``)."""
        starts: list[int] = []
        at = 0
        for f in writer.files:
            starts.append(at)
            at += aligned(f.size)
        host = [self.restored[_key(writer.rank, i)].cpu().numpy() for i in range(len(writer.files))]

        def restored(at: int, n: int) -> bytes:  # ``mismatch`` asks within one file at a time
            i = max(j for j, s in enumerate(starts) if s <= at)
            return host[i][at - starts[i] : at - starts[i] + n].tobytes()

        bad = mismatch(writer, self.seed_of(writer), restored)
        if bad is not None:
            raise RunFailed(
                f"--verify: rank {self.rank.rank} read rank {writer.rank}'s checkpoint back wrong at byte {bad}"
            )

    def _facts(self) -> LibraryFacts:
        io_mode = (
            "buffered writes of a zip archive through the page cache (torch.save), each tensor copied whole to "
            "pageable host memory first"
            if self.job.path == "torch-save"
            else "DCP's FileSystemWriter: buffered writes a thread a file, each tensor copied to host memory"
        )
        return facts_of(self.lib, self.settings, io_mode, self.setup_s)

    def close(self) -> None:
        self.tensors.clear()
        self.restored = {}
        self._into.clear()
        if self._group:
            with contextlib.suppress(Exception):
                import torch.distributed as dist

                dist.destroy_process_group()
        if self.job.on_gpu:
            with contextlib.suppress(Exception):
                import torch

                torch.cuda.empty_cache()


def serve(channel: Channel) -> None:
    serve_with(channel, LibraryCheckpointSetup)
