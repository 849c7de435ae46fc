"""The ``mlc`` backend of memory sweeps: Intel's Memory Latency Checker binary, run for a ``MemSpec``.

Its output is read by ``xferscope.memory.mlc_text`` (the same parser as ``import mlc``),
so an mlc run and a saved mlc output give the same ``MemSweep``. The modes map to
mlc's: idle ``--idle_latency``, loaded ``--loaded_latency``, peak ``--max_bandwidth``,
matrix ``--latency_matrix`` and ``--bandwidth_matrix``, curve ``--idle_latency -b``
once per working-set size. ``--locality whole`` is mlc's ``-r`` (random access);
``--pages 2m``/``1g`` are its ``-L``/``-h``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Iterator

from msgspec.structs import replace

from xferscope.errors import EngineUnavailable, RunFailed
from xferscope.memory.machine import allowed_cpus, format_cpu_list, llc_bytes
from xferscope.memory.mlc_text import MlcParser
from xferscope.memory.plan import curve_sizes_for
from xferscope.memory.result import CURVE, IDLE, in_matrix
from xferscope.memory.spec import DEFAULT_DELAYS, WHOLE, MemSpec
from xferscope.records import MemEnvironment, MemPoint

MLC_URL = "https://www.intel.com/content/www/us/en/developer/articles/tool/intelr-memory-latency-checker.html"


def find_mlc(path: str | None = None) -> str:
    """The mlc executable: ``path`` when given, else ``mlc`` on PATH."""
    if path:
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
        raise EngineUnavailable(
            "mlc", f"{path} is not an executable file; download Intel MLC from {MLC_URL} and pass its path with --mlc"
        )
    found = shutil.which("mlc")
    if not found:
        raise EngineUnavailable(
            "mlc", f"Intel MLC (mlc) is not on PATH; download it from {MLC_URL} and put it on PATH or pass --mlc PATH"
        )
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


def _chase_options(spec: MemSpec) -> list[str]:
    """mlc's -r (random access for the latency thread) for --locality whole, and its page options."""
    return (["-r"] if spec.locality == WHOLE else []) + _page_options(spec)


def _page_options(spec: MemSpec) -> list[str]:
    return {"2m": ["-L"], "1g": ["-h"]}.get(spec.pages, [])


def mlc_seconds(spec: MemSpec) -> int:
    """MLC measures whole seconds per point."""
    return max(1, round(spec.seconds_per_point))


def loaded_latency_command(
    mlc: str, spec: MemSpec, traffic: str, stride: int, delays_file: str | None = None
) -> list[str]:
    """``mlc --loaded_latency`` for one traffic type and stride; ``delays_file`` when the delays are a list."""
    cmd = [mlc, "--loaded_latency", "-R" if traffic == "R" else f"-{traffic}", f"-l{stride}", f"-t{mlc_seconds(spec)}"]
    if len(spec.delays) == 1:
        cmd.append(f"-d{spec.delays[0]}")
    elif tuple(spec.delays) != DEFAULT_DELAYS:
        if not delays_file:
            raise ValueError("a delay list other than MLC's default needs a delays file")
        cmd.append(f"-g{delays_file}")
    return cmd + _buffer_option(spec) + _load_cpu_option(spec) + _latency_cpu_option(spec) + _chase_options(spec)


def idle_latency_command(mlc: str, spec: MemSpec, stride: int, size: int | None = None) -> list[str]:
    """``mlc --idle_latency``; ``size`` (bytes) in place of the spec's buffer for a point of the curve."""
    buffer = [f"-b{max(1, size // 1024)}"] if size else _buffer_option(spec)
    return [mlc, "--idle_latency", f"-l{stride}"] + buffer + _latency_cpu_option(spec) + _chase_options(spec)


def peak_bandwidth_command(mlc: str, spec: MemSpec) -> list[str]:
    """``mlc --max_bandwidth``: all reads, 3:1, 2:1, 1:1 and stream-triad-like in one table."""
    return [mlc, "--max_bandwidth"] + _buffer_option(spec) + _load_cpu_option(spec) + _page_options(spec)


