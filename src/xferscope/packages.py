"""The Python packages that some paths run on (torch, the loaders' and checkpointers' libraries, KvikIO): which
package a path needs, its version, and the one line that refuses a path whose package is missing or too old, asked
of the package index's metadata (nothing imported: torch alone takes seconds)."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Library:
    path: str  # the path's name on the command line
    module: str  # what it imports
    package: str  # what pip installs
    minimum: str  # the oldest version with the call below (as measured here)
    call: str  # what the path calls, in words
    also: tuple[str, ...] = ()  # other distributions the same module comes in (KvikIO's one per CUDA version)
    install: str = ""  # what to install, where it is more than ``package``


#: torch, which every library path of the workloads runs on
TORCH = Library("torch", "torch", "torch", "2.0", "")

#: KvikIO, the cuFile library most people use from Python (the ``kvikio`` transfer path); 25.02 brought
#: ``kvikio.defaults.set``, through which the path sets its thread pool and task size
KVIKIO = Library(
    "kvikio",
    "kvikio",
    "kvikio-cu13",
    "25.02",
    "kvikio.CuFile(file).pread(gpu_buffer, block, offset, task_size=block).get(), each worker a block at a time on "
    "KvikIO's thread pool",
    also=("kvikio-cu12", "kvikio"),
    install="kvikio-cu13 (kvikio-cu12 for CUDA 12)",
)


def _version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(n) for n in re.findall(r"\d+", text.split("+")[0])[:3])


def installed_version(*packages: str) -> str | None:
    """The version of the first of ``packages`` that is installed; None where none is."""
    from importlib import metadata  # here: it costs a command's start 10 ms

    for package in packages:
        try:
            return metadata.version(package)
        except metadata.PackageNotFoundError:
            continue
    return None


def _importable(module: str) -> bool:
    import importlib.util  # here: it costs every command's start 3 ms, and only a library path asks

    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent that fails to import, or a module set to None on purpose
        return False


@functools.cache  # torch is asked for by every path: its metadata is read once a process
def _importable_version(module: str, packages: tuple[str, ...]) -> str | None:
    return installed_version(*packages) if _importable(module) else None


def package_refusal(need: Library, path: str) -> str | None:
    """Why ``path`` cannot run for want of ``need``'s package (missing, or older than its call), in one line that
    names what to install; None where it is there."""
    version = _importable_version(need.module, (need.package, *need.also))
    install = need.install or need.package
    if version is None:
        return f"{path} needs {need.package}, which is not installed: pip install {install}"
    if _version_tuple(version) < _version_tuple(need.minimum):
        return f"{path} needs {need.package} {need.minimum} or newer, here {version}: pip install -U {install}"
    return None
