"""The checks of ``xferscope doctor``: each reads the machine (or the facts gathered once) and gives ok, warn or
fail, one line of detail and, where something is wrong, the fix."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from xferscope.records import GpuReading

OK, WARN, FAIL = "ok", "warn", "fail"
SCHEMA = "xferscope.doctor/1"
#: cufile.json settings worth showing, as (section, key)
CONFIG_KEYS = (
    ("properties", "allow_compat_mode"),
    ("properties", "max_direct_io_size_kb"),
    ("properties", "use_poll_mode"),
    ("properties", "poll_mode_max_size_kb"),
    ("properties", "use_pci_p2pdma"),
    ("properties", "io_batchsize"),
    ("properties", "rdma_dev_addr_list"),
    ("properties", "rdma_dynamic_routing"),
    ("execution", "parallel_io"),
    ("logging", "level"),
)


@dataclass
class Check:
    name: str
    status: str
    detail: str
    fix: str = ""


@dataclass
class Facts:
    """What the checks learn once and share."""

    directory: str
    gpus: list[GpuReading]
    cuda_reason: str | None = None
    cufile_reason: str | None = None
    fstype: str = "unknown"
    config: dict | None = None


# ------------------------------------------------------------------ GPU and drivers


def check_driver(f: Facts) -> list[Check]:
    from xferscope.telemetry.gpu import driver_versions, no_gpu_reason

    versions = driver_versions()
    if not versions:
        why = no_gpu_reason() or "no NVIDIA driver"
        return [
            Check(
                "NVIDIA driver",
                WARN,
                f"{why}: the GPU paths (bounce, cufile) cannot run here; host and memory paths work",
                "install the NVIDIA driver if this machine has a GPU",
            )
        ]
    detail = f"driver {versions.get('driver', '?')}, CUDA {versions.get('cuda', '?')}"
    names = ", ".join(f"{g['index']}: {g['name']}" for g in f.gpus) or "none"
    return [Check("NVIDIA driver", OK, detail), Check("GPUs", OK if f.gpus else WARN, names)]


def check_cuda_python(f: Facts) -> list[Check]:
    from xferscope.engines import gpu_setup

    version = gpu_setup.cuda_python_version()
    if version is None:
        return [
            Check("cuda-python", WARN, "not installed: bounce and cufile paths unavailable", "pip install cuda-python")
        ]
    if f.cuda_reason:
        return [Check("cuda-python", WARN, f"{version}; CUDA cannot start: {f.cuda_reason}")]
    return [Check("cuda-python", OK, f"{version}; CUDA {gpu_setup.cuda_driver_version()} initialises")]


def check_cufile_library(f: Facts) -> list[Check]:
    from xferscope.engines import cufile_driver

    reason = cufile_driver.library_status()[0]
    if reason:
        status = WARN if f.cuda_reason else FAIL
        return [
            Check(
                "cuFile library",
                status,
                reason,
                "" if f.cuda_reason else "pip install nvidia-cufile-cu13 (or install NVIDIA GDS)",
            )
        ]
    return [Check("cuFile library", OK, f"{cufile_driver.library_version()} ({cufile_driver.library_path()})")]


def check_nvidia_fs(f: Facts) -> list[Check]:
    from xferscope.engines import cufile_driver

    version = cufile_driver.nvidia_fs_version()
    if version:
        return [Check("nvidia-fs", OK, f"loaded ({version}): cuFile can move data by DMA (true GDS)")]
    p2p = bool(((f.config or {}).get("properties") or {}).get("use_pci_p2pdma"))
    if p2p:
        return [Check("nvidia-fs", OK, "not loaded; cufile.json enables PCI P2PDMA instead")]
    return [
        Check(
            "nvidia-fs",
            WARN,
            "not loaded: cuFile runs in compat mode (POSIX reads into its own "
            "bounce buffers), so cufile results are labelled compat",
            "on bare metal: install the nvidia-gds package and run `modprobe nvidia_fs`; "
            "inside VMs and containers GDS is usually not possible",
        )
    ]


def check_cufile_driver(f: Facts) -> list[Check]:
    from xferscope.engines import cufile_driver

    if f.cufile_reason:
        return []
    try:
        cufile_driver.open_driver(0)
    except Exception as exc:
        return [Check("cuFile driver", FAIL, str(exc), "run with CUFILE_LOGGING_LEVEL=TRACE and read the log")]
    mode = cufile_driver.driver_mode()
    return [Check("cuFile driver", OK if mode.mode == "gds" else WARN, f"opens; {mode.label}")]


def check_config(f: Facts) -> list[Check]:
    from xferscope.engines import cufile_driver

    path = cufile_driver.config_path()
    if not os.path.exists(path):
        return [
            Check(
                "cufile.json",
                WARN,
                f"{path} not found: cuFile uses its built-in defaults",
                f"set {cufile_driver.CONFIG_ENV} to your cufile.json, or install one at {cufile_driver.DEFAULT_CONFIG}",
            )
        ]
    try:
        f.config = cufile_driver.read_config(path)
    except (OSError, ValueError) as exc:
        return [Check("cufile.json", FAIL, f"{path} cannot be read: {exc}", f"fix the JSON in {path}")]
    shown = []
    for section, key in CONFIG_KEYS:
        value = (f.config.get(section) or {}).get(key) if isinstance(f.config.get(section), dict) else None
        if value is None:
            continue
        if isinstance(value, list):
            value = f"{len(value)} entries"
        shown.append(f"{key}={json_word(value)}")
    detail = f"{path}: " + (", ".join(shown) if shown else "no key settings (defaults)")
    props = (f.config or {}).get("properties")
    if not isinstance(props, dict):
        props = {}
    if (
        props.get("allow_compat_mode") is False
        and not cufile_driver.nvidia_fs_version()
        and not props.get("use_pci_p2pdma")
    ):
        return [
            Check(
                "cufile.json",
                FAIL,
                detail + "; compat mode is off and nvidia-fs is not loaded, so cuFile cannot run",
                'set "allow_compat_mode": true or load nvidia-fs',
            )
        ]
    return [Check("cufile.json", OK, detail)]


def json_word(value: Any) -> str:
    return "true" if value is True else "false" if value is False else str(value)


# ------------------------------------------------------------------ the directory


def check_filesystem(f: Facts) -> list[Check]:
    from xferscope.engines import cufile_driver
    from xferscope.target import filesystem_of

    if not os.path.isdir(f.directory):
        return [
            Check(
                "directory",
                FAIL,
                f"{f.directory} does not exist or is not a directory",
                "create it, or pass an existing one with --dir",
            )
        ]
    fs = filesystem_of(f.directory)
    f.fstype = fs.fstype
    detail = f"{f.directory}: {fs.fstype} on {fs.device or '?'} (mounted at {fs.mountpoint})"
    if any(fs.fstype.startswith(bad) for bad in cufile_driver.NO_CUFILE_FS):
        return [
            Check(
                "filesystem",
                WARN,
                detail + f"; cuFile cannot register files on {fs.fstype}",
                "for cufile paths use a directory on ext4 or xfs",
            )
        ]
    return [Check("filesystem", OK, detail)]


def check_direct_io(f: Facts) -> list[Check]:
    from xferscope.target import probe_direct_io

    if not os.path.isdir(f.directory):
        return []
    ok, why = probe_direct_io(f.directory)
    if ok:
        return [Check("O_DIRECT", OK, "files here open with O_DIRECT")]
    return [
        Check(
            "O_DIRECT",
            FAIL,
            f"{why}: host, bounce and cufile need O_DIRECT here",
            "use a directory on ext4 or xfs; host and bounce can run with --buffered",
        )
    ]


def check_host_buffers(f: Facts) -> list[Check]:
    from xferscope.engines.host import THP_SETTING, huge_pages_offered, thp_mode

    mode = thp_mode()
    if huge_pages_offered():
        return [Check("host buffers", OK, f"on 2 MiB transparent huge pages by default (THP {mode})")]
    return [
        Check(
            "host buffers",
            WARN,
            f"on 4 KiB pages: transparent huge pages are {mode or 'absent'}; on a VM the pages a run gets change "
            "its O_DIRECT speed, run to run, by up to a third",
            f"as root: echo madvise > {THP_SETTING}",
        )
    ]


def _probe_cannot_run(name: str, directory: str) -> list[Check]:
    """Why a probe that reads its file with O_DIRECT (``host_rounds``) cannot run in ``directory``, as its check;
    empty where it can."""
    from xferscope.doctor.host_rounds import FILE_BYTES
    from xferscope.target import probe_direct_io

    if not os.path.isdir(directory) or not probe_direct_io(directory)[0]:
        return [Check(name, WARN, "not measured: O_DIRECT does not work here")]
    free = shutil.disk_usage(directory).free
    if free < 2 * FILE_BYTES:
        return [Check(name, WARN, f"not measured: {free >> 20} MiB free, the probe's file needs 512 MiB")]
    return []


def _measured(name: str, ok: bool, sentence: str, fix: str) -> Check:
    """A probe's check: what it measured, with what to do where that is worth a warning."""
    return Check(name, OK, sentence) if ok else Check(name, WARN, sentence, fix)


