"""Tables in a real terminal of 80x24 and 120x40 (tmux, and a pseudo-terminal where tmux is not installed): the
first columns (the path, its figure and range, CPU-s/GiB, the ratio and the verdict) whole, no cell broken inside
a number, no line wider than the terminal, and a line naming what was left out. Into a pipe, every column."""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import termios
import uuid
from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data"
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07|\r")
SIZES = [(80, 24), (120, 40)]


def in_pty(
    args: list[str], cols: int, rows: int, timeout: float = 120, env: dict[str, str] | None = None, raw: bool = False
) -> str:
    """``xferscope ARGS`` with its stdout on a pseudo-terminal of ``cols`` x ``rows`` (``env`` added to the
    command's); what it printed there, without its terminal codes (with them: ``raw``)."""
    # a pseudo-terminal opened here and handed to the command as its stdout: no fork of this process, whose
    # threads (pytest-xdist's) a forked child could deadlock on (Python 3.12 on warns of pty.fork here)
    fd, terminal = os.openpty()
    fcntl.ioctl(terminal, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    base = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "NO_COLOR", "FORCE_COLOR")}
    child = subprocess.Popen(
        [sys.executable, "-m", "xferscope.cli", *args],
        stdin=terminal,
        stdout=terminal,
        stderr=subprocess.DEVNULL,  # progress and notes on stderr are not the tables'
        env={**base, "TERM": "xterm", **(env or {})},
        start_new_session=True,
    )
    os.close(terminal)
    out = b""
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # the child has ended and closed its side
            break
        if not chunk:
            break
        out += chunk
    child.wait(timeout)
    os.close(fd)
    text = out.decode(errors="replace")
    return text if raw else ANSI.sub("", text)


def in_tmux(args: list[str], cols: int, rows: int, timeout: float = 120) -> str:
    """``xferscope ARGS`` in a tmux pane of ``cols`` x ``rows`` (a server of its own); the pane's whole text."""
    sock = f"xs-{uuid.uuid4().hex[:8]}"
    tmux = ["tmux", "-L", sock, "-f", "/dev/null"]
    env = " ".join(f"{k}={v!r}" for k, v in (("PYTHONPATH", os.environ.get("PYTHONPATH", "")),))
    command = " ".join([sys.executable, "-m", "xferscope.cli", *(repr(a) for a in args)])
    script = f"env -u COLUMNS -u LINES {env} {command} 2>/dev/null; tmux -L {sock} wait-for -S done; sleep 600"
    try:
        subprocess.run([*tmux, "new-session", "-d", "-x", str(cols), "-y", str(rows), script], check=True)
        subprocess.run([*tmux, "wait-for", "done"], check=True, timeout=timeout)
        pane = subprocess.run([*tmux, "capture-pane", "-p", "-S", "-5000"], check=True, capture_output=True, text=True)
        return pane.stdout
    finally:
        subprocess.run([*tmux, "kill-server"], capture_output=True)


def terminals():
    """tmux where it is installed (a real terminal, as over SSH); else a pseudo-terminal of the same size."""
    return [pytest.param(in_tmux if shutil.which("tmux") else in_pty, id="tmux" if shutil.which("tmux") else "pty")]


def header_line(text: str, *headers: str) -> str:
    """The one line that holds every header given (each whole)."""
    lines = [line for line in text.splitlines() if all(h in line for h in headers)]
    assert lines, f"no line holds every one of {headers} whole:\n{text}"
    return lines[0]


def fits(text: str, cols: int) -> None:
    """No line wider than the terminal (but the one naming a file written, a path the terminal folds as it is)."""
    lines = [line for line in text.splitlines() if not line.startswith(("JSON written", "CSV written"))]
    wide = [line for line in lines if len(line.rstrip()) > cols]
    assert not wide, f"lines wider than {cols}: {wide}"


def compare_args(directory: Path) -> list[str]:
    """A small comparison of host against itself."""
    args = ["compare", "--paths", "host,host", "-T", "0.1", "-s", "8M", "--bs", "64K", "--rounds", "2"]
    return [*args, "--dir", str(directory)]


