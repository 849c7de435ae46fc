"""Where a run reads and writes: checks on the filesystem, and scratch files.

Scratch files are created and filled with a data pattern by xferscope, and
marked by a small sidecar file (``NAME.xferscope``) that records their size
and pattern. A file with a matching sidecar is ours: it is reused, and write
tests may overwrite it. Any other file is the user's: it is only ever read,
unless the user passes ``--force``. Files a run creates are removed when it
ends (also on Ctrl-C or failure) unless ``--keep`` is given.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import mmap
import os
import platform
import shutil
import tempfile
import threading
from dataclasses import dataclass, field

import psutil

from xferscope.errors import EnvironmentProblem, NotWritten, SpecError, XferscopeError
from xferscope.safe_write import write_output
from xferscope.spec import RunSpec
from xferscope.units import format_bytes, format_size

SIDECAR_SUFFIX = ".xferscope"
SIDECAR_MAGIC = "xferscope-scratch/1"
FILL_CHUNK = 8 << 20
FREE_SPACE_MARGIN = 64 << 20  # left free beside new scratch files: the run must not fill the filesystem


class Interrupted(XferscopeError):
    """The user stopped the run (Ctrl-C, SIGTERM, closed terminal)."""

    exit_code = 130


@dataclass
class Filesystem:
    mountpoint: str
    fstype: str
    device: str
    logical_block: int
    direct_io: bool | None = None
    direct_error: str = ""


@dataclass
class TargetFile:
    path: str
    size: int
    pattern_seed: int
    owned: bool  # a scratch file of ours (sidecar present or created now)
    create: bool = False  # does not exist yet: this run creates it
    refill: bool = False  # ours, but its pattern was overwritten: refill before a verify run


@dataclass
class Target:
    """The files of a run, one per worker in directory mode, or one shared."""

    files: list[TargetFile]
    worker_files: list[int]  # index into ``files`` for each worker
    worker_regions: list[tuple[int, int]]  # (start, length) in bytes for each worker
    filesystem: Filesystem
    direct: bool
    temp_dir: str | None = None  # made by xferscope for this run; removed at the end
    created: list[str] = field(default_factory=list)

    @property
    def description(self) -> str:
        if len(self.files) == 1:
            return self.files[0].path
        return f"{os.path.dirname(self.files[0].path)} ({len(self.files)} files)"


# ----------------------------------------------------------------- filesystem


def filesystem_of(path: str) -> Filesystem:
    """The mount holding ``path`` (an existing file or directory)."""
    real = os.path.realpath(path)
    best = None
    for part in psutil.disk_partitions(all=True):
        mp = part.mountpoint
        within = real == mp or real.startswith(mp.rstrip("/") + "/") or mp == "/"
        if within and (best is None or len(mp) > len(best.mountpoint)):
            best = part
    fstype = best.fstype if best else "unknown"
    mountpoint = best.mountpoint if best else "/"
    device = best.device if best else ""
    return Filesystem(mountpoint, fstype, device, _logical_block_size(real))


def _logical_block_size(path: str) -> int:
    try:
        st = os.stat(path)
        major, minor = os.major(st.st_dev), os.minor(st.st_dev)
        base = f"/sys/dev/block/{major}:{minor}"
        for candidate in (f"{base}/queue/logical_block_size", f"{base}/../queue/logical_block_size"):
            if os.path.exists(candidate):
                with open(candidate) as fh:
                    return int(fh.read().strip())
    except (OSError, ValueError):
        pass
    return 512


def probe_direct_io(directory: str) -> tuple[bool, str]:
    """Can files in ``directory`` be opened with O_DIRECT? Returns (ok, reason).

    The probe is a file without a name (O_TMPFILE) where the filesystem makes one: nothing can be left
    behind, whatever ends this process. Elsewhere a named file, removed at once."""
    try:
        fd = os.open(directory, os.O_TMPFILE | os.O_RDWR, 0o600)
    except OSError as exc:
        if exc.errno not in (errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL):
            return False, f"cannot create a file there: {exc.strerror}"
        return _probe_direct_io_named(directory)
    try:
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) | os.O_DIRECT)
        return True, ""
    except OSError as exc:
        return False, _direct_refused(exc)
    finally:
        os.close(fd)


def _direct_refused(exc: OSError) -> str:
    return "the filesystem refuses O_DIRECT" if exc.errno == errno.EINVAL else exc.strerror or str(exc)


def _probe_direct_io_named(directory: str) -> tuple[bool, str]:
    fd = -1
    try:
        fd, probe = tempfile.mkstemp(prefix=".xferscope-probe-", dir=directory)
    except OSError as exc:
        return False, f"cannot create a file there: {exc.strerror}"
    try:
        os.close(fd)
        fd = os.open(probe, os.O_RDWR | os.O_DIRECT)
        os.close(fd)
        return True, ""
    except OSError as exc:
        return False, _direct_refused(exc)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(probe)


def default_scratch_parent() -> tuple[str, bool]:
    """A temporary directory's parent where O_DIRECT works if possible: ($TMPDIR or /tmp, then /var/tmp)."""
    candidates = [tempfile.gettempdir(), "/var/tmp"]
    for cand in candidates:
        if os.path.isdir(cand) and os.access(cand, os.W_OK) and probe_direct_io(cand)[0]:
            return cand, True
    return candidates[0], False


