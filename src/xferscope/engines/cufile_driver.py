"""cuFile (GPUDirect Storage) through ``cuda.bindings.cufile``: the library, the driver, its log,
the mode it runs in, and registration errors explained in the user's terms.

cuFile writes its reasons to a log file, not to the error code: ``handle_register``
says HANDLE_NOT_REGISTERED, while the log says ``udev property not found:
ID_FS_USAGE vda``. So before the library is first loaded, ``CUFILE_LOGFILE_PATH``
points to a file of ours (unless the user set it), and every failure is
explained from what the log gained during the failing call.

The mode is what the run is labelled with: ``gds`` (data moves by DMA through
nvidia-fs or PCI P2PDMA) or ``compat`` (cuFile's POSIX path with its own bounce
buffers). It is decided from the driver (nvidia-fs loaded, P2PDMA enabled,
forced compat) and, per file, from cuFile's own counters around one probe read, taken
in a process of its own (see ``cufile_probe``).
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import functools
import json
import os
import re
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass

from xferscope.engines import gpu_setup
from xferscope.errors import EnvironmentProblem

LOG_ENV = "CUFILE_LOGFILE_PATH"
CONFIG_ENV = "CUFILE_ENV_PATH_JSON"
DEFAULT_CONFIG = "/etc/cufile.json"
FORCE_COMPAT_ENV = "CUFILE_FORCE_COMPAT_MODE"
#: filesystems cuFile can never register a file on
NO_CUFILE_FS = ("tmpfs", "ramfs", "devtmpfs", "proc", "sysfs", "squashfs", "overlay", "fuse")


# ------------------------------------------------------------------ log


class CufileLog:
    """The file cuFile logs to; ``mark()`` then ``since(mark)`` gives what one call added."""

    def __init__(self) -> None:
        given = os.environ.get(LOG_ENV)
        self.owned = not given
        if given:
            path = given
        else:
            fd, path = tempfile.mkstemp(prefix="xferscope-cufile-", suffix=".log")
            os.close(fd)
            os.environ[LOG_ENV] = path
            atexit.register(self._remove)
            from xferscope import janitor

            janitor.guard(path)  # a process killed outright runs no exit handler: the janitor removes it then
        self.path = path

    def _remove(self) -> None:
        from xferscope import janitor

        with contextlib.suppress(OSError):
            os.unlink(self.path)
        with contextlib.suppress(Exception):  # at exit: the janitor's pipe may be gone already
            janitor.release(self.path)

    def mark(self) -> int:
        try:
            return os.path.getsize(self.path)
        except OSError:
            return 0

    def since(self, mark: int) -> str:
        try:
            with open(self.path, "rb") as fh:
                fh.seek(mark)
                return fh.read(1 << 20).decode(errors="replace")
        except OSError:
            return ""


_log: CufileLog | None = None
_lock = threading.RLock()


def log() -> CufileLog:
    global _log
    with _lock:
        if _log is None:
            _log = CufileLog()
        return _log


def child_env(path: str) -> tuple[dict[str, str] | None, str | None]:
    """The environment of a child process that runs ``path``, and its cuFile log: for a cuFile path, a file of
    ours that outlives the child, guarded by the janitor until the caller discards it (``janitor.discard``), so
    it goes too should this process end first (a child that leaves with ``os._exit`` runs no exit handler of
    its own); (None, None) for other paths, and when the user chose the log file. KvikIO's path counts as a cuFile
    path: the libcufile it loads logs to the same file."""
    if not (path.startswith("cufile") or path == "kvikio") or os.environ.get(LOG_ENV):
        return None, None
    from xferscope import janitor

    fd, log = tempfile.mkstemp(prefix="xferscope-cufile-", suffix=".log")
    os.close(fd)
    janitor.guard(log)
    return {**os.environ, LOG_ENV: log}, log


@contextlib.contextmanager
def child_log_env() -> Iterator[dict[str, str] | None]:
    """``child_env`` for a child process that lives as long as the block: its log discarded at the end."""
    from xferscope import janitor

    env, log = child_env("cufile")
    try:
        yield env
    finally:
        if log:
            janitor.discard(log)


def module():
    """``cuda.bindings.cufile``, imported after the log path is set (ImportError when absent)."""
    log()
    from cuda.bindings import cufile

    return cufile


def error_code(exc: BaseException) -> tuple[int | None, str]:
    """(code, name) of a cuFileError, e.g. (5027, "HANDLE_NOT_REGISTERED")."""
    code = None
    for arg in getattr(exc, "args", ()):
        if isinstance(arg, int):
            code = arg
            break
    if code is None:
        m = re.search(r"\b(50\d\d)\b", str(exc))
        code = int(m.group(1)) if m else None
    name = str(exc)
    if code is not None:
        with contextlib.suppress(Exception):
            name = module().OpError(code).name
    return code, name


# ------------------------------------------------------------------ library


@functools.lru_cache(maxsize=1)
def library_status() -> tuple[str | None, int | None]:
    """(None, version) when libcufile loads here; (reason, None) when it does not."""
    reason = gpu_setup.unavailable_reason()
    if reason:
        return reason, None
    try:
        cf = module()
    except ImportError:
        return "cuda-python has no cuFile bindings (install cuda-python 12.9 or newer)", None
    try:
        return None, int(cf.get_version())
    except Exception:
        return "libcufile not found (pip install nvidia-cufile-cu13, or install NVIDIA GDS)", None


def library_version() -> str | None:
    """The cuFile library version as "1.15.0"; None when it is not there."""
    v = library_status()[1]
    return f"{v // 1000}.{v % 1000 // 10}.{v % 10}" if v else None


def library_path() -> str | None:
    if library_status()[0]:
        return None
    path = gpu_setup.loaded_library("libcufile.so")
    if path:
        return path
    with contextlib.suppress(Exception):
        from cuda.pathfinder import load_nvidia_dynamic_lib

        return load_nvidia_dynamic_lib("cufile").abs_path
    return None


@functools.lru_cache(maxsize=1)
def functions() -> dict[str, int]:
    """Addresses of cuFileRead/cuFileWrite in the libcufile the bindings loaded (same handles)."""
    path = library_path()
    if not path:
        raise EnvironmentProblem(library_status()[0] or "libcufile not found")
    lib = ctypes.CDLL(path)
    return {name: gpu_setup.symbol_address(lib, name) for name in ("cuFileRead", "cuFileWrite")}


# ------------------------------------------------------------------ driver


class _Driver:
    """cuFile's driver, opened once per process with a CUDA context current, closed at exit."""

    def __init__(self) -> None:
        self.opened = False
        self.error: str | None = None
        self.open_log = ""
        self.resources = gpu_setup.GpuResources()

    def open(self, gpu: int) -> None:
        with _lock:
            if self.opened:
                self.resources.context(gpu)
                return
            if self.error:
                raise EnvironmentProblem(self.error)
            reason = library_status()[0]
            if reason:
                raise EnvironmentProblem(reason)
            cf = module()
            self.resources.context(gpu)  # cuFile needs CUDA initialised and a context current
            mark = log().mark()
            try:
                cf.driver_open()
            except Exception as exc:
                self.error = explain_driver_failure(exc, log().since(mark))
                raise EnvironmentProblem(self.error) from None
            self.open_log = log().since(mark)
            self.opened = True
            atexit.register(self.close)

    def close(self) -> None:
        with _lock:
            if self.opened:
                with contextlib.suppress(Exception):
                    module().driver_close()
                self.opened = False
            self.resources.release()


