"""doctor's probes that read one file through the host engine several ways (``variants``, each set on the engine
by ``configure``) in rotated rounds, with O_DIRECT, on a scratch file of their own that goes at the end even where
the process is killed."""

from __future__ import annotations

import os
import statistics
import threading
from collections.abc import Callable, Sequence
from typing import TypeVar

from xferscope.spec import RunSpec

V = TypeVar("V")
#: the probes' request shape and file
BLOCK, WORKERS, FILE_BYTES = 1 << 20, 4, 512 << 20


def host_rounds(
    directory: str,
    name: str,
    variants: Sequence[V],
    configure: Callable[[object, V], None],
    rounds: int,
    seconds: float,
    gpu: int = 0,
) -> tuple[dict[V, float], dict[V, float]]:
    """Per variant, the median over ``rounds`` rotated rounds of one read's median time (µs, from the engine's
    histogram) and of the run's bytes a second; the scratch file ``xferscope-{name}.dat`` in ``directory``."""
    from xferscope import janitor
    from xferscope import target as targets
    from xferscope.engines.host import HostEngine

    spec = RunSpec(
        path="host",
        file=os.path.join(directory, f"xferscope-{name}.dat"),
        file_size=FILE_BYTES,
        block_size=BLOCK,
        workers=WORKERS,
        duration=seconds,
        gpus=[gpu],
        keep=False,
    ).validate()
    target = targets.plan(spec)
    # doctor runs its probes in a process that may crash or be killed: the file goes all the same
    planned = [p for tf in target.files if tf.create for p in (tf.path, targets.sidecar_path(tf.path))]
    read_us: dict[V, list[float]] = {v: [] for v in variants}
    rate: dict[V, list[float]] = {v: [] for v in variants}
    with janitor.guarded(*planned):
        try:
            targets.materialize(target, threading.Event(), None)
            for r in range(rounds):
                for v in list(variants[r % len(variants) :]) + list(variants[: r % len(variants)]):
                    engine = HostEngine(spec, target)
                    configure(engine, v)
                    try:
                        snap = engine.run_to_end()
                    finally:
                        engine.close()
                    if snap.error:
                        raise RuntimeError(snap.error[0])
                    span = max(w.done_ns or snap.t_ns for w in snap.workers)
                    read_us[v].append(snap.hist_read.percentiles([50.0])[50.0] / 1e3)
                    rate[v].append(snap.bytes / (span / 1e9))
        finally:
            targets.cleanup(target, keep=False)
    return (
        {v: statistics.median(x) for v, x in read_us.items()},
        {v: statistics.median(x) for v, x in rate.items()},
    )