def matrix_commands(mlc: str, spec: MemSpec, stride: int) -> list[list[str]]:
    """``mlc --latency_matrix`` and ``mlc --bandwidth_matrix``."""
    return [
        [mlc, "--latency_matrix", f"-l{stride}"] + _buffer_option(spec) + _chase_options(spec),
        [mlc, "--bandwidth_matrix"] + _buffer_option(spec) + _page_options(spec),
    ]


class MlcRunner:
    """Runs ``mlc`` for a spec and streams its points; ``stop()`` ends the running mlc."""

    def __init__(self, spec: MemSpec, mlc: str):
        self.spec = spec
        self.mlc = mlc
        self.warnings: list[str] = []
        self.environment: MemEnvironment = {"mlc_path": mlc, "mlc_commands": []}
        self.pages: str | None = None  # mlc's page option when one was given (2m, 1g)
        self._proc: subprocess.Popen | None = None
        self._lock = threading.Lock()
        self._stopped = False
        if mlc_seconds(spec) != spec.point_seconds and spec.mode == "loaded":
            self.warnings.append(
                f"mlc measures whole seconds per point: ran -t{mlc_seconds(spec)} "
                f"for --point-seconds {spec.point_seconds:g}"
            )

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
                if spec.mode == "matrix":
                    for cmd in matrix_commands(self.mlc, spec, stride):
                        if not cancel.is_set():
                            yield from self._run(cmd, None, stride, cancel)
                    continue
                if spec.mode == "curve":
                    for size in curve_sizes_for(spec, llc_bytes(spec.sysfs)):
                        if cancel.is_set():
                            return
                        yield from self._run(
                            idle_latency_command(self.mlc, spec, stride, size), CURVE, stride, cancel, size=size
                        )
                    continue
                yield from self._run(idle_latency_command(self.mlc, spec, stride), IDLE, stride, cancel)
                if spec.mode == "idle":
                    continue
                for traffic in spec.traffic_types:
                    if cancel.is_set():
                        return
                    cmd = loaded_latency_command(self.mlc, spec, traffic, stride, delays_file)
                    yield from self._run(cmd, traffic, stride, cancel)

    def _peak(self, cancel: threading.Event) -> Iterator[MemPoint]:
        got = []
        for point in self._run(peak_bandwidth_command(self.mlc, self.spec), None, None, cancel):
            if point.traffic in self.spec.traffic_types:
                got.append(point.traffic)
                yield point
        missing = [t for t in self.spec.traffic_types if t not in got]
        if missing and not cancel.is_set():
            self.warnings.append(f"mlc --max_bandwidth printed no row for {', '.join(missing)}")

    def _run(
        self, cmd: list[str], traffic: str | None, stride: int | None, cancel: threading.Event, size: int | None = None
    ) -> Iterator[MemPoint]:
        self.environment["mlc_commands"].append(" ".join(cmd))
        parser = MlcParser(" ".join(cmd))
        parser.learn_flags(cmd[1:])
        with self._lock:
            if self._stopped:
                return
            try:
                self._proc = subprocess.Popen(
                    cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace", bufsize=1
                )
            except OSError as exc:
                raise EngineUnavailable("mlc", f"cannot run {self.mlc}: {exc.strerror or exc}") from None
        proc = self._proc
        tail: list[str] = []
        assert proc.stdout is not None  # opened with stdout=PIPE
        try:
            for line in proc.stdout:
                tail = (tail + [line.strip()])[-3:] if line.strip() else tail
                for point in parser.feed(line):
                    if traffic == CURVE and point.traffic == IDLE and not in_matrix(point):
                        point = replace(point, traffic=CURVE, size_bytes=size)
                    elif point.traffic != IDLE and traffic not in (None, IDLE, CURVE):
                        point = replace(point, traffic=traffic)
                    yield replace(point, stride=stride if stride is not None else point.stride)
                if cancel.is_set():
                    self.stop()
        finally:
            if proc.poll() is None:
                proc.terminate()
            proc.wait()
        self.warnings.extend(w for w in parser.warnings if w not in self.warnings)
        found = parser.environment.copy()
        found.pop("mlc_command_line", None)
        self.environment.update(found)
        self.pages = parser.pages or self.pages
        if proc.returncode != 0 and not cancel.is_set() and not self._stopped:
            raise RunFailed(f"mlc exited with status {proc.returncode}: {' / '.join(tail) or 'no output'}")
