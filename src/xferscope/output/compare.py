"""A comparison in rounds on the terminal (each run's gdsio line, the table of medians, ratios and verdicts,
its notes) and in its files (``--json``: the comparison and every run; ``--csv``: one row per run)."""

from __future__ import annotations

import typer

from xferscope import records
from xferscope.compare.rounds import ROUNDS_CSV_COLUMNS, csv_rows
from xferscope.export import SUMMARY_COLUMNS, _csv_text, result_to_record
from xferscope.output.files import Output, show_then_write
from xferscope.report import advice_notes, gdsio_line, print_table, rounds_table, say


def print_comparison(comp, printed_runs: bool = True) -> None:
    """gdsio's line of every run (round by round), the table of medians, ratios and verdicts, and its notes."""

    if printed_runs:
        for r in range(comp.rounds):
            runs = [run for run in comp.runs if run.round == r and run.result is not None]
            if not runs:
                continue
            if comp.rounds > 1:
                typer.echo(f"round {r + 1}/{comp.rounds}: " + ", ".join(comp.labels[run.slot] for run in runs))
            for run in runs:
                say(gdsio_line(run.result))
    rounds = (
        f"{comp.rounds_done()} of {comp.rounds} rounds"
        if comp.rounds_done() < comp.rounds
        else f"{comp.rounds} round{'s' if comp.rounds != 1 else ''}"
    )
    print_table(rounds_table(comp, title=f"{rounds}, order rotated; ratio: paired per round against {comp.labels[0]}"))
    for line in comp.notes():
        say(line)
    for note in advice_notes([run.result for run in comp.runs if run.result is not None]):
        say(f"note: {note}")
    labels = {}
    for run in comp.runs:
        if run.result is not None and run.result.labels:
            labels.setdefault(comp.labels[run.slot], run.result.labels)
    for label, notes in labels.items():
        say(f"{label}: " + ", ".join(notes))


def comparison_payload(comp, *, samples: bool) -> records.Comparison:
    """The comparison and every run's result in the order they ran (``load_results`` reads the results back)."""

    results = [run.result for run in comp.runs if run.result is not None]
    index = {id(r): i for i, r in enumerate(results)}
    return records.Comparison(
        schema_version=records.SCHEMA_VERSION,
        comparison=comp.to_record(lambda r: index.get(id(r))),
        results=[result_to_record(r, samples=samples) for r in results],
    )


def rounds_csv_text(comp) -> str:
    """One row per run: round, place, ratio to the baseline in that round, verdict, and its figures."""

    return _csv_text(ROUNDS_CSV_COLUMNS + SUMMARY_COLUMNS, csv_rows(comp))


def comparison_outputs(comp, json_path: str | None, csv_path: str | None) -> list[Output]:
    """``--json`` (the comparison and every run with its time series) and ``--csv`` (one row per run)."""

    return [
        Output("JSON", "--json", json_path, lambda: records.json_text(comparison_payload(comp, samples=True))),
        Output("CSV", "--csv", csv_path, lambda: rounds_csv_text(comp)),
    ]


def emit_comparison(comp, *, fmt: str, json_path: str | None, csv_path: str | None, printer=None) -> int:
    """Print the comparison, then write the files asked for (``output.files``); ExitCode.NOT_WRITTEN
    when a file could not be written (a line said which and why), else 0."""
    return show_then_write(
        fmt,
        lambda: comparison_payload(comp, samples=False),
        lambda: (printer or print_comparison)(comp),
        comparison_outputs(comp, json_path, csv_path),
    )
