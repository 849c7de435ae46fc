"""`xferscope tui` (the default): opens the Textual console. Textual is imported only when it opens."""

from __future__ import annotations

import typer

from xferscope.errors import SpecError


def _machine():
    """GPUs for the picker, and which paths can run here (with the reason when not)."""
    from xferscope.app.app import Machine
    from xferscope.engines.registry import availability, engine_class
    from xferscope.gpus import gpu_count
    from xferscope.isolation import ChildDied, call
    from xferscope.telemetry.gpu import inventory_and_reason

    avail = availability()
    descriptions = {path: engine_class(path).description for path, reason in avail.items() if reason is None}
    gpus: list[tuple[str, int]] = []
    try:  # NVML in a process of its own: a crash there is "no GPU list", not a console that never opens
        inventory, reason = call(inventory_and_reason, what="the GPU list", timeout=120)
        gpus = [(gpu_label(g), int(g["index"])) for g in inventory]
        reason = "" if gpus else (reason or "")
    except ChildDied as exc:
        reason = f"cannot tell: {exc}"
    if not gpus and not reason:
        reason = gpu_count()[1]
    return Machine(gpus, reason, avail, descriptions)


def gpu_label(g: dict) -> str:
    """'0: NVIDIA H100 80GB HBM3 · PCIe gen5 x16 · 80 GiB' from an inventory entry."""
    parts = [f"{g['index']}: {g.get('name', 'GPU')}"]
    if g.get("link_gen") and g.get("link_width"):
        link = f"PCIe gen{g['link_gen']} x{g['link_width']}"
        if (g.get("link_gen_max"), g.get("link_width_max")) not in ((None, None), (g["link_gen"], g["link_width"])):
            link += f" (max gen{g.get('link_gen_max')} x{g.get('link_width_max')})"
        parts.append(link)
    if g.get("mem_total_mib"):
        parts.append(f"{g['mem_total_mib'] / 1024:.0f} GiB")
    return " · ".join(parts)


def console_options(
    start: bool = False,
    profile: str | None = None,
    duration: float | None = None,
    path: str | None = None,
    directory: str | None = None,
    file: str | None = None,
    bs: str | None = None,
    workers: int | None = None,
    iodepth: int | None = None,
    size: str | None = None,
    io: str | None = None,
    buffered: bool = False,
    export_to: str | None = None,
):
    """What the console opens on: the embedded default (or a profile) with the overrides applied."""
    from xferscope.app.app import ConsoleOptions
    from xferscope.app.setup_model import FormValues, default_paths

    machine = _machine()
    values = FormValues(paths=[path] if path else default_paths(machine.availability))
    profile_name = profile_points = mem_points = saturate_plan = None
    repetitions = 1
    if profile:
        from xferscope.app.profile_io import open_profile

        profile_name, kind, points, repetitions = open_profile(profile, duration)
        if kind == "mem":
            mem_points = points
        elif kind == "saturate":
            saturate_plan = points[0]
        else:
            profile_points = points
            values = FormValues.from_spec(points[0], list(dict.fromkeys(p.path for p in points)))
    for key, value in {"io": io, "bs": bs, "workers": workers, "iodepth": iodepth, "size": size}.items():
        if value is not None:
            setattr(values, key, str(value))
            profile_points = None  # the command line changed the profile: run the form as shown
    if directory or file:
        values.typed_path = directory or file
        profile_points = None
    if buffered:
        values.buffered = True
        profile_points = None
    if duration is not None:
        values.duration = f"{duration:g}"
    return ConsoleOptions(
        values,
        machine,
        start=start,
        profile_name=profile_name,
        profile_points=profile_points,
        profile_repetitions=repetitions,
        mem_points=mem_points,
        saturate_plan=saturate_plan,
        export_to=export_to,
    )


