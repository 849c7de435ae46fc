"""What a workload shows in the console, declared in its package and rendered by the console's one workload screen
(``app.screens.workload_run``): the view's name and key, its form (typed fields read through the command's option
groups into a spec, ``workloads.common.options.from_text``), the run's state as its ticks arrive, and the rows of
its tables and its title as cells of text. No Textual here."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from xferscope.workloads.common.kind import WorkloadKind
from xferscope.workloads.common.libraries import installed
from xferscope.workloads.common.saved_kind import workload_of

#: a cell: its text, or its text in (text, style) segments
Cell = str | tuple[tuple[str, str], ...]
Row = Sequence[Cell]


@dataclass(frozen=True)
class FormField:
    id: str  # the control's id, which a SpecError's field names (``ConsoleView.field_control``)
    label: str
    hint: str  # what the empty field shows
    attr: str  # the attribute of the form's values it holds


@dataclass(frozen=True)
class Title:
    """A view's first line: its heading, the status shown (a view may show "idle" between runs of another kind),
    and the view's own facts after them, each (text, style)."""

    heading: str
    status: str
    facts: list[tuple[str, str]]


@dataclass(frozen=True)
class ConsoleView:
    name: str  # its mode, and the app's action that shows it: "workload"
    key: str  # the key that shows it
    label: str  # the key's words in the footer
    what: str  # what it runs, in its messages: "training run"
    leaving: str  # what the console says as it closes during a run
    prefix: str  # its controls' ids' prefix: "wl" ("wl-title", "wl-table", ...)
    fields: tuple[FormField, ...]  # the typed fields, in two rows
    form: type  # the values as typed (each field's ``attr`` a str)
    field_control: dict[str, str]  # a SpecError's field -> the control that explains it
    build_spec: Callable[[Any, bool], Any]  # (the form's values, a GPU here) -> what a run needs; SpecError
    state: type  # a run as it goes: start(spec), take(tick), finish(result); spec, made, result
    session: Callable[[Any], Any]  # what ``build_spec`` gave -> the session (prepare, run, stop, close)
    has_figures: Callable[[Any], bool]  # an ended run measured something: it joins the session's ranking
    summary: Callable[[Any], list[Any]]  # a finished run's lines as the command prints them
    saved: tuple[str, Callable[[str], list[Any]]]  # o's prompt, and a saved file -> what joins the ranking
    figures_panel: tuple[str, str]  # the figures' panel: its id's middle, its title
    session_title: str  # the session's ranking's panel title
    table_headers: tuple[str, ...]
    session_headers: tuple[str, ...]
    idle_text: str  # what the summary says before a run
    table_rows: Callable[[Any], list[Row]]  # the state -> the figures' rows
    #: (runs, saved, state, status, form values) -> the session's runs ranked, a row each
    session_rows: Callable[[list[Any], list[Any], Any, str, Any], list[Row]]
    title: Callable[[Any, str, Any], Title]  # (state, status, form values)
    session_min_width: int = 0  # narrower, the session's ranking is left out


def making(state: Any, status: str) -> list[tuple[str, str]]:
    """While a data set is made: how far it is."""
    if state.made is None or status not in ("preparing", "stopping"):
        return []
    done, total = state.made
    return [(f" · making the data set {100 * done // max(total, 1)}%", "dim")]


PRESS_R = (" · press r to start", "dim")


def path_hint(libraries: dict[str, Any]) -> str:
    """A Path field's hint: xferscope's paths, then those of ``libraries`` installed here (a path typed that is not:
    one line under the field)."""
    return "host, bounce, bounce-async, cufile" + "".join(f", {p}" for p in installed(libraries))


def saved_runs(*kinds: WorkloadKind) -> Callable[[str], list[Any]]:
    """What a saved file of one of ``kinds`` adds to a view's ranking: its runs, labelled by the file's name."""

    def runs(path: str) -> list[Any]:
        name = os.path.basename(path)
        return [(name, r) for r in workload_of(path, kinds).compare_saved([path]).results]

    return runs