# ------------------------------------------------------------------ sidecars


def sidecar_path(path: str) -> str:
    return path + SIDECAR_SUFFIX


def read_sidecar(path: str) -> dict | None:
    """The sidecar of a scratch file, if it is ours and still matches the file."""
    try:
        with open(sidecar_path(path)) as fh:
            meta = json.load(fh)
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    if meta.get("magic") != SIDECAR_MAGIC or meta.get("size") != st.st_size or meta.get("inode") != st.st_ino:
        return None
    return meta


def write_sidecar(path: str, seed: int, intact: bool) -> None:
    """Mark ``path`` as xferscope's scratch file (replaced whole; NotWritten when it cannot be written)."""
    st = os.stat(path)
    meta = {
        "magic": SIDECAR_MAGIC,
        "size": st.st_size,
        "inode": st.st_ino,
        "pattern_seed": seed,
        "pattern_intact": intact,
    }
    write_output(sidecar_path(path), json.dumps(meta))


# -------------------------------------------------------------------- plan


def _file_seed(spec: RunSpec, index: int) -> int:
    return (spec.seed * 0x100000001B3 + index * 0x9E3779B9) & 0xFFFFFFFFFFFFFFFF


def plan(spec: RunSpec) -> Target:
    """Decide the files and regions of a run and check everything checkable. Creates nothing
    but a temporary directory when no target was given."""
    temp_dir = None
    if spec.file:
        parent = os.path.dirname(os.path.abspath(spec.file)) or "."
        if not os.path.isdir(parent):
            raise SpecError("file", f"directory {parent} does not exist")
        if os.path.isdir(spec.file):
            raise SpecError("file", f"{spec.file} is a directory; use --dir for a directory")
        directory = parent
    elif spec.directory:
        directory = spec.directory
        if not os.path.exists(directory):
            raise SpecError("dir", f"{directory} does not exist (create it, or check the mount)")
        if not os.path.isdir(directory):
            raise SpecError("dir", f"{directory} is not a directory; use --file for a file")
    else:
        parent, _ = default_scratch_parent()
        temp_dir = tempfile.mkdtemp(prefix="xferscope-", dir=parent)
        directory = temp_dir
    try:
        return _plan_in(spec, directory, temp_dir)
    except BaseException:
        if temp_dir:
            shutil.rmtree(temp_dir, ignore_errors=True)
        raise