def open_console(start: bool = False, profile: str | None = None, duration: float | None = None, **overrides) -> int:
    """Open the console on the embedded default (or a profile); returns the exit code.

    ``overrides``: path, directory, file, io, bs, workers, iodepth, size, buffered, export_to
    (see ``console_options``).
    """
    from xferscope.app.app import XferscopeApp

    app = XferscopeApp(console_options(start=start, profile=profile, duration=duration, **overrides))
    restore = _end_on_hangup(app)
    try:
        app.run()
    finally:
        app.wait_for_runs()
        restore()
    return int(app.return_code or 0)


def _end_on_hangup(app):
    """SIGHUP (the terminal or SSH session closed) and SIGTERM end the console in any screen or phase:
    the run in progress is stopped, its engine's process removes its files, the console leaves. Returns
    what puts the previous handlers back."""
    import asyncio
    import signal
    import threading

    def handler(signum, frame):
        if app.batch is not None:
            app.batch.stop()
        try:
            asyncio.get_running_loop().call_soon_threadsafe(lambda: app.exit(None, 128 + signum))
        except RuntimeError:  # the console is not running (yet, or any more)
            raise KeyboardInterrupt from None
        threading.Thread(target=_leave_soon, args=(app, 128 + signum), name="xferscope-hangup", daemon=True).start()

    previous = {}
    for sig in (signal.SIGHUP, signal.SIGTERM):
        try:
            previous[sig] = signal.signal(sig, handler)
        except (ValueError, OSError):
            pass

    def restore():
        for sig, old in previous.items():
            signal.signal(sig, old)

    return restore


#: after a hang-up, how long the console gets to leave by itself once its runs are closed
LEAVE_GRACE_S = 5.0


def _leave_soon(app, code: int) -> None:
    """With its terminal gone, Textual can block for good writing to it (its writer thread dies on the
    first failed write and the queue to it fills). Once the runs are stopped and their files removed,
    leave, whether or not Textual has finished."""
    import os
    import sys
    import time

    app.wait_for_runs(30.0)
    time.sleep(LEAVE_GRACE_S)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


def tui_command(
    start: bool = typer.Option(False, "--start", help="start the default (or the profile) at once"),
    profile: str | None = typer.Option(None, "--profile", help="open a profile (name or .toml path)"),
    duration: str | None = typer.Option(None, "--duration", "-T", help="seconds per run"),
    path: str | None = typer.Option(None, "--path", "-x", help="transfer path instead of the default ones"),
    directory: str | None = typer.Option(None, "--dir", "-D", help="directory for the scratch files"),
    file: str | None = typer.Option(None, "--file", "-f", help="file to read (or create as scratch)"),
    io: str | None = typer.Option(None, "--io", "-I", help="read, write, randread, randwrite, randrw, rw"),
    bs: str | None = typer.Option(None, "--bs", "-i", help="block size, e.g. 64K"),
    workers: int | None = typer.Option(None, "--workers", "-w", help="worker threads"),
    iodepth: int | None = typer.Option(None, "--iodepth", "--qd", help="I/O in flight per worker"),
    size: str | None = typer.Option(None, "--size", "-s", help="scratch file size, e.g. 256M"),
    buffered: bool = typer.Option(False, "--buffered", help="through the page cache (no O_DIRECT)"),
) -> None:
    """Open the live console (the default command)."""
    from xferscope.commands.options import parse_io, parse_path
    from xferscope.units import parse_duration

    if directory and file:
        raise SpecError("file", "give either --file or --dir, not both")
    try:
        seconds = parse_duration(duration) if duration is not None else None
    except ValueError as exc:
        raise SpecError("duration", str(exc)) from None
    code = open_console(
        start=start,
        profile=profile,
        duration=seconds,
        path=parse_path(path) if path else None,
        directory=directory,
        file=file,
        io=parse_io(io) if io else None,
        bs=bs,
        workers=workers,
        iodepth=iodepth,
        size=size,
        buffered=buffered,
    )
    raise typer.Exit(code)


def register(app: typer.Typer) -> None:
    app.command("tui")(tui_command)
