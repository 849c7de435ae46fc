"""The terminal a headless command talks to: a live progress line on stderr (only on a terminal), and the
signals that say the terminal or the session went away."""

from __future__ import annotations

import signal
import sys


class ProgressLine:
    """A live progress line on stderr (only on a terminal), at most 4 updates a second."""

    def __init__(self, enabled: bool, duration: float | None):
        self.enabled = enabled
        self.duration = duration
        self._last = 0.0
        self._shown = False

    def sample(self, s) -> None:
        if not self.enabled or s is None or s.t - self._last < 0.25:
            return
        from xferscope.report import progress_text

        self._last = s.t
        self._write("\r\033[K" + progress_text(s, self.duration))

    def fill(self, done: int, total: int) -> None:
        if self.enabled:
            self._write(f"\r\033[Kcreating scratch file: {100 * done // max(total, 1)}%")

    def clear(self) -> None:
        if self._shown:
            self._write("\r\033[K")
            self._shown = False

    def _write(self, text: str) -> None:
        try:
            sys.stderr.write(text)
            sys.stderr.flush()
            self._shown = True
        except OSError:  # terminal gone (closed SSH session): keep measuring
            self.enabled = False


def install_hangup_handlers() -> None:
    """SIGTERM and SIGHUP (closed SSH session) stop a run like Ctrl-C: results kept, files removed."""

    def handler(signum, frame):
        raise KeyboardInterrupt

    for sig in (signal.SIGTERM, signal.SIGHUP):
        try:
            signal.signal(sig, handler)
        except (ValueError, OSError):
            pass


def write_status(text: str) -> None:
    """A live status line on stderr (nothing when stderr is gone)."""
    try:
        sys.stderr.write(text)
        sys.stderr.flush()
    except OSError:
        pass


def fill_line(done: int, total: int) -> None:
    write_status(f"\r\033[Kcreating the data set: {100 * done // max(total, 1)}%")


def clear_line(live: bool) -> None:
    if live:
        write_status("\r\033[K")
