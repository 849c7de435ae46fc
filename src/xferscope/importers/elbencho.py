"""elbencho ``--csvfile`` results into RunResults: one per READ or WRITE row.

Columns as elbencho writes them (``ISO date``, ``label``, ``path type``, ``paths``,
``hosts``, ``threads``, ``file size``, ``block size``, ``direct IO``, ``random``,
``IO depth``, ``operation``, ``time ms [first]``/``[last]``, ``IOPS [first]``/``[last]``,
``MiB/s [first]``/``[last]``, ``CPU% [first]``/``[last]``, ``MiB [first]``/``[last]``,
``IO lat us [min]``/``[avg]``/``[max]``, the ``rwmix read ...`` columns, ``version``,
``command``). Columns are found by name, so files of older and newer elbencho
versions read alike. elbencho replaces commas inside values with spaces, so a row
splits on every comma. READ and WRITE rows become runs, and so do mixed phases
(``RWMIX70``: 70% reads, ``MIX-T4``: 4 reader threads), whose plain columns are the
writes and ``rwmix read`` columns the reads. Rows of other phases (MKDIRS, STAT,
RMFILES, SYNC, ...) move no data and are left out.

The transfer path comes from the command line: ``--cufile`` is cuFile, ``--gpuids``
without it is the bounce path, neither is host memory. ``CPU%`` is elbencho's
whole-system CPU utilisation; it is kept as ``cpu.sys_busy_pct``.
"""

from __future__ import annotations

import math
import re
import shlex
from collections.abc import Callable

from xferscope.engines.base import DoneTotals, LatencySummary, RunResult
from xferscope.errors import FormatError
from xferscope.importers._result import checked_spec, imported_result, latency, read_text
from xferscope.records import RunEnvironment
from xferscope.spec import RunSpec

SOURCE = "elbencho"
MIB = 1 << 20

REQUIRED = ("operation", "threads", "block size", "time ms [first]", "time ms [last]", "MiB [first]", "MiB [last]")
_PHASE = re.compile(r"^(?:(?P<plain>READ|WRITE)|RWMIX(?P<pct>\d+)|MIX-T(?P<readers>\d+))(?:\+[a-z]+)*$")


def phase_kind(operation: str) -> tuple[str, int | None] | None:
    """("read"|"write"|"mix", read percent or None) for a phase that moves data; None for the others."""
    match = _PHASE.match(operation.strip().upper())
    if not match:
        return None
    if match.group("plain"):
        return match.group("plain").lower(), None
    return "mix", int(match.group("pct")) if match.group("pct") else None


def _number(row: dict[str, str], column: str, where: str, line: int, default: float | None = None) -> float | None:
    text = row.get(column, "").strip()
    if not text:
        return default
    try:
        value = float(text)
    except ValueError:
        raise FormatError(where, line, f"column {column!r}: {text!r} is not a number") from None
    if not math.isfinite(value):
        raise FormatError(where, line, f"column {column!r}: {text!r} is not a finite number")
    return value


def _command_options(command: str) -> dict[str, str | bool]:
    """Long options of the elbencho command line as it sits in the CSV (quoted words, commas made spaces)."""
    try:
        words = shlex.split(command)
    except ValueError:
        words = command.replace('"', " ").split()
    options: dict[str, str | bool] = {}
    for i, word in enumerate(words):
        if not word.startswith("--"):
            continue
        name, eq, value = word[2:].partition("=")
        if eq:
            options[name] = value
        elif i + 1 < len(words) and not words[i + 1].startswith("-"):
            options[name] = words[i + 1]
        else:
            options[name] = True
    return options


def _gpu_ids(text: str) -> list[int]:
    out: list[int] = []
    for part in re.split(r"[\s,]+", text.strip()):
        lo, sep, hi = part.partition("-")
        if lo.isdigit() and (not sep or hi.isdigit()):
            out.extend(range(int(lo), int(hi) + 1) if sep else [int(lo)])
    return out


def _row_result(row: dict[str, str], kind: tuple[str, int | None], where: str, line: int) -> RunResult:
    def num(column: str, default: float) -> float:
        value = _number(row, column, where, line, default)
        return default if value is None else value

    operation = kind[0]
    mixed = operation == "mix"
    t_first, t_last = num("time ms [first]", 0) / 1e3, num("time ms [last]", 0) / 1e3
    if t_last <= 0:
        raise FormatError(where, line, "'time ms [last]' is 0: the phase was too short to give rates")
    main_last = num("MiB [last]", 0) * MIB
    main_first = num("MiB [first]", 0) * MIB
    read_last = (num("rwmix read MiB [last]", 0) or 0) * MIB
    read_first = (num("rwmix read MiB [first]", 0) or 0) * MIB
    main_ops = round(num("IOPS [last]", 0) * t_last)
    read_ops = round((num("rwmix read IOPS [last]", 0) or 0) * t_last)
    first_ops = round((num("IOPS [first]", 0) + (num("rwmix read IOPS [first]", 0) or 0)) * t_first)
    spec = _row_spec(row, num, kind, read_last, main_last, t_last, where, line)
    # with --rwmixpct the plain columns are the writes and "rwmix read" the reads
    write_bytes = main_last if (mixed or operation == "write") else 0
    read_bytes = read_last if mixed else (main_last if operation == "read" else 0)
    write_ops = main_ops if (mixed or operation == "write") else 0
    reads = read_ops if mixed else (main_ops if operation == "read" else 0)
    overall, read_lat, io_lat = _row_latencies(num, mixed, reads, write_ops)
    cpu = {}
    busy = _number(row, "CPU% [last]", where, line)
    if busy is not None:
        cpu["sys_busy_pct"] = busy
    label = row.get("label", "").strip()
    return imported_result(
        spec,
        source=SOURCE,
        seconds=t_last,
        read_bytes=int(read_bytes),
        write_bytes=int(write_bytes),
        read_ops=reads,
        write_ops=write_ops,
        latency_us=overall,
        read_latency_us=read_lat,
        write_latency_us=io_lat if mixed else None,
        cpu=cpu,
        first_done=DoneTotals(t_first, int(main_first + read_first), first_ops) if t_first > 0 else None,
        last_done=DoneTotals(t_last, int(main_last + read_last), main_ops + read_ops),
        environment=_row_environment(row),
        labels=[label] if label else [],
    )


