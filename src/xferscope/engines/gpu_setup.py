"""CUDA set-up for the GPU paths, through cuda-python (``cuda.bindings.driver``).

What lives here: whether CUDA can run at all (and why not, in the user's
terms), primary contexts, device and pinned host memory, streams and events,
the addresses of the driver functions the native core calls, and teardown.

Everything allocated goes through ``GpuResources``, which remembers how to undo
each step and undoes them all in ``release()``: after a normal run, after a
failure half-way through set-up, and after Ctrl-C. Signals that would raise
``KeyboardInterrupt`` are held back while an allocation is being recorded, so
an interrupt can never land between "allocated" and "remembered".
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import signal
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from xferscope.errors import EnvironmentProblem, SpecError
from xferscope.gpus import NO_GPU_ENV, hidden_gpus

#: cuMemHostAlloc flag: the pinned buffer is usable from every context.
CU_MEMHOSTALLOC_PORTABLE = 0x01
#: cuMemHostRegister flag: the same, for memory allocated elsewhere.
CU_MEMHOSTREGISTER_PORTABLE = 0x01
HUGE_PAGE = 2 << 20
#: cuEventCreate flags: waiting blocks the thread instead of spinning; no timing (cheapest to record).
CU_EVENT_BLOCKING_SYNC = 0x01
CU_EVENT_DISABLE_TIMING = 0x02
CU_STREAM_NON_BLOCKING = 0x01

#: Job.gpu_functions key -> symbol in libcuda (the _v2 copies take 64-bit device pointers).
DRIVER_SYMBOLS = {
    "cuCtxSetCurrent": "cuCtxSetCurrent",
    "cuMemcpyHtoDAsync": "cuMemcpyHtoDAsync_v2",
    "cuMemcpyDtoHAsync": "cuMemcpyDtoHAsync_v2",
    "cuStreamSynchronize": "cuStreamSynchronize",
    "cuEventRecord": "cuEventRecord",
    "cuEventSynchronize": "cuEventSynchronize",
    "cuEventQuery": "cuEventQuery",
}


class CudaError(EnvironmentProblem):
    """A CUDA driver call failed; the message names the call and CUDA's error name."""

    def __init__(self, what: str, code: int, name: str):
        self.code = code
        self.name = name
        super().__init__(f"{what} failed: {name}")


def driver():
    """The ``cuda.bindings.driver`` module (ImportError when cuda-python is missing)."""
    from cuda.bindings import driver as cu

    return cu


def _error_name(cu, err) -> str:
    try:
        rc, name = cu.cuGetErrorName(err)
        if rc == cu.CUresult.CUDA_SUCCESS and name:
            return name.decode() if isinstance(name, bytes) else str(name)
    except Exception:
        pass
    return str(err)


def check(result, what: str):
    """Unpack a cuda-python ``(CUresult, *values)`` tuple; raise CudaError unless it succeeded."""
    cu = driver()
    err = result[0]
    if err != cu.CUresult.CUDA_SUCCESS:
        raise CudaError(what, int(err), _error_name(cu, err))
    if len(result) == 1:
        return None
    return result[1] if len(result) == 2 else result[1:]


# ------------------------------------------------------------------ availability


@functools.lru_cache(maxsize=1)
def cuda_status() -> tuple[str | None, int]:
    """(None, number of GPUs) when CUDA works here; (reason, 0) when it does not."""
    if hidden_gpus():
        return f"no GPU: hidden by {NO_GPU_ENV}", 0
    try:
        cu = driver()
    except ImportError:
        return "cuda-python not installed (pip install cuda-python)", 0
    try:
        rc = cu.cuInit(0)[0]
    except Exception:  # cuda.pathfinder cannot find libcuda.so: no NVIDIA driver
        return "no GPU: the NVIDIA driver (libcuda) is not installed", 0
    hidden = os.environ.get("CUDA_VISIBLE_DEVICES")
    if rc == cu.CUresult.CUDA_ERROR_NO_DEVICE:
        why = f" (CUDA_VISIBLE_DEVICES={hidden!r})" if hidden is not None else ""
        return f"no GPU: CUDA sees no device{why}", 0
    if rc != cu.CUresult.CUDA_SUCCESS:
        return f"no GPU: cuInit failed ({_error_name(cu, rc)})", 0
    count = check(cu.cuDeviceGetCount(), "cuDeviceGetCount")
    if not count:
        return "no GPU: CUDA sees no device", 0
    return None, int(count)


