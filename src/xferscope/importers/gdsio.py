"""gdsio result lines, as people paste them into reports, into RunResults.

    IoType: READ XferType: GPUD Threads: 1 DataSetSize: 14655488/1048576(KiB) IOSize: 1024(KiB)
    Throughput: 1.384300 GiB/sec, Avg_Latency: 705.381428 usecs ops: 14312 total_time 10.096484 secs

(one line; ``IoDepth: N`` after Threads for the batch path). Text around the lines is
ignored, except two things kept with each result: the gdsio command line above it
(``$ gdsio ...``), and a note in angle brackets such as ``<C-state Disable>`` between
that command and the previous command or numbered heading.
"""

from __future__ import annotations

import re

from xferscope.engines.base import RunResult
from xferscope.errors import FormatError
from xferscope.importers._result import checked_spec, imported_result, latency, read_text
from xferscope.records import RunEnvironment
from xferscope.spec import GDSIO_IO_NAME, PATHS

SOURCE = "gdsio"

_NUM = r"[0-9]+(?:\.[0-9]+)?"
RESULT_LINE = re.compile(
    r"IoType:\s*(?P<io>\w+)\s+XferType:\s*(?P<xfer>\w+)\s+Threads:\s*(?P<threads>\d+)\s+"
    r"(?:IoDepth:\s*(?P<depth>\d+)\s+)?"
    r"DataSetSize:\s*(?P<done_kib>\d+)/(?P<size_kib>\d+)\s*\(KiB\)\s+IOSize:\s*(?P<io_kib>\d+)\s*\(KiB\)\s+"
    rf"Throughput:\s*(?P<gib_s>{_NUM})\s*GiB/sec,?\s+Avg_Latency:\s*(?P<lat_us>{_NUM})\s*usecs\s+"
    rf"ops:\s*(?P<ops>\d+)\s+total_time\s*(?P<seconds>{_NUM})\s*secs"
)
_COMMAND = re.compile(r"(?:^|[\s$#>])(?:\S*/)?gdsio\s+-")
_NOTE = re.compile(r"^\s*<([^<>]{1,80})>\s*$")
_OTHER = re.compile(r"^\s*(?:[$#>]\s|\d+\.\s|\(\d+\)\s)")  # another command or a new numbered section

IO_TYPES = {name: io for io, name in GDSIO_IO_NAME.items()}
XFER_TYPES = {name: (path, False) for path, (_, name) in PATHS.items()}
XFER_TYPES.update({"GPU_DIRECT": ("cufile", False), "CPU_CACHED_GPU": ("bounce", True)})


def _option(command: str, letter: str) -> str | None:
    match = re.search(rf"\s-{letter}\s+(\S+)", command)
    return match.group(1) if match else None


def parse_line(text: str, where: str, line: int, command: str | None = None, note: str | None = None) -> RunResult:
    """One result from the gdsio line at ``line`` (with the command and note found above it)."""
    match = RESULT_LINE.search(text)
    if not match:
        raise FormatError(
            where,
            line,
            "not a complete gdsio result line: expected 'IoType: ... XferType: ... "
            "Threads: ... DataSetSize: N/N(KiB) IOSize: N(KiB) Throughput: X GiB/sec, "
            "Avg_Latency: X usecs ops: N total_time X secs'",
        )
    g = match.groupdict()
    io_name, xfer = g["io"].upper(), g["xfer"].upper()
    if io_name not in IO_TYPES:
        raise FormatError(where, line, f"IoType {g['io']!r} is not one of {', '.join(IO_TYPES)}")
    if xfer not in XFER_TYPES:
        raise FormatError(
            where, line, f"XferType {g['xfer']!r} is not one xferscope measures; known: {', '.join(XFER_TYPES)}"
        )
    path, buffered = XFER_TYPES[xfer]
    nbytes = int(g["done_kib"]) * 1024
    ops = int(g["ops"])
    seconds = float(g["seconds"])
    if seconds <= 0:
        raise FormatError(where, line, f"total_time {g['seconds']} is not a positive number of seconds")
    gpu = _option(command, "d") if command else None
    spec = checked_spec(
        where,
        line,
        path=path,
        io=IO_TYPES[io_name],
        block_size=int(g["io_kib"]) * 1024,
        workers=int(g["threads"]),
        iodepth=int(g["depth"] or 1),
        file_size=int(g["size_kib"]) * 1024,
        duration=seconds,
        buffered=buffered,
        gpus=[int(gpu)] if gpu and gpu.isdigit() else [0],
    )
    writes = spec.writes
    environment: RunEnvironment = {"gdsio_line": match.group(0), "gdsio_throughput_gib_s": float(g["gib_s"])}
    if command:
        environment["command"] = command
    return imported_result(
        spec,
        source=SOURCE,
        seconds=seconds,
        read_bytes=0 if writes else nbytes,
        write_bytes=nbytes if writes else 0,
        read_ops=0 if writes else ops,
        write_ops=ops if writes else 0,
        latency_us=latency(mean=float(g["lat_us"])),
        environment=environment,
        labels=[note] if note else [],
    )


def parse_text(text: str, where: str) -> list[RunResult]:
    """Every gdsio result line in ``text``; a line that starts like one but is cut short is an error."""
    results: list[RunResult] = []
    command: str | None = None
    note: str | None = None
    for number, line in enumerate(text.splitlines(), start=1):
        if "IoType:" in line:
            at = line.index("IoType:")
            if _COMMAND.search(line[:at]):  # pasted right after its command, on the same line
                command = line[:at].strip().lstrip("$#> ").strip()
            results.append(parse_line(line[at:], where, number, command, note))
            command, note = None, None
            continue
        if _COMMAND.search(line):
            command = line.strip().lstrip("$#> ").strip()
            continue
        note_match = _NOTE.match(line)
        if note_match:
            note = note_match.group(1).strip()
        elif _OTHER.match(line):
            command, note = None, None
    if not results:
        raise FormatError(where, None, "no gdsio result lines found (lines starting 'IoType: ... XferType: ...')")
    return results


def import_gdsio(path: str) -> list[RunResult]:
    return parse_text(read_text(path), path)
