"""A workload's options, declared once, in its own package: frozen dataclasses whose fields carry ``Opt`` (how the
command line spells the option, and its help) in their annotations, and whose methods turn them into the spec's
fields; and its command (``CommandShape``): its help, its argument, its option groups and what it makes of them
(``Given`` -> what to run). The CLI builds `workload NAME` from it (``commands.workload_kinds``), a profile's [workload]
fields are its options, and the console's forms build the same dataclasses from their text (``from_text``): one
parse, one default and one check of each option wherever it is given."""

from __future__ import annotations

import types
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

from xferscope.errors import SpecError
from xferscope.spec import parse_int_list
from xferscope.units import parse_duration, parse_size

if TYPE_CHECKING:
    from xferscope.workloads.common.run_options import RunOptions

T = TypeVar("T")


class Opt(NamedTuple):
    """How an option is spelled on the command line (``--tp``, ``--fsync/--no-fsync``, ``-d``) and what it does."""

    flags: tuple[str, ...]
    help: str


def opt(*flags: str, help: str) -> Opt:
    return Opt(flags, help)


class Arg(NamedTuple):
    """A command's argument: its name (a profile's field), its help, and its default (None: it must be given)."""

    name: str
    help: str
    default: str | None = None


@dataclass(frozen=True)
class Given:
    """What a workload command was given: its argument, each option group's values (``given[Group]``), --mpi, and
    the run's seed, --keep and live interval."""

    argument: str | None
    groups: dict[type, Any]
    mpi: bool
    seed: int
    keep: bool
    interval: float

    def __getitem__(self, group: type[T]) -> T:
        return self.groups[group]

    def run_options(self, path: str, gpu: str | None, directory: str | None, note: str) -> RunOptions:
        """What every workload run takes from its command: the path, ``-d`` (GPU 0 until each rank fills in
        ``{local_rank}`` under --mpi), where its data goes, the seed, --keep, the live interval, and ``note``: why
        defaults were chosen."""
        from xferscope.workloads.common.run_options import RunOptions

        gpus = workload_gpus(gpu, self.mpi)
        return RunOptions(path=path, gpus=gpus, directory=directory, seed=self.seed, keep=self.keep,
                          interval=self.interval, defaults_note=note)  # fmt: skip


@dataclass(frozen=True)
class CommandShape:
    """A workload's command: its help, its argument, its option groups in the order its help lists them, and
    ``make``: what to run from what it was given (SpecError names a bad option; under --mpi, made on every rank)."""

    help: str
    argument: Arg | None
    groups: tuple[type, ...]
    make: Callable[[Given], Any]


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


def paths_of(text: str, mpi: bool) -> list[str]:
    """A workload's comma list of paths: SpecError where there is none, or several under --mpi (a job runs one
    path)."""
    paths = [p.strip() for p in text.split(",") if p.strip()]
    if not paths:
        raise SpecError("path", "no path given")
    if mpi and len(paths) > 1:
        raise SpecError("path", "--mpi runs one path: compare paths as separate jobs (workload compare)")
    return paths


def gpu_list(text: str | None) -> list[int]:
    """``-d``: GPU indices (0, 0,1, 0-3) or all; GPU 0 where none is given."""
    if text is None:
        return [0]
    if text.strip().lower() == "all":
        from xferscope.gpus import gpu_count

        n, why = gpu_count()
        if not n:
            raise SpecError("gpu", f"--gpu all: no GPU on this machine ({why})")
        return list(range(n))
    return parse_int_list(text, "gpu")


def workload_gpus(text: str | None, mpi: bool) -> tuple[int, ...]:
    """A workload's ``-d`` here: its GPUs (GPU 0 where none is given), or under --mpi, where it holds
    ``{local_rank}``, GPU 0 until each rank fills it in (``cluster.workload_ranks.rank_gpus``)."""
    return tuple(gpu_list(None if mpi and text is not None and "{" in text else text))


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