def unavailable_reason() -> str | None:
    """None when CUDA can run here, else why not ("no GPU", "cuda-python not installed", ...)."""
    return cuda_status()[0]


def cuda_driver_version() -> str | None:
    """The CUDA version the driver supports, e.g. "13.0"; None without a driver."""
    try:
        cu = driver()
        v = check(cu.cuDriverGetVersion(), "cuDriverGetVersion")
    except Exception:
        return None
    return f"{v // 1000}.{v % 1000 // 10}"


def cuda_python_version() -> str | None:
    from importlib import metadata

    for dist in ("cuda-bindings", "cuda-python"):
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return None


def _nvml_bus_id(index: int) -> str | None:
    """PCI bus id of the GPU that nvidia-smi numbers ``index``, or None without NVML."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:
        return None
    try:
        bus = pynvml.nvmlDeviceGetPciInfo(pynvml.nvmlDeviceGetHandleByIndex(index)).busId
        return bus.decode() if isinstance(bus, bytes) else str(bus)
    except Exception:
        return None
    finally:
        with contextlib.suppress(Exception):
            pynvml.nvmlShutdown()


def device(index: int):
    """The CUdevice for GPU ``index``, numbered as nvidia-smi numbers them (PCI order).

    CUDA's own order may differ (fastest first); matching by PCI bus id keeps
    ``--gpu N`` and the telemetry of GPU N on the same card.
    """
    reason, count = cuda_status()
    if reason:
        raise EnvironmentProblem(reason)
    cu = driver()
    bus = _nvml_bus_id(index)
    if bus:
        rc, dev = cu.cuDeviceGetByPCIBusId(bus.encode())
        if rc == cu.CUresult.CUDA_SUCCESS:
            return dev
        raise SpecError("gpu", f"GPU {index} ({bus}) is not visible to CUDA here; check CUDA_VISIBLE_DEVICES")
    if index >= count:
        raise SpecError("gpu", f"GPU {index} does not exist; CUDA sees {count} (indices 0..{count - 1})")
    return check(cu.cuDeviceGet(index), f"cuDeviceGet({index})")


def numa_nodes() -> list[int]:
    """The machine's NUMA nodes, from sysfs; [] where sysfs does not say."""
    try:
        names = os.listdir("/sys/devices/system/node")
    except OSError:
        return []
    return sorted(int(n[4:]) for n in names if n.startswith("node") and n[4:].isdigit())


def gpu_local_cpus(index: int) -> tuple[int | None, list[int]]:
    """The NUMA node of GPU ``index`` and the CPUs local to it (None, [] where unknown)."""
    from xferscope.gpus import pci_locality
    from xferscope.spec import parse_int_list

    bus = _nvml_bus_id(index)
    if not bus:
        return None, []
    where = pci_locality(bus)
    cpus: list[int] = []
    with contextlib.suppress(SpecError):
        cpus = parse_int_list(where.get("local_cpus", ""), "local_cpulist") if where.get("local_cpus") else []
    node = where.get("numa_node")
    return (node if node is not None and node >= 0 else None), cpus


@contextlib.contextmanager
def running_on(cpus: Iterable[int] | None) -> Iterator[None]:
    """Run the block with this thread bound to ``cpus`` (nothing when None or empty), then restore.

    Pinned host memory is allocated and faulted in by the calling thread, so its
    pages land on the NUMA node of the CPUs it runs on.
    """
    wanted = set(cpus or ())
    if not wanted:
        yield
        return
    saved = os.sched_getaffinity(0)
    usable = wanted & saved or wanted
    try:
        os.sched_setaffinity(0, usable)
    except OSError:
        yield
        return
    try:
        yield
    finally:
        os.sched_setaffinity(0, saved)


def device_name(index: int) -> str:
    cu = driver()
    raw = check(cu.cuDeviceGetName(256, device(index)), "cuDeviceGetName")
    return raw.split(b"\0", 1)[0].decode(errors="replace") if isinstance(raw, bytes) else str(raw)


# ------------------------------------------------------------------ signals

_DEFERRED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _deferring(pending: list[tuple[int, Callable]], handler: Callable) -> Callable[[int, Any], None]:
    """A signal handler that notes the signal, for ``handler`` to take once the deferring block ends."""
    return lambda signum, frame: pending.append((signum, handler))


