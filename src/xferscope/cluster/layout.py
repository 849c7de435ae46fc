"""Where each rank runs and what it uses: hosts, local ranks, GPUs, CPUs, and per-rank targets.

Ranks on one host split that host's GPUs and CPUs:

* GPUs: without ``--gpu``, local rank *i* uses GPU ``i % gpus_on_host``; with a
  list, the local ranks share it out (each its own slice, or round-robin when
  there are more ranks than GPUs).
* CPUs: ``--cpus`` (or the ``--numa`` node's CPUs) are shared out the same way;
  with neither, the CPUs the launcher left to all local ranks alike are split,
  and a launcher that already bound each rank to its own CPUs is left alone.

``--dir`` and ``--file`` may hold ``{rank}`` and ``{host}``; without ``{rank}``
the ranks share the target, and they prepare it in turn so that only one of
them creates a missing scratch file.
"""

from __future__ import annotations

import glob
import os
import re
import socket
from dataclasses import dataclass

from xferscope.errors import SpecError
from xferscope.spec import RunSpec

PLACEHOLDER = re.compile(r"\{([^{}]*)\}")
#: each rank's random offsets come from its own seed; workers of one rank step the seed by 0x1000
RANK_SEED_STRIDE = 1 << 24


@dataclass(frozen=True)
class RankPlace:
    rank: int
    host: str
    local_rank: int
    local_size: int


@dataclass(frozen=True)
class Layout:
    """Every rank's place, the same on all ranks (built from one allgather)."""

    places: tuple[RankPlace, ...]
    me: int
    shared_cpus: tuple[int, ...] | None  # this host's CPUs to split, when all local ranks got the same set

    @property
    def mine(self) -> RankPlace:
        return self.places[self.me]

    @property
    def size(self) -> int:
        return len(self.places)

    @property
    def hosts(self) -> list[str]:
        """Host names in the order of their first rank."""
        seen: dict[str, None] = {}
        for p in self.places:
            seen.setdefault(p.host)
        return list(seen)


def describe_me() -> tuple[str, tuple[int, ...]]:
    """(host name, CPUs this process may run on)."""
    try:
        cpus = tuple(sorted(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        cpus = tuple(range(os.cpu_count() or 1))
    return socket.gethostname(), cpus


def layout_from(rows: list[tuple[str, tuple[int, ...]]], me: int) -> Layout:
    """The layout from every rank's ``describe_me()`` (index = rank)."""
    local_index: dict[str, int] = {}
    counts: dict[str, int] = {}
    for host, _ in rows:
        counts[host] = counts.get(host, 0) + 1
    places = []
    for rank, (host, _) in enumerate(rows):
        places.append(RankPlace(rank, host, local_index.get(host, 0), counts[host]))
        local_index[host] = local_index.get(host, 0) + 1
    my_host = rows[me][0]
    local_sets = {cpus for host, cpus in rows if host == my_host}
    shared = rows[me][1] if len(local_sets) == 1 else None
    return Layout(tuple(places), me, shared)


def share(items: list[int], index: int, parts: int) -> list[int]:
    """Part ``index`` of ``parts`` contiguous slices of ``items``; round-robin when items are fewer."""
    if not items:
        return []
    if len(items) < parts:
        return [items[index % len(items)]]
    base, extra = divmod(len(items), parts)
    start = index * base + min(index, extra)
    return items[start : start + base + (1 if index < extra else 0)]


def expand(template: str | None, field: str, place: RankPlace) -> str | None:
    """``template`` with ``{rank}``, ``{host}`` and ``{local_rank}`` (the rank's number on its host) filled in;
    SpecError for any other placeholder."""
    if template is None:
        return None

    def fill(m: re.Match) -> str:
        name = m.group(1)
        if name == "rank":
            return str(place.rank)
        if name == "host":
            return place.host
        if name == "local_rank":
            return str(place.local_rank)
        raise SpecError(
            field, f"unknown placeholder {{{name}}} in {template!r}; use {{rank}}, {{host}} or {{local_rank}}"
        )

    return PLACEHOLDER.sub(fill, template)


def rank_files(spec: RunSpec, place: RankPlace) -> list[str]:
    """The files this rank's runs read (as far as they exist now): --file, or the scratch files in --dir."""
    if spec.file:
        return [str(expand(spec.file, "file", place))]
    if spec.directory:
        folder = str(expand(spec.directory, "dir", place))
        return sorted(glob.glob(os.path.join(glob.escape(folder), "xferscope-scratch*.dat")))
    return []


def per_rank_target(spec: RunSpec) -> bool:
    """True when every rank has a target of its own (``{rank}`` in --dir/--file, or the default scratch)."""
    template = spec.file or spec.directory
    return template is None or "{rank}" in template


def rank_spec(spec: RunSpec, layout: Layout, *, gpu_given: bool, gpus_on_host: int) -> RunSpec:
    """The spec this rank runs: its target, GPUs, CPUs and seed."""
    me = layout.mine
    gpus = list(spec.gpus)
    if gpu_given:
        gpus = share(gpus, me.local_rank, me.local_size)
    elif gpus_on_host > 0:
        gpus = [me.local_rank % gpus_on_host]
    cpus = spec.cpus
    if cpus is None and spec.numa_node is not None:
        from xferscope.engines.native import numa_cpus

        cpus = numa_cpus(spec.numa_node)
    if cpus is not None:
        cpus = share(list(cpus), me.local_rank, me.local_size)
    elif layout.shared_cpus is not None and me.local_size > 1:
        cpus = share(list(layout.shared_cpus), me.local_rank, me.local_size)
    return spec.replace(
        file=expand(spec.file, "file", me),
        directory=expand(spec.directory, "dir", me),
        gpus=gpus,
        cpus=cpus,
        seed=(spec.seed + me.rank * RANK_SEED_STRIDE) & 0xFFFFFFFFFFFFFFFF,
    ).validate()


def prepare_waves(spec: RunSpec, layout: Layout) -> list[set[int]]:
    """Which ranks prepare together. Own targets: all at once. A shared target: rank 0 first (it creates
    the file on a shared filesystem), then the first rank of every other host (local disks), then the rest
    (the file exists by then)."""
    everyone = set(range(layout.size))
    if per_rank_target(spec):
        return [everyone]
    first = {0}
    leaders = {p.rank for p in layout.places if p.local_rank == 0} - first
    rest = everyone - first - leaders
    return [wave for wave in (first, leaders, rest) if wave]
