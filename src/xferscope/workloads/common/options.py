"""A workload's options, declared once, in its own package: a frozen dataclass whose fields carry ``Opt`` (how the
command line spells the option, and its help) in their annotations, and whose methods turn them into the spec's
fields. The CLI makes each field an option (``commands.option_groups.takes``), a profile's [workload] fields are
those options, and the console's forms build the same dataclass from their text (``from_text``): one parse, one
default and one check of each option wherever it is given."""

from __future__ import annotations

import types
import typing
from typing import Any, NamedTuple, TypeVar

from xferscope.errors import SpecError
from xferscope.units import parse_duration, parse_size

T = TypeVar("T")


class Opt(NamedTuple):
    """How an option is spelled on the command line (``--tp``, ``--fsync/--no-fsync``, ``-d``) and what it does."""

    flags: tuple[str, ...]
    help: str


def opt(*flags: str, help: str) -> Opt:
    return Opt(flags, help)


def declared(group: type) -> dict[str, tuple[Any, Opt | None]]:
    """Each field of an options dataclass: its type (without the ``Annotated``) and its ``Opt``."""
    out: dict[str, tuple[Any, Opt | None]] = {}
    for name, hint in typing.get_type_hints(group, include_extras=True).items():
        found = [m for m in getattr(hint, "__metadata__", ()) if isinstance(m, Opt)]
        out[name] = (getattr(hint, "__origin__", hint) if found else hint, found[0] if found else None)
    return out


def flag_name(option: Opt | None, field: str) -> str:
    """The name a one-line error gives the option: its long flag without the dashes (``prompt-tokens``)."""
    longs = [f for f in option.flags if f.startswith("--")] if option else []
    return longs[0].split("/")[0].lstrip("-") if longs else field.replace("_", "-")


def _typed(text: str, kind: Any, name: str) -> Any:
    """Typed text as a field of type ``kind`` (int, float, bool or str, or one of them or None)."""
    options = [k for k in typing.get_args(kind) if k is not type(None)] if _is_union(kind) else [kind]
    target = options[0] if options else str
    if target is bool:
        if text.lower() in ("true", "yes", "on", "1"):
            return True
        if text.lower() in ("false", "no", "off", "0"):
            return False
        raise SpecError(name, f"yes or no, got {text!r}")
    if target in (int, float):
        try:
            return target(text)
        except ValueError:
            raise SpecError(name, f"not {'a whole number' if target is int else 'a number'}: {text!r}") from None
    return text


def _is_union(kind: Any) -> bool:
    return typing.get_origin(kind) in (typing.Union, types.UnionType)


def from_text(group: type[T], texts: dict[str, str]) -> T:
    """The options dataclass ``group`` from a form's text by field name: each converted as its type says (SpecError
    names the option), left empty: the option's default."""
    fields = declared(group)
    values: dict[str, Any] = {}
    for name, text in texts.items():
        kind, option = fields[name]
        if text.strip():
            values[name] = _typed(text.strip(), kind, flag_name(option, name))
    return group(**values)


def optional_size(text: str | None, field: str) -> int | None:
    """A size the user may leave out (None stays None); a bad one is one line naming the option."""
    return _parsed(parse_size, text, field)


def optional_duration(text: str | None, field: str) -> float | None:
    """Seconds the user may leave out (10, 500ms, 2m); a bad one is one line naming the option."""
    return _parsed(parse_duration, text, field)


def _parsed(parse: Any, text: str | None, field: str) -> Any:
    if text is None:
        return None
    try:
        return parse(text)
    except ValueError as exc:
        raise SpecError(field, str(exc)) from None


__all__ = ["Opt", "declared", "flag_name", "from_text", "opt", "optional_duration", "optional_size"]