@contextlib.contextmanager
def interrupts_deferred() -> Iterator[None]:
    """Hold back signals whose Python handler would raise (Ctrl-C) until the block ends.

    Only the main thread receives signals in Python, so elsewhere this does nothing.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pending: list[tuple[int, Callable]] = []
    saved: dict[int, Any] = {}
    for sig in _DEFERRED:
        old = signal.getsignal(sig)
        if callable(old):
            saved[sig] = old
            signal.signal(sig, _deferring(pending, old))
    try:
        yield
    finally:
        for signum, handler in saved.items():
            signal.signal(signum, handler)
        if pending:
            signum, handler = pending[0]
            handler(signum, None)


# ------------------------------------------------------------------ resources


class GpuResources:
    """Contexts and allocations of one engine (or one measurement), freed together.

    Every ``alloc``-style method records how to undo itself before returning;
    ``release()`` undoes everything in reverse order, never raises, and may be
    called any number of times.
    """

    def __init__(self) -> None:
        self._contexts: dict[int, tuple[Any, Any]] = {}  # gpu -> (CUdevice, CUcontext)
        self._undo: list[tuple[int | None, str, Callable[[], Any]]] = []
        self._lock = threading.Lock()
        self.problems: list[str] = []  # what release() could not undo (reported, never raised)

    # -- bookkeeping ---------------------------------------------------------
    def on_release(self, gpu: int | None, what: str, undo: Callable[[], Any]) -> None:
        """Remember ``undo`` (run with ``gpu``'s context current) for ``release()``."""
        with self._lock:
            self._undo.append((gpu, what, undo))

    @property
    def live(self) -> int:
        """How many steps are still to undo (0 after ``release()``)."""
        return len(self._undo) + len(self._contexts)

    # -- contexts --------------------------------------------------------------
    def context(self, gpu: int):
        """Retain GPU ``gpu``'s primary context (once) and make it current in this thread."""
        cu = driver()
        if gpu not in self._contexts:
            dev = device(gpu)
            with interrupts_deferred():
                ctx = check(cu.cuDevicePrimaryCtxRetain(dev), f"cuDevicePrimaryCtxRetain(GPU {gpu})")
                self._contexts[gpu] = (dev, ctx)
        ctx = self._contexts[gpu][1]
        check(cu.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
        return ctx

    def functions(self) -> dict[str, int]:
        """Addresses of the CUDA entry points the native core calls (the stand-ins' take their place in tests)."""
        return dict(driver_functions())

    def context_handle(self, gpu: int) -> int:
        return int(self.context(gpu))

    # -- memory ----------------------------------------------------------------
    def device_memory(self, gpu: int, size: int) -> int:
        """``size`` bytes of GPU memory on ``gpu``; the address as an int."""
        cu = driver()
        self.context(gpu)
        with interrupts_deferred():
            rc, ptr = cu.cuMemAlloc(size)
            if rc != cu.CUresult.CUDA_SUCCESS:
                free = _free_memory(cu)
                more = f" ({free / (1 << 20):.0f} MiB free)" if free is not None else ""
                raise EnvironmentProblem(
                    f"not enough GPU memory on GPU {gpu}: cuMemAlloc of "
                    f"{size / (1 << 20):.0f} MiB failed ({_error_name(cu, rc)}){more}; "
                    "lower --bs or --workers"
                )
            self.on_release(gpu, "cuMemFree", lambda: check(cu.cuMemFree(ptr), "cuMemFree"))
        return int(ptr)

    def pinned_memory(self, gpu: int, size: int) -> int:
        """``size`` bytes of page-locked host memory (portable across contexts); the address."""
        cu = driver()
        self.context(gpu)
        with interrupts_deferred():
            rc, ptr = cu.cuMemHostAlloc(size, CU_MEMHOSTALLOC_PORTABLE)
            if rc != cu.CUresult.CUDA_SUCCESS:
                raise EnvironmentProblem(
                    f"cannot pin {size / (1 << 20):.0f} MiB of host memory "
                    f"({_error_name(cu, rc)}); lower --bs or --workers, or raise ulimit -l"
                )
            self.on_release(gpu, "cuMemFreeHost", lambda: check(cu.cuMemFreeHost(ptr), "cuMemFreeHost"))
        return int(ptr)

    def pinned_huge_memory(self, gpu: int, size: int) -> int:
        """``size`` bytes of host memory on 2 MiB transparent huge pages, page-locked and registered with
        CUDA (cuMemHostRegister, portable); the address. The pages are faulted in by the calling thread."""
        cu = driver()
        self.context(gpu)
        with interrupts_deferred():
            raw, length, base = map_huge_pages(size)
            self.on_release(gpu, "munmap", lambda: unmap(raw, length))
        with interrupts_deferred():
            rc = cu.cuMemHostRegister(base, size, CU_MEMHOSTREGISTER_PORTABLE)[0]
            if rc != cu.CUresult.CUDA_SUCCESS:
                raise EnvironmentProblem(
                    f"cannot pin {size / (1 << 20):.0f} MiB of host memory on huge pages "
                    f"(cuMemHostRegister: {_error_name(cu, rc)}); lower --bs or --workers, "
                    "or raise ulimit -l"
                )
            self.on_release(
                gpu, "cuMemHostUnregister", lambda: check(cu.cuMemHostUnregister(base), "cuMemHostUnregister")
            )
        return base

    def stream(self, gpu: int):
        """A non-blocking stream on ``gpu`` (the CUstream object; ``int()`` gives the handle)."""
        cu = driver()
        self.context(gpu)
        with interrupts_deferred():
            s = check(cu.cuStreamCreate(CU_STREAM_NON_BLOCKING), "cuStreamCreate")
            self.on_release(gpu, "cuStreamDestroy", lambda: check(cu.cuStreamDestroy(s), "cuStreamDestroy"))
        return s

    def event(self, gpu: int, timing: bool = False, blocking: bool = False):
        """An event on ``gpu``; ``blocking``: cuEventSynchronize sleeps rather than spins. The bounce paths do not
        ask for it: on an H100 VM cuEventQuery on such an event cost up to 45 us, and a blocking wait landed a
        1 MiB copy 80-160 us late (the native core's wait_copy sleeps by itself where a wait is long)."""
        cu = driver()
        self.context(gpu)
        flags = (0 if timing else CU_EVENT_DISABLE_TIMING) | (CU_EVENT_BLOCKING_SYNC if blocking else 0)
        with interrupts_deferred():
            e = check(cu.cuEventCreate(flags), "cuEventCreate")
            self.on_release(gpu, "cuEventDestroy", lambda: check(cu.cuEventDestroy(e), "cuEventDestroy"))
        return e

    def fill_device(self, gpu: int, ptr: int, size: int, seed: int) -> None:
        """Put xferscope's data pattern into GPU memory, so that writes carry data, not zeros."""
        from xferscope import _iocore

        cu = driver()
        self.context(gpu)
        chunk = min(size, 8 << 20)
        buf = bytearray(chunk)
        done = 0
        while done < size:
            n = min(chunk, size - done)
            _iocore.fill_pattern(buf, done, seed)
            check(cu.cuMemcpyHtoD(ptr + done, buf, n), "cuMemcpyHtoD")
            done += n

    def copy(self, gpu: int, dst: int, src: int, n: int, kind: str) -> None:
        """``n`` bytes from ``src`` to ``dst`` on ``gpu``'s context, waited for: ``kind`` "dtoh" (GPU memory to host
        memory, pinned or pageable), "htod", or "dtod" (within GPU memory)."""
        cu = driver()
        self.context(gpu)
        name = {"dtoh": "cuMemcpyDtoH", "htod": "cuMemcpyHtoD", "dtod": "cuMemcpyDtoD"}[kind]
        check(getattr(cu, name)(dst, src, n), name)
        if kind == "dtod":  # the one kind the call returns from before the copy is done
            check(cu.cuCtxSynchronize(), "cuCtxSynchronize")

    # -- teardown ----------------------------------------------------------------
    def release(self) -> None:
        """Free everything, newest first. Never raises; problems go to ``self.problems``."""
        cu = None
        with contextlib.suppress(Exception):
            cu = driver()
        if cu is None:
            return
        for _, ctx in list(self._contexts.values()):  # nothing may still be in flight
            with contextlib.suppress(Exception):
                cu.cuCtxSetCurrent(ctx)
                cu.cuCtxSynchronize()
        while True:
            with self._lock:
                if not self._undo:
                    break
                gpu, what, undo = self._undo.pop()
            try:
                if gpu is not None and gpu in self._contexts:
                    cu.cuCtxSetCurrent(self._contexts[gpu][1])
                undo()
            except Exception as exc:  # keep freeing the rest
                self.problems.append(f"{what}: {exc}")
        for gpu, (dev, _) in list(self._contexts.items()):
            with contextlib.suppress(Exception):
                cu.cuDevicePrimaryCtxRelease(dev)
            del self._contexts[gpu]
        with contextlib.suppress(Exception):
            cu.cuCtxSetCurrent(cu.CUcontext(0))

    def __enter__(self) -> GpuResources:
        return self

    def __exit__(self, *exc) -> None:
        self.release()


_PROT_RW = 0x1 | 0x2  # PROT_READ | PROT_WRITE
_MAP_ANON_PRIVATE = 0x02 | 0x20  # MAP_PRIVATE | MAP_ANONYMOUS
_MADV_HUGEPAGE = 14
_MAP_FAILED = ctypes.c_void_p(-1).value


def map_huge_pages(size: int) -> tuple[int, int, int]:
    """Anonymous memory for ``size`` bytes on 2 MiB transparent huge pages, faulted in by the calling
    thread: (mapping address, mapping length, the 2 MiB-aligned address to use). ``unmap`` frees it."""
    libc = _libc()
    length = -(-size // HUGE_PAGE) * HUGE_PAGE + HUGE_PAGE  # room to start on a 2 MiB boundary
    raw = libc.mmap(None, length, _PROT_RW, _MAP_ANON_PRIVATE, -1, 0)
    if not raw or raw == _MAP_FAILED:
        raise EnvironmentProblem(
            f"cannot map {length / (1 << 20):.0f} MiB of host memory "
            f"({os.strerror(ctypes.get_errno())}); lower --bs or --workers"
        )
    base = -(-raw // HUGE_PAGE) * HUGE_PAGE
    if libc.madvise(ctypes.c_void_p(base), ctypes.c_size_t(length - (base - raw)), _MADV_HUGEPAGE):
        err = ctypes.get_errno()
        unmap(raw, length)
        raise EnvironmentProblem(f"--huge-pages: madvise(MADV_HUGEPAGE) refused ({os.strerror(err)})")
    ctypes.memset(base, 0, size)  # fault the pages in now, as huge pages, on this thread's NUMA node
    return raw, length, base


def unmap(address: int, length: int) -> None:
    _libc().munmap(ctypes.c_void_p(address), ctypes.c_size_t(length))


@functools.lru_cache(maxsize=1)
def _libc():
    """libc's mmap, madvise and munmap, with their C types."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    return libc


def _free_memory(cu) -> int | None:
    try:
        free, _total = check(cu.cuMemGetInfo(), "cuMemGetInfo")
        return int(free)
    except Exception:
        return None


def memory_info(gpu: int) -> tuple[int, int]:
    """(free, total) bytes of GPU memory on ``gpu``, as CUDA sees them."""
    with GpuResources() as res:
        res.context(gpu)
        free, total = check(driver().cuMemGetInfo(), "cuMemGetInfo")
        return int(free), int(total)


# ------------------------------------------------------------------ native entry points


def loaded_library(fragment: str) -> str | None:
    """Path of a shared library already mapped into this process whose name contains ``fragment``."""
    try:
        with open("/proc/self/maps") as fh:
            for line in fh:
                parts = line.split(maxsplit=5)
                if len(parts) == 6 and fragment in os.path.basename(parts[5].strip()):
                    return parts[5].strip()
    except OSError:
        pass
    return None


@functools.lru_cache(maxsize=1)
def driver_functions() -> dict[str, int]:
    """Addresses of the driver functions the native core calls, from the libcuda cuda-python loaded."""
    reason = unavailable_reason()
    if reason:
        raise EnvironmentProblem(reason)
    lib = ctypes.CDLL(loaded_library("libcuda.so") or "libcuda.so.1")
    return {key: symbol_address(lib, symbol) for key, symbol in DRIVER_SYMBOLS.items()}


def symbol_address(lib: ctypes.CDLL, name: str) -> int:
    """The address of ``name`` in ``lib`` (AttributeError where it has none)."""
    return ctypes.cast(getattr(lib, name), ctypes.c_void_p).value or 0


def assign_gpus(gpus: list[int], workers: int) -> list[int]:
    """Worker i runs on ``gpus[i % len(gpus)]`` (round-robin)."""
    return [gpus[i % len(gpus)] for i in range(workers)]