def _plan_in(spec: RunSpec, directory: str, temp_dir: str | None) -> Target:
    fs = filesystem_of(directory)
    direct = not spec.through_page_cache
    if direct:
        ok, why = probe_direct_io(directory)
        fs.direct_io, fs.direct_error = ok, why
        if not ok:
            hint = (
                "cuFile needs O_DIRECT: use a directory on ext4 or xfs (--dir)"
                if spec.path.startswith("cufile")
                else "use --buffered to go through the page cache"
            )
            raise EnvironmentProblem(f"O_DIRECT does not work in {directory} ({fs.fstype}): {why}; {hint}")
        if spec.block_size % fs.logical_block:
            raise SpecError(
                "block_size",
                f"{spec.block_size} bytes is not a multiple of the device's logical "
                f"block size ({fs.logical_block} bytes) as O_DIRECT needs",
            )
    files: list[TargetFile] = []
    if spec.file:
        files.append(_target_file(spec, os.path.abspath(spec.file), 0))
    elif spec.directory is not None or temp_dir is not None:
        if spec.directory is None:  # the embedded default: one shared scratch file
            files.append(_target_file(spec, os.path.join(directory, "xferscope-scratch.dat"), 0))
        else:  # gdsio -D: one file per worker
            for i in range(spec.workers):
                name = f"xferscope-scratch-{format_size(spec.file_size)}-w{i}.dat"
                files.append(_target_file(spec, os.path.join(directory, name), i))
    if spec.source == "cache":
        _check_fits_in_memory(sum(f.size for f in files))
    to_create = sum(f.size for f in files if f.create)
    if to_create:
        free = shutil.disk_usage(directory).free
        if to_create + FREE_SPACE_MARGIN > free:
            raise EnvironmentProblem(
                f"not enough free space in {directory}: the scratch file needs {format_bytes(to_create)} and "
                f"{format_bytes(FREE_SPACE_MARGIN)} more stay free beside it (so that the run never fills the "
                f"filesystem, and its results can still be written), {format_bytes(to_create + FREE_SPACE_MARGIN)} "
                f"in all; {format_bytes(free)} free. Lower --size or make room"
            )
    if not os.access(directory, os.W_OK) and to_create:
        raise EnvironmentProblem(f"cannot create files in {directory}: permission denied")
    worker_files, regions = _regions(spec, files)
    return Target(files, worker_files, regions, fs, direct, temp_dir)


#: --source cache holds the file in memory: at most this share of the memory available
CACHE_SHARE = 0.9


def memory_available() -> int | None:
    """Bytes of memory available for new use, page cache included (MemAvailable); None where unknown."""
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def os_name() -> str:
    """'Linux-6.8.0-45-generic-x86_64-with-glibc2.39', as ``platform.platform()`` spells it, but without the
    `uname -p` process that call starts (a fork of the engine's process while its workers read)."""
    u = os.uname()
    try:
        libc = os.confstr("CS_GNU_LIBC_VERSION") or ""
    except (ValueError, OSError):
        libc = ""
    return "-".join(p for p in (u.sysname, u.release, u.machine) if p) + (
        f"-with-{libc.replace(' ', '')}" if libc else ""
    )


