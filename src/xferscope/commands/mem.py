"""`xferscope mem`: memory latency under load and peak bandwidth, in Intel MLC's shape.

Only typer is imported at module level; the engine, the native core and Rich
are imported when the command runs.
"""

from __future__ import annotations

import dataclasses
from typing import Annotated

import typer

from xferscope.commands.option_groups import takes

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
    "locality": "--locality",
    "pages": "--pages",
    "max_size": "--max-size",
    "per_octave": "--per-octave",
    "plot": "--plot",
}


def _opt(flag: str, text: str) -> typer.models.OptionInfo:
    return typer.Option(flag, help=text)


@dataclasses.dataclass(frozen=True)
class MemOptions:
    """Every option of `xferscope mem`, as ``run_mem`` takes them."""

    mode: Annotated[
        str,
        _opt(
            "--mode",
            "idle | loaded | peak | curve | matrix (MLC's idle latency, loaded latency, max bandwidth table; "
            "lmbench's cache-level curve; MLC's NUMA matrix)",
        ),
    ] = "loaded"
    traffic: Annotated[
        str | None,
        _opt(
            "--traffic",
            "traffic types, comma list: R, W2, W3, W5, W6, W7, W8, W9, W10 (default R; peak: R,W3,W2,W5,W10 as "
            "mlc --max_bandwidth)",
        ),
    ] = None
    stride: Annotated[str, _opt("--stride", "bytes between accesses, comma list (64, 128, 256)")] = "64"
    delays: Annotated[str | None, _opt("--delays", "injection delays, comma list (default: MLC's 19 delays)")] = None
    point_seconds: Annotated[
        str | None,
        _opt("--point-seconds", "measured time per point, e.g. 2, 0.5, 500ms (default 2; curve 0.25; matrix 1)"),
    ] = None
    locality: Annotated[
        str,
        _opt(
            "--locality",
            "latency chase: SIZE (random lines within a window, windows in random order: multichase -T), page, "
            "whole (one random cycle over the buffer) or default (64 pages, multichase's default)",
        ),
    ] = "default"
    whole_idle: Annotated[
        bool,
        _opt(
            "--whole-idle/--no-whole-idle",
            "the idle point also measures the whole-buffer chase (the difference is the page-walk cost)",
        ),
    ] = True
    pages: Annotated[
        str,
        _opt(
            "--pages",
            "4k | thp | 2m | 1g: 4 KiB pages, transparent huge pages, or hugetlbfs pages reserved by the admin",
        ),
    ] = "thp"
    max_size: Annotated[
        str | None, _opt("--max-size", "curve: largest working set (default 8x the last-level cache)")
    ] = None
    per_octave: Annotated[int, _opt("--per-octave", "curve: working-set sizes per doubling")] = 4
    plot: Annotated[
        str | None, _opt("--plot", "curve: draw it into FILE.svg or FILE.png (the loaded-latency curve otherwise)")
    ] = None
    sysfs: Annotated[
        str,
        _opt("--sysfs", "where CPU, cache, NUMA and huge-page facts are read (a host's sysfs mounted elsewhere)"),
    ] = "/sys"
    threads: Annotated[int | None, _opt("--threads", "load threads (default: every CPU but the latency thread's)")] = (
        None
    )
    cpus: Annotated[str | None, _opt("--cpus", "load-thread CPUs like MLC's -k, e.g. 1-15")] = None
    latency_cpu: Annotated[
        int | None, _opt("--latency-cpu", "CPU of the latency thread (default: the first free one)")
    ] = None
    buffer: Annotated[
        str | None,
        _opt("--buffer", "buffer per thread, e.g. 1G (default: 4x the last-level cache, at least 1G for latency)"),
    ] = None
    backend: Annotated[str, _opt("--backend", "builtin | mlc (Intel's binary)")] = "builtin"
    mlc: Annotated[str | None, _opt("--mlc", "path of the mlc binary (default: mlc on PATH)")] = None
    json_out: Annotated[str | None, _opt("--json", "write the result as JSON to FILE")] = None
    csv_out: Annotated[str | None, _opt("--csv", "write one row per point to FILE")] = None
    fmt: Annotated[str, _opt("--format", "table | json on stdout")] = "table"


@takes(MemOptions)
def mem_command(options: MemOptions) -> None:
    """Memory latency against bandwidth at each injection delay, like Intel MLC --loaded_latency."""
    raise typer.Exit(run_mem(**dataclasses.asdict(options)))


def register(app: typer.Typer) -> None:
    app.command("mem")(mem_command)


def _named_for_cli(fn):
    """Re-raise a SpecError with the option's spelling (--point-seconds, not point_seconds)."""
    from xferscope.errors import SpecError

    try:
        return fn()
    except SpecError as exc:
        message = str(exc)[len(exc.field) + 2 :]
        raise SpecError(OPTION_NAMES.get(exc.field, exc.field), message) from None


