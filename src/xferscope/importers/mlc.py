"""Intel MLC's saved text output as a ``MemSweep`` (backend "mlc"), read with the parser the mlc backend
uses (``xferscope.memory.mlc_text``), and memory results read back from any file that holds them.
"""

from __future__ import annotations

from xferscope import records
from xferscope.errors import FormatError
from xferscope.export import read_json
from xferscope.memory.mlc_text import parse_mlc_output
from xferscope.memory.result import is_mem_result, read_sweep
from xferscope.records import MemSweep

__all__ = ["import_mlc", "parse_mlc_output", "read_mem_results"]


def import_mlc(path: str) -> MemSweep:
    """A saved MLC output file as a MemSweep; FormatError when it cannot be read or holds no MLC section."""
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            text = fh.read()
    except OSError as exc:
        raise FormatError(path, None, f"cannot read: {exc.strerror or exc}") from None
    result = parse_mlc_output(text, path)
    result.source = path
    if not result.points:
        raise FormatError(
            path,
            None,
            "no MLC section found (idle latency, peak injection bandwidth or loaded "
            "latencies); pass the text mlc printed",
        )
    return result


def read_mem_results(path: str) -> list[MemSweep]:
    """Memory results from ``path``: JSON written by ``mem --json`` or ``import mlc --json`` (one result or a list),
    or mlc's own text."""

    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            head = fh.read(64).lstrip()[:1]
    except OSError as exc:
        raise FormatError(path, None, f"cannot read: {exc.strerror or exc}") from None
    if head in ("{", "["):
        data = read_json(path)
        if not is_mem_result(data):
            raise FormatError(
                path,
                None,
                "not a memory result (mem --json or import mlc --json); transfer "
                "results are compared with `compare` paths or opened in the console",
            )
        items = data if isinstance(data, list) else [data]
        return [read_sweep(records.as_mem(item, path), path) for item in items]
    return [import_mlc(path)]
