"""Checkpoints written and read back in the engine's own process (``process_host``'s channel): the job a
``CheckpointJob``, each tick a ``CheckpointTick``, the payload at the end a ``CheckpointEnd``.

Before "ready", outside the timed region, every rank's state is made (the data pattern of a seed of its own) in GPU
memory (as in training), or in host memory (DLIO's CPU tensors: the host path where asked, or without a GPU), with
the path's writers (``storers``) and readers (``fetchers``) and a buffer to restore into; an asynchronous save
(``staged``) also gets a copy of each state: pinned host memory (in GPU memory for cufile, which writes from there).
Then, for each checkpoint, in a directory of its own: an asynchronous save first copies every state at once (the
time the GPUs are blocked); every rank at once (a thread each, started together; in the DCP layout a thread a
writer thread's file) writes its files, each ``fsync``ed (timed apart); in the DCP layout rank 0 then writes the
``.metadata`` index as ``.metadata.tmp`` and renames it. ``every`` seconds of training pass between checkpoints:
an asynchronous save's writes go on under them, and the next checkpoint waits for them (as DCP waits for the last
``async_save``). After the last, every file's pages are evicted (and the share still resident measured), and
checkpoint after checkpoint every rank reads back the files of the rank ``rank_shift`` after it (DLIO's recovery
rank shift); ``verify`` compares each byte with the pattern written.

Under MPI (``meets``) the process holds its part of the world's ranks: every checkpoint's save, the restore, and
every checkpoint's restore begin at a meeting of the ranks (``process_host.MeetsMidRun``); a rank may read back
the files another process wrote (``sources``: each rank's writer and the directory it wrote in), and only the
process of rank 0 writes DCP's index (``index``: the world's).
"""

from __future__ import annotations

import ctypes
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from types import SimpleNamespace
from typing import Any

from xferscope import _iocore
from xferscope.errors import RunFailed
from xferscope.isolation import Channel
from xferscope.records import WorkloadEnvironment
from xferscope.workloads.checkpoint.layout import Rank, aligned, dcp_metadata, restore_capacity
from xferscope.workloads.common.data_files import DataFile, SampleRef
from xferscope.workloads.common.fetchers import PageableFetcher, Slot, host_slot, make_fetcher
from xferscope.workloads.common.gpu_memory import pinned
from xferscope.workloads.common.process_host import serve_with
from xferscope.workloads.common.records import LibraryFacts
from xferscope.workloads.common.storers import make_storer

#: one write or read call moves at most this (torch.save's file object writes in pieces of its own)
REQUEST = 16 << 20


@dataclass(frozen=True)
class CheckpointJob:
    directory: str
    ranks: list[Rank]
    checkpoints: int
    layout: str
    fsync: bool = True
    verify: bool = False
    rank_shift: int = 0
    seed: int = 0
    path: str = "host"
    gpus: tuple[int, ...] = (0,)
    on_gpu: bool = False  # the states in GPU memory (else in host memory)
    staged: bool = False  # an asynchronous save: the states copied (the GPUs blocked), then written from the copy
    every: float = 0.0  # seconds of training between two checkpoints
    meets: bool = False  # under MPI: each save and restore begins at a meeting of every rank
    #: each rank's writer and the directory it wrote in (under MPI); empty: the rank ``rank_shift`` after it here
    sources: tuple[tuple[Rank, str], ...] = ()
    #: DCP's index, written by the process that holds rank 0: the world's under MPI; None: of this process's ranks
    index: bytes | None = None
    #: a library's rank processes (``library_checkpoint``): this process's number among them, and how many
    group: tuple[int, int] = (0, 1)
    interval: float = 0.5  # seconds between live ticks while the checkpoints are written (--interval)

    def gpu_of(self, i: int) -> int:
        """The GPU the ``i``-th rank's state lives on (round-robin)."""
        return self.gpus[i % len(self.gpus)]


@dataclass(frozen=True)
class RankWrite:
    rank: int
    bytes: int
    write_s: float
    fsync_s: float
    blocked_s: float = 0.0  # an asynchronous save: the copy of this rank's state
    staged_s: float = 0.0  # an asynchronous save: every rank's copy, from the save's start until the writes began

    @property
    def durable_s(self) -> float:
        """From the save's start until the rank's last file is synced."""
        return self.staged_s + self.write_s + self.fsync_s


@dataclass(frozen=True)
class RankRead:
    rank: int  # the rank that read
    wrote: int  # the rank whose files it read
    bytes: int
    seconds: float


