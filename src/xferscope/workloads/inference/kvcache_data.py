"""The KV cache a ``workload kvcache`` run restores from: generated in LMCache's GDS layout (``kv_layout``) in a
directory of its own, or an existing one read as it is (``--cache DIR``, never written).

``KvCache.pieces(request, rank)`` are the reads that restore a request's hits for one rank: one per chunk
(``--layout block``), or one per K and V plane of each layer, layer after layer over the request's chunks
(``--layout layer``, as a layer-wise pipeline loads them). Each lands in the worker's own buffer, placed one
after another.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypedDict

from xferscope.errors import SpecError
from xferscope.units import format_bytes
from xferscope.workloads.common.data_files import DataFile
from xferscope.workloads.common.generated import GeneratedDir, check_fits, direct_works, parent_dir
from xferscope.workloads.inference import kv_layout
from xferscope.workloads.inference.kv_layout import HEADER, ChunkShape
from xferscope.workloads.inference.kvcache_spec import DEFAULT_CACHE_BYTES, KvSpec, Request, request
from xferscope.workloads.inference.transfer import Files, Job, Piece, place


class KvCacheFiles(TypedDict, total=False):
    """A KV cache on storage as a restore's record gives it (``describe()``; every key optional, as older files may
    lack one)."""

    where: str
    chunk_files: int
    chunks_per_rank: int
    ranks: int
    chunk_payload_bytes: int
    chunk_shape: list[int]
    dtype: str
    bytes: int
    generated: bool
    direct_io: bool
    kept: bool


@dataclass
class KvCache:
    root: str
    files: list[DataFile]
    direct: bool
    shape: ChunkShape
    positions: int  # chunks per rank
    ranks: int
    generated: bool
    #: file index of (position, rank): position * ranks + rank
    created: GeneratedDir | None = field(default=None, repr=False)
    notes: list[str] = field(default_factory=list)

    @property
    def fileset(self) -> Files:
        return Files(self.files, self.direct)

    def file_of(self, position: int, rank: int) -> int:
        return (position % self.positions) * self.ranks + rank

    def pieces(self, req: Request, rank: int, layout: str) -> tuple[Piece, ...]:
        chunks = [self.file_of(req.first + i, rank) for i in range(req.hits)]
        reads: list[tuple[int, int, int]] = []
        if layout == "block":
            reads = [(f, HEADER, self.shape.payload) for f in chunks]
        else:
            for layer in range(self.shape.layers):
                for f in chunks:
                    reads += [(f, HEADER + off, n) for off, n in self.shape.layer_ranges(layer)]
        out, cursor = [], 0
        for f, off, n in reads:
            at, cursor = place(cursor, off, n, self.direct)
            out.append(Piece(f, off, n, -1, at))
        return tuple(out)

    def buffer_bytes(self, hits: int, layout: str) -> int:
        """A worker's buffer for a request of ``hits`` chunks (in 2 MiB units)."""
        req = Request(0, 0, hits, hits, 0)
        pieces = self.pieces(req, 0, layout)
        end = max((p.at + p.length + 4096 for p in pieces), default=4096)
        return -(-end // (2 << 20)) * (2 << 20)

    def largest_read(self, layout: str) -> int:
        return self.shape.payload if layout == "block" else self.shape.plane

    def describe(self) -> KvCacheFiles:
        return {
            "where": self.root,
            "chunk_files": len(self.files),
            "chunks_per_rank": self.positions,
            "ranks": self.ranks,
            "chunk_payload_bytes": self.shape.payload,
            "chunk_shape": self.shape.shape,
            "dtype": self.shape.dtype_name,
            "bytes": sum(f.size for f in self.files),
            "generated": self.generated,
            "direct_io": self.direct,
            "kept": bool(self.created and self.created.kept),
        }

    def close(self, keep: bool = False) -> None:
        if self.created is not None:
            self.created.close(keep)


class KvJobs:
    """Worker (client c, rank r) restores rank r's part of requests c, c + C, c + 2C, … (C: --concurrency); under
    MPI, of this rank's requests among the job's (``KvSpec.part``)."""

    shared = False

    def __init__(self, spec: KvSpec, cache: KvCache):
        self.spec = spec
        self.cache = dataclasses.replace(cache, created=None, notes=[])  # what the engine's process needs

    def job(self, worker: int, k: int) -> Job | None:
        spec = self.spec
        client, rank = divmod(worker, spec.tp)
        index, parts = spec.part
        n = (k * spec.concurrency + client) * parts + index
        if spec.requests is not None and n >= spec.requests:
            return None
        req = request(spec, n, self.cache.positions)
        return Job(n, self.cache.pieces(req, rank, spec.layout), spec.rank_gpu(rank) if spec.lands_in_gpu else None)


def default_chunks(spec: KvSpec) -> int:
    per_chunk = spec.shape.payload + HEADER
    return max(spec.max_hits, math.ceil(DEFAULT_CACHE_BYTES / (per_chunk * spec.tp)))


def plan(spec: KvSpec) -> tuple[str, bool, int, int]:
    """Where a generated cache goes, O_DIRECT there, its chunks per rank and its bytes; refuses one that does not
    fit the disk (before anything is written)."""
    parent, direct = parent_dir(spec.directory, spec.buffered)
    chunks = spec.cache_chunks or default_chunks(spec)
    if chunks < spec.max_hits:
        raise SpecError(
            "cache-chunks",
            f"the cache holds {chunks} chunks; the longest prompt ({spec.prompt.high} tokens) restores {spec.max_hits}: "
            f"raise --cache-chunks to at least {spec.max_hits}",
        )
    total = chunks * spec.tp * (spec.shape.payload + 2 * HEADER)
    check_fits(
        parent,
        total,
        f"the KV cache ({chunks} chunks x {spec.tp} ranks)",
        "cache-chunks",
        "lower --cache-chunks or choose --dir",
    )
    return parent, direct, chunks, total


def generate(
    spec: KvSpec, progress: Callable[[int, int], None] | None = None, cancel: Callable[[], bool] | None = None
) -> KvCache:
    parent, direct, chunks, total = plan(spec)
    made = GeneratedDir(parent, "kvcache", direct)
    shape = spec.shape
    head = kv_layout.header(shape)
    cache = KvCache(made.path, [], direct, shape, chunks, spec.tp, True, made)
    try:
        done = 0
        for c in range(chunks):
            h = kv_layout.chunk_hash(spec.seed, c)
            for r in range(spec.tp):
                path = kv_layout.chunk_path(made.path, spec.model.name, spec.tp, r, h)
                size = HEADER + shape.payload
                made.write(path, size, spec.seed + c * spec.tp + r, head, cancel)
                made.write_small(path + kv_layout.METADATA_SUFFIX, head)
                cache.files.append(DataFile(path, size))
                done += size
                if progress is not None:
                    progress(done, total)
    except BaseException:
        made.close(keep=False)
        raise
    made.done_writing()
    return cache


def adopt(spec: KvSpec, root: str, direct: bool) -> KvCache | None:
    """The cache another process generated in ``root`` for ``spec``, read where it is (never removed from here);
    None when it cannot be seen whole from here."""
    try:
        found = scan(dataclasses.replace(spec, cache=root, directory=None))
    except (OSError, SpecError):
        return None
    if found.positions < plan(spec)[2] or found.shape != spec.shape:
        return None
    return dataclasses.replace(found, direct=direct, generated=True, notes=[])


def scan(spec: KvSpec) -> KvCache:
    """An existing cache: its chunk files by rank; every rank needs as many, all of one shape."""
    root = os.path.abspath(spec.cache or "")
    if not os.path.isdir(root):
        raise SpecError("cache", f"{spec.cache}: no such directory")
    found = kv_layout.scan(root)
    shapes = {(f.shape, f.dtype) for f in found}
    if len(shapes) > 1:
        raise SpecError("cache", f"{spec.cache}: chunks of {len(shapes)} shapes; a run reads chunks of one shape")
    shape = found[0].chunk_shape()
    if shape is None:
        raise SpecError(
            "cache",
            f"{spec.cache}: chunk shape {list(found[0].shape)} of {found[0].dtype} is not [kv, layers, tokens, hidden]",
        )
    by_rank: dict[int, list[kv_layout.ChunkFile]] = {}
    for f in found:
        by_rank.setdefault(f.rank, []).append(f)
    ranks = sorted(by_rank)
    if ranks != list(range(spec.tp)):
        raise SpecError("tp", f"{spec.cache} holds ranks {ranks}; --tp {spec.tp} reads ranks 0-{spec.tp - 1}")
    positions = min(len(v) for v in by_rank.values())
    files = [DataFile(by_rank[r][p].path, HEADER + by_rank[r][p].payload) for p in range(positions) for r in ranks]
    direct = False if spec.buffered else direct_works(files[0].path)
    cache = KvCache(root, files, direct, shape, positions, spec.tp, False)
    if shape.tokens != spec.chunk_tokens:
        cache.notes.append(
            f"the cache's chunks hold {shape.tokens} tokens (--chunk-tokens {spec.chunk_tokens} not used)"
        )
    if not direct and not spec.buffered:
        cache.notes.append("O_DIRECT refused there: reads go through the page cache")
    cache.notes.append(f"existing cache: {len(files)} chunk files, {format_bytes(sum(f.size for f in files))}")
    return cache
