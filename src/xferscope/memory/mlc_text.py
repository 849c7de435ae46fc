"""Intel MLC's text output as a ``MemSweep`` (backend "mlc"): the parser the mlc backend
(``xferscope.memory.mlc``) reads mlc's output with, line by line as it comes, and
``xferscope import mlc`` (``xferscope.importers.mlc``) reads a saved copy with.

``parse_mlc_output`` reads what ``mlc`` prints (or a saved copy: tabs or spaces,
``***`` warning lines, several sections in any order, markdown pipes around
pasted tables). Sections it recognises: idle latency (``Each iteration took ...``,
or the latency matrix: one point per CPU node and memory node), peak injection and
maximum bandwidths (one table), the bandwidth matrix, loaded latencies. Others are
skipped. A malformed number in a recognised section is a ``FormatError`` naming the
file and line.

Every latency point names MLC's chase as its locality: ``mlc random`` when mlc
says it measures random access (``-r``, or when it could not switch the hardware
prefetchers off), ``mlc sequential`` when it says sequential, ``mlc`` otherwise.
MLC's ``-L`` and ``-h`` are its 2 MiB and 1 GiB pages.
"""

from __future__ import annotations

import re

from xferscope.errors import FormatError
from xferscope.memory.result import IDLE, new_sweep, sanity_warnings, with_figures
from xferscope.records import MemEnvironment, MemPoint, MemSweep

# MLC's peak-injection labels and the traffic types they are.
PEAK_LABELS = {
    "all reads": "R",
    "3:1 reads-writes": "W3",
    "2:1 reads-writes": "W2",
    "1:1 reads-writes": "W5",
    "stream-triad like": "W10",
}
UNKNOWN_TRAFFIC = "unknown"
MLC_PAGES = {"-L": "2m", "-h": "1g"}


_NUMBER = re.compile(r"^-?\d+(?:\.\d+)?$")
_DELAY = re.compile(r"^\d+$")
_ITERATION = re.compile(r"each iteration took\s+([\d.]+)\s+.*?clocks\s*\(\s*([\d.]+)\s*ns\s*\)", re.IGNORECASE)
_PEAK_ROW = re.compile(r"^(?P<label>.*?(?:read|write|triad).*?)\s*:\s*(?P<value>\S+)\s*$", re.IGNORECASE)
_TRAFFIC_LINE = re.compile(r"^using\s+(?P<what>.+?)\s+traffic type", re.IGNORECASE)
_VERSION = re.compile(r"memory latency checker.*?v(\d[\w.\-]*)", re.IGNORECASE)


def _tokens(line: str) -> list[str]:
    return [t for t in re.split(r"[\s|]+", line.strip()) if t]


def _is_table_header(line: str) -> bool:
    low = line.lower()
    return "inject" in low and "latency" in low


