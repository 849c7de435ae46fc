"""What pinned memory costs a read here: doctor's probe.

The bounce paths read into pinned host memory and copy it to the GPU; the host path reads into memory of its own.
Where a bounce path trails host by a few percent, part of it may be the memory, not the path: on a virtual disk a
read into memory pinned for the GPU can cost more than one into a process's own pages. The probe reads one file
with O_DIRECT through the host engine, with no copy, one buffer a worker, three ways: into the worker's own 2 MiB
huge pages (as the host path reads), into the same kind of huge pages registered with CUDA (cuMemHostRegister, as
the bounce paths' buffers), and into CUDA's own pinned allocation (cuMemHostAlloc), in rotated rounds. It gives
each one's median read time and GB/s against the host path's own memory.
"""

from __future__ import annotations

from dataclasses import dataclass

from xferscope.doctor.host_rounds import FILE_BYTES, WORKERS

#: the probe's memories (None: the worker's own pages), and its time
MEMORIES: tuple[str | None, ...] = (None, "registered", "allocated")
ROUNDS, SECONDS = 4, 0.6
__all__ = ["FILE_BYTES", "MEMORIES", "PinnedProbe", "measure"]


def _name(memory: str | None) -> str:
    return memory or "own"


@dataclass(frozen=True)
class PinnedProbe:
    """Median over the rounds, per memory ("own", "registered", "allocated"): the median time of one read (µs,
    from the engine's histogram) and the GB/s of the whole run."""

    read_us: dict[str, float]
    gb_s: dict[str, float]
    rounds: int

    def cost(self, memory: str) -> float:
        """How much slower the reads into ``memory`` go than into the workers' own pages (0.05: 5% slower)."""
        return 1 - self.gb_s[memory] / self.gb_s["own"]

    def sentence(self) -> str:
        def said(memory: str) -> str:
            c = self.cost(memory)
            return f"{abs(c):.1%} {'slower' if c >= 0 else 'faster'} ({self.gb_s[memory]:.2f} GB/s)"

        return (
            f"a read into pinned memory costs {self.cost('registered'):.1%} here: into huge pages registered with "
            f"CUDA (the bounce paths' buffers) {said('registered')}, into cuMemHostAlloc's memory "
            f"{said('allocated')}, against the host path's own pages ({self.gb_s['own']:.2f} GB/s; 1M O_DIRECT, "
            f"{WORKERS} workers, no copy, medians of {self.rounds} rotated rounds)"
        )


def measure(directory: str, rounds: int = ROUNDS, seconds: float = SECONDS, gpu: int = 0) -> PinnedProbe:
    """Run the probe on a scratch file of its own in ``directory`` (removed after), the pinned memory ``gpu``'s."""
    from xferscope.doctor.host_rounds import host_rounds

    def configure(engine, memory: str | None) -> None:
        engine.pinned_memory = memory

    read_us, rate = host_rounds(directory, "pinned-probe", MEMORIES, configure, rounds, seconds, gpu)
    return PinnedProbe({_name(m): v for m, v in read_us.items()}, {_name(m): r / 1e9 for m, r in rate.items()}, rounds)
