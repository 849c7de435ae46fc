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


KIND_NAMES = ("run", "comparison", "sweep", "saturation", "mem", *(w.name for w in WORKLOADS))


def schema_command(
    kind: Annotated[str, typer.Argument(help=f"one of: {', '.join(KIND_NAMES)}", metavar="KIND")],
) -> None:
    """Print the JSON Schema of a result file's kind (every file carries its schema_version)."""
    kinds = _kinds()
    if kind not in kinds:
        raise SpecError("kind", f"{kind!r} is not a kind of result file; one of: {', '.join(kinds)}")
    typer.echo(json.dumps(kinds[kind](), indent=2))


def register(app: typer.Typer) -> None:
    app.command("schema")(schema_command)
