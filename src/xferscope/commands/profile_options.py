"""A profile's [workload] fields run as the workload command's own options: each field names an option as its
command line spells it (without the dashes), or the command's argument by its name (``preset``, ``model``), so the
command declares each option once and parses, checks and documents it for the command line and the profile alike
(``workload_kinds``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import typer

from xferscope.errors import SpecError
from xferscope.profiles.fields import OptionValue

#: names profiles written before their fields were the commands' options used, and the option each means
FIELD_ALIASES = {"gpus": "gpu", "block_size": "bs", "type": "accelerator_type", "a": "accelerators"}


class CommandOption(Protocol):
    """What of a click option (typer's own copy of click's, or click's) a field is turned into."""

    name: str | None
    opts: list[str]
    secondary_opts: list[str]
    is_flag: bool
    default: object


def _options(command: Any) -> dict[str, CommandOption]:
    """The command's options by every name a field may use: its parameter's name and each long option's. (By what
    they are, not their class: typer brings click's classes with it from 0.28 on, and click's before.)"""
    named: dict[str, CommandOption] = {}
    for param in command.params:
        if getattr(param, "param_type_name", None) == "option":
            for name in (param.name, *(o.lstrip("-").replace("-", "_") for o in param.opts if o.startswith("--"))):
                if name:
                    named[name] = param
    return named


def command_line(command: Any, fields: dict[str, OptionValue], what: str) -> list[str]:
    """``fields`` as the command's arguments (SpecError names a field the command has no option for, or a flag
    given something other than true or false)."""
    options = _options(command)
    arguments = [p for p in command.params if getattr(p, "param_type_name", None) == "argument"]
    for a in arguments:
        if a.required and a.name not in fields:
            raise SpecError(a.name, f"[workload] needs {a.name}, {what}'s argument (see xferscope {what} --help)")
    argv: list[str] = [str(fields[a.name]) for a in arguments if a.name in fields]
    for key, value in fields.items():
        if any(a.name == key for a in arguments):
            continue
        option = options.get(key) or options.get(FIELD_ALIASES.get(key, key))
        if option is None:
            raise SpecError(key, f"{what} has no option --{key.replace('_', '-')} (see xferscope {what} --help)")
        name = max((o for o in option.opts if o.startswith("--")), key=len, default=option.opts[0])
        if not option.is_flag:
            argv += [name, ",".join(map(str, value)) if isinstance(value, list) else str(value)]
        elif value is True:
            argv.append(name)
        elif value is not False:
            raise SpecError(key, f"true or false, got {value!r}")
        elif option.secondary_opts:
            argv.append(max(option.secondary_opts, key=len))
        elif option.default:
            raise SpecError(key, f"{name} has no off switch: leave it out")
    return argv


def command_of(function: Callable[..., None], name: str) -> Any:
    """The click command typer makes of the workload command ``function`` (``xferscope workload NAME``)."""
    app = typer.Typer(add_completion=False)
    app.command(name)(function)
    return typer.main.get_command(app)


def run_as_command(command: Any, name: str, fields: dict[str, OptionValue], extra: dict[str, str | None]) -> None:
    """Run the workload's click ``command`` (``command_of``: ``xferscope workload NAME``) with a profile's ``fields``
    and the replay's own options ``extra`` (which win), as its command line would: the same parsing, checks and
    errors."""
    what = f"workload {name}"
    argv = command_line(command, {**fields, **{k: v for k, v in extra.items() if v is not None}}, what)
    try:
        code = command.main(args=argv, prog_name=f"xferscope {what}", standalone_mode=False)
    except Exception as exc:
        if getattr(exc, "exit_code", None) != 2 or not hasattr(exc, "format_message"):
            raise
        raise SpecError("workload", f"{what}: {exc.format_message()}") from None  # click's usage errors
    if code:
        raise typer.Exit(code)
