"""The `xferscope` command line.

Each subcommand lives in its own module under ``xferscope.commands`` and
registers itself with ``register(app)``. A command line that names a subcommand
imports and builds that one alone (the others' modules and options cost every
run 0.05-0.1 s of CPU); one that names none, or asks for help, gets them all.
Nothing here imports Textual: the console is imported only when ``tui`` (the
default) actually runs, so headless runs start fast.
"""

from __future__ import annotations

import importlib
import sys

import typer

#: each subcommand's name and the module under ``xferscope.commands`` that registers it, in the order help lists them
COMMAND_MODULES = {
    "tui": "tui",
    "run": "run",
    "compare": "compare",
    "saturate": "saturate",
    "mem": "mem",
    "replay": "replay",
    "profiles": "profiles",
    "import": "imports",
    "doctor": "doctor",
    "workload": "workload",
    "schema": "schema",
}

app = typer.Typer(
    name="xferscope",
    help="How fast does data get from this storage (or memory) into this GPU, by which path, at what CPU cost?",
    no_args_is_help=False,
    add_completion=False,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


@app.callback(invoke_without_command=True)
def _default(ctx: typer.Context) -> None:
    """With no subcommand, open the console on its embedded default."""
    if ctx.invoked_subcommand is None:
        from xferscope.commands.tui import open_console

        raise typer.Exit(open_console())


def register(argv: list[str]) -> None:
    """Register the subcommand ``argv`` names first, or every one when it names none (the console, help, a typo)."""
    named = COMMAND_MODULES.get(argv[0]) if argv else None
    for module in [named] if named else COMMAND_MODULES.values():
        importlib.import_module(f"xferscope.commands.{module}").register(app)


def main() -> None:
    import faulthandler
    import signal

    from xferscope.commands._common import run_app

    if hasattr(signal, "SIGUSR2"):  # `kill -USR2 PID`: every thread's stack on stderr, and the command goes on
        faulthandler.register(signal.SIGUSR2, all_threads=True)
    register(sys.argv[1:])
    sys.exit(run_app(app))


if __name__ == "__main__":
    main()