def check_buffer_set(f: Facts) -> list[Check]:
    """What a larger set of buffers costs a read here (xferscope.doctor.buffer_probe): measured, about 8 s."""
    from xferscope.doctor import buffer_probe

    name = "buffer set"
    cannot = _probe_cannot_run(name, f.directory)
    if cannot:
        return cannot
    probe = buffer_probe.measure(f.directory)
    fix = (
        "keep the buffers a reader cycles through few (bounce-async measures one buffer against two groups taking "
        "turns, and says which it chose)"
    )
    return [_measured(name, probe.ratio(buffer_probe.SETS[1]) <= 1.1, probe.sentence(), fix)]


def check_pinned_memory(f: Facts) -> list[Check]:
    """What pinned memory costs a read here (xferscope.doctor.pinned_probe): measured where there is a GPU, about
    8 s."""
    from xferscope.doctor import pinned_probe
    from xferscope.engines import gpu_setup
    from xferscope.errors import EnvironmentProblem

    name = "pinned memory"
    if f.cuda_reason or not f.gpus or gpu_setup.unavailable_reason():
        return []
    cannot = _probe_cannot_run(name, f.directory)
    if cannot:
        return cannot
    try:
        probe = pinned_probe.measure(f.directory)
    except EnvironmentProblem as exc:  # pinning refused (a low ulimit -l, say)
        return [Check(name, WARN, f"not measured: {exc}")]
    from xferscope.engines import pinned_cost

    pinned_cost.remember(f.directory, probe.cost("registered"), probe.cost("allocated"))  # compare cites it
    fix = (
        "the bounce paths read into such memory: where one trails host by about this much, the memory costs it, "
        "not the path"
    )
    return [_measured(name, probe.cost("registered") <= 0.02, probe.sentence(), fix)]


