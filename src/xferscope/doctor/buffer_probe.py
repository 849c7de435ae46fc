"""What a larger set of buffers costs a read here: doctor's probe.

On virtual disks (the host copies each read into guest memory) a read into a buffer that was not read into
lately is slower, and a program that keeps many buffers in flight (a data loader's prefetched batches, a
pinned-memory pool) pays it on every read. The probe reads one file with O_DIRECT through the host engine,
4 workers of 1 MiB requests, three ways: into 1 buffer a worker, into 16 in turn, into 64 in turn, in
rotated rounds, and gives the median read time of each against one buffer's (as bench/bounce_timeline.py's
read times: host@n16 against host).
"""

from __future__ import annotations

from dataclasses import dataclass

from xferscope.doctor.host_rounds import FILE_BYTES, WORKERS

#: the probe's buffer sets, and its time
SETS = (1, 16, 64)
ROUNDS, SECONDS = 4, 0.6
__all__ = ["FILE_BYTES", "SETS", "BufferProbe", "measure"]


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
    from xferscope.doctor.host_rounds import host_rounds

    def configure(engine, buffers: int) -> None:
        engine.buffers_in_turn = buffers

    read_us, rate = host_rounds(directory, "buffer-probe", SETS, configure, rounds, seconds)
    return BufferProbe(read_us, {n: r / (1 << 20) for n, r in rate.items()}, rounds)