@pytest.mark.parametrize("cols, rows", SIZES)
@pytest.mark.parametrize("terminal", terminals())
def test_compare_shows_its_first_columns_whole_at_the_terminal_s_width(direct_dir, tmp_path, terminal, cols, rows):
    out = tmp_path / "c.json"
    text = terminal([*compare_args(direct_dir), "--json", str(out)], cols, rows)
    data = json.loads(out.read_text())
    fits(text, cols)
    header_line(text, "path", "MiB/s", "min-max", "CPU-s/GiB", "ratio (range)", "verdict")
    second = data["comparison"]["paths"][1]
    row = next(line for line in text.splitlines() if "host#2" in line and "│" in line)
    mib = f"{second['throughput_mib_s']['median']:.1f}"
    ratio = f"{second['ratio']:.2f} ({second['interval_low']:.2f}-{second['interval_high']:.2f})"
    assert mib in row and ratio in row, (row, mib, ratio)
    if cols == 80:
        left = text[text.index("left out at 80 columns") :]
        assert "IOPS" in left and "--wide" in left
    # the rule under the table is wrapped at word ends: every line's words are whole words of the rule
    rule_words = set(data["comparison"]["rule"].split())
    rule = [line for line in text.splitlines() if line.startswith("verdict: faster/slower")]
    assert rule and all(word in rule_words for word in rule[0].split())


@pytest.mark.parametrize("terminal", terminals())
def test_wide_shows_every_column_and_a_pipe_gets_every_column(direct_dir, terminal):
    args = compare_args(direct_dir)
    text = terminal([*args, "--wide"], 80, 24)
    assert "left out" not in text
    top = next(line for line in text.splitlines() if line.startswith("┏"))
    assert top.count("┳") == 15, "16 columns, folded to fit"
    piped = subprocess.run([sys.executable, "-m", "xferscope.cli", *args], capture_output=True, text=True, timeout=120)
    assert piped.returncode == 0
    header_line(piped.stdout, "path", "io", "block", "workers", "IOPS", "avg lat (us)", "usr CPU %", "verdict")
    assert "left out" not in piped.stdout


@pytest.mark.parametrize("cols, rows", SIZES)
@pytest.mark.parametrize("terminal", terminals())
def test_saturate_and_saved_workloads_show_their_first_columns_whole(terminal, cols, rows):
    saved = DATA / "records" / "saturation.json"
    text = terminal(["saturate", "--from", str(saved)], cols, rows)
    fits(text, cols)
    header_line(text, "in flight", "GiB/s", "min-max")
    points = json.loads(saved.read_text())["series"][0]["points"]
    for p in points:
        low, high = min(p["throughput_gib_s"]), max(p["throughput_gib_s"])
        assert f"{low:.3f}-{high:.3f}" in text, "a point's range whole"
    text = terminal(["compare", "--workload", str(DATA / "dlio-summary.json")], cols, rows)
    fits(text, cols)
    header_line(text, "#", "path", "AU", "range")
    assert "91.8%-93.1%" in text


@pytest.mark.parametrize("terminal", terminals())
def test_memory_results_side_by_side_keep_their_first_columns_at_80(terminal):
    saved = str(DATA / "records" / "mem.json")
    text = terminal(["compare", "--mem", ",".join([saved] * 5)], 80, 24)
    fits(text, 80)
    assert "idle latency (ns)" in text and "110.63" in text, "the figures' names and the first result whole"
    assert "left out at 80 columns" in text
    piped = subprocess.run(
        [sys.executable, "-m", "xferscope.cli", "compare", "--mem", ",".join([saved] * 5)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert piped.returncode == 0 and piped.stdout.splitlines()[0].count("builtin (mem.json)") == 5


def test_a_terminal_gets_colour_and_an_mpi_rank_plain_text():
    """A person's terminal gets the tables' bold and colours. An MPI rank's stdout is a pseudo-terminal too under
    Open MPI, whatever mpirun's own stdout is (a pipe, a file): a rank prints plain text, as into a pipe."""
    args = ["saturate", "--from", str(DATA / "records" / "saturation.json")]
    person = in_pty(args, 120, 40, raw=True)
    assert "\x1b[1m" in person and "host plateau" in ANSI.sub("", person)
    rank = in_pty(args, 120, 40, raw=True, env={"OMPI_COMM_WORLD_SIZE": "2", "OMPI_COMM_WORLD_RANK": "0"})
    assert "\x1b" not in rank and "host plateau" in rank