#: where the block devices' queue limits are read (tests point it at a tree of their own)
SYSFS = "/sys"
SMALL_PAGE, HUGE_PAGE = 4096, 2 << 20


@dataclass(frozen=True)
class QueueLimits:
    """What one request to a block device may hold (``/sys/block/DEV/queue``)."""

    device: str
    max_segments: int  # scatter-gather entries a request may have
    max_segment_size: int  # bytes one entry may hold
    max_request: int  # bytes a request may hold (max_sectors_kb)

    def unsplit(self, page: int) -> int:
        """The largest read into buffers on pages of ``page`` bytes that is one request, where no two pages sit
        side by side in physical memory (4 KiB pages as a process gets them): each page, or each piece of a page
        that one entry can hold, is one entry."""
        per_segment = min(page, self.max_segment_size)
        return min(self.max_segments * per_segment, self.max_request)


def queue_limits(major: int, minor: int) -> QueueLimits | None:
    """The queue limits of the block device ``major:minor`` (a partition's are its disk's); None where sysfs has
    none (a filesystem not on a local block device, a device mapper without them)."""
    base = os.path.join(SYSFS, "dev", "block", f"{major}:{minor}")
    for queue in (os.path.join(base, "queue"), os.path.join(base, "..", "queue")):
        try:
            values = {}
            for name in ("max_segments", "max_segment_size", "max_sectors_kb"):
                with open(os.path.join(queue, name)) as fh:
                    values[name] = int(fh.read().strip())
        except (OSError, ValueError):
            continue
        device = os.path.basename(os.path.realpath(os.path.join(queue, "..")))
        return QueueLimits(device, values["max_segments"], values["max_segment_size"], values["max_sectors_kb"] << 10)
    return None


