"""Errors that users see as one line, and the exit code each maps to.

Engines and the spec raise these; the CLI prints ``str(error)`` on stderr and
exits with ``error.exit_code``. Anything else escaping is a bug in xferscope.
"""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    OK = 0
    RUN_FAILED = 1
    USAGE = 2
    ENVIRONMENT = 3
    NOT_WRITTEN = 4  # measured (and shown) but a file asked for could not be written
    INTERRUPTED = 130


class XferscopeError(Exception):
    """Base class: a message fit to print as one line."""

    exit_code = ExitCode.RUN_FAILED

    def __init__(self, message: str):
        super().__init__(" ".join(str(message).split()))


class SpecError(XferscopeError):
    """Bad input: names the field and the fix."""

    exit_code = ExitCode.USAGE

    def __init__(self, field: str, message: str):
        self.field = field
        super().__init__(f"{field}: {message}")


class EnvironmentProblem(XferscopeError):
    """The machine cannot do what was asked (no GPU, no O_DIRECT, no space, no cuFile)."""

    exit_code = ExitCode.ENVIRONMENT


class EngineUnavailable(EnvironmentProblem):
    """An engine cannot run here; the message says why in the user's terms."""

    def __init__(self, engine: str, reason: str):
        self.engine = engine
        self.reason = reason
        super().__init__(f"{engine}: unavailable: {reason}")


class RunFailed(XferscopeError):
    """The run started but an engine reported a failure (I/O error, verification mismatch)."""

    exit_code = ExitCode.RUN_FAILED
    #: what was gathered before the failure (a RunResult), where the runner has it
    result: object = None


class FormatError(XferscopeError):
    """A file given to xferscope (profile, import) is malformed: names the file and line."""

    exit_code = ExitCode.USAGE

    def __init__(self, path: str, line: int | None, message: str):
        self.path = path
        self.line = line
        where = f"{path}:{line}" if line else str(path)
        super().__init__(f"{where}: {message}")


class NotWritten(XferscopeError):
    """A file xferscope was asked to write could not be written (full disk, no permission, a device
    that refuses data). Nothing of the file's previous version is lost; the message names the file."""

    exit_code = ExitCode.NOT_WRITTEN

    def __init__(self, path: str, reason: str):
        self.path = path
        self.reason = reason
        super().__init__(f"could not write {path}: {reason}")
