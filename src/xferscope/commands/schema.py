"""`xferscope schema KIND`: the JSON Schema of a result file's kind, for scripts and dashboards to pin to."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Annotated

import typer

from xferscope.commands.workload_kinds import WORKLOADS
from xferscope.errors import SpecError


def _kinds() -> dict[str, Callable[[], object]]:
    import msgspec

    from xferscope import records

    kinds: dict[str, Callable[[], object]] = {kind: (lambda kind=kind: records.schema(kind)) for kind in records.KINDS}
    for w in WORKLOADS:
        kinds[w.name] = lambda w=w: msgspec.json.schema(w.kind.record)
    return kinds


def _file_kinds() -> dict[str, Callable[[], object]]:
    """The kind each file of a workload carries (its run, its paths side by side, ...), with that file's record."""
    import msgspec

    return {
        name: (lambda record=record: msgspec.json.schema(record))
        for w in WORKLOADS
        for name, record in w.kind.files.items()
    }


KIND_NAMES = ("run", "comparison", "sweep", "saturation", "mem", *(w.name for w in WORKLOADS))


def schema_command(
    kind: Annotated[
        str,
        typer.Argument(
            help=f"one of: {', '.join(KIND_NAMES)}; or the kind a workload's file carries (workload-train-comparison, "
            "workload-load-compare, ...)",
            metavar="KIND",
        ),
    ],
) -> None:
    """Print the JSON Schema of a result file's kind (every file carries its schema_version)."""
    kinds, files = _kinds(), _file_kinds()
    schema = kinds.get(kind) or files.get(kind)
    if schema is None:
        raise SpecError(
            "kind",
            f"{kind!r} is not a kind of result file; one of: {', '.join(kinds)}; or of a workload's file: "
            f"{', '.join(k for k in files if k not in kinds)}",
        )
    typer.echo(json.dumps(schema(), indent=2))


def register(app: typer.Typer) -> None:
    app.command("schema")(schema_command)