@dataclass(frozen=True)
class CheckpointTick:
    phase: str  # "staging", "writing", "fsync" (a file being synced), "evicting", "restoring"
    checkpoint: int
    bytes_done: int
    per_rank: tuple[int, ...] = ()  # each rank's bytes written so far (its checkpoints saved)


@dataclass
class CheckpointEnd:
    writes: list[list[RankWrite]] = field(default_factory=list)  # a list a checkpoint
    metadata_s: list[float] = field(default_factory=list)
    restores: list[list[RankRead]] = field(default_factory=list)  # a list a checkpoint
    resident_share: float | None = None  # of the checkpoints' bytes, as the restore began
    verify_cpu_s: float = 0.0  # the process's CPU spent checking the bytes (not the path's cost)
    facts: LibraryFacts | None = None  # a library's path: the library's own facts (``library_checkpoint``)

    def add_save(self, writes: list[RankWrite], metadata_s: float | None) -> None:
        """A checkpoint saved: its ranks' figures, and DCP's index's seconds (None in DLIO's layout)."""
        self.writes.append(writes)
        if metadata_s is not None:
            self.metadata_s.append(metadata_s)


def checkpoint_dir(directory: str, k: int) -> str:
    """The ``k``-th checkpoint's directory, named as DLIO names it."""
    return os.path.join(directory, f"global_epoch1_step{k + 1}")


def store_rank(
    rank: Rank,
    directory: str,
    storer: Any,
    fsync: bool,
    stop: threading.Event,
    only: int | None = None,
    spaced: bool = False,
) -> RankWrite:
    """``rank``'s files of one checkpoint (or its file ``only``: one DCP writer thread's), each from its place in
    the rank's state (``spaced``: a copy with each file from a 4 KiB boundary), by the path's storer
    (``storers``)."""
    written = at = 0
    write_s = fsync_s = 0.0
    for i, f in enumerate(rank.files):
        if (only is None or i == only) and not stop.is_set():
            n, w, fs = storer.store(os.path.join(directory, f.name), at, f.size, fsync, stop)
            written, write_s, fsync_s = written + n, write_s + w, fsync_s + fs
        at += aligned(f.size) if spaced else f.size
    return RankWrite(rank.rank, written, write_s, fsync_s)


def joined(parts: list[RankWrite], blocked_s: float = 0.0, staged_s: float = 0.0) -> RankWrite:
    """A rank's writer threads, started together, as the rank: its bytes, and the slowest thread's times."""
    slowest = max(parts, key=lambda w: w.write_s + w.fsync_s)
    return RankWrite(parts[0].rank, sum(w.bytes for w in parts), slowest.write_s, slowest.fsync_s, blocked_s, staged_s)


def fetch_rank(reader: int, writer: Rank, directory: str, fetcher: Any, into: Slot) -> RankRead:
    """``writer``'s files of one checkpoint read into ``into``, each at a 4 KiB boundary, by the path's fetcher."""
    fetcher.close_file()
    fetcher.data.files[:] = [DataFile(os.path.join(directory, f.name), f.size) for f in writer.files]
    t0 = time.perf_counter()
    at = 0
    for i, f in enumerate(writer.files):
        fetcher.read(SampleRef(i, 0, f.size), into, at)
        at += aligned(f.size)
    fetcher.batch_done()
    return RankRead(reader, writer.rank, writer.size, time.perf_counter() - t0)


def mismatch(writer: Rank, seed: int, restored: Callable[[int, int], Any]) -> int | None:
    """Where ``writer``'s files as read back (``restored(at, n)``: the buffer's ``n`` bytes from ``at``) differ from
    its state, the data pattern of ``seed`` from state offset 0; None where every byte agrees."""
    want = bytearray(REQUEST + 16)
    state = at = 0
    for f in writer.files:
        for pos in range(0, f.size, REQUEST):
            n = min(REQUEST, f.size - pos)
            got = restored(at + pos, n)
            skew = (state + pos) % 8  # the pattern is made in whole 8-byte words
            _iocore.fill_pattern(want, state + pos - skew, seed)
            if got != want[skew : skew + n]:
                return state + pos + next(i for i in range(n) if got[i] != want[skew + i])
        state += f.size
        at += aligned(f.size)
    return None


