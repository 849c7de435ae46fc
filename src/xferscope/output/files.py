"""What a command leaves behind, in an order that never loses a measurement: the result is printed first,
then each file asked for is written through ``xferscope.safe_write``.

* ``-`` (or /dev/stdout) is stdout for every file option (``--json``, ``--csv``): stdout then carries that
  file's content alone, and the human summary goes to stderr. One output at a time can take stdout
  (``--format json`` is one).
* A file that cannot be written is one line on stderr naming it and the reason, after the result was
  shown; the other files are still written, and the command exits with ``ExitCode.NOT_WRITTEN`` (4)
  unless the run itself failed or was interrupted (its own code then).
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TextIO

import typer

from xferscope.errors import ExitCode, NotWritten, SpecError
from xferscope.safe_write import is_stdout, is_stream, write_output

SHOWN = "result shown above"


@dataclass(frozen=True)
class Output:
    """One file a command was asked for. ``label`` names it in messages ("JSON"), ``option`` on the command
    line ("--json"); ``content()`` makes what goes into it, when it is written."""

    label: str
    option: str
    path: str | None
    content: Callable[[], str | bytes]


def check_outputs(fmt: str, outputs: dict[str, str | None], *, folders: bool = True) -> None:
    """Before anything is measured: SpecError for two outputs that both want stdout, or (``folders``) for a
    path that cannot become a file (a folder, a folder that does not exist or cannot be written).
    ``outputs``: option ("--json") -> path. Under MPI only rank 0 writes: its ranks pass ``folders=False``."""
    on_stdout = (["--format json"] if fmt == "json" else []) + [o for o, p in outputs.items() if p and is_stdout(p)]
    if len(on_stdout) > 1:
        raise SpecError(on_stdout[-1], f"{' and '.join(on_stdout)} would both write stdout; send one of them to a file")
    for option, path in outputs.items():
        if not folders or not path or is_stream(path):
            continue
        target = os.path.realpath(path)
        if os.path.isdir(target):
            raise SpecError(option, f"{path} is a folder; name a file")
        folder = os.path.dirname(target)
        if not os.path.isdir(folder):
            raise SpecError(option, f"cannot write {path}: {folder} does not exist")
        if not os.access(folder, os.W_OK):
            raise SpecError(option, f"cannot write {path}: {folder} is not writable; pick a writable path")


@contextlib.contextmanager
def human_output(*paths: str | None) -> Iterator[TextIO]:
    """Inside, what is printed for people goes to stdout, or to stderr when one of ``paths`` is stdout."""
    if any(p and is_stdout(p) for p in paths):
        with contextlib.redirect_stdout(sys.stderr):
            yield sys.stderr
    else:
        yield sys.stdout


def write_outputs(outputs: Sequence[Output], shown: str = SHOWN) -> int:
    """Write each output asked for and say where it went; a file that cannot be written is one line
    ("could not write r.json: no space left on device (result shown above)") and the others are still
    written. Returns ExitCode.NOT_WRITTEN when one was not written, else 0."""
    code = ExitCode.OK
    for out in outputs:
        if not out.path:
            continue
        try:
            write_output(out.path, out.content())
        except NotWritten as exc:
            _say(f"xferscope: {exc} ({shown})")
            code = ExitCode.NOT_WRITTEN
            continue
        except BrokenPipeError:  # stdout's reader left (`| head`): what it did not want is not an error
            _stdout_to_devnull()
            continue
        if not is_stdout(out.path):
            _say(f"{out.label} written to {out.path}")
    return int(code)


def save_partial(outputs: Sequence[Output]) -> None:
    """Save while measuring goes on (Ctrl-C under MPI, before every rank stopped): regular files only, as
    streams take the final result once; a failure here is reported by the final write."""
    for out in outputs:
        if out.path and not is_stream(out.path):
            with contextlib.suppress(NotWritten):
                write_output(out.path, out.content())


def _say(line: str) -> None:
    try:
        typer.echo(line, err=True)
    except OSError:  # a closed terminal: the files matter more than the words
        pass


def _stdout_to_devnull() -> None:
    """Python's advice for a closed stdout: point it at /dev/null so that the exit flush stays quiet."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