def build_spec(
    *,
    mode,
    traffic,
    stride,
    delays,
    point_seconds,
    threads,
    cpus,
    latency_cpu,
    buffer,
    backend,
    mlc,
    locality="default",
    whole_idle=True,
    pages="thp",
    max_size=None,
    per_octave=4,
    sysfs="/sys",
):
    """The MemSpec for these options, validated; errors name the option and the fix."""
    from xferscope.errors import SpecError
    from xferscope.memory.sweep import DEFAULT_DELAYS, MemSpec, parse_cpu_list, parse_int_list
    from xferscope.units import parse_duration, parse_size

    try:
        seconds = None if point_seconds is None else parse_duration(point_seconds)
    except ValueError as exc:
        raise SpecError("--point-seconds", f"{exc}") from None
    sizes = {}
    for option, text in (("--buffer", buffer), ("--max-size", max_size)):
        try:
            sizes[option] = None if text is None else parse_size(text)
        except ValueError as exc:
            raise SpecError(option, f"{exc}") from None

    def spec():
        return MemSpec(
            mode=mode,
            traffic=None if traffic is None else tuple(t for t in traffic.replace(" ", "").split(",") if t),
            strides=parse_int_list(stride, "stride"),
            delays=DEFAULT_DELAYS if delays is None else parse_int_list(delays, "delays"),
            point_seconds=seconds,
            threads=threads,
            cpus=None if cpus is None else parse_cpu_list(cpus),
            latency_cpu=latency_cpu,
            buffer_bytes=sizes["--buffer"],
            backend=backend,
            mlc_path=mlc,
            locality=locality,
            whole_idle=whole_idle,
            pages=pages,
            max_size=sizes["--max-size"],
            per_octave=per_octave,
            sysfs=sysfs,
        ).validated()

    return _named_for_cli(spec)


def run_mem(*, fmt: str, json_out: str | None, csv_out: str | None, plot: str | None = None, **options) -> int:
    import sys

    from xferscope.errors import ExitCode, RunFailed, SpecError
    from xferscope.memory.runner import MemRun
    from xferscope.output.files import check_outputs
    from xferscope.output.mem import emit_mem

    if fmt not in ("table", "json"):
        raise SpecError("--format", f"{fmt!r} is not a format; use table or json")
    if plot:
        from xferscope.sweep.plot import check_plot_path

        _named_for_cli(lambda: check_plot_path(plot))
    check_outputs(fmt, {"--json": json_out, "--csv": csv_out, "--plot": plot})
    spec = build_spec(**options)
    sweep = _named_for_cli(lambda: MemRun(spec))
    progress = _Progress(sweep.spec, sweep.expected_points()) if sys.stderr.isatty() else None
    interrupted = False
    try:
        for point in sweep:
            if progress:
                progress.advance(point)
    except KeyboardInterrupt:
        interrupted = True
    except RunFailed:  # the engine failed or its process died: what it measured is shown and saved first
        if progress:
            progress.close()
            progress = None
        if sweep.result.points:
            emit_mem(sweep.result, fmt, json_out, csv_out, plot)
        raise
    finally:
        if progress:
            progress.close()
    result = sweep.result
    written = emit_mem(result, fmt, json_out, csv_out, plot)
    if interrupted:
        sys.stderr.write(f"xferscope: interrupted; {len(result.points)} points measured\n")
        return int(ExitCode.INTERRUPTED)
    return written


class _Progress:
    """A live line on stderr: which curve, the last point, how many are left."""

    def __init__(self, spec, expected_points: int):
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        total = expected_points
        self._progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=Console(stderr=True),
            transient=True,
        )
        self._task = self._progress.add_task(f"mem {spec.mode} ({spec.backend})", total=total)
        self._progress.start()

    def advance(self, p) -> None:
        from xferscope.units import format_size

        parts = [p.traffic, f"stride {p.stride}" if p.stride else "", p.locality or ""]
        if p.traffic == "curve" and p.size_bytes:
            parts.append(format_size(p.size_bytes))
        if p.cpu_node is not None:
            parts.append(f"CPU node {p.cpu_node} -> memory node {p.mem_node}")
        if p.delay is not None:
            parts.append(f"delay {p.delay:05d}")
        if p.latency_ns is not None:
            parts.append(f"{p.latency_ns:.1f} ns")
        if p.bandwidth_mb_s is not None:
            parts.append(f"{p.bandwidth_mb_s:.1f} MB/s")
        self._progress.update(self._task, advance=1, description=" ".join(x for x in parts if x))

    def close(self) -> None:
        self._progress.stop()
