"""Path name -> engine class, and what can run on this machine."""

from __future__ import annotations

import functools
import importlib

from xferscope.engines.base import Engine
from xferscope.errors import EngineUnavailable, SpecError
from xferscope.spec import PATHS

# module:class for each path; modules are imported only when asked for
_ENGINES = {
    "host": "xferscope.engines.host:HostEngine",
    "bounce": "xferscope.engines.bounce:BounceEngine",
    "bounce-async": "xferscope.engines.bounce:BounceAsyncEngine",
    "cufile": "xferscope.engines.cufile:CufileEngine",
    "cufile-batch": "xferscope.engines.cufile:CufileBatchEngine",
    "cufile-async": "xferscope.engines.cufile:CufileAsyncEngine",
}


def engine_class(path: str) -> type[Engine]:
    if path not in PATHS:
        raise SpecError("path", f"unknown transfer path {path!r}; choose one of {', '.join(PATHS)}")
    module_name, cls_name = _ENGINES[path].split(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise EngineUnavailable(path, f"not available in this build ({exc})") from None
    return getattr(module, cls_name)


def reason_here(path: str) -> str | None:
    """None when ``path`` can run in this process; else the reason. Loads CUDA and cuFile's driver for
    the GPU paths: the engines' own processes call it, everything else ``unavailable_reason``."""
    try:
        return engine_class(path).unavailable_reason()
    except EngineUnavailable as exc:
        return exc.reason


def availability_here() -> dict[str, str | None]:
    return {path: reason_here(path) for path in PATHS}


@functools.lru_cache(maxsize=1)
def availability() -> dict[str, str | None]:
    """Every path with None (runs here) or the reason it cannot, as found once per process by a process
    of its own: CUDA and cuFile's driver are never loaded into this one, and a crash while loading them
    is a reason, not the end of this process."""
    from xferscope.engines.cufile_driver import child_log_env
    from xferscope.isolation import ChildDied, call

    try:
        with child_log_env() as env:
            return call("xferscope.engines.registry:availability_here", what="the paths' check", timeout=600, env=env)
    except ChildDied as exc:
        why = f"cannot tell: {exc}"
        return dict.fromkeys(PATHS, why)


def unavailable_reason(path: str) -> str | None:
    """None when ``path`` can run here; else the reason (e.g. "no GPU", "cuda-python not installed")."""
    if path not in PATHS:
        engine_class(path)  # the SpecError that names the paths
    return availability()[path]