class MlcParser:
    """Reads MLC's text one line at a time; ``feed`` returns the points each line completes."""

    def __init__(self, source: str):
        self.source = source
        self.section: str | None = None  # "idle", "peak", "loaded", "skip" or None before any
        self.lineno = 0
        self.points: list[MemPoint] = []
        self.warnings: list[str] = []
        self.environment: MemEnvironment = {}
        self._matrix_nodes: list[int] | None = None
        self._cmd_traffic: str | None = None
        self._cmd_stride: int | None = None
        self._cmd_buffer: int | None = None
        self._section_traffic: str | None = None
        self.access: str | None = None  # "random" or "sequential", as mlc says
        self.pages: str | None = None

    # -- the pieces of a line

    def _fail(self, message: str) -> FormatError:
        return FormatError(self.source, self.lineno, message)

    def _start_section(self, line: str) -> None:
        low = line.lower()
        if low.startswith("measuring idle latenc"):
            self.section = "idle"
            self._matrix_nodes = None
            for access in ("random", "sequential"):
                if f"{access} access" in low:
                    self.access = access
        elif low.startswith(("measuring peak injection", "measuring maximum memory bandwidth")):
            self.section = "peak"
        elif low.startswith("measuring memory bandwidths between nodes"):
            self.section = "bandwidth"
            self._matrix_nodes = None
            self._section_traffic = None
        elif low.startswith("measuring loaded latenc"):
            self.section = "loaded"
            self._section_traffic = None
        else:
            self.section = "skip"

    def _command_line(self, line: str) -> None:
        self.environment["mlc_command_line"] = line.split(":", 1)[1].strip()
        self.learn_flags(line.split())

    def learn_flags(self, tokens: list[str]) -> None:
        """What mlc's flags say about the points that follow: traffic, stride, buffer, access, pages."""
        for token in tokens:
            if token == "-R":
                self._cmd_traffic = "R"
            elif re.fullmatch(r"-W\d+", token):
                self._cmd_traffic = token[1:]
            elif re.fullmatch(r"-l\d+", token):
                self._cmd_stride = int(token[2:])
            elif re.fullmatch(r"-b\d+", token):
                self._cmd_buffer = int(token[2:]) * 1024
            elif token == "-r":
                self.access = "random"
            elif token in MLC_PAGES:
                self.pages = MLC_PAGES[token]

    def _traffic(self) -> str:
        return self._cmd_traffic or self._section_traffic or UNKNOWN_TRAFFIC

    @property
    def locality(self) -> str:
        """How mlc's latency thread moved, as mlc said: 'mlc random', 'mlc sequential', or 'mlc'."""
        return f"mlc {self.access}" if self.access else "mlc"

    def _idle_point(self, latency: float, **where) -> MemPoint:
        return MemPoint(
            delay=None,
            latency_ns=latency,
            latency_min_ns=None,
            latency_max_ns=None,
            bandwidth_mb_s=None,
            read_mb_s=None,
            write_mb_s=None,
            traffic=IDLE,
            stride=self._cmd_stride,
            backend="mlc",
            locality=self.locality,
            size_bytes=self._cmd_buffer,
            **where,
        )

    def _matrix_row(self, tokens: list[str], what: str) -> list[MemPoint]:
        """A row of the latency or bandwidth matrix: a CPU node, then one value per memory node."""
        if not tokens[0].isdigit():
            if tokens[0].lower() in ("numa", "socket", "memory", "node"):
                nodes = [int(t) for t in tokens if t.isdigit()]
                if nodes:
                    self._matrix_nodes = nodes
            return []
        values: list[float | None] = []
        for t in tokens[1:]:
            if t == "-":
                values.append(None)
            elif _NUMBER.match(t):
                values.append(float(t))
            else:
                raise self._fail(f"{what} row: {t!r} is not a number")
        if not values:
            raise self._fail(f"{what} row has a node but no values")
        if self._matrix_nodes and len(values) != len(self._matrix_nodes):
            raise self._fail(f"{what} row has {len(values)} values for {len(self._matrix_nodes)} nodes")
        columns = self._matrix_nodes or list(range(len(values)))
        cpu_node = int(tokens[0])
        out = []
        for mem_node, value in zip(columns, values):
            if value is None:
                continue
            if what == "idle latency":
                out.append(self._idle_point(value, cpu_node=cpu_node, mem_node=mem_node))
            else:
                out.append(
                    MemPoint(
                        delay=0,
                        latency_ns=None,
                        latency_min_ns=None,
                        latency_max_ns=None,
                        bandwidth_mb_s=value,
                        read_mb_s=None,
                        write_mb_s=None,
                        traffic=self._section_traffic or "R",
                        stride=self._cmd_stride,
                        backend="mlc",
                        cpu_node=cpu_node,
                        mem_node=mem_node,
                    )
                )
        return out

    def _peak_row(self, line: str) -> list[MemPoint]:
        match = _PEAK_ROW.match(line)
        if not match:
            return []
        value = match.group("value")
        if not _NUMBER.match(value):
            raise self._fail(f"peak bandwidth row: {value!r} is not a number")
        label = " ".join(match.group("label").split())
        traffic = PEAK_LABELS.get(label.lower(), label)
        bw = float(value)
        return [
            MemPoint(
                delay=0,
                latency_ns=None,
                latency_min_ns=None,
                latency_max_ns=None,
                bandwidth_mb_s=bw,
                read_mb_s=None,
                write_mb_s=None,
                traffic=traffic,
                stride=self._cmd_stride,
                backend="mlc",
            )
        ]

    def _loaded_row(self, tokens: list[str]) -> list[MemPoint]:
        if len(tokens) != 3 or not _DELAY.match(tokens[0]) or not all(_NUMBER.match(t) for t in tokens[1:]):
            raise self._fail(
                f"loaded latency row needs a delay, a latency (ns) and a bandwidth (MB/sec), got {' '.join(tokens)!r}"
            )
        return [
            MemPoint(
                delay=int(tokens[0]),
                latency_ns=float(tokens[1]),
                latency_min_ns=None,
                latency_max_ns=None,
                bandwidth_mb_s=float(tokens[2]),
                read_mb_s=None,
                write_mb_s=None,
                traffic=self._traffic(),
                stride=self._cmd_stride,
                backend="mlc",
                locality=self.locality,
                size_bytes=self._cmd_buffer,
            )
        ]

    # -- one line

    def feed(self, raw: str) -> list[MemPoint]:
        self.lineno += 1
        line = raw.strip().strip("|").strip()
        if not line:
            return []
        new = self._line(line)
        self.points.extend(new)
        return new

    def _line(self, line: str) -> list[MemPoint]:
        low = line.lower()
        if line.startswith("***"):
            self.warnings.append("mlc: " + line.lstrip("*").strip())
            if "random access" in low:
                self.access = "random"
            return []
        if low.startswith("measuring"):
            self._start_section(line)
            return []
        if low.startswith("command line parameters"):
            self._command_line(line)
            return []
        version = _VERSION.search(line)
        if version:
            self.environment["mlc_version"] = version.group(1)
            return []
        iteration = _ITERATION.search(line)
        if iteration:
            return [self._idle_point(float(iteration.group(2)))]
        if low.startswith("using buffer size"):
            self.environment["mlc_buffer"] = line
            return []
        if _is_table_header(line):
            if self.section != "loaded":
                self.section = "loaded"
                self._section_traffic = None
            return []
        traffic_line = _TRAFFIC_LINE.match(line)
        if traffic_line and self.section in ("loaded", "bandwidth"):
            what = traffic_line.group("what").strip()
            self._section_traffic = "R" if what.lower() == "read-only" else what
            return []
        tokens = _tokens(line)
        if self.section == "idle":
            return self._matrix_row(tokens, "idle latency") if tokens else []
        if self.section == "bandwidth":
            return self._matrix_row(tokens, "bandwidth matrix") if tokens else []
        if self.section == "peak":
            return self._peak_row(line)
        if self.section == "loaded" and tokens and tokens[0][0].isdigit():
            return self._loaded_row(tokens)
        return []

    def result(self) -> MemSweep:
        result = new_sweep(
            "mlc",
            warnings=[*self.warnings, *sanity_warnings(self.points)],
            environment={"source": self.source, **self.environment},
            pages=self.pages,
        )
        result.points = list(self.points)
        return with_figures(result)


def parse_mlc_output(text: str, source: str) -> MemSweep:
    """Every section of MLC output we recognise, as one MemSweep (backend "mlc")."""
    parser = MlcParser(source)
    for line in text.splitlines():
        parser.feed(line)
    return parser.result()