def cpu_model() -> str | None:
    """This host's CPU model (``/proc/cpuinfo``'s first model name, else ``platform.processor()``); None where
    neither says."""
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def memory_total() -> int | None:
    """Bytes of this host's memory (its RAM); None where unknown."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return None


def _check_fits_in_memory(size: int) -> None:
    """--source cache: a file that cannot stay in memory is refused before anything runs."""
    available = memory_available()
    if available is not None and size > CACHE_SHARE * available:
        raise SpecError(
            "source",
            f"--source cache holds the file in memory, and {format_bytes(size)} does not fit in "
            f"{CACHE_SHARE:.0%} of the memory available ({format_bytes(available)}, MemAvailable): lower --size",
        )


def _target_file(spec: RunSpec, path: str, index: int) -> TargetFile:
    if not os.path.exists(path):
        return TargetFile(path, spec.file_size, _file_seed(spec, index), owned=True, create=True)
    if not os.path.isfile(path):
        raise SpecError("file", f"{path} is not a regular file")
    size = os.path.getsize(path)
    meta = read_sidecar(path)
    if meta is not None:
        seed = int(meta["pattern_seed"])
        if size < spec.block_size:
            raise SpecError("size", f"{path} holds {size} bytes, less than one block ({spec.block_size})")
        return TargetFile(path, size, seed, owned=True, refill=spec.verify and not meta.get("pattern_intact", False))
    # the user's file: read it as it is; never write it unless forced
    if spec.writes and not spec.force:
        raise SpecError(
            "file",
            f"{path} was not created by xferscope; a write test would overwrite it. "
            "Pick a new file name, or pass --force to write over it",
        )
    if spec.verify:
        raise SpecError(
            "verify",
            f"{path} was not written by xferscope, so its content cannot be checked; "
            "verify on a scratch file (a new --file name or --dir)",
        )
    if size < spec.block_size:
        raise SpecError("file", f"{path} holds {size} bytes, less than one block ({spec.block_size} bytes)")
    return TargetFile(path, size, _file_seed(spec, index), owned=False)


def _regions(spec: RunSpec, files: list[TargetFile]) -> tuple[list[int], list[tuple[int, int]]]:
    bs = spec.block_size
    worker_files, regions = [], []
    if len(files) > 1:
        for i in range(spec.workers):
            usable = files[i].size // bs * bs
            worker_files.append(i)
            regions.append((0, usable))
        return worker_files, regions
    usable = files[0].size // bs * bs
    if usable < bs:
        raise SpecError("size", f"{files[0].path} is smaller than one block")
    share = usable // spec.workers // bs * bs
    for i in range(spec.workers):
        worker_files.append(0)
        if spec.is_random or share < bs:  # random: every worker over the whole file
            regions.append((0, usable))
        else:  # sequential: each worker its own slice, as gdsio does
            regions.append((i * share, share))
    return worker_files, regions


# ------------------------------------------------------------ materialize


def materialize(target: Target, cancel: threading.Event | None = None, progress=None) -> None:
    """Create and fill the files the plan needs (outside the timed region)."""
    from xferscope import _iocore

    for tf in target.files:
        if not (tf.create or tf.refill):
            continue
        if tf.create:
            target.created.append(tf.path)
        _fill(tf, target.direct, cancel, progress, _iocore)
        try:
            write_sidecar(tf.path, tf.pattern_seed, intact=True)
        except NotWritten as exc:
            raise EnvironmentProblem(f"{exc}; the scratch file needs it beside it") from None
        if tf.create:
            target.created.append(sidecar_path(tf.path))
        tf.create = tf.refill = False


def _fill(tf: TargetFile, direct: bool, cancel, progress, iocore) -> None:
    flags = os.O_WRONLY | os.O_CREAT | (os.O_DIRECT if direct else 0)
    buf = mmap.mmap(-1, FILL_CHUNK)
    try:
        fd = os.open(tf.path, flags, 0o644)
    except OSError as exc:
        raise EnvironmentProblem(f"cannot create {tf.path}: {exc.strerror}") from None
    try:
        off = 0
        while off < tf.size:
            if cancel is not None and cancel.is_set():
                raise Interrupted("interrupted while creating the scratch file")
            n = min(FILL_CHUNK, tf.size - off)
            iocore.fill_pattern(buf, off, tf.pattern_seed)
            view = memoryview(buf)[:n] if n % 4096 == 0 or not direct else memoryview(buf)
            try:
                os.pwrite(fd, view, off)
            except OSError as exc:
                if exc.errno == errno.ENOSPC:
                    raise EnvironmentProblem(f"disk full while creating {tf.path}; lower --size") from None
                raise EnvironmentProblem(f"cannot write {tf.path}: {exc.strerror}") from None
            finally:
                view.release()
            off += n
            if progress:
                progress(off, tf.size)
        if direct and tf.size % 4096:
            os.ftruncate(fd, tf.size)
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)
        buf.close()


def mark_written(target: Target) -> None:
    """After a write run without verification the pattern is gone: say so in the sidecars."""
    for tf in target.files:
        if tf.owned and os.path.exists(tf.path):
            try:
                write_sidecar(tf.path, tf.pattern_seed, intact=False)
            except NotWritten:  # never leave a sidecar that vouches for a pattern the run overwrote
                with contextlib.suppress(OSError):
                    os.unlink(sidecar_path(tf.path))


def cleanup(target: Target, keep: bool) -> list[str]:
    """Remove what this run created (unless ``keep``); returns the paths removed."""
    removed = []
    if not keep:
        for path in target.created:
            try:
                os.unlink(path)
                removed.append(path)
            except FileNotFoundError:
                pass
        target.created.clear()
    if target.temp_dir:
        shutil.rmtree(target.temp_dir, ignore_errors=True)
        removed.append(target.temp_dir)
        target.temp_dir = None
    return removed