def check_queue_limits(f: Facts) -> list[Check]:
    """How large an O_DIRECT read can be before the block layer splits it, by the pages of the buffer."""
    from xferscope.engines.host import huge_pages_offered

    def format_size(n: int) -> str:
        return f"{n >> 10} KiB" if n < 1 << 20 or n % (1 << 20) else f"{n >> 20} MiB"

    dev = _block_device(f)
    limits = queue_limits(*dev) if dev else None
    if limits is None:
        return [Check("request size", OK, "no block device queue under this directory: nothing to split")]
    small, huge = limits.unsplit(SMALL_PAGE), limits.unsplit(HUGE_PAGE)
    size = (
        "no size limit on one" if limits.max_segment_size >= 1 << 31 else f"{format_size(limits.max_segment_size)} each"
    )
    detail = (
        f"{limits.device}: {limits.max_segments} segments a request ({size}), at most "
        f"{format_size(limits.max_request)} a request"
    )
    if small >= huge:
        return [Check("request size", OK, f"{detail}: the pages of a buffer make no difference here")]
    detail += (
        f": a read over {format_size(small)} into 4 KiB pages is split here; into 2 MiB pages one request holds "
        f"{format_size(huge)}"
    )
    if huge_pages_offered():
        return [Check("request size", OK, f"{detail}. xferscope's buffers are on 2 MiB pages")]
    return [
        Check(
            "request size",
            WARN,
            f"{detail}. xferscope's buffers are on 4 KiB pages here (transparent huge pages off): larger reads "
            "are split, and slower for it",
            "as root: echo madvise > /sys/kernel/mm/transparent_hugepage/enabled",
        )
    ]


def _block_device(f: Facts) -> tuple[int, int] | None:
    try:
        st = os.stat(f.directory)
    except OSError:
        return None
    major = os.major(st.st_dev)
    return None if major == 0 else (major, os.minor(st.st_dev))


def check_udev(f: Facts) -> list[Check]:
    from xferscope.engines import cufile_driver

    dev = _block_device(f)
    if dev is None:
        return (
            []
            if not os.path.isdir(f.directory)
            else [Check("udev record", OK, f"{f.fstype} is not on a local block device: no udev record needed")]
        )
    record = cufile_driver.udev_record_path(f.directory)
    if cufile_driver.udev_record_ok(f.directory):
        return [Check("udev record", OK, f"{record} has ID_FS_USAGE")]
    status = WARN if f.cufile_reason else FAIL
    return [
        Check(
            "udev record",
            status,
            f"{record} is missing or has no ID_FS_USAGE: cuFile's handle_register "
            "fails here (usual in VMs and containers without udev)",
            "as root (xferscope never does this for you): " + cufile_driver.udev_fix(f.directory, f.fstype),
        )
    ]


def check_registration(f: Facts) -> list[Check]:
    """Register a scratch file with cuFile and read it once: does cuFile work here, and in which mode?"""
    from xferscope import janitor
    from xferscope.engines import cufile_driver, cufile_probe, gpu_setup

    if f.cufile_reason or not os.path.isdir(f.directory):
        return []
    try:
        cufile_driver.open_driver(0)
    except Exception:
        return []
    fd, path = -1, ""
    res = gpu_setup.GpuResources()
    try:
        with tempfile.NamedTemporaryFile(prefix=".xferscope-doctor-", dir=f.directory, delete=False) as tmp:
            janitor.guard(tmp.name)  # this check runs in a process that may crash: the file goes all the same
            path = tmp.name
            tmp.write(os.urandom(1 << 20))
        fd = os.open(path, os.O_RDWR | os.O_DIRECT)
        cufile_driver.register_handle(res, fd, path, f.fstype)
        dev = res.device_memory(0, 1 << 20)
        cufile_driver.register_buffer(res, 0, dev, 1 << 20)
        mode = cufile_probe.file_mode(path, 1 << 20, 0, fstype=f.fstype)
        status = OK if mode.mode == "gds" else WARN
        return [Check("cuFile registration", status, f"a file in {f.directory} registers; {mode.label}")]
    except OSError as exc:
        return [
            Check(
                "cuFile registration",
                WARN,
                f"cannot make a test file in {f.directory}: {exc.strerror}",
                "pass a writable directory with --dir",
            )
        ]
    except Exception as exc:
        detail, _, fix = str(exc).partition(" Fix, as root: ")
        return [Check("cuFile registration", FAIL, detail, ("as root: " + fix) if fix else "")]
    finally:
        res.release()
        if fd >= 0:
            os.close(fd)
        if path:
            with contextlib.suppress(OSError):
                os.unlink(path)
            janitor.release(path)


def check_free_space(f: Facts) -> list[Check]:
    if not os.path.isdir(f.directory):
        return []
    free = shutil.disk_usage(f.directory).free
    detail = f"{free / (1 << 30):.1f} GiB free in {f.directory}"
    if free < (2 << 30):
        return [
            Check(
                "free space",
                WARN,
                detail + "; the default scratch file is 1 GiB per file",
                "free some space, or run with a smaller --size",
            )
        ]
    return [Check("free space", OK, detail)]


# ------------------------------------------------------------------ platform


