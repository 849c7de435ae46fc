"""`xferscope run`: one transfer path, headless, with gdsio's result line and what gdsio leaves out."""
from __future__ import annotations

import signal
import sys

import typer

from xferscope.commands.options import (BsOpt, BufferedOpt, CpusOpt, CsvOpt, DepthOpt, DirOpt, DurationOpt,
                                        FileOpt, ForceOpt, FormatOpt, GpuOpt, IntervalOpt, IoOpt, JsonOpt, KeepOpt,
                                        HugePagesOpt, MixOpt, MpiOpt, NumaOpt, RegisterOpt, SeedOpt, SizeOpt, SplitOpt,
                                        TotalOpt, VerifyOpt, WorkersOpt, build_spec)
from xferscope.commands.outputs import check_outputs, emit
from xferscope.errors import ExitCode, SpecError


class _Progress:
    """A live progress line on stderr (only on a terminal), at most 4 updates a second."""

    def __init__(self, enabled: bool, duration: float | None):
        self.enabled = enabled
        self.duration = duration
        self._last = 0.0
        self._shown = False

    def sample(self, s) -> None:
        if not self.enabled or s is None or s.t - self._last < 0.25:
            return
        from xferscope.report import progress_text

        self._last = s.t
        self._write("\r\033[K" + progress_text(s, self.duration))

    def fill(self, done: int, total: int) -> None:
        if self.enabled:
            self._write(f"\r\033[Kcreating scratch file: {100 * done // max(total, 1)}%")

    def clear(self) -> None:
        if self._shown:
            self._write("\r\033[K")
            self._shown = False

    def _write(self, text: str) -> None:
        try:
            sys.stderr.write(text)
            sys.stderr.flush()
            self._shown = True
        except OSError:  # terminal gone (closed SSH session): keep measuring
            self.enabled = False


def install_hangup_handlers() -> None:
    """SIGTERM and SIGHUP (closed SSH session) stop a run like Ctrl-C: results kept, files removed."""
    def handler(signum, frame):
        raise KeyboardInterrupt

    for sig in (signal.SIGTERM, signal.SIGHUP):
        try:
            signal.signal(sig, handler)
        except (ValueError, OSError):
            pass


def print_run(results) -> None:
    from xferscope.report import done_line, extras_line, gdsio_line

    for r in results:
        typer.echo(gdsio_line(r))
        typer.echo(extras_line(r))
        line = done_line(r)
        if line:
            typer.echo(line)


def check_format(fmt: str) -> str:
    if fmt not in ("table", "json"):
        raise SpecError("format", f"{fmt!r} is not one of table, json")
    return fmt


def run_command(
    path: str = typer.Option("host", "--path", "-x", help="host, bounce, bounce-async, cufile, cufile-batch, "
                                                          "cufile-async (or gdsio's -x number)"),
    io: IoOpt = "read", bs: BsOpt = "1M", workers: WorkersOpt = 1, iodepth: DepthOpt = 1, size: SizeOpt = "1G",
    duration: DurationOpt = None, total: TotalOpt = None, file: FileOpt = None, directory: DirOpt = None,
    gpu: GpuOpt = None, numa: NumaOpt = None, cpus: CpusOpt = None, rwmix: MixOpt = 70, verify: VerifyOpt = False,
    buffered: BufferedOpt = False, force: ForceOpt = False, keep: KeepOpt = False, json_path: JsonOpt = None,
    csv_path: CsvOpt = None, fmt: FormatOpt = "table", interval: IntervalOpt = 0.1, seed: SeedOpt = 0x5EED,
    mpi: MpiOpt = False, register: RegisterOpt = True, huge_pages: HugePagesOpt = False, split: SplitOpt = None,
) -> None:
    """Run one transfer path and print gdsio's result line plus percentiles and CPU cost."""
    from xferscope.runner import Run

    check_format(fmt)
    check_outputs(fmt, {"--json": json_path, "--csv": csv_path}, folders=not mpi)
    spec_args = dict(path=path, io=io, bs=bs, workers=workers, iodepth=iodepth, size=size, duration=duration,
                     total=total, file=file, directory=directory, gpu=gpu, numa=numa, cpus=cpus, rwmix=rwmix,
                     verify=verify, buffered=buffered, force=force, keep=keep, interval=interval, seed=seed,
                     register=register, huge_pages=huge_pages, split=split)
    if mpi:
        from xferscope.cluster.commands import run_mpi

        return run_mpi(lambda: build_spec(**spec_args), gpu_given=gpu is not None, fmt=fmt, json_path=json_path,
                       csv_path=csv_path)
    spec = build_spec(**spec_args)
    install_hangup_handlers()
    progress = _Progress(sys.stderr.isatty() and fmt != "json", spec.duration)
    run = Run(spec)
    execute_and_report(lambda: run.execute(on_sample=progress.sample, progress=progress.fill), progress,
                       fmt=fmt, json_path=json_path, csv_path=csv_path, printer=print_run)


def execute_and_report(execute, progress, *, fmt: str, json_path: str | None, csv_path: str | None,
                       printer) -> None:
    """Call ``execute()`` for one result, then print and save it; a failure's partial result is printed and
    saved before the error goes on; an interrupted run exits 130, a file not written 4. ``None`` from
    ``execute``: nothing to say."""
    try:
        result = execute()
    except Exception as exc:
        progress.clear()
        partial = getattr(exc, "result", None)
        if partial is not None:
            emit([partial], fmt=fmt, json_path=json_path, csv_path=csv_path, printer=printer)
        raise
    progress.clear()
    if result is None:
        return
    written = emit([result], fmt=fmt, json_path=json_path, csv_path=csv_path, printer=printer)
    if result.status == "interrupted":
        typer.echo("xferscope: interrupted; results so far are above", err=True)
        raise typer.Exit(int(ExitCode.INTERRUPTED))
    if written:
        raise typer.Exit(written)


def register(app: typer.Typer) -> None:
    app.command("run", no_args_is_help=False)(run_command)
