"""The safetensors format, written and read: an 8-byte little-endian header length N, N bytes of JSON (per
tensor: dtype, shape, data_offsets relative to the end of the header; an optional ``__metadata__``), then the
data. ``parse`` checks what a reader relies on and names the byte or field where a file breaks it."""

from __future__ import annotations

import json
import math
import os
import struct
from dataclasses import dataclass

from xferscope.errors import SpecError
from xferscope.workloads.inference.models import SAFETENSORS_DTYPES

#: the most header a file may announce (safetensors itself refuses more than 100 MB)
MAX_HEADER = 100_000_000


@dataclass(frozen=True)
class Tensor:
    name: str
    dtype: str
    shape: tuple[int, ...]
    start: int  # absolute byte offset in the file
    end: int

    @property
    def nbytes(self) -> int:
        return self.end - self.start


@dataclass(frozen=True)
class SafetensorsFile:
    path: str
    size: int
    data_start: int  # 8 + the header's length
    tensors: tuple[Tensor, ...]


def header_bytes(tensors: list[tuple[str, str, tuple[int, ...]]], metadata: dict[str, str] | None = None) -> bytes:
    """The length and JSON header of a file holding ``tensors`` (name, safetensors dtype, shape) in order, padded
    with spaces so that the data starts on an 8-byte boundary (as safetensors writes it)."""
    head: dict[str, object] = {}
    if metadata:
        head["__metadata__"] = metadata
    offset = 0
    for name, dtype, shape in tensors:
        n = math.prod(shape) * SAFETENSORS_DTYPES[dtype]
        head[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + n]}
        offset += n
    text = json.dumps(head, separators=(",", ":")).encode()
    text += b" " * (-(8 + len(text)) % 8)
    return struct.pack("<Q", len(text)) + text


def parse(path: str, option: str = "files") -> SafetensorsFile:
    """The file's tensors; a file that is not valid safetensors is a SpecError naming the byte or field."""
    try:
        with open(path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            first = fh.read(8)
            if len(first) < 8:
                raise SpecError(option, f"{path}: not safetensors: {size} bytes, the header length needs 8 (bytes 0-7)")
            (n,) = struct.unpack("<Q", first)
            if n > MAX_HEADER or 8 + n > size:
                raise SpecError(
                    option,
                    f"{path}: damaged safetensors header: bytes 0-7 give a header of {n:,} bytes, "
                    f"{'more than 100 MB' if n > MAX_HEADER else f'past the end of the file ({size:,} bytes)'}",
                )
            raw = fh.read(n)
    except OSError as exc:
        raise SpecError(option, f"{path}: cannot read: {exc.strerror}") from None
    try:
        head = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise SpecError(option, f"{path}: damaged safetensors header: not UTF-8 at byte {8 + exc.start}") from None
    except json.JSONDecodeError as exc:
        raise SpecError(
            option, f"{path}: damaged safetensors header: not JSON at byte {8 + exc.pos} ({exc.msg})"
        ) from None
    if not isinstance(head, dict):
        raise SpecError(option, f"{path}: damaged safetensors header: bytes 8-{7 + n} are JSON but not an object")
    data_start = 8 + n
    tensors = []
    for name, entry in head.items():
        if name == "__metadata__":
            continue
        tensors.append(_tensor(path, option, name, entry, data_start, size))
    tensors.sort(key=lambda t: t.start)
    return SafetensorsFile(path, size, data_start, tuple(tensors))


def _tensor(path: str, option: str, name: str, entry: object, data_start: int, size: int) -> Tensor:
    def bad(why: str) -> SpecError:
        return SpecError(option, f"{path}: damaged safetensors header: tensor {name!r}: {why}")

    if not isinstance(entry, dict):
        raise bad("not an object")
    dtype = entry.get("dtype")
    if dtype not in SAFETENSORS_DTYPES:
        raise bad(f"field dtype is {dtype!r}, not one of safetensors' dtypes")
    shape = entry.get("shape")
    if not isinstance(shape, list) or not all(isinstance(d, int) and d >= 0 for d in shape):
        raise bad(f"field shape is {shape!r}, not a list of whole numbers")
    offsets = entry.get("data_offsets")
    if not (isinstance(offsets, list) and len(offsets) == 2 and all(isinstance(o, int) and o >= 0 for o in offsets)):
        raise bad(f"field data_offsets is {offsets!r}, not [begin, end]")
    begin, end = offsets
    want = math.prod(shape) * SAFETENSORS_DTYPES[dtype]
    if end - begin != want:
        raise bad(f"field data_offsets spans {end - begin:,} bytes; shape {shape} of {dtype} needs {want:,}")
    if data_start + end > size:
        raise bad(f"field data_offsets ends at byte {data_start + end:,}, past the end of the file ({size:,})")
    return Tensor(name, dtype, tuple(shape), data_start + begin, data_start + end)
