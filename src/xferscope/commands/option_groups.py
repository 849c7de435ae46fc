"""Groups of command-line options that several commands take alike, so that a command's signature names only
what is its own: ``@takes(SpecOptions)`` gives the command every field of the group as an option (typer reads
the signature) and hands them to it as one ``SpecOptions`` argument."""

from __future__ import annotations

import dataclasses
import functools
import inspect
import typing
from collections.abc import Callable
from typing import Annotated, Any, TypeVar

import typer

from xferscope.commands.options import (
    BsOpt,
    BufferedOpt,
    CpusOpt,
    CsvOpt,
    DepthOpt,
    DirOpt,
    DurationOpt,
    FileOpt,
    ForceOpt,
    FormatOpt,
    GpuOpt,
    HugePagesOpt,
    IntervalOpt,
    IoOpt,
    JsonOpt,
    KeepOpt,
    LiveIntervalOpt,
    MixOpt,
    NumaOpt,
    RegisterOpt,
    SeedOpt,
    SizeOpt,
    SourceOpt,
    SplitOpt,
    TotalOpt,
    VerifyOpt,
    WideOpt,
    WorkersOpt,
    WorkloadRoundsOpt,
    build_spec,
    check_workload_outputs,
    wide_tables,
)
from xferscope.spec import RunSpec
from xferscope.workloads.common.options import Opt

F = TypeVar("F", bound=Callable[..., Any])
T = TypeVar("T")


@dataclasses.dataclass(frozen=True)
class SpecOptions:
    """What one transfer run is, but for its path: ``run``'s and ``compare``'s options alike."""

    io: IoOpt = "read"
    bs: BsOpt = "1M"
    workers: WorkersOpt = 1
    iodepth: DepthOpt = 1
    size: SizeOpt = "1G"
    duration: DurationOpt = None
    total: TotalOpt = None
    file: FileOpt = None
    directory: DirOpt = None
    gpu: GpuOpt = None
    numa: NumaOpt = None
    cpus: CpusOpt = None
    rwmix: MixOpt = 70
    verify: VerifyOpt = False
    buffered: BufferedOpt = False
    source: SourceOpt = "storage"
    force: ForceOpt = False
    keep: KeepOpt = False
    interval: IntervalOpt = 0.1
    seed: SeedOpt = 0x5EED
    register: RegisterOpt = True
    huge_pages: HugePagesOpt = None
    split: SplitOpt = None

    def spec(self, path: str) -> RunSpec:
        """The validated spec of ``path`` with these options (SpecError names the option and the fix)."""
        return build_spec(path=path, **dataclasses.asdict(self))


@dataclasses.dataclass(frozen=True)
class WorkloadRunOptions:
    """How a workload command runs and reports (``workload train``, ``kvcache``, ``load``, ``checkpoint`` alike)."""

    rounds: WorkloadRoundsOpt = 3
    interval: LiveIntervalOpt = 0.5
    seed: SeedOpt = 0x5EED
    keep: KeepOpt = False
    json_path: JsonOpt = None
    csv_path: CsvOpt = None
    fmt: FormatOpt = "table"
    wide: WideOpt = False

    def check(self) -> None:
        """Bad --format, --json, --csv or --rounds: one line, before anything runs."""
        check_workload_outputs(self.fmt, self.json_path, self.csv_path, self.rounds)
        wide_tables(self.wide)

    @property
    def outputs(self) -> dict[str, str | None]:
        return {"fmt": self.fmt, "json_path": self.json_path, "csv_path": self.csv_path}


#: the groups' defaults, for the signatures that ``takes`` replaces
SPEC_OPTIONS = SpecOptions()
WORKLOAD_RUN = WorkloadRunOptions()


def _typer(hint: Any) -> Any:
    """A field's annotation as typer reads it: a workload package's ``Opt`` (``workloads.common.options``) made a
    typer option; any other as it is."""
    found = [m for m in getattr(hint, "__metadata__", ()) if isinstance(m, Opt)]
    if not found:
        return hint
    return Annotated[hint.__origin__, typer.Option(*found[0].flags, help=found[0].help)]


def options_of(group: type) -> list[inspect.Parameter]:
    """The fields of the options dataclass ``group`` as a command's parameters, each a typer option."""
    hints = typing.get_type_hints(group, include_extras=True)
    return [
        inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=f.default, annotation=_typer(hints[f.name]))
        for f in dataclasses.fields(group)
    ]


def grouped(group: type[T], values: dict[str, Any]) -> T:
    """``group`` from a command's ``values``, its fields taken out of them."""
    return group(**{f.name: values.pop(f.name) for f in dataclasses.fields(group)})  # type: ignore[arg-type]


def signed(function: F, params: list[inspect.Parameter]) -> F:
    """``function`` with the signature typer reads: ``params``."""
    function.__signature__ = inspect.Signature(params, return_annotation=None)  # type: ignore[attr-defined]
    function.__annotations__ = {p.name: p.annotation for p in params} | {"return": None}
    return function


def takes(group: type) -> Callable[[F], F]:
    """The command's parameter annotated with ``group`` becomes the group's fields, each an option where that
    parameter stands in the signature; the command receives them as one ``group`` instance."""

    def decorate(command: F) -> F:
        # the annotations as written: typing.get_type_hints would wrap those defaulting to None in Optional on
        # Python 3.10, hiding the typer option inside (its help and its name)
        own = {p.name: p.annotation for p in inspect.signature(command, eval_str=True).parameters.values()}
        [name] = [n for n, t in own.items() if t is group]
        params: list[inspect.Parameter] = []
        for p in inspect.signature(command).parameters.values():
            if p.name == name:
                params += options_of(group)
            else:
                params.append(p.replace(kind=inspect.Parameter.KEYWORD_ONLY, annotation=own.get(p.name, p.annotation)))

        @functools.wraps(command)
        def wrapper(**kwargs: Any) -> Any:
            return command(**{name: grouped(group, kwargs)}, **kwargs)

        del wrapper.__wrapped__  # typer reads this signature, not the command's
        return signed(typing.cast(F, wrapper), params)

    return decorate
