"""Every file xferscope writes goes through ``write_output``: a name is never destroyed, a failed write never
loses the previous version, and a failure is one line.

    write_output("r.json", text)      # NotWritten("could not write r.json: no space left on device")

What the name is decides how it is written:

* ``-``, ``/dev/stdout`` (and ``/dev/fd/1``): stdout. ``/dev/stderr`` (``/dev/fd/2``): stderr. Other
  ``/dev/fd/N``: that open descriptor. Written at the stream's position, never reopened or truncated.
* a regular file, or a name that does not exist yet: atomically. The data goes to a temporary file in the
  same directory, is fsync'ed, renamed over the name, and the directory is fsync'ed: a reader, a crash or a
  full disk sees the previous complete version or the new one, never a mix. An existing file keeps its
  permission bits.
* a symbolic link: followed (also when its target does not exist yet); the target is written atomically and
  the link stays.
* anything else (a FIFO, a character device such as ``/dev/null``, a terminal): opened and written in place,
  streamed, never renamed over. A FIFO waits for its reader, as ``cat > fifo`` does.
* a directory: refused.

On any ``OSError`` the temporary file is removed and ``NotWritten`` names the file and the reason. A process
killed between write and rename leaves its hidden temporary file ``.NAME.PID.*.xferscope-tmp``; the next
write of the same name removes it once that process is gone.

Test seams (documented so that tests can fail a write on purpose, through the real entry point):

* ``XFERSCOPE_TEST_WRITE_ERROR="GLOB=ERRNO[,GLOB=ERRNO...]"``, e.g. ``"*.json=ENOSPC"``: a write whose file
  name matches ``GLOB`` (fnmatch on the base name) fails with that errno after its data was written and
  before it is committed, as a full disk does.
* ``before_rename``: called with (temporary file, target) just before the rename; a test sets it to end the
  process there (a crash between write and rename).
"""

from __future__ import annotations

import errno
import fnmatch
import os
import re
import stat
import sys
import tempfile
from collections.abc import Callable

from xferscope.errors import NotWritten

STDOUT = "-"
TEMP_SUFFIX = ".xferscope-tmp"
TEST_ERROR_ENV = "XFERSCOPE_TEST_WRITE_ERROR"

#: test seam: called with (temporary path, target path) right before the rename
before_rename: Callable[[str, str], None] | None = None

_STD_NAMES = {"/dev/stdout": 1, "/dev/stderr": 2}
_FD_PATH = re.compile(r"^/(?:dev/fd|proc/self/fd|proc/(\d+)/fd)/(\d+)$")
_NAME_IN_TEMP = 100  # characters of the target's name kept in its temporary file's name (NAME_MAX is 255)


def stream_fd(path: str) -> int | None:
    """The descriptor a name stands for: 1 for ``-`` and /dev/stdout, 2 for /dev/stderr, N for /dev/fd/N
    (following symbolic links until one of those names appears); None for any other name."""
    if path == STDOUT:
        return 1
    named = _STD_NAMES.get(os.path.abspath(path))
    if named is not None:  # also where /dev has no such link (a bare container)
        return named
    current = path
    for _ in range(40):
        absolute = os.path.abspath(current)
        m = _FD_PATH.match(absolute)
        if m and (m.group(1) is None or int(m.group(1)) == os.getpid()):
            return int(m.group(2))
        if not os.path.islink(absolute):
            return None
        try:
            current = os.path.join(os.path.dirname(absolute), os.readlink(absolute))
        except OSError:
            return None
    return None


def is_stdout(path: str | None) -> bool:
    """Whether writing ``path`` writes stdout (``-``, /dev/stdout, /dev/fd/1)."""
    return bool(path) and stream_fd(path) == 1


def is_stream(path: str) -> bool:
    """Whether ``path`` is written in place as a stream (stdout, a descriptor, a FIFO, a device), not
    replaced as a file: such a target takes its content once, at the end, never a partial save."""
    if stream_fd(path) is not None:
        return True
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


def reason_of(exc: OSError) -> str:
    """'no space left on device' from an OSError: its message, as words in a sentence."""
    text = exc.strerror or str(exc) or type(exc).__name__
    first = text.split()[0]
    return text[0].lower() + text[1:] if first.isalpha() and first[1:].islower() else text


