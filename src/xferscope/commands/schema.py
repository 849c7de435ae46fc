"""`xferscope schema KIND`: the JSON Schema of a result file's kind, for scripts and dashboards to pin to."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Annotated, Any

import typer

from xferscope.errors import SpecError


def _kinds() -> dict[str, Callable[[], dict[str, Any]]]:
    from xferscope import records
    from xferscope.workloads.checkpoint import session as checkpoint_record
    from xferscope.workloads.inference import kvcache_record, load_record
    from xferscope.workloads.train import train_record

    kinds: dict[str, Callable[[], dict[str, Any]]] = {
        kind: (lambda kind=kind: records.schema(kind)) for kind in records.KINDS
    }
    kinds.update(
        train=train_record.schema,
        kvcache=kvcache_record.schema,
        load=load_record.schema,
        checkpoint=checkpoint_record.schema,
    )
    return kinds


KIND_NAMES = ("run", "comparison", "sweep", "saturation", "mem", "train", "kvcache", "load", "checkpoint")


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