def check_iommu(f: Facts) -> list[Check]:
    try:
        groups = os.listdir("/sys/kernel/iommu_groups")
    except OSError:
        groups = []
    try:
        with open("/proc/cmdline") as fh:
            cmdline = fh.read()
    except OSError:
        cmdline = ""
    passthrough = bool(re.search(r"\biommu(=|\.passthrough=)(pt|1)\b", cmdline))
    if not groups:
        return [Check("IOMMU", OK, "off (no IOMMU groups)")]
    if passthrough:
        return [Check("IOMMU", OK, f"on in passthrough mode ({len(groups)} groups)")]
    return [
        Check(
            "IOMMU",
            WARN,
            f"on ({len(groups)} groups): GDS peer-to-peer DMA may fail or slow down",
            "boot with iommu=pt (or intel_iommu=off / amd_iommu=off) for GDS",
        )
    ]


def check_gpu_links(f: Facts) -> list[Check]:
    from xferscope.engines.link_ceiling import measure_link_ceiling

    out = []
    for g in f.gpus:
        gen, gen_max = g.get("link_gen"), g.get("link_gen_max")
        width, width_max = g.get("link_width"), g.get("link_width_max")
        detail = f"Gen{gen} x{width} (max Gen{gen_max} x{width_max})"
        ceiling = measure_link_ceiling(g["index"])
        if ceiling:
            detail += (
                f"; pinned copies {ceiling['link_ceiling_h2d_gb_s']:.1f} GB/s host->GPU, "
                f"{ceiling['link_ceiling_d2h_gb_s']:.1f} GB/s GPU->host"
            )
        if width and width_max and width < width_max:
            out.append(
                Check(
                    f"PCIe link GPU {g['index']}",
                    WARN,
                    detail + f"; the link runs at x{width} of x{width_max}",
                    "check the slot, riser and BIOS lane settings",
                )
            )
            continue
        if gen and gen_max and gen < gen_max:
            detail += " (an idle GPU lowers its link generation; it rises under load)"
        out.append(Check(f"PCIe link GPU {g['index']}", OK, detail))
    return out


def _storage_numa(f: Facts) -> int | None:
    dev = _block_device(f)
    if dev is None:
        return None
    base = f"/sys/dev/block/{dev[0]}:{dev[1]}"
    for rel in ("device/numa_node", "device/device/numa_node", "../device/numa_node", "../device/device/numa_node"):
        with contextlib.suppress(OSError, ValueError):
            with open(os.path.join(base, rel)) as fh:
                node = int(fh.read().strip())
            return node if node >= 0 else None
    return None


def check_affinity(f: Facts) -> list[Check]:
    out = []
    storage = _storage_numa(f)
    for g in f.gpus:
        node = g.get("numa_node")
        where = "no NUMA information" if node is None or node < 0 else f"NUMA node {node}"
        detail = f"{where}, local CPUs {g.get('local_cpus', '?')}"
        if storage is not None and node is not None and node >= 0 and storage != node:
            out.append(
                Check(
                    f"affinity GPU {g['index']}",
                    WARN,
                    detail + f"; the storage under {f.directory} is on NUMA node {storage}",
                    f"pin workers near the GPU: --numa {node}",
                )
            )
        else:
            out.append(Check(f"affinity GPU {g['index']}", OK, detail))
    return out


CHECKS: tuple[Callable[[Facts], list[Check]], ...] = (
    check_driver,
    check_cuda_python,
    check_cufile_library,
    check_config,
    check_nvidia_fs,
    check_cufile_driver,
    check_filesystem,
    check_direct_io,
    check_host_buffers,
    check_queue_limits,
    check_udev,
    check_registration,
    check_free_space,
    check_iommu,
    check_gpu_links,
    check_affinity,
    check_buffer_set,
    check_pinned_memory,
)
#: the checks that measure (skipped by --quick)
PROBES = (check_buffer_set, check_pinned_memory)
#: the checks that call NVML, CUDA or cuFile: they run in a process of their own (a crash there is a
#: failed check naming the signal, and the checks after it still run)
NATIVE_CHECKS: dict[Callable[[Facts], list[Check]], str] = {
    check_driver: "NVIDIA driver",
    check_cuda_python: "cuda-python",
    check_cufile_library: "cuFile library",
    check_cufile_driver: "cuFile driver",
    check_registration: "cuFile registration",
    check_gpu_links: "PCIe links",
    check_buffer_set: "buffer set",  # the native core's reads: a crash there is a failed check too
    check_pinned_memory: "pinned memory",
}