_driver = _Driver()


def open_driver(gpu: int = 0) -> None:
    """Open cuFile's driver (once per process); raise EnvironmentProblem saying why it cannot."""
    _driver.open(gpu)


def unavailable_reason() -> str | None:
    """None when cuFile can run here; else why not (no GPU, no cuda-python, no libcufile, driver)."""
    reason = library_status()[0]
    if reason:
        return reason
    try:
        open_driver(0)
    except EnvironmentProblem as exc:
        return str(exc)
    return None


def explain_driver_failure(exc: BaseException, log_text: str) -> str:
    _code, name = error_code(exc)
    detail = last_log_error(log_text)
    if nvidia_fs_version() is None and not truthy(os.environ.get(FORCE_COMPAT_ENV)):
        hint = (
            "nvidia-fs is not loaded and compat mode seems off: load nvidia-fs (modprobe nvidia-fs) or set "
            '"allow_compat_mode": true in cufile.json'
        )
    else:
        hint = "run `xferscope doctor` for the cuFile set-up"
    return f"cuFile driver_open failed: {name}" + (f" ({detail})" if detail else "") + f"; {hint}"


def last_log_error(text: str) -> str:
    """The most telling line of a cuFile log excerpt (errors first), trimmed of its prefix."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for ln in reversed(lines):
        if "ERROR" in ln or "error" in ln:
            return _trim_log_line(ln)
    return _trim_log_line(lines[-1]) if lines else ""


def _trim_log_line(line: str) -> str:
    # "22-11-2026 10:11:12:123 [pid:1 tid: 2] ERROR  cufio-fs:408 udev property not found: ..."
    m = re.search(r"\b(?:ERROR|WARN|NOTICE|INFO|DEBUG|TRACE)\b\s+(?:\S+:\d+\s+)?(.*)$", line)
    return (m.group(1) if m else line).strip()[:300]


# ------------------------------------------------------------------ mode


def truthy(text: str | None) -> bool:
    return str(text or "").strip().lower() in ("1", "true", "yes", "on")


def nvidia_fs_version() -> str | None:
    """nvidia-fs kernel module version when it is loaded, else None."""
    for path in ("/proc/driver/nvidia-fs/version", "/sys/module/nvidia_fs/version"):
        try:
            with open(path) as fh:
                text = fh.read().strip()
            m = re.search(r"(\d+\.\d+(?:\.\d+)?)", text)
            return m.group(1) if m else (text.splitlines()[0] if text else "loaded")
        except OSError:
            continue
    return "loaded" if os.path.isdir("/sys/module/nvidia_fs") else None


def _param(kind: str, name: str):
    """A cuFile setting in effect (``kind`` "bool" or "size_t"); None when it cannot be read."""
    try:
        cf = module()
        enum = cf.BoolConfigParameter if kind == "bool" else cf.SizeTConfigParameter
        return getattr(cf, f"get_parameter_{kind}")(int(getattr(enum, name)))
    except Exception:
        return None


def _param_bool(name: str) -> bool | None:
    value = _param("bool", name)
    return None if value is None else bool(value)


@dataclass(frozen=True)
class CufileMode:
    mode: str  # "gds" or "compat"
    reason: str  # why, in a few words

    @property
    def label(self) -> str:
        if self.mode == "compat":
            return f"cuFile compat mode (POSIX underneath: {self.reason})"
        return f"cuFile GDS ({self.reason})"


def driver_mode() -> CufileMode:
    """The mode the opened driver runs in, from what it was given and what it logged."""
    if truthy(os.environ.get(FORCE_COMPAT_ENV)):
        return CufileMode("compat", f"forced by {FORCE_COMPAT_ENV}")
    if _param_bool("FORCE_COMPAT_MODE"):
        return CufileMode("compat", "forced by cufile.json")
    compat_line = next((ln for ln in _driver.open_log.splitlines() if "compat" in ln.lower()), "")
    nvfs = nvidia_fs_version()
    p2pdma = bool(_param_bool("USE_PCIP2PDMA"))
    if nvfs is None and not p2pdma:
        return CufileMode("compat", "nvidia-fs not loaded")
    if compat_line:
        return CufileMode("compat", _trim_log_line(compat_line))
    return CufileMode("gds", f"nvidia-fs {nvfs}" if nvfs else "PCI P2PDMA")


#: the cuFile counters a probe read moves: which path served it
PROBE_COUNTERS = {"nvfs": "n_nvfs_reads", "p2p": "n_p2p_reads", "posix": "n_posix_reads"}


def max_batch_size() -> int:
    """Largest batch cuFile accepts (cufile.json properties.io_batchsize; 128 by default)."""
    return int(_param("size_t", "PROPERTIES_IO_BATCHSIZE") or 128)


# ------------------------------------------------------------------ registration


def block_device(path: str) -> tuple[int, int]:
    st = os.stat(path)
    return os.major(st.st_dev), os.minor(st.st_dev)


def udev_record_path(path: str) -> str:
    major, minor = block_device(path)
    return f"/run/udev/data/b{major}:{minor}"


def udev_fix(path: str, fstype: str) -> str:
    """The shell line (as root) that writes the udev record cuFile looks for."""
    major, minor = block_device(path)
    fs = fstype if fstype and fstype != "unknown" else "ext4"
    return (
        f"mkdir -p /run/udev/data && printf 'E:ID_FS_USAGE=filesystem\\nE:ID_FS_TYPE={fs}\\n' "
        f"> /run/udev/data/b{major}:{minor}"
    )


def udev_record_ok(path: str) -> bool:
    try:
        with open(udev_record_path(path)) as fh:
            return "ID_FS_USAGE=" in fh.read()
    except OSError:
        return False


def explain_registration(exc: BaseException, log_text: str, path: str, fstype: str) -> str:
    """Why cuFile would not register ``path``, and the fix, in one line."""
    code, name = error_code(exc)
    low = log_text.lower()
    if "id_fs_usage" in low or "udev" in low:
        major, minor = block_device(path)
        return (
            f"cuFile cannot register {path}: the udev database has no record for its block device "
            f"{major}:{minor} (usual inside VMs and containers). Fix, as root: {udev_fix(path, fstype)}"
        )
    if any(fstype.startswith(fs) for fs in NO_CUFILE_FS):
        return (
            f"cuFile cannot register files on {fstype} ({path}): it needs a block-device filesystem "
            "with O_DIRECT; use a directory on ext4 or xfs (--dir)"
        )
    if name in ("DIO_NOT_SET", "INVALID_FILE_OPEN_FLAG") or "o_direct" in low:
        return (
            f"cuFile cannot register {path}: the file must be open with O_DIRECT and {fstype} refuses "
            "it; use a directory on ext4 or xfs (--dir)"
        )
    detail = last_log_error(log_text)
    return (
        f"cuFile handle_register failed for {path}: {name}"
        + (f" ({code})" if code else "")
        + (f"; cuFile log: {detail}" if detail else "")
        + "; run `xferscope doctor --dir DIR` for the checks"
    )


def register_handle(res: gpu_setup.GpuResources, fd: int, path: str, fstype: str) -> int:
    """A cuFile handle for ``fd`` (deregistered by ``res.release()``)."""
    cf = module()
    descr = cf.Descr()
    descr.type = cf.FileHandleType.OPAQUE_FD
    descr.handle.fd = fd
    descr.fs_ops = 0
    mark = log().mark()
    with gpu_setup.interrupts_deferred():
        try:
            handle = cf.handle_register(descr.ptr)
        except Exception as exc:
            raise EnvironmentProblem(explain_registration(exc, log().since(mark), path, fstype)) from None
        res.on_release(None, "cuFileHandleDeregister", lambda: cf.handle_deregister(handle))
    return int(handle)


def register_buffer(res: gpu_setup.GpuResources, gpu: int, ptr: int, size: int) -> None:
    """Register GPU memory with cuFile (outside the timed region; it costs 0.3-1 ms a call)."""
    cf = module()
    mark = log().mark()
    with gpu_setup.interrupts_deferred():
        try:
            cf.buf_register(ptr, size, 0)
        except Exception as exc:
            _, name = error_code(exc)
            detail = last_log_error(log().since(mark))
            raise EnvironmentProblem(
                f"cuFile buf_register of {size >> 10} KiB on GPU {gpu} failed: {name}"
                + (f" ({detail})" if detail else "")
            ) from None
        res.on_release(gpu, "cuFileBufDeregister", lambda: cf.buf_deregister(ptr))


def register_stream(res: gpu_setup.GpuResources, gpu: int, stream, flags: int) -> None:
    cf = module()
    with gpu_setup.interrupts_deferred():
        try:
            cf.stream_register(int(stream), flags)
        except Exception as exc:
            _, name = error_code(exc)
            raise EnvironmentProblem(f"cuFile stream_register failed: {name}") from None
        res.on_release(gpu, "cuFileStreamDeregister", lambda: cf.stream_deregister(int(stream)))


# ------------------------------------------------------------------ cufile.json


def config_path() -> str:
    return os.environ.get(CONFIG_ENV) or DEFAULT_CONFIG


def strip_json_comments(text: str) -> str:
    """cufile.json allows // and /* */ comments; JSON does not. Strings are left alone."""
    out, i, n, in_str = [], 0, len(text), False
    while i < n:
        c = text[i]
        if in_str:
            out.append(c)
            if c == "\\" and i + 1 < n:
                out.append(text[i + 1])
                i += 1
            elif c == '"':
                in_str = False
        elif c == '"':
            in_str = True
            out.append(c)
        elif text.startswith("//", i):
            while i < n and text[i] != "\n":
                i += 1
            continue
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            i = n if end < 0 else end + 2
            continue
        else:
            out.append(c)
        i += 1
    return re.sub(r",(\s*[}\]])", r"\1", "".join(out))


def read_config(path: str | None = None) -> dict:
    """The cufile.json in effect, parsed (comments allowed); raises OSError or ValueError."""
    with open(path or config_path()) as fh:
        return json.loads(strip_json_comments(fh.read()))