def _cpu_seconds() -> float:
    import resource

    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _together(work: list[Callable[[], Any]]) -> list[Any]:
    """Each of ``work`` in a thread of its own, started together; their results in order (an error raised)."""
    results: list[Any] = [None] * len(work)
    errors: list[BaseException] = []
    go = threading.Barrier(len(work))

    def one(i: int) -> None:
        try:
            go.wait()
            results[i] = work[i]()
        except BaseException as exc:  # the run fails with it
            errors.append(exc)

    threads = [threading.Thread(target=one, args=(i,), name=f"xferscope-ckpt-{i}") for i in range(len(work))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return results


class _Background:
    """``work`` in a thread of its own, begun now; ``result()`` waits for it (its error raised)."""

    def __init__(self, work: Callable[[], Any]):
        self._out: list[Any] = []
        self._thread = threading.Thread(target=self._run, args=(work,), name="xferscope-ckpt-save")
        self._thread.start()

    def _run(self, work: Callable[[], Any]) -> None:
        try:
            self._out.append(work())
        except BaseException as exc:  # raised in the waiting thread
            self._out.append(exc)

    def result(self) -> Any:
        self._thread.join()
        if isinstance(self._out[0], BaseException):
            raise self._out[0]
        return self._out[0]


class CheckpointSetup:
    """Every rank's state (in GPU memory, or in host memory), its copy for an asynchronous save, its writers and
    readers, and the buffers the restore reads into; ``close()`` frees them."""

    def __init__(self, job: CheckpointJob):
        self.job = job
        sync = "fsync per file" if job.fsync else "no fsync"
        summed = ", each byte's CRC-32 summed (torch.save's zip records)" if job.layout == "dlio" else ""
        if not job.on_gpu:
            self.labels = ["host memory (as DLIO's CPU tensors)", f"buffered writes{summed}, {sync}"]
        elif job.path == "host":
            self.labels = [
                "GPU memory, copied to pageable host memory and written through the page cache (as torch.save)"
                + summed,
                sync,
            ]
        else:
            self.labels = [f"GPU memory, written by {job.path} with O_DIRECT", sync]
        if job.staged:
            self.labels.append(
                "--async: each state copied within GPU memory (the GPUs blocked), then written from the copy"
                if job.path == "cufile"
                else "--async: each state copied to pinned host memory (the GPUs blocked), then written from there"
                + (" with O_DIRECT" if job.path != "host" else "")
            )
        self.environment: WorkloadEnvironment = {"checkpoint_layout": job.layout, "request_bytes": REQUEST}
        self.states: list[Slot] = []
        self.copies: list[tuple[Slot, int]] = []  # an asynchronous save's: the copy, and its address
        self.restored: list[Slot] = []
        self.resources: Any = None
        self.storers: list[list[Any]] = []  # a rank's: one, or one a DCP writer thread
        self.fetchers: list[Any] = []
        self.meet: Callable[[str], bool] = lambda what: True
        self.pinned_kinds: list[str] = []  # which memory the pinned buffers written from are (``gpu_memory.pinned``)

    def meet_with(self, meet: Callable[[str], bool]) -> None:
        """Under MPI: ``meet(what)`` waits for every rank at ``what`` (False: stop, another rank failed)."""
        if self.job.meets:
            self.meet = meet

    def seed_of(self, rank: Rank) -> int:
        return self.job.seed * 1_000_003 + rank.rank

    def build(self) -> None:
        job = self.job
        if job.on_gpu:
            from xferscope.engines import gpu_setup

            self.resources = gpu_setup.GpuResources()
        res = self.resources
        capacity = restore_capacity(job.ranks + [w for w, _ in job.sources])  # any file set it reads back
        for i, r in enumerate(job.ranks):
            gpu = job.gpu_of(i) if job.on_gpu else None
            state = self._buffer(gpu, aligned(max(1, r.size)))
            if gpu is None:
                assert state.host is not None
                _iocore.fill_pattern(state.host, 0, self.seed_of(r))
            else:
                assert state.dev is not None
                res.fill_device(gpu, state.dev, -(-r.size // 8) * 8, self.seed_of(r))  # the pattern's 8-byte words
            self.states.append(state)
            source = state
            if job.staged:
                assert gpu is not None
                self.copies.append(self._copy_buffer(gpu, restore_capacity([r])))
                source = self.copies[-1][0]
            self.storers.append(
                [
                    make_storer(job.path, source, gpu, res, checksum=job.layout == "dlio")
                    for _ in (r.files if job.layout == "dcp" else [0])
                ]
            )
            self.restored.append(self._buffer(gpu, capacity))
            data = SimpleNamespace(files=[], direct=job.on_gpu and job.path != "host")
            if gpu is not None and job.path == "host":
                self.fetchers.append(PageableFetcher(data, REQUEST, gpu, res))
            else:
                self.fetchers.append(make_fetcher(job.path, data, REQUEST, gpu, res))
        kinds = self.pinned_kinds + [k for rank in self.storers for st in rank for k in st.pinned_kinds]
        if kinds:  # the memory the GPU paths write from, as run's bounce paths say it
            self.environment["pinned_buffers"] = " and ".join(sorted(set(kinds)))

    def _buffer(self, gpu: int | None, size: int) -> Slot:
        """``size`` bytes of host memory (``gpu`` None) or of the GPU's."""
        if gpu is None:
            return host_slot(size)
        return Slot(size, dev=self.resources.device_memory(gpu, size))

    def _copy_buffer(self, gpu: int, size: int) -> tuple[Slot, int]:
        """An asynchronous save's copy of a state: in GPU memory for cufile, else in pinned host memory
        (``gpu_memory.pinned``)."""
        if self.job.path == "cufile":
            dev = self.resources.device_memory(gpu, size)
            return Slot(size, dev=dev), dev
        host, kind = pinned(self.resources, gpu, size)
        self.pinned_kinds.append(kind)
        return Slot(size, host=memoryview((ctypes.c_char * size).from_address(host)).cast("B")), host

    def run(self, stop: threading.Event, on_tick: Callable[[Any], None]) -> tuple[Any, BaseException | None]:
        end = CheckpointEnd()
        try:
            self._run(stop, on_tick, end)
        except (OSError, RunFailed) as exc:
            return end, exc
        return end, None

    def _stage(self, i: int) -> float:
        """An asynchronous save's copy of rank ``i``'s state, each file from a 4 KiB boundary: its seconds."""
        r, state, (_, to) = self.job.ranks[i], self.states[i], self.copies[i]
        gpu, kind = self.job.gpu_of(i), "dtod" if self.job.path == "cufile" else "dtoh"
        assert state.dev is not None
        t0 = time.perf_counter()
        at = spaced = 0
        for f in r.files:
            self.resources.copy(gpu, to + spaced, state.dev + at, f.size, kind)
            at, spaced = at + f.size, spaced + aligned(f.size)
        return time.perf_counter() - t0

    def _save(
        self, k: int, stop: threading.Event, blocked: list[float], staged_s: float
    ) -> tuple[list[RankWrite], float | None]:
        """Every rank's files of checkpoint ``k``, written at once, and DCP's index after them: each rank's figures
        (``blocked``: each rank's copy of an asynchronous save, ``staged_s``: all of them), and the index's
        seconds (None in DLIO's layout)."""
        job, ranks = self.job, self.job.ranks
        directory = checkpoint_dir(job.directory, k)
        # a rank writes its files in turn; DCP's writer threads (a file each) write theirs at once
        threads = [
            (i, partial(store_rank, r, directory, self.storers[i][only or 0], job.fsync, stop, only, job.staged))
            for i, r in enumerate(ranks)
            for only in (range(len(r.files)) if job.layout == "dcp" else [None])
        ]
        parts = _together([work for _, work in threads])
        writes = [
            joined([w for (i, _), w in zip(threads, parts) if i == j], blocked[j], staged_s) for j in range(len(ranks))
        ]
        metadata = (
            self._metadata(directory) if job.layout == "dcp" and job.ranks[0].rank == 0 and not stop.is_set() else None
        )
        return writes, metadata

    def _tick_while(self, done: threading.Event, tick: Callable[[], None]) -> None:
        """A tick every ``interval`` until ``done``: each rank's bytes written, live."""
        while not done.wait(self.job.interval):
            try:
                tick()
            except OSError:  # the parent is gone: the run's own end deals with that
                return

    def _write_all(
        self,
        stop: threading.Event,
        tick: Callable[[str, int], None],
        saved: Callable[[tuple[list[RankWrite], float | None]], None],
    ) -> None:
        """Every checkpoint written (an asynchronous save's writes under the next interval), each one's ranks'
        figures given to ``saved``."""
        job, ranks = self.job, self.job.ranks
        pending: _Background | None = None  # an asynchronous save's writes, under the next interval
        for k in range(job.checkpoints):
            if k and job.every and stop.wait(job.every):
                break
            if pending is not None:
                saved(pending.result())
                pending = None
            if stop.is_set() or not self.meet(f"checkpoint {k + 1}"):
                break
            os.mkdir(checkpoint_dir(job.directory, k))
            blocked, staged_s = [0.0] * len(ranks), 0.0
            if job.staged:
                tick("staging", k + 1)
                t0 = time.perf_counter()
                blocked = _together([partial(self._stage, i) for i in range(len(ranks))])
                staged_s = time.perf_counter() - t0  # the writes begin once every copy is made
            tick("writing", k + 1)
            if job.staged and job.every and k + 1 < job.checkpoints:
                pending = _Background(partial(self._save, k, stop, blocked, staged_s))
                continue
            saved(self._save(k, stop, blocked, staged_s))
        if pending is not None:
            saved(pending.result())

    def _run(self, stop: threading.Event, on_tick: Callable[[Any], None], end: CheckpointEnd) -> None:
        job, ranks = self.job, self.job.ranks
        now: list[tuple[str, int]] = []  # the phase and the checkpoint, for the ticks while they are written

        def tick(phase: str, k: int) -> None:
            now[:] = [(phase, k)]
            per_rank = tuple(sum(st.written for st in self.storers[i]) for i in range(len(ranks)))
            on_tick(CheckpointTick(phase, k, sum(per_rank), per_rank))

        def again() -> None:
            if now:  # once the first checkpoint has begun
                phase, k = now[0]
                every = [st for rank in self.storers for st in rank]
                if phase in ("writing", "fsync"):  # "fsync" while a storer syncs its file
                    phase = "fsync" if any(st.syncing for st in every) else "writing"
                tick(phase, k)

        writing = threading.Event()
        ticker = threading.Thread(target=self._tick_while, args=(writing, again), name="xferscope-ticks")
        ticker.start()
        try:
            self._write_all(stop, tick, lambda saved: end.add_save(*saved))
        finally:
            writing.set()
            ticker.join()
        if stop.is_set():
            return
        tick("evicting", job.checkpoints)
        from xferscope.engines import page_cache

        dirs = [checkpoint_dir(job.directory, k) for k in range(job.checkpoints)]
        end.resident_share = page_cache.evict_files(
            [os.path.join(d, f.name) for d in dirs for r in ranks for f in r.files]
        )
        sources = self.sources()
        for k in range(job.checkpoints):  # under MPI, the first meeting is once every rank's files are evicted
            if stop.is_set() or not self.meet(f"restore {k + 1}"):
                return
            tick("restoring", k + 1)
            end.restores.append(
                _together(
                    [
                        partial(
                            fetch_rank,
                            ranks[i].rank,
                            writer,
                            checkpoint_dir(where, k),
                            self.fetchers[i],
                            self.restored[i],
                        )
                        for i, (writer, where) in enumerate(sources)
                    ]
                )
            )
            if job.verify:
                before = _cpu_seconds()
                try:
                    self._verify([writer for writer, _ in sources])
                finally:
                    end.verify_cpu_s += _cpu_seconds() - before

    def sources(self) -> list[tuple[Rank, str]]:
        """What each rank reads back: its writer and the directory it wrote in (the job's, under MPI; else the
        rank ``rank_shift`` after it, here)."""
        job, ranks = self.job, self.job.ranks
        if job.sources:
            return list(job.sources)
        n = len(ranks)
        return [(ranks[(i + job.rank_shift) % n], job.directory) for i in range(n)]

    def _verify(self, writers: list[Rank]) -> None:
        ranks = self.job.ranks
        for i, w in enumerate(writers):
            bad = mismatch(w, self.seed_of(w), self._restored_bytes(i))
            if bad is not None:
                raise RunFailed(
                    f"--verify: rank {ranks[i].rank} read rank {w.rank}'s checkpoint back wrong at byte {bad}"
                )

    def _restored_bytes(self, i: int) -> Callable[[int, int], Any]:
        """The bytes rank ``i`` read back, ``n`` from ``at`` (copied out of GPU memory where they landed there)."""
        slot = self.restored[i]
        if slot.host is not None:
            view = slot.host
            return lambda at, n: view[at : at + n]
        dev, gpu, got = slot.dev, self.job.gpu_of(i), (ctypes.c_char * REQUEST)()
        assert dev is not None

        def copied(at: int, n: int) -> memoryview:
            self.resources.copy(gpu, ctypes.addressof(got), dev + at, n, "dtoh")
            return memoryview(got).cast("B")[:n]

        return copied

    def _metadata(self, directory: str) -> float:
        """The coordinator's index: ``.metadata.tmp`` written and fsynced, then renamed (DCP's commit)."""
        t0 = time.perf_counter()
        tmp = os.path.join(directory, ".metadata.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            os.write(fd, dcp_metadata(self.job.ranks) if self.job.index is None else self.job.index)
            if self.job.fsync:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.rename(tmp, os.path.join(directory, ".metadata"))
        return time.perf_counter() - t0

    def close(self) -> None:
        for fetcher in self.fetchers:
            fetcher.close()
        for slot in self.states + self.restored + [c for c, _ in self.copies]:
            slot.close()
        self.states, self.restored, self.fetchers, self.storers, self.copies = [], [], [], [], []
        if self.resources is not None:
            self.resources.release()
            self.resources = None


def serve(channel: Channel) -> None:
    serve_with(channel, CheckpointSetup)