def write_output(path: str, data: str | bytes, *, shown: str | None = None) -> None:
    """Write ``data`` (text as UTF-8) to ``path`` as the module docstring says; NotWritten names ``shown``
    (default: ``path``, or "stdout" for ``-``) on any OSError."""
    payload = data.encode("utf-8") if isinstance(data, str) else data
    name = shown or ("stdout" if path == STDOUT else path)
    try:
        fd = stream_fd(path)
        if fd is not None:
            _write_descriptor(fd, payload, path)
            return
        target = _resolve(path)
        try:
            st = os.stat(target)
        except FileNotFoundError:
            st = None
        if st is not None and stat.S_ISDIR(st.st_mode):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), path)
        if st is None or stat.S_ISREG(st.st_mode):
            _write_atomic(target, payload, st)
        else:
            _write_in_place(target, payload)
    except BrokenPipeError:
        if stream_fd(path) == 1:  # stdout closed by its reader (`| head`): end quietly, as other tools do
            raise
        raise NotWritten(name, reason_of(BrokenPipeError(errno.EPIPE, os.strerror(errno.EPIPE)))) from None
    except OSError as exc:
        raise NotWritten(name, reason_of(exc)) from None


# ------------------------------------------------------------------ how


def _resolve(path: str) -> str:
    """The file a name stands for: symbolic links followed, also a last one whose target does not exist."""
    return os.path.realpath(path) if os.path.islink(path) else path


def _write_descriptor(fd: int, payload: bytes, path: str) -> None:
    """Write at the stream's position: Python's own stdout/stderr (their buffered text first), or fd N."""
    _check_injected(path)
    stream = {1: sys.stdout, 2: sys.stderr}.get(fd)
    if stream is not None:
        stream.flush()
        buffer = getattr(stream, "buffer", None)
        if buffer is not None:
            buffer.write(payload)
            buffer.flush()
        else:  # a stream without bytes (a test's capture): text
            stream.write(payload.decode("utf-8"))
            stream.flush()
        return
    _write_all(fd, payload)


def _write_in_place(target: str, payload: bytes) -> None:
    """A FIFO, a device or a terminal: opened for writing (never created, never truncated) and streamed."""
    fd = os.open(target, os.O_WRONLY | os.O_NOCTTY | os.O_CLOEXEC)
    try:
        _write_all(fd, payload)
        _check_injected(target)
    finally:
        os.close(fd)


def _write_all(fd: int, payload: bytes) -> None:
    view = memoryview(payload)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def _write_atomic(target: str, payload: bytes, existing: os.stat_result | None) -> None:
    directory = os.path.dirname(os.path.abspath(target))
    prefix = f".{os.path.basename(target)[:_NAME_IN_TEMP]}."
    _remove_stale_temps(directory, prefix)
    fd, tmp = tempfile.mkstemp(prefix=f"{prefix}{os.getpid()}.", suffix=TEMP_SUFFIX, dir=directory)
    committed = False
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(payload)
            fh.flush()
            _check_injected(target)
            _keep_mode(fh.fileno(), existing)
            os.fsync(fh.fileno())
        if before_rename is not None:
            before_rename(tmp, target)
        os.replace(tmp, target)
        committed = True
        _fsync_directory(directory)
    finally:
        if not committed:
            try:
                os.unlink(tmp)
            except OSError:
                pass


def _keep_mode(fd: int, existing: os.stat_result | None) -> None:
    """The permission bits (and owner, where allowed) of the file replaced; a new file gets the umask's."""
    if existing is None:
        os.fchmod(fd, 0o666 & ~_umask())
        return
    os.fchmod(fd, stat.S_IMODE(existing.st_mode))
    if (existing.st_uid, existing.st_gid) != (os.geteuid(), os.getegid()):
        try:
            os.fchown(fd, existing.st_uid, existing.st_gid)
        except OSError:
            pass


def _umask() -> int:
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _fsync_directory(directory: str) -> None:
    """Make the rename durable; filesystems that cannot fsync a directory are left to their own ways."""
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError as exc:
        if exc.errno not in (errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EBADF, errno.EROFS):
            raise
    finally:
        os.close(fd)


def _remove_stale_temps(directory: str, prefix: str) -> None:
    """Temporary files of this name left by a process that was killed between write and rename."""
    try:
        entries = [e.name for e in os.scandir(directory) if e.name.startswith(prefix) and e.name.endswith(TEMP_SUFFIX)]
    except OSError:
        return
    for name in entries:
        pid = name[len(prefix) :].split(".", 1)[0]
        if not pid.isdigit() or _alive(int(pid)):
            continue
        try:
            os.unlink(os.path.join(directory, name))
        except OSError:
            pass


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def _check_injected(target: str) -> None:
    """The test seam ``XFERSCOPE_TEST_WRITE_ERROR``: fail this write as the named errno would."""
    spec = os.environ.get(TEST_ERROR_ENV)
    if not spec:
        return
    name = os.path.basename(target) or target
    for item in spec.split(","):
        pattern, _, code = item.strip().rpartition("=")
        number = getattr(errno, code.strip(), None)
        if pattern and isinstance(number, int) and fnmatch.fnmatch(name, pattern):
            raise OSError(number, os.strerror(number), target)
