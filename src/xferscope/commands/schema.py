"""`xferscope schema KIND`: the JSON Schema of a result file's kind, for scripts and dashboards to pin to."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Annotated

import typer

from xferscope.errors import SpecError


def _kinds() -> dict[str, Callable[[], object]]:
    import msgspec

    from xferscope import records
    from xferscope.workloads.checkpoint.session import CheckpointRecord
    from xferscope.workloads.inference.kvcache_record import KvResult
    from xferscope.workloads.inference.load_record import LoadResult
    from xferscope.workloads.train.train_record import TrainResult

    kinds: dict[str, Callable[[], object]] = {kind: (lambda kind=kind: records.schema(kind)) for kind in records.KINDS}
    for name, record in (
        ("train", TrainResult),
        ("kvcache", KvResult),
        ("load", LoadResult),
        ("checkpoint", CheckpointRecord),
    ):
        kinds[name] = lambda record=record: msgspec.json.schema(record)
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
