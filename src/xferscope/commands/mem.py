"""`xferscope mem`: memory latency under load and peak bandwidth, in Intel MLC's shape.

Only typer is imported at module level; the engine, the native core and Rich
are imported when the command runs.
"""
from __future__ import annotations

import typer

# Spec fields as the user typed them on this command line.
OPTION_NAMES = {
    "mode": "--mode",
    "traffic": "--traffic",
    "stride": "--stride",
    "delays": "--delays",
    "point_seconds": "--point-seconds",
    "threads": "--threads",
    "cpus": "--cpus",
    "latency_cpu": "--latency-cpu",
    "buffer": "--buffer",
    "backend": "--backend",
}


def register(app: typer.Typer) -> None:
    @app.command("mem")
    def mem(
        mode: str = typer.Option("loaded", "--mode", help="idle | loaded | peak (MLC's idle latency, loaded latency, peak injection bandwidth)"),
        traffic: str = typer.Option("R", "--traffic", help="traffic types, comma list: R, W2, W3, W5, W6, W7, W8, W9, W10"),
        stride: str = typer.Option("64", "--stride", help="bytes between accesses, comma list (64, 128, 256)"),
        delays: str = typer.Option(None, "--delays", help="injection delays, comma list (default: MLC's 19 delays)"),
        point_seconds: str = typer.Option("2", "--point-seconds", help="measured time per point, e.g. 2, 0.5, 500ms"),
        threads: int = typer.Option(None, "--threads", help="load threads (default: every CPU but the latency thread's)"),
        cpus: str = typer.Option(None, "--cpus", help="load-thread CPUs like MLC's -k, e.g. 1-15"),
        latency_cpu: int = typer.Option(None, "--latency-cpu", help="CPU of the latency thread (default: the first free one)"),
        buffer: str = typer.Option(None, "--buffer", help="buffer per thread, e.g. 1G (default: 4x the last-level cache, at least 1G for latency)"),
        backend: str = typer.Option("builtin", "--backend", help="builtin | mlc (Intel's binary)"),
        mlc: str = typer.Option(None, "--mlc", help="path of the mlc binary (default: mlc on PATH)"),
        json_out: str = typer.Option(None, "--json", help="write the result as JSON to FILE"),
        csv_out: str = typer.Option(None, "--csv", help="write one row per point to FILE"),
        fmt: str = typer.Option("table", "--format", help="table | json on stdout"),
    ) -> None:
        """Memory latency against bandwidth at each injection delay, like Intel MLC --loaded_latency."""
        raise typer.Exit(run_mem(mode=mode, traffic=traffic, stride=stride, delays=delays,
                                 point_seconds=point_seconds, threads=threads, cpus=cpus, latency_cpu=latency_cpu,
                                 buffer=buffer, backend=backend, mlc=mlc, json_out=json_out, csv_out=csv_out,
                                 fmt=fmt))


def _named_for_cli(fn):
    """Re-raise a SpecError with the option's spelling (--point-seconds, not point_seconds)."""
    from xferscope.errors import SpecError

    try:
        return fn()
    except SpecError as exc:
        message = str(exc)[len(exc.field) + 2:]
        raise SpecError(OPTION_NAMES.get(exc.field, exc.field), message) from None


def build_spec(*, mode, traffic, stride, delays, point_seconds, threads, cpus, latency_cpu, buffer, backend, mlc):
    """The MemSpec for these options, validated; errors name the option and the fix."""
    from xferscope.engines.mem import DEFAULT_DELAYS, MemSpec, parse_cpu_list, parse_int_list
    from xferscope.errors import SpecError
    from xferscope.units import parse_duration, parse_size

    try:
        seconds = parse_duration(point_seconds)
    except ValueError as exc:
        raise SpecError("--point-seconds", f"{exc}") from None
    try:
        buffer_bytes = None if buffer is None else parse_size(buffer)
    except ValueError as exc:
        raise SpecError("--buffer", f"{exc}") from None

    def spec():
        return MemSpec(
            mode=mode,
            traffic=tuple(t for t in traffic.replace(" ", "").split(",") if t),
            strides=parse_int_list(stride, "stride"),
            delays=DEFAULT_DELAYS if delays is None else parse_int_list(delays, "delays"),
            point_seconds=seconds,
            threads=threads,
            cpus=None if cpus is None else parse_cpu_list(cpus),
            latency_cpu=latency_cpu,
            buffer_bytes=buffer_bytes,
            backend=backend,
            mlc_path=mlc,
        ).validated()

    return _named_for_cli(spec)


def run_mem(*, fmt: str, json_out: str | None, csv_out: str | None, **options) -> int:
    import sys

    from xferscope.commands.outputs import check_outputs
    from xferscope.engines.mem import MemSweep
    from xferscope.errors import ExitCode, SpecError

    if fmt not in ("table", "json"):
        raise SpecError("--format", f"{fmt!r} is not a format; use table or json")
    check_outputs(fmt, {"--json": json_out, "--csv": csv_out})
    spec = build_spec(**options)
    sweep = _named_for_cli(lambda: MemSweep(spec))
    progress = _Progress(sweep.spec) if sys.stderr.isatty() else None
    interrupted = False
    try:
        for point in sweep:
            if progress:
                progress.advance(point)
    except KeyboardInterrupt:
        interrupted = True
    finally:
        if progress:
            progress.close()
    result = sweep.result
    written = emit_mem(result, fmt, json_out, csv_out)
    if interrupted:
        sys.stderr.write(f"xferscope: interrupted; {len(result.points)} points measured\n")
        return int(ExitCode.INTERRUPTED)
    return written


def emit_mem(result, fmt: str, json_out: str | None, csv_out: str | None) -> int:
    """Print a memory result (MLC's table, or JSON), then write ``--json``/``--csv``; 4 when one could not be
    written (a line says which and why), else 0."""
    from xferscope.commands.outputs import Output, human_output, write_outputs
    from xferscope.engines.mem import csv_text, result_json
    from xferscope.mem_report import emit_result

    try:
        with human_output(json_out, csv_out) as out:
            emit_result(result, fmt, out=out)
    except OSError:  # a closed terminal: the files still get the result
        pass
    return write_outputs([Output("JSON", "--json", json_out, lambda: result_json(result) + "\n"),
                          Output("CSV", "--csv", csv_out, lambda: csv_text(result))])


class _Progress:
    """A live line on stderr: which curve, the last point, how many are left."""

    def __init__(self, spec):
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        strides = len(spec.strides)
        if spec.mode == "idle":
            total = strides
        elif spec.mode == "peak":
            total = len(spec.traffic) * (strides if spec.backend == "builtin" else 1)
        else:
            total = strides * (1 + len(spec.traffic) * len(spec.delays))
        self._progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                  TimeElapsedColumn(), console=Console(stderr=True), transient=True)
        self._task = self._progress.add_task(f"mem {spec.mode} ({spec.backend})", total=total)
        self._progress.start()

    def advance(self, p) -> None:
        parts = [p.traffic, f"stride {p.stride}" if p.stride else ""]
        if p.delay is not None:
            parts.append(f"delay {p.delay:05d}")
        if p.latency_ns is not None:
            parts.append(f"{p.latency_ns:.1f} ns")
        if p.bandwidth_mb_s is not None:
            parts.append(f"{p.bandwidth_mb_s:.1f} MB/s")
        self._progress.update(self._task, advance=1, description=" ".join(x for x in parts if x))

    def close(self) -> None:
        self._progress.stop()