# -------------------------------------------------------------- run results


def result_outputs(
    results: list, json_path: str | None, csv_path: str | None, csv_text: Callable[[list], str] | None = None
) -> list[Output]:
    """``--json`` (the summary with the time series) and ``--csv`` (the time series, or ``csv_text``'s
    table) of RunResults."""
    from xferscope.export import result_to_record, series_csv_text
    from xferscope.records import json_text

    def payload():
        if len(results) == 1:
            return result_to_record(results[0], samples=True)
        return {"results": [result_to_record(r, samples=True) for r in results]}

    return [
        Output("JSON", "--json", json_path, lambda: json_text(payload())),
        Output("CSV", "--csv", csv_path, lambda: (csv_text or series_csv_text)(results)),
    ]


def echo_lines(lines: Iterable[Any]) -> None:
    """Print lines (wrapped at word ends in a terminal) and the tables among them (``report.print_table``: the
    first columns at any width)."""
    from xferscope.report import print_table, say

    for line in lines:
        if isinstance(line, str):
            say(line)
        else:
            print_table(line)


def show_then_write(fmt: str, shown: Callable[[], Any], printer: Callable[[], None], outputs: Sequence[Output]) -> int:
    """Print for people (``printer``), or with ``--format json`` the JSON of ``shown()`` (a record, or plain data
    holding records), then write ``outputs`` (``write_outputs``): a closed terminal loses no file. Returns
    ExitCode.NOT_WRITTEN when a file could not be written (a line said which and why), else 0."""
    from xferscope.records import json_text

    try:
        with human_output(*(o.path for o in outputs)):
            if fmt == "json":
                typer.echo(json_text(shown()), nl=False)
            else:
                printer()
    except OSError:  # a closed terminal: the files still get the result
        pass
    except SystemExit:  # Rich's answer to a closed pipe (`| head`): stdout is /dev/null now; the files still come
        pass
    return write_outputs(outputs)


def show_record(
    record: Any,
    lines: Callable[[], list],
    csv_text: Callable[[Any], str],
    *,
    fmt: str,
    json_path: str | None,
    csv_path: str | None,
) -> int:
    """A workload's record, or its paths side by side: its ``lines`` printed (its JSON with ``--format json``),
    then ``--json`` and ``--csv`` written; ExitCode.NOT_WRITTEN where one could not be, else 0."""
    from xferscope.records import json_text

    return show_then_write(
        fmt,
        lambda: record,
        lambda: echo_lines(lines()),
        [
            Output("JSON", "--json", json_path, lambda: json_text(record)),
            Output("CSV", "--csv", csv_path, lambda: csv_text(record)),
        ],
    )


def end_of_run(status: str, written: int = 0, error: str | None = None) -> None:
    """How a command that measured ends once its record is printed and written: interrupted, exit 130 (what was
    measured is above); failed, exit 1 (``error``, where given, in one line); else ``written``'s code (a file
    asked for not written), or 0."""
    if status == "interrupted":
        typer.echo("xferscope: interrupted; what was measured is above", err=True)
        raise typer.Exit(int(ExitCode.INTERRUPTED))
    if status == "failed":
        if error:
            typer.echo(f"xferscope: the run failed: {error}", err=True)
        raise typer.Exit(int(ExitCode.RUN_FAILED))
    if written:
        raise typer.Exit(written)


def emit(
    results: list,
    *,
    fmt: str,
    json_path: str | None,
    csv_path: str | None,
    printer,
    csv_text: Callable[[list], str] | None = None,
) -> int:
    """Print the results (``printer``, or JSON with ``--format json``), then write the files asked for.
    Returns ExitCode.NOT_WRITTEN when a file could not be written (a line said which and why), else 0."""
    from xferscope.export import result_to_record

    def shown():
        runs = [result_to_record(r) for r in results]
        return runs[0] if len(runs) == 1 else runs

    return show_then_write(fmt, shown, lambda: printer(results), result_outputs(results, json_path, csv_path, csv_text))
