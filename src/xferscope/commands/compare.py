"""`xferscope compare`: several transfer paths with one spec, one after another, side by side."""
from __future__ import annotations

import sys

import typer

from xferscope.commands.options import (BsOpt, BufferedOpt, CpusOpt, CsvOpt, DepthOpt, DirOpt, DurationOpt,
                                        FileOpt, ForceOpt, FormatOpt, GpuOpt, IntervalOpt, IoOpt, JsonOpt, KeepOpt,
                                        HugePagesOpt, MixOpt, MpiOpt, NumaOpt, RegisterOpt, SeedOpt, SizeOpt, TotalOpt, VerifyOpt, WorkersOpt,
                                        build_spec, parse_path)
from xferscope.commands.run import (_Progress, check_format, emit, exit_leaving_stuck_workers,
                                    install_hangup_handlers)
from xferscope.errors import ExitCode, SpecError


def print_compare(results) -> None:
    from xferscope.report import compare_table, gdsio_line, print_table

    for r in results:
        typer.echo(gdsio_line(r))
    print_table(compare_table(results, title=f"ratio against {results[0].spec.path}"))
    for r in results:
        if r.labels:
            typer.echo(f"{r.spec.path}: " + ", ".join(r.labels))


def compare_command(
    paths: str = typer.Option("host,bounce,bounce-async,cufile", "--paths", "-P",
                              help="comma list of paths (or gdsio -x numbers); the first is the baseline"),
    io: IoOpt = "read", bs: BsOpt = "1M", workers: WorkersOpt = 1, iodepth: DepthOpt = 1, size: SizeOpt = "1G",
    duration: DurationOpt = None, total: TotalOpt = None, file: FileOpt = None, directory: DirOpt = None,
    gpu: GpuOpt = None, numa: NumaOpt = None, cpus: CpusOpt = None, rwmix: MixOpt = 70, verify: VerifyOpt = False,
    buffered: BufferedOpt = False, force: ForceOpt = False, keep: KeepOpt = False, json_path: JsonOpt = None,
    csv_path: CsvOpt = None, fmt: FormatOpt = "table", interval: IntervalOpt = 0.1, seed: SeedOpt = 0x5EED,
    skip_unavailable: bool = typer.Option(False, "--skip-unavailable",
                                          help="leave out paths that cannot run here instead of failing"),
    drop_cache: bool = typer.Option(True, "--drop-cache/--no-drop-cache",
                                    help="drop the page cache between runs (needs root; warns otherwise)"),
    mpi: MpiOpt = False, register: RegisterOpt = True, huge_pages: HugePagesOpt = False,
) -> None:
    """Run several paths with the same spec and print them side by side (seed 001's table)."""
    from xferscope.engines.registry import unavailable_reason
    from xferscope.errors import EngineUnavailable
    from xferscope.runner import Run
    from xferscope.target import drop_page_cache

    check_format(fmt)

    def make_specs():
        names = [parse_path(p) for p in paths.split(",") if p.strip()]
        if not names:
            raise SpecError("paths", "give at least one path, e.g. --paths host,bounce")
        specs = []
        for name in names:
            reason = unavailable_reason(name)
            if reason:
                if skip_unavailable:
                    typer.echo(f"xferscope: skipping {name}: {reason}", err=True)
                    continue
                raise EngineUnavailable(name, reason + " (use --skip-unavailable to compare the others)")
            specs.append(build_spec(path=name, io=io, bs=bs, workers=workers, iodepth=iodepth, size=size,
                                    duration=duration, total=total, file=file, directory=directory, gpu=gpu,
                                    numa=numa, cpus=cpus, rwmix=rwmix, verify=verify, buffered=buffered, force=force,
                                    keep=keep, interval=interval, seed=seed, register=register, huge_pages=huge_pages))
        if not specs:
            raise EngineUnavailable(",".join(names), "none of these paths can run here")
        return specs

    if mpi:
        from xferscope.cluster.commands import compare_mpi

        return compare_mpi(make_specs, gpu_given=gpu is not None, drop_cache=drop_cache, fmt=fmt,
                           json_path=json_path, csv_path=csv_path)
    specs = make_specs()
    install_hangup_handlers()
    # one scratch file for all paths when none is given, so every path reads the same data
    shared_tmp = None
    if not file and not directory:
        import tempfile

        from xferscope.target import default_scratch_parent

        shared_tmp = tempfile.mkdtemp(prefix="xferscope-compare-", dir=default_scratch_parent()[0])
        specs = [s.replace(file=f"{shared_tmp}/xferscope-scratch.dat", keep=True) for s in specs]
    results = []
    warned = False
    stuck_run = None
    try:
        for i, spec in enumerate(specs):
            if i and drop_cache and not drop_page_cache() and not warned:
                typer.echo("xferscope: cannot drop the page cache (not root); buffered figures may be cached",
                           err=True)
                warned = True
            progress = _Progress(sys.stderr.isatty() and fmt != "json", spec.duration)
            if progress.enabled:
                sys.stderr.write(f"{spec.path}:\n")
            run = Run(spec)
            try:
                results.append(run.execute(on_sample=progress.sample, progress=progress.fill))
            except KeyboardInterrupt:
                progress.clear()
                if run.result is not None:
                    results.append(run.result)
                break
            except Exception as exc:
                progress.clear()
                partial = getattr(exc, "result", None)
                if partial is None:
                    raise
                results.append(partial)
                typer.echo(f"xferscope: {exc}", err=True)
            progress.clear()
            if run.stuck:
                stuck_run = run
            if results and results[-1].status == "interrupted":
                break
    finally:
        if shared_tmp:
            import shutil

            shutil.rmtree(shared_tmp, ignore_errors=True)
    if not results:
        raise typer.Exit(int(ExitCode.INTERRUPTED))
    emit(results, fmt=fmt, json_path=json_path, csv_path=csv_path, printer=print_compare)
    if stuck_run is not None:
        exit_leaving_stuck_workers(stuck_run.result.error if stuck_run.result else None)
    if any(r.status == "interrupted" for r in results) or len(results) < len(specs):
        typer.echo("xferscope: interrupted; results so far are above", err=True)
        raise typer.Exit(int(ExitCode.INTERRUPTED))
    if any(r.status == "failed" for r in results):
        raise typer.Exit(int(ExitCode.RUN_FAILED))


def register(app: typer.Typer) -> None:
    app.command("compare")(compare_command)
