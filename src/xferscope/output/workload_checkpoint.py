"""`workload checkpoint --plan`: what each rank of this host would write, and how the bytes were found."""

from __future__ import annotations

from itertools import groupby

from xferscope.output.files import Output, echo_lines, show_then_write
from xferscope.records import json_text
from xferscope.report import text_table
from xferscope.units import format_bytes
from xferscope.workloads.checkpoint.layout import Rank
from xferscope.workloads.checkpoint.plan import CheckpointPlan, plan_record


def _span(ranks: list[Rank]) -> str:
    first, last = ranks[0].rank, ranks[-1].rank
    return str(first) if first == last else f"{first}-{last}"


def _files(rank: Rank, alone: bool) -> str:
    """A rank's files (the first rank's of a run alike, named so): each named where there are few, else how many
    and of what."""
    whose = "" if alone else f"rank {rank.rank}: "
    if len(rank.files) <= 2:
        return whose + ", ".join(f"{f.name} {format_bytes(f.size)}" for f in rank.files)
    kinds = " and ".join(sorted({f.holds for f in rank.files}))
    return f"{whose}{len(rank.files)} files ({kinds}), {rank.files[0].name} ... {rank.files[-1].name}"


def plan_lines(plan: CheckpointPlan) -> list:
    """The derivation, then the ranks of this host (runs of ranks alike in their files' shape and bytes as one
    row), then the warnings."""
    rows = []

    def shape(r: Rank):
        return (len(r.files), r.size, tuple(f.holds for f in r.files))

    for _, run in groupby(plan.ranks, key=shape):
        ranks = list(run)
        rows.append((_span(ranks), len(ranks[0].files), format_bytes(ranks[0].size), _files(ranks[0], len(ranks) == 1)))
    lines: list = [f"workload checkpoint {plan.spec.model.model.name} --plan: nothing is written"]
    lines += ["  " + line for line in plan.derivation()]
    lines.append(text_table(("ranks", "files", "bytes a rank", "each rank's files"), rows, left=("ranks",)))
    if plan.metadata_bytes:
        lines.append(
            f"  rank 0 also writes .metadata ({format_bytes(plan.metadata_bytes)}), renamed from .metadata.tmp"
        )
    lines += [f"  warning: {w}" for w in plan.warnings]
    lines += [f"  a run would be refused: {r}" for r in plan.refusals]
    return lines


def show_plan(plan: CheckpointPlan, *, fmt: str, json_path: str | None) -> int:
    record = plan_record(plan)
    return show_then_write(
        fmt,
        lambda: record,
        lambda: echo_lines(plan_lines(plan)),
        [Output("JSON", "--json", json_path, lambda: json_text(record))],
    )
