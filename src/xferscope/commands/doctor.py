"""`xferscope doctor`: is this machine ready for each path, and if not, what to do."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from xferscope.errors import ExitCode, SpecError


def doctor_command(
    directory: Annotated[
        str | None,
        typer.Option("--dir", "-D", help="directory to check for scratch files (default: where runs put them)"),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print the report as JSON")] = False,
    ceilings: Annotated[
        bool,
        typer.Option(
            "--ceilings",
            help="also measure each path's own ceiling: host, bounce and bounce-async reading a file held in the "
            "page cache (--source cache, 1M x 4 workers, 2 s each), so that storage drops out",
        ),
    ] = False,
    quick: Annotated[
        bool,
        typer.Option(
            "--quick",
            help="skip the checks that measure (the buffer-set probe: what reads into 16 and 64 buffers a worker "
            "cost against one, about 8 s)",
        ),
    ] = False,
) -> None:
    """Check drivers, cuFile, the filesystem under --dir, IOMMU, PCIe links and NUMA affinity, and measure what
    a larger set of buffers costs a read there.

    Exit status 1 when a check fails. Fixes are printed, never applied.
    """
    import os

    from xferscope.doctor import format_report, run_checks

    if directory is not None and not os.path.isdir(directory):
        raise SpecError("dir", f"{directory} is not a directory")
    report = run_checks(directory, ceilings=ceilings, probes=not quick)
    typer.echo(json.dumps(report, indent=2) if as_json else format_report(report))
    if report["summary"]["fail"]:
        raise typer.Exit(int(ExitCode.RUN_FAILED))


def register(app: typer.Typer) -> None:
    app.command("doctor")(doctor_command)
