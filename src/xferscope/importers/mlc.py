"""Intel MLC's text output as a ``MemResult`` (backend "mlc").

``parse_mlc_output`` reads what ``mlc`` prints (or a saved copy: tabs or spaces,
``***`` warning lines, several sections in any order, markdown pipes around
pasted tables). Sections it recognises: idle latency (matrix, or ``Each iteration
took ...``), peak injection bandwidths, loaded latencies. Others are skipped. A
malformed number in a recognised section is a ``FormatError`` naming the file and
line. The mlc backend (``xferscope.engines.mem_mlc``) reads mlc's output with the
same parser, line by line as it comes.
"""
from __future__ import annotations

import re

from xferscope.engines.mem_result import IDLE, MemPoint, MemResult, sanity_warnings
from xferscope.errors import FormatError

# MLC's peak-injection labels and the traffic types they are.
PEAK_LABELS = {
    "all reads": "R",
    "3:1 reads-writes": "W3",
    "2:1 reads-writes": "W2",
    "1:1 reads-writes": "W5",
    "stream-triad like": "W10",
}
# How a peak bandwidth row is labelled when we print one.
UNKNOWN_TRAFFIC = "unknown"


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
        self.environment: dict = {}
        self.idle_matrix: list[list[float | None]] = []
        self._matrix_nodes: list[int] | None = None
        self._cmd_traffic: str | None = None
        self._cmd_stride: int | None = None
        self._section_traffic: str | None = None

    # -- the pieces of a line

    def _fail(self, message: str) -> FormatError:
        return FormatError(self.source, self.lineno, message)

    def _start_section(self, line: str) -> None:
        low = line.lower()
        if low.startswith("measuring idle latenc"):
            self.section = "idle"
            self._matrix_nodes = None
        elif low.startswith("measuring peak injection"):
            self.section = "peak"
        elif low.startswith("measuring loaded latenc"):
            self.section = "loaded"
            self._section_traffic = None
        else:
            self.section = "skip"

    def _command_line(self, line: str) -> None:
        self.environment["mlc_command_line"] = line.split(":", 1)[1].strip()
        for token in line.split():
            if token == "-R":
                self._cmd_traffic = "R"
            elif re.fullmatch(r"-W\d+", token):
                self._cmd_traffic = token[1:]
            elif re.fullmatch(r"-l\d+", token):
                self._cmd_stride = int(token[2:])

    def _traffic(self) -> str:
        return self._cmd_traffic or self._section_traffic or UNKNOWN_TRAFFIC

    def _idle_point(self, latency: float) -> MemPoint:
        return MemPoint(delay=None, latency_ns=latency, latency_min_ns=None, latency_max_ns=None, bandwidth_mb_s=None,
                        read_mb_s=None, write_mb_s=None, traffic=IDLE, stride=self._cmd_stride, backend="mlc")

    def _idle_row(self, tokens: list[str]) -> list[MemPoint]:
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
                raise self._fail(f"idle latency row: {t!r} is not a number")
        if not values:
            raise self._fail("idle latency row has a node but no latencies")
        if self._matrix_nodes and len(values) != len(self._matrix_nodes):
            raise self._fail(f"idle latency row has {len(values)} values for {len(self._matrix_nodes)} nodes")
        self.idle_matrix.append(values)
        node = int(tokens[0])
        if len(self.idle_matrix) == 1:
            column = self._matrix_nodes.index(node) if self._matrix_nodes and node in self._matrix_nodes else 0
            local = values[column] if column < len(values) else values[0]
            if local is not None:
                return [self._idle_point(local)]
        return []

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
        return [MemPoint(delay=0, latency_ns=None, latency_min_ns=None, latency_max_ns=None, bandwidth_mb_s=bw,
                         read_mb_s=None, write_mb_s=None, traffic=traffic, stride=self._cmd_stride, backend="mlc")]

    def _loaded_row(self, tokens: list[str]) -> list[MemPoint]:
        if len(tokens) != 3 or not _DELAY.match(tokens[0]) or not all(_NUMBER.match(t) for t in tokens[1:]):
            raise self._fail("loaded latency row needs a delay, a latency (ns) and a bandwidth (MB/sec), got "
                             f"{' '.join(tokens)!r}")
        return [MemPoint(delay=int(tokens[0]), latency_ns=float(tokens[1]), latency_min_ns=None, latency_max_ns=None,
                         bandwidth_mb_s=float(tokens[2]), read_mb_s=None, write_mb_s=None, traffic=self._traffic(),
                         stride=self._cmd_stride, backend="mlc")]

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
        if traffic_line and self.section == "loaded":
            what = traffic_line.group("what").strip()
            self._section_traffic = "R" if what.lower() == "read-only" else what
            return []
        tokens = _tokens(line)
        if self.section == "idle":
            return self._idle_row(tokens) if tokens else []
        if self.section == "peak":
            return self._peak_row(line)
        if self.section == "loaded" and tokens and tokens[0][0].isdigit():
            return self._loaded_row(tokens)
        return []

    def result(self) -> MemResult:
        result = MemResult(points=list(self.points), backend="mlc", warnings=list(self.warnings),
                           environment={"source": self.source, **self.environment})
        if self.idle_matrix:
            result.environment["idle_latency_matrix_ns"] = [list(r) for r in self.idle_matrix]
        result.warnings.extend(sanity_warnings(result.points))
        return result


def parse_mlc_output(text: str, source: str) -> MemResult:
    """Every section of MLC output we recognise, as one MemResult (backend "mlc")."""
    parser = MlcParser(source)
    for line in text.splitlines():
        parser.feed(line)
    return parser.result()


def import_mlc(path: str) -> MemResult:
    """A saved MLC output file as a MemResult; FormatError when it cannot be read or holds no MLC section."""
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            text = fh.read()
    except OSError as exc:
        raise FormatError(path, None, f"cannot read: {exc.strerror or exc}") from None
    result = parse_mlc_output(text, path)
    if not result.points:
        raise FormatError(path, None, "no MLC section found (idle latency, peak injection bandwidth or loaded "
                                      "latencies); pass the text mlc printed")
    return result
