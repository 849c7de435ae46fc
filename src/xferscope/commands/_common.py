"""What every subcommand shares: one mapping from errors to one-line messages and exit codes."""

from __future__ import annotations

import sys
from collections.abc import Callable

import typer

try:  # typer >= 0.22 carries its own copy of click
    from typer._click import exceptions as _click_exc
except ImportError:  # pragma: no cover - older typer on top of click
    from click import exceptions as _click_exc

from xferscope.errors import ExitCode, XferscopeError

_ClickExit = getattr(_click_exc, "Exit", typer.Exit)  # click's own Exit, where this click has one


def fail(message: str, code: int = ExitCode.USAGE) -> typer.Exit:
    """Print one line on stderr and return the Exit to raise."""
    typer.echo(f"xferscope: {message}", err=True)
    return typer.Exit(int(code))


def run_app(app: typer.Typer, argv: list[str] | None = None) -> int:
    """Run the typer app; turn every known error into one line and an exit code, never a traceback."""
    command = typer.main.get_command(app)
    try:
        # without standalone mode, click returns the code of a typer.Exit instead of raising it
        code = command.main(args=argv, prog_name="xferscope", standalone_mode=False)
        return code if isinstance(code, int) else 0
    except XferscopeError as exc:
        typer.echo(f"xferscope: {exc}", err=True)
        return int(exc.exit_code)
    except (typer.Exit, _ClickExit) as exc:
        return int(getattr(exc, "exit_code", 0) or 0)
    except typer.Abort:
        typer.echo("xferscope: interrupted", err=True)
        return int(ExitCode.INTERRUPTED)
    except _click_exc.ClickException as exc:
        exc.show(file=sys.stderr)
        return int(exc.exit_code or ExitCode.USAGE)
    except KeyboardInterrupt:
        typer.echo("xferscope: interrupted", err=True)
        return int(ExitCode.INTERRUPTED)
    except BrokenPipeError:
        return 0


def guarded(fn: Callable[[], int | None]) -> int:
    """Call ``fn`` and map xferscope errors to an exit code (for commands that run nested work)."""
    try:
        return int(fn() or 0)
    except XferscopeError as exc:
        typer.echo(f"xferscope: {exc}", err=True)
        return int(exc.exit_code)
