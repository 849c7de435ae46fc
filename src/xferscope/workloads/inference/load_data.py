"""The shards a ``workload load`` run reads, and how their tensors are cut into reads.

Generated (``--model``): the model's tensors, in Hugging Face's order, packed into shards of at most
``--shard-size`` named ``model-0000i-of-0000n.safetensors`` beside ``model.safetensors.index.json``, in a
directory of its own (``generated``); the tensors hold xferscope's data pattern. Or the user's shards
(``--files PATTERN``), read as they are and never written.

Sharding over ``--gpu`` (under MPI with ``--share tp``, over every rank's GPUs) as tensor parallelism puts it: a
tensor of two or more dimensions is split by rows into one contiguous range per GPU (a column-parallel layer's share; a row-parallel layer such as o_proj or
down_proj holds the same bytes per GPU, there split by columns), a one-dimensional tensor (a norm) goes to
every GPU. Each GPU's share is cut into pieces of at most ``--split`` and placed in that GPU's buffer.
"""

from __future__ import annotations

import glob
import json
import math
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypedDict

from xferscope.errors import SpecError
from xferscope.units import format_bytes
from xferscope.workloads.common.data_files import DataFile
from xferscope.workloads.common.generated import GeneratedDir, check_fits, direct_works, parent_dir
from xferscope.workloads.inference import safetensors_format as st
from xferscope.workloads.inference.load_spec import DEFAULT_SPLIT, LoadSpec
from xferscope.workloads.inference.models import DTYPES, SAFETENSORS_DTYPES
from xferscope.workloads.inference.transfer import Job, Piece, place


class LoadShards(TypedDict, total=False):
    """A model's shards as a load's record gives them (``describe()``; every key optional, as older files may lack
    one)."""

    where: str
    shards: int
    names: list[str]
    tensors: int
    bytes: int
    generated: bool
    kept: bool


@dataclass
class Shards:
    root: str
    files: list[DataFile]
    parsed: list[st.SafetensorsFile]
    generated: bool
    direct: bool
    created: GeneratedDir | None = field(default=None, repr=False)
    notes: list[str] = field(default_factory=list)

    @property
    def tensors(self) -> int:
        return sum(len(p.tensors) for p in self.parsed)

    @property
    def tensor_bytes(self) -> int:
        return sum(t.nbytes for p in self.parsed for t in p.tensors)

    def describe(self) -> LoadShards:
        return {
            "where": self.root,
            "shards": len(self.files),
            "names": [os.path.basename(f.path) for f in self.files],
            "tensors": self.tensors,
            "bytes": self.tensor_bytes,
            "generated": self.generated,
            "kept": bool(self.created and self.created.kept),
        }

    def close(self, keep: bool = False) -> None:
        if self.created is not None:
            self.created.close(keep)


