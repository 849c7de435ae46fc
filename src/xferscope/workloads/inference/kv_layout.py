"""LMCache's GDS backend layout for KV chunks (``lmcache/v1/storage_backend/gds_backend.py``), as xferscope
writes and reads it.

One file per chunk and tensor-parallel rank, ``<root>/<h[0:2]>/<h[2:4]>/<key>.kvcache.safetensors`` where
``h`` is the chunk hash in decimal. The file starts with a 4 KiB header: an 8-byte little-endian length (4088)
and the JSON ``{"kvcache": {"dtype", "shape", "data_offsets", "fmt", "__metadata__": {"lmcache_version": "1"}}}``
padded with spaces to 4088 bytes (LMCache's ``pack_metadata``). The payload follows at offset 4096, laid out
[2, layers, tokens, hidden] (format KV_2LTD = 1; MLA: [1, layers, tokens, rank + rope], KV_MLA_FMT = 6).
Beside each file, ``<file>.metadata`` holds the same 4 KiB header, as LMCache writes it. The file is also a valid
safetensors file (its header length covers the padding).
"""

from __future__ import annotations

import json
import os
import struct
from dataclasses import dataclass

from xferscope.errors import SpecError
from xferscope.workloads.inference.models import ModelShape

HEADER = 4096
DATA_SUFFIX = ".kvcache.safetensors"
METADATA_SUFFIX = ".metadata"
FMT_KV_2LTD = 1
FMT_KV_MLA = 6
#: xferscope's dtype -> LMCache's name for it (its torch_dtypes table)
LMCACHE_DTYPES = {"bf16": "BF16", "fp16": "F16", "fp32": "F32", "fp8": "F8E4M3FN"}
_ELEMENT = {"BF16": 2, "F16": 2, "F32": 4, "F8E4M3FN": 1, "F8E5M2": 1, "F64": 8}


@dataclass(frozen=True)
class ChunkShape:
    """One rank's part of one chunk."""

    kv: int  # 2 (K and V), or 1 for MLA
    layers: int
    tokens: int
    hidden: int  # per rank
    dtype_bytes: int
    dtype_name: str
    fmt: int

    @property
    def shape(self) -> list[int]:
        return [self.kv, self.layers, self.tokens, self.hidden]

    @property
    def payload(self) -> int:
        return self.kv * self.layers * self.tokens * self.hidden * self.dtype_bytes

    @property
    def plane(self) -> int:
        """Bytes of one (K or V, layer) plane: [tokens, hidden]."""
        return self.tokens * self.hidden * self.dtype_bytes

    def layer_ranges(self, layer: int) -> list[tuple[int, int]]:
        """(payload offset, length) of a layer's K and V planes (MLA: its one plane)."""
        return [((k * self.layers + layer) * self.plane, self.plane) for k in range(self.kv)]


def chunk_shape(m: ModelShape, tokens: int, tp: int) -> ChunkShape:
    if m.mla is not None:  # the compressed vector is not split over ranks: each rank holds all of it
        return ChunkShape(1, m.layers, tokens, m.mla[0] + m.mla[1], m.dtype_bytes, LMCACHE_DTYPES[m.dtype], FMT_KV_MLA)
    if m.kv_heads % tp:
        raise SpecError("tp", f"--tp {tp} does not divide the {m.kv_heads} KV heads of {m.name}")
    hidden = m.kv_heads // tp * m.head_dim
    return ChunkShape(2, m.layers, tokens, hidden, m.dtype_bytes, LMCACHE_DTYPES[m.dtype], FMT_KV_2LTD)


def header(shape: ChunkShape) -> bytes:
    meta = {
        "kvcache": {
            "dtype": shape.dtype_name,
            "shape": shape.shape,
            "data_offsets": [0, shape.payload],
            "fmt": shape.fmt,
            "__metadata__": {"lmcache_version": "1"},
        }
    }
    text = json.dumps(meta).encode("utf-8")
    assert len(text) <= HEADER - 8
    return struct.pack("<Q", HEADER - 8) + text + b" " * (HEADER - 8 - len(text))


def chunk_hash(seed: int, index: int) -> int:
    """A stable 63-bit hash for chunk ``index`` of a generated cache (LMCache hashes the tokens)."""
    x = (seed * 0x9E3779B97F4A7C15 + index * 0xBF58476D1CE4E5B9 + 0x94D049BB133111EB) % (1 << 63)
    return max(x, 10_000)


def chunk_path(root: str, model: str, tp: int, rank: int, h: int) -> str:
    s = str(h)
    key = f"xferscope@{model}@{tp}@{rank}@{h:x}"
    return os.path.join(root, s[:2], s[2:4], key + DATA_SUFFIX)


@dataclass(frozen=True)
class ChunkFile:
    path: str
    payload: int  # bytes after the header
    shape: tuple[int, ...]
    dtype: str
    rank: int

    def chunk_shape(self) -> ChunkShape | None:
        """The chunk's layout as its header gives it; None where it is not [kv, layers, tokens, hidden] of a
        dtype known here."""
        if len(self.shape) != 4 or self.dtype not in _ELEMENT:
            return None
        kv, layers, tokens, hidden = self.shape
        return ChunkShape(
            kv, layers, tokens, hidden, _ELEMENT[self.dtype], self.dtype, FMT_KV_MLA if kv == 1 else FMT_KV_2LTD
        )


def read_header(path: str) -> ChunkFile:
    """A chunk file's header; one that is not LMCache's layout is a SpecError naming the byte or field."""
    try:
        with open(path, "rb") as fh:
            raw = fh.read(HEADER)
            size = os.fstat(fh.fileno()).st_size
    except OSError as exc:
        raise SpecError("cache", f"{path}: cannot read: {exc.strerror}") from None
    if len(raw) < HEADER:
        raise SpecError("cache", f"{path}: not an LMCache chunk: {size} bytes, its header needs {HEADER}")
    (n,) = struct.unpack("<Q", raw[:8])
    if n != HEADER - 8:
        raise SpecError("cache", f"{path}: not an LMCache chunk: bytes 0-7 give a header of {n}, not {HEADER - 8}")
    try:
        meta = json.loads(raw[8:].rstrip(b" \x00").decode())["kvcache"]
        shape = tuple(int(d) for d in meta["shape"])
        begin, end = (int(x) for x in meta["data_offsets"])
        dtype = str(meta["dtype"])
    except (ValueError, KeyError, TypeError) as exc:
        raise SpecError("cache", f"{path}: damaged LMCache chunk header (field {exc})") from None
    if HEADER + end > size:
        raise SpecError("cache", f"{path}: its header says {end} bytes of payload; the file has {size - HEADER}")
    rank = 0
    parts = os.path.basename(path).split("@")
    if len(parts) >= 5 and parts[3].isdigit():
        rank = int(parts[3])
    return ChunkFile(path, end - begin, shape, dtype, rank)


def scan(root: str) -> list[ChunkFile]:
    """The chunk files of an existing cache under ``root``, in path order."""
    found = []
    for dirpath, dirnames, names in os.walk(root):
        dirnames.sort()
        for name in sorted(names):
            if name.endswith(DATA_SUFFIX):
                found.append(read_header(os.path.join(dirpath, name)))
    if not found:
        raise SpecError("cache", f"{root}: no LMCache chunk files (*{DATA_SUFFIX}) there")
    return found
