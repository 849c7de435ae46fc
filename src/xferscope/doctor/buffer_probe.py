"""What a larger set of buffers costs a read here: doctor's probe.

On virtual disks (the host copies each read into guest memory) a read into a buffer that was not read into
lately is slower, and a program that keeps many buffers in flight (a data loader's prefetched batches, a
pinned-memory pool) pays it on every read. The probe reads one file with O_DIRECT through the host engine,
4 workers of 1 MiB requests, three ways: into 1 buffer a worker, into 16 in turn, into 64 in turn, in
rotated rounds, and gives the median read time of each against one buffer's (as bench/bounce_timeline.py's
read times: host@n16 against host).
"""

from __future__ import annotations

import os
import statistics
import threading
from dataclasses import dataclass

from xferscope.spec import RunSpec

#: the probe's buffer sets, its request shape, and its time
SETS = (1, 16, 64)
BLOCK, WORKERS, FILE_BYTES = 1 << 20, 4, 512 << 20
ROUNDS, SECONDS = 4, 0.6


@dataclass(frozen=True)
class BufferProbe:
    """Median over the rounds, per buffer set: the median time of one read (µs, from the engine's histogram) and
    the MiB/s."""

    read_us: dict[int, float]
    mib_s: dict[int, float]
    rounds: int

    def ratio(self, buffers: int) -> float:
        """How long a read into ``buffers`` buffers a worker takes, against one buffer's."""
        return self.read_us[buffers] / self.read_us[SETS[0]]

    def sentence(self) -> str:
        many = SETS[1]
        slower = 1 - self.mib_s[many] / self.mib_s[SETS[0]]
        ratios = ", ".join(f"into {n} {self.ratio(n):.2f}x" for n in SETS[1:])
        what = f"{abs(slower):.0%} {'slower' if slower >= 0 else 'faster'}"
        return (
            f"a read into a set of buffers a worker in turn takes, against one buffer's time: {ratios} "
            f"(1M O_DIRECT, {WORKERS} workers, medians of {self.rounds} rotated rounds): a data loader keeping "
            f"{many} batches in flight reads {what} here"
        )


def measure(directory: str, rounds: int = ROUNDS, seconds: float = SECONDS) -> BufferProbe:
    """Run the probe on a scratch file of its own in ``directory`` (removed after)."""
    from xferscope import janitor
    from xferscope import target as targets

    spec = RunSpec(
        path="host",
        file=os.path.join(directory, "xferscope-buffer-probe.dat"),
        file_size=FILE_BYTES,
        block_size=BLOCK,
        workers=WORKERS,
        duration=seconds,
        keep=False,
    ).validate()
    target = targets.plan(spec)
    # doctor runs the probe in a process that may crash or be killed: its file goes all the same
    planned = [p for tf in target.files if tf.create for p in (tf.path, targets.sidecar_path(tf.path))]
    with janitor.guarded(*planned):
        read_us, mib_s = _rounds(spec, target, rounds)
    return BufferProbe(
        {n: statistics.median(v) for n, v in read_us.items()},
        {n: statistics.median(v) for n, v in mib_s.items()},
        rounds,
    )


def _rounds(spec: RunSpec, target, rounds: int) -> tuple[dict[int, list[float]], dict[int, list[float]]]:
    """Each set's median read times (us) and MiB/s, one figure a round, on ``target`` (created, then removed)."""
    from xferscope import target as targets
    from xferscope.engines.host import HostEngine

    read_us: dict[int, list[float]] = {n: [] for n in SETS}
    mib_s: dict[int, list[float]] = {n: [] for n in SETS}
    try:
        targets.materialize(target, threading.Event(), None)
        for r in range(rounds):
            for n in SETS[r % len(SETS) :] + SETS[: r % len(SETS)]:
                engine = HostEngine(spec, target)
                engine.buffers_in_turn = n
                try:
                    snap = engine.run_to_end()
                finally:
                    engine.close()
                if snap.error:
                    raise RuntimeError(snap.error[0])
                span = max(w.done_ns or snap.t_ns for w in snap.workers)
                read_us[n].append(snap.hist_read.percentiles([50.0])[50.0] / 1e3)
                mib_s[n].append(snap.bytes / (1 << 20) / (span / 1e9))
    finally:
        targets.cleanup(target, keep=False)
    return read_us, mib_s