def _row_spec(
    row: dict[str, str],
    num: Callable[[str, float], float],
    kind: tuple[str, int | None],
    read_last: float,
    main_last: float,
    t_last: float,
    where: str,
    line: int,
) -> RunSpec:
    """The spec of one phase: the pattern and read share, the path from the GPU options, the sizes."""
    operation, read_pct = kind
    options = _command_options(row.get("command", ""))
    random = num("random", 0) == 1
    if operation == "mix":
        io = "randrw" if random else "rw"
        rwmix = (
            read_pct
            if read_pct is not None
            else round(100 * read_last / (read_last + main_last))
            if read_last + main_last
            else 50
        )
    else:
        io = ("rand" if random else "") + operation
        rwmix = 70
    gpuids = options.get("gpuids")
    gpus = _gpu_ids(gpuids) if isinstance(gpuids, str) else []
    block = int(num("block size", 0))
    return checked_spec(
        where,
        line,
        path="cufile" if options.get("cufile") else "bounce" if gpus else "host",
        io=io,
        block_size=block,
        workers=int(num("threads", 0)) * int(num("hosts", 1) or 1),
        iodepth=int(num("IO depth", 1) or 1),
        file_size=max(int(num("file size", 0) or 0), block),
        rwmix=rwmix,
        buffered=num("direct IO", 1) == 0,
        duration=t_last,
        gpus=gpus or [0],
    )


def _row_latencies(
    num: Callable[[str, float], float], mixed: bool, reads: int, writes: int
) -> tuple[LatencySummary, LatencySummary | None, LatencySummary]:
    """(overall, reads', the plain columns'): a mixed phase's overall latency weighs its reads' and writes'."""
    io_lat = latency(
        min=num("IO lat us [min]", float("nan")),
        mean=num("IO lat us [avg]", float("nan")),
        max=num("IO lat us [max]", float("nan")),
    )
    if not mixed:
        return io_lat, None, io_lat
    read_lat = latency(
        min=num("rwmix read IO lat us [min]", float("nan")),
        mean=num("rwmix read IO lat us [avg]", float("nan")),
        max=num("rwmix read IO lat us [max]", float("nan")),
    )
    if not reads + writes:
        return io_lat, read_lat, io_lat
    overall = latency(
        min=min(io_lat.min, read_lat.min),
        max=max(io_lat.max, read_lat.max),
        mean=(io_lat.mean * writes + read_lat.mean * reads) / (reads + writes),
    )
    return overall, read_lat, io_lat


def _row_environment(row: dict[str, str]) -> RunEnvironment:
    """elbencho's version, command, date and path type, where the row has them."""
    env: RunEnvironment = {}
    if version := row.get("version", "").strip():
        env["elbencho_version"] = version
    if command := row.get("command", "").strip():
        env["command"] = command
    if date := row.get("ISO date", "").strip():
        env["iso_date"] = date
    if path_type := row.get("path type", "").strip():
        env["path_type"] = path_type
    return env


def parse_text(text: str, where: str) -> list[RunResult]:
    results: list[RunResult] = []
    header: list[str] | None = None
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.rstrip("\r")
        if not line.strip():
            continue
        cells = line.split(",")
        if "operation" in cells and "threads" in cells:  # a header (files appended to each other repeat it)
            missing = [c for c in REQUIRED if c not in cells]
            if missing:
                raise FormatError(where, number, f"elbencho CSV header lacks {', '.join(repr(m) for m in missing)}")
            header = cells
            continue
        if header is None:
            raise FormatError(
                where,
                number,
                "no elbencho CSV header before the first row "
                "(expected columns such as 'operation', 'threads', 'MiB/s [last]')",
            )
        if len(cells) != len(header):
            raise FormatError(where, number, f"row has {len(cells)} fields, the header has {len(header)}")
        row = dict(zip(header, cells))
        kind = phase_kind(row["operation"])
        if kind is not None:
            results.append(_row_result(row, kind, where, number))
    if header is None:
        raise FormatError(where, None, "empty: no elbencho CSV header (write it with elbencho --csvfile FILE)")
    if not results:
        raise FormatError(where, None, "no READ, WRITE or RWMIX rows to import")
    return results


def import_elbencho(path: str) -> list[RunResult]:
    return parse_text(read_text(path), path)
