"""Intel MLC: run the ``mlc`` binary, read its text output, and print results in its shape.

``parse_mlc_output`` reads what ``mlc`` prints (or a saved copy: tabs or spaces,
``***`` warning lines, several sections in any order, markdown pipes around
pasted tables) into the same ``MemResult`` the built-in sweep gives. Sections it
recognises: idle latency (matrix, or ``Each iteration took ...``), peak injection
bandwidths, loaded latencies. Others are skipped. A malformed number in a
recognised section is a ``FormatError`` naming the file and line.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from dataclasses import replace
from typing import Iterator, TextIO

from xferscope.engines.mem import (
    DEFAULT_DELAYS,
    IDLE,
    MemPoint,
    MemResult,
    MemSpec,
    allowed_cpus,
    check_output_paths,
    format_cpu_list,
    result_json,
    sanity_warnings,
    write_outputs,
)
from xferscope.errors import EngineUnavailable, FormatError, RunFailed, SpecError

MLC_URL = "https://www.intel.com/content/www/us/en/developer/articles/tool/intelr-memory-latency-checker.html"

# MLC's peak-injection labels and the traffic types they are.
PEAK_LABELS = {
    "all reads": "R",
    "3:1 reads-writes": "W3",
    "2:1 reads-writes": "W2",
    "1:1 reads-writes": "W5",
    "stream-triad like": "W10",
}
# How a peak bandwidth row is labelled when we print one.
TRAFFIC_LABELS = {
    "R": "ALL Reads",
    "W2": "2:1 Reads-Writes",
    "W3": "3:1 Reads-Writes",
    "W5": "1:1 Reads-Writes",
    "W6": "0:1 NT writes",
    "W7": "2:1 Reads-NT writes",
    "W8": "1:1 Reads-NT writes",
    "W9": "3:1 Reads-NT writes",
    "W10": "Stream-triad like",
}
UNKNOWN_TRAFFIC = "unknown"


# ------------------------------------------------------------- the binary


def find_mlc(path: str | None = None) -> str:
    """The mlc executable: ``path`` when given, else ``mlc`` on PATH."""
    if path:
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
        raise EngineUnavailable("mlc", f"{path} is not an executable file; download Intel MLC from {MLC_URL} "
                                       "and pass its path with --mlc")
    found = shutil.which("mlc")
    if not found:
        raise EngineUnavailable("mlc", f"Intel MLC (mlc) is not on PATH; download it from {MLC_URL} and put it "
                                       "on PATH or pass --mlc PATH")
    return found


def _buffer_option(spec: MemSpec) -> list[str]:
    return [f"-b{spec.buffer_bytes // 1024}"] if spec.buffer_bytes else []


def _load_cpu_option(spec: MemSpec) -> list[str]:
    cpus = spec.cpus
    if cpus is None and spec.threads is not None:
        latency = spec.latency_cpu if spec.latency_cpu is not None else allowed_cpus()[0]
        cpus = tuple(c for c in allowed_cpus() if c != latency)[: spec.threads]
    return [f"-k{format_cpu_list(cpus)}"] if cpus else []


def _latency_cpu_option(spec: MemSpec) -> list[str]:
    return [f"-c{spec.latency_cpu}"] if spec.latency_cpu is not None else []


def mlc_seconds(spec: MemSpec) -> int:
    """MLC measures whole seconds per point."""
    return max(1, round(spec.point_seconds))


def loaded_latency_command(mlc: str, spec: MemSpec, traffic: str, stride: int,
                           delays_file: str | None = None) -> list[str]:
    """``mlc --loaded_latency`` for one traffic type and stride; ``delays_file`` when the delays are a list."""
    cmd = [mlc, "--loaded_latency", "-R" if traffic == "R" else f"-{traffic}", f"-l{stride}", f"-t{mlc_seconds(spec)}"]
    if len(spec.delays) == 1:
        cmd.append(f"-d{spec.delays[0]}")
    elif tuple(spec.delays) != DEFAULT_DELAYS:
        if not delays_file:
            raise ValueError("a delay list other than MLC's default needs a delays file")
        cmd.append(f"-g{delays_file}")
    return cmd + _buffer_option(spec) + _load_cpu_option(spec) + _latency_cpu_option(spec)


def idle_latency_command(mlc: str, spec: MemSpec, stride: int) -> list[str]:
    return [mlc, "--idle_latency", f"-l{stride}"] + _buffer_option(spec) + _latency_cpu_option(spec)


def peak_bandwidth_command(mlc: str, spec: MemSpec) -> list[str]:
    return [mlc, "--peak_injection_bandwidth"] + _buffer_option(spec) + _load_cpu_option(spec)


class MlcRunner:
    """Runs ``mlc`` for a spec and streams its points; ``stop()`` ends the running mlc."""

    def __init__(self, spec: MemSpec, mlc: str):
        self.spec = spec
        self.mlc = mlc
        self.warnings: list[str] = []
        self.environment: dict = {"mlc_path": mlc, "mlc_commands": []}
        self._proc: subprocess.Popen | None = None
        self._lock = threading.Lock()
        self._stopped = False
        if mlc_seconds(spec) != spec.point_seconds and spec.mode != "idle":
            self.warnings.append(f"mlc measures whole seconds per point: ran -t{mlc_seconds(spec)} "
                                 f"for --point-seconds {spec.point_seconds:g}")

    def stop(self) -> None:
        with self._lock:
            self._stopped = True
            if self._proc and self._proc.poll() is None:
                self._proc.terminate()

    def points(self, cancel: threading.Event) -> Iterator[MemPoint]:
        spec = self.spec
        with tempfile.TemporaryDirectory(prefix="xferscope-mlc-") as tmp:
            delays_file = os.path.join(tmp, "delays.txt")
            with open(delays_file, "w") as fh:
                fh.write("".join(f"{d}\n" for d in spec.delays))
            if spec.mode == "peak":
                yield from self._peak(cancel)
                return
            for stride in spec.strides:
                if cancel.is_set():
                    return
                yield from self._run(idle_latency_command(self.mlc, spec, stride), IDLE, stride, cancel)
                if spec.mode == "idle":
                    continue
                for traffic in spec.traffic:
                    if cancel.is_set():
                        return
                    cmd = loaded_latency_command(self.mlc, spec, traffic, stride, delays_file)
                    yield from self._run(cmd, traffic, stride, cancel)

    def _peak(self, cancel: threading.Event) -> Iterator[MemPoint]:
        got = []
        for point in self._run(peak_bandwidth_command(self.mlc, self.spec), None, None, cancel):
            if point.traffic in self.spec.traffic:
                got.append(point.traffic)
                yield point
        missing = [t for t in self.spec.traffic if t not in got]
        if missing and not cancel.is_set():
            self.warnings.append(f"mlc --peak_injection_bandwidth printed no row for {', '.join(missing)}")

    def _run(self, cmd: list[str], traffic: str | None, stride: int | None,
             cancel: threading.Event) -> Iterator[MemPoint]:
        self.environment["mlc_commands"].append(" ".join(cmd))
        parser = MlcParser(" ".join(cmd))
        with self._lock:
            if self._stopped:
                return
            try:
                self._proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                              errors="replace", bufsize=1)
            except OSError as exc:
                raise EngineUnavailable("mlc", f"cannot run {self.mlc}: {exc.strerror or exc}") from None
        proc = self._proc
        tail = []
        try:
            for line in proc.stdout:
                tail = (tail + [line.strip()])[-3:] if line.strip() else tail
                for point in parser.feed(line):
                    if point.traffic != IDLE and traffic not in (None, IDLE):
                        point = replace(point, traffic=traffic)
                    yield replace(point, stride=stride if stride is not None else point.stride)
                if cancel.is_set():
                    self.stop()
        finally:
            if proc.poll() is None:
                proc.terminate()
            proc.wait()
        self.warnings.extend(w for w in parser.warnings if w not in self.warnings)
        self.environment.update({k: v for k, v in parser.environment.items() if k != "mlc_command_line"})
        if proc.returncode != 0 and not cancel.is_set() and not self._stopped:
            raise RunFailed(f"mlc exited with status {proc.returncode}: {' / '.join(tail) or 'no output'}")


# ------------------------------------------------------------- the parser


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


# ---------------------------------------------------------- MLC's shape


def _series(points: list[MemPoint]) -> list[list[MemPoint]]:
    """Consecutive runs of one traffic type and stride with rising delays."""
    runs: list[list[MemPoint]] = []
    for p in points:
        last = runs[-1][-1] if runs else None
        if last and (last.traffic, last.stride) == (p.traffic, p.stride) and (p.delay or 0) > (last.delay or 0):
            runs[-1].append(p)
        else:
            runs.append([p])
    return runs


def _stride_text(stride: int | None) -> str:
    return f"stride {stride} B" if stride else "stride not given"


def format_mlc_table(result: MemResult) -> str:
    """The result as MLC prints it: idle latency, peak bandwidths, and one Inject Delay table per curve."""
    out: list[str] = []
    for p in result.idle_points:
        spread = f" (min {p.latency_min_ns:.2f}, max {p.latency_max_ns:.2f})" if p.latency_min_ns is not None else ""
        out.append(f"Idle latency: {p.latency_ns:.2f} ns{spread}, {_stride_text(p.stride)}, {p.backend}")
    peak = [p for p in result.curve_points if p.latency_ns is None]
    curves = [p for p in result.curve_points if p.latency_ns is not None]
    if peak:
        out.append("")
        out.append(f"Peak injection bandwidth (MB/sec), {_stride_text(peak[0].stride)}, {peak[0].backend}")
        for p in peak:
            label = TRAFFIC_LABELS.get(p.traffic, p.traffic)
            split = (f"   (read {p.read_mb_s:.1f}, write {p.write_mb_s:.1f})"
                     if p.read_mb_s is not None and p.write_mb_s is not None else "")
            out.append(f"{label:<20}:\t{p.bandwidth_mb_s:10.1f}{split}")
    for run in _series(curves):
        first = run[0]
        split = all(p.read_mb_s is not None for p in run)
        out.append("")
        out.append(f"Loaded latency: traffic {first.traffic}, {_stride_text(first.stride)}, {first.backend}")
        head = f"{'Inject Delay':>12}  {'Latency (ns)':>12}  {'Bandwidth (MB/sec)':>18}"
        out.append(head + (f"  {'Read (MB/sec)':>13}  {'Write (MB/sec)':>14}" if split else ""))
        out.append("=" * len(out[-1]))
        for p in run:
            row = f"{format(p.delay, '05d'):>12}  {p.latency_ns:>12.2f}  {p.bandwidth_mb_s:>18.1f}"
            if split:
                row += f"  {p.read_mb_s:>13.1f}  {p.write_mb_s:>14.1f}"
            out.append(row)
    footer = []
    if result.thp_coverage is not None:
        footer.append(f"THP coverage: {result.thp_coverage:.0%} of the buffers on huge pages")
    ns_iter = result.environment.get("ns_per_delay_iter")
    if ns_iter:
        footer.append(f"Delay loop: {ns_iter:.3f} ns per iteration (calibrated)")
    if result.cancelled:
        footer.append(f"Interrupted: {len(result.points)} points measured")
    if footer:
        out.append("")
        out.extend(footer)
    return "\n".join(out).lstrip("\n")


def emit_result(result: MemResult, fmt: str = "table", out: TextIO | None = None, err: TextIO | None = None) -> None:
    """Print a result: the MLC-shaped table (warnings on ``err``) or JSON."""
    out = out or sys.stdout
    err = err or sys.stderr
    if fmt == "json":
        out.write(result_json(result) + "\n")
        return
    text = format_mlc_table(result)
    if text:
        out.write(text + "\n")
    for warning in result.warnings:
        err.write(f"warning: {warning}\n")


def import_mlc_file(path: str, json_out: str | None = None, csv_out: str | None = None, fmt: str = "table") -> int:
    """``xferscope import mlc FILE``: parse a saved MLC output, print it, write the same columns as ``mem``."""
    if fmt not in ("table", "json"):
        raise SpecError("--format", f"{fmt!r} is not a format; use table or json")
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            text = fh.read()
    except OSError as exc:
        raise FormatError(path, None, f"cannot read: {exc.strerror or exc}") from None
    check_output_paths(json_out, csv_out)
    result = parse_mlc_output(text, path)
    if not result.points:
        raise FormatError(path, None, "no MLC section found (idle latency, peak injection bandwidth or loaded "
                                      "latencies); pass the text mlc printed")
    write_outputs(result, json_out, csv_out)
    emit_result(result, fmt)
    return 0


__all__ = [
    "MLC_URL", "MlcParser", "MlcRunner", "emit_result", "find_mlc", "format_mlc_table", "idle_latency_command",
    "import_mlc_file", "loaded_latency_command", "parse_mlc_output", "peak_bandwidth_command",
]