class LoadPieces:
    """Every GPU's share of every tensor, in pieces of at most --split, shard after shard (a shared queue)."""

    shared = True

    def __init__(self, spec: LoadSpec, shards: Shards, direct: bool):
        self.jobs: list[Job] = []
        split = DEFAULT_SPLIT if spec.split is None else spec.split
        gpus = list(spec.gpus)
        cursors = [0] * len(gpus)
        index, parts = spec.part  # this rank's GPUs' shares of the world's
        for s, parsed in enumerate(shards.parsed):
            for t in parsed.tensors:
                shares = _shares(t, len(gpus) * parts)[index * len(gpus) : (index + 1) * len(gpus)]
                for g, (start, end) in enumerate(shares):
                    off = start
                    while off < end:
                        n = min(split, end - off)
                        at, cursors[g] = place(cursors[g], off, n, direct)
                        gpu = gpus[g] if spec.lands_in_gpu else None
                        self.jobs.append(Job(s, (Piece(s, off, n, g, at),), gpu))
                        off += n
        #: each GPU's buffer (in 2 MiB units)
        self.buffer_bytes = [-(-(c + 4096) // (2 << 20)) * (2 << 20) for c in cursors]

    def job(self, worker: int, k: int) -> Job | None:
        return self.jobs[k] if k < len(self.jobs) else None


def _shares(t: st.Tensor, n: int) -> list[tuple[int, int]]:
    """(start, end) of each of ``n`` GPUs' share of tensor ``t`` in the file."""
    if n == 1 or len(t.shape) < 2:
        return [(t.start, t.end)] * n
    rows = t.shape[0]
    row = t.nbytes // rows if rows else 0
    return [(t.start + (rows * g // n) * row, t.start + (rows * (g + 1) // n) * row) for g in range(n)]


def scan(spec: LoadSpec) -> Shards:
    """The user's shards matching --files; nothing there is written."""
    pattern = os.path.expanduser(spec.files or "")
    paths = sorted(p for p in glob.glob(pattern) if os.path.isfile(p))
    if os.path.isdir(pattern):
        paths = sorted(glob.glob(os.path.join(pattern, "*.safetensors")))
    if not paths:
        raise SpecError("files", f"{spec.files}: matches no file")
    parsed = [st.parse(p) for p in paths]
    if not any(p.tensors for p in parsed):
        raise SpecError("files", f"{spec.files}: the shards hold no tensors")
    files = [DataFile(p.path, p.size) for p in parsed]
    return Shards(os.path.dirname(os.path.abspath(paths[0])), files, parsed, False, direct_works(paths[0]))


def plan_shards(spec: LoadSpec) -> list[list[tuple[str, str, tuple[int, ...]]]]:
    """The generated model's tensors packed into shards of at most --shard-size (a tensor larger than that has a
    shard of its own)."""
    assert spec.model is not None
    dtype = DTYPES[spec.model.dtype][1]
    size = SAFETENSORS_DTYPES[dtype]
    shards: list[list[tuple[str, str, tuple[int, ...]]]] = [[]]
    used = 0
    for name, shape in spec.model.tensors():
        n = math.prod(shape) * size
        if shards[-1] and used + n > spec.shard_size:
            shards.append([])
            used = 0
        shards[-1].append((name, dtype, shape))
        used += n
    return shards


def planned(spec: LoadSpec) -> Shards:
    """The generated shards as they will lie (nothing written): what the memory checks need before writing."""
    parsed = []
    for i, tensors in enumerate(plan_shards(spec)):
        offset = len(st.header_bytes(tensors, {"format": "pt"}))
        start = offset
        ts = []
        for name, dtype, shape in tensors:
            n = math.prod(shape) * SAFETENSORS_DTYPES[dtype]
            ts.append(st.Tensor(name, dtype, shape, offset, offset + n))
            offset += n
        parsed.append(st.SafetensorsFile(f"planned-{i}", offset, start, tuple(ts)))
    return Shards("", [], parsed, True, True)


def adopt(spec: LoadSpec, root: str, direct: bool) -> Shards | None:
    """The shards another process generated in ``root`` for ``spec``, read where they are (never removed from
    here); None when they cannot be seen whole from here."""
    plan = plan_shards(spec)
    names = [f"model-{i + 1:05d}-of-{len(plan):05d}.safetensors" for i in range(len(plan))]
    try:
        parsed = [st.parse(os.path.join(root, name)) for name in names]
    except (OSError, SpecError):
        return None
    if [[t.name for t in p.tensors] for p in parsed] != [[t[0] for t in tensors] for tensors in plan]:
        return None
    return Shards(root, [DataFile(p.path, p.size) for p in parsed], parsed, True, direct)


def generate(
    spec: LoadSpec, progress: Callable[[int, int], None] | None = None, cancel: Callable[[], bool] | None = None
) -> Shards:
    assert spec.model is not None
    parent, direct = parent_dir(spec.directory, False)
    plan = plan_shards(spec)
    heads = [st.header_bytes(tensors, {"format": "pt"}) for tensors in plan]
    sizes = [
        len(h) + sum(math.prod(s) * SAFETENSORS_DTYPES[d] for _, d, s in tensors) for h, tensors in zip(heads, plan)
    ]
    total = sum(sizes)
    check_fits(parent, total, f"the {spec.model.name} shards", "dir", "choose --dir, or --model with fewer --layers")
    made = GeneratedDir(parent, "load", direct)
    try:
        n = len(plan)
        names = [f"model-{i + 1:05d}-of-{n:05d}.safetensors" for i in range(n)]
        done = 0
        for i, (name, head, size) in enumerate(zip(names, heads, sizes)):
            made.write(os.path.join(made.path, name), size, spec.seed + i, head, cancel)
            done += size
            if progress is not None:
                progress(done, total)
        index = {
            "metadata": {"total_size": total - sum(len(h) for h in heads)},
            "weight_map": {t[0]: names[i] for i, tensors in enumerate(plan) for t in tensors},
        }
        made.write_small(os.path.join(made.path, "model.safetensors.index.json"), json.dumps(index, indent=2).encode())
        made.done_writing()
        parsed = [st.parse(os.path.join(made.path, name)) for name in names]
    except BaseException:
        made.close(keep=False)
        raise
    files = [DataFile(p.path, p.size) for p in parsed]
    shards = Shards(made.path, files, parsed, True, direct, made)
    shards.notes.append(f"generated {spec.model.name} ({spec.model.dtype}): {n} shards, {format_bytes(total)}")
    return shards
