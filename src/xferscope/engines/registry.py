"""Path name -> engine class, and what can run on this machine."""

from __future__ import annotations

import functools

from xferscope.engines.base import Engine
from xferscope.errors import EngineUnavailable, SpecError
from xferscope.spec import PATHS


def engine_class(path: str) -> type[Engine]:
    """The engine of ``path``; its module is imported only now. Raises SpecError for a path that does not exist,
    EngineUnavailable for one this build lacks."""
    if path not in PATHS:
        raise SpecError("path", f"unknown transfer path {path!r}; choose one of {', '.join(PATHS)}")
    try:
        return _engines(path)[path]
    except ImportError as exc:
        raise EngineUnavailable(path, f"not available in this build ({exc})") from None


def _engines(path: str) -> dict[str, type[Engine]]:
    """The engines of the module that holds ``path``'s."""
    if path == "host":
        from xferscope.engines.host import HostEngine

        return {"host": HostEngine}
    if path.startswith("bounce"):
        from xferscope.engines.bounce import BounceAsyncEngine, BounceEngine

        return {"bounce": BounceEngine, "bounce-async": BounceAsyncEngine}
    if path == "kvikio":
        from xferscope.engines.kvikio import KvikioEngine

        return {"kvikio": KvikioEngine}
    from xferscope.engines.cufile import CufileAsyncEngine, CufileBatchEngine, CufileEngine

    return {"cufile": CufileEngine, "cufile-batch": CufileBatchEngine, "cufile-async": CufileAsyncEngine}


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
            return call(availability_here, what="the paths' check", timeout=600, env=env)
    except ChildDied as exc:
        why = f"cannot tell: {exc}"
        return dict.fromkeys(PATHS, why)


def unavailable_reason(path: str) -> str | None:
    """None when ``path`` can run here; else the reason (e.g. "no GPU", "cuda-python not installed")."""
    if path not in PATHS:
        engine_class(path)  # the SpecError that names the paths
    return availability()[path]
