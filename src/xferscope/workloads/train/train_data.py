"""The training data set: generated in DLIO's layout with sizes drawn from the preset's distribution, or the
user's own files read as they are.

A generated set lives in a directory xferscope creates (``xferscope-train-*`` under ``--dir``, files under
``train/``, named ``img_<i>_of_<n>.dat`` as DLIO names its files), guarded by the janitor from its creation
and removed at the end unless ``--keep``. Its files hold xferscope's data pattern, not the format DLIO writes
(npz, TFRecord): the reads move the same bytes, nothing decodes them. With ``samples_per_file`` > 1 a file is
its samples one after another (records). Nothing is written before the set is known to fit the disk.

``--data DIR``: every readable regular file under DIR, in name order, each cut into ``samples_per_file``
samples of equal size. Nothing there is written, not even a probe: O_DIRECT is tried by opening a file.
"""

from __future__ import annotations

import contextlib
import os
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypedDict

from xferscope.errors import SpecError
from xferscope.target import memory_total
from xferscope.units import format_bytes
from xferscope.workloads.common.data_files import DataFile, SampleRef
from xferscope.workloads.common.generated import GeneratedDir, check_fits, direct_works, parent_dir
from xferscope.workloads.train.train_spec import TrainSpec

__all__ = ["TrainData", "adopt", "generate", "page_cache_warning", "plan_generated", "scan"]


class TrainDataSet(TypedDict, total=False):
    """A training data set as a record gives it (``describe()``; every key optional, as older files may lack one)."""

    where: str
    files: int
    samples: int
    bytes: int
    generated: bool
    direct_io: bool
    kept: bool


@dataclass
class TrainData:
    root: str
    files: list[DataFile]
    samples: list[SampleRef]
    generated: bool
    direct: bool
    #: the directory xferscope created for a generated set (removed by ``close`` unless kept)
    created: GeneratedDir | None = None
    kept: bool = False
    notes: list[str] = field(default_factory=list)

    @property
    def created_dir(self) -> str | None:
        return None if self.created is None else self.created.path

    @property
    def bytes(self) -> int:
        return sum(s.length for s in self.samples)

    def describe(self) -> TrainDataSet:
        return {
            "where": self.root,
            "files": len(self.files),
            "samples": len(self.samples),
            "bytes": self.bytes,
            "generated": self.generated,
            "direct_io": self.direct,
            "kept": self.kept,
        }

    def close(self, keep: bool = False) -> None:
        """Remove the generated set (unless ``keep``); the user's own files are never touched."""
        if self.created is None:
            return
        self.created.close(keep)
        self.kept = self.created.kept
        self.created = None


# ------------------------------------------------------------------ sizes


def sample_sizes(spec: TrainSpec, count: int) -> list[int]:
    """``count`` sample sizes drawn from the normal distribution of the spec (mean, sd), seeded, at least 1 byte
    (a draw below 1 is drawn again)."""
    rng = random.Random(spec.seed)
    out = []
    for _ in range(count):
        while True:
            size = round(rng.gauss(spec.sample_size, spec.sample_sd)) if spec.sample_sd else spec.sample_size
            if size >= 1:
                break
        out.append(size)
    return out


# ------------------------------------------------------------------ a generated set


def plan_generated(spec: TrainSpec) -> tuple[str, bool, list[int]]:
    """Where the set goes, whether O_DIRECT works there, and the sizes of its samples; refuses a set that does
    not fit the free space (before anything is written)."""
    parent, direct = parent_dir(spec.directory, spec.buffered)
    count = spec.files * spec.samples_per_file

    def fits(total: int) -> None:
        check_fits(
            parent,
            total,
            f"the data set of {spec.files} files",
            "files",
            lambda room: f"lower --files (about {room * spec.files // max(total, 1)} fit) or choose --dir",
        )

    # the mean size first: a preset's own count (resnet50's 1.6 billion samples) is refused before its sizes are
    # drawn, and a set that passes holds no more samples than the free space has room for
    fits(count * spec.sample_size)
    sizes = sample_sizes(spec, count)
    fits(sum(sizes))
    return parent, direct, sizes


def generate(
    spec: TrainSpec, progress: Callable[[int, int], None] | None = None, cancel: Callable[[], bool] | None = None
) -> TrainData:
    """Create and fill the set (outside any timed region). On an error or Ctrl-C what was written is removed."""
    parent, direct, sizes = plan_generated(spec)
    made = GeneratedDir(parent, f"train-{spec.preset}", direct)
    made.on_full = "lower --files"
    data = _laid_out(spec, os.path.join(made.path, "train"), sizes, direct)
    data.created = made
    try:
        total, done = sum(sizes), 0
        for i, f in enumerate(data.files):
            made.write(f.path, f.size, spec.seed + i, cancel=cancel)
            done += f.size
            if progress is not None:
                progress(done, total)
        made.done_writing()
    except BaseException:
        data.close(keep=False)
        raise
    return data


def _laid_out(spec: TrainSpec, root: str, sizes: list[int], direct: bool) -> TrainData:
    """The files and samples of a generated set under ``root`` (DLIO's names), from its samples' sizes."""
    data = TrainData(root=root, files=[], samples=[], generated=True, direct=direct)
    per = spec.samples_per_file
    for i in range(spec.files):
        offset = 0
        for n in sizes[i * per : (i + 1) * per]:
            data.samples.append(SampleRef(i, offset, n))
            offset += n
        data.files.append(DataFile(os.path.join(root, f"img_{i + 1}_of_{spec.files}.dat"), offset))
    return data


def adopt(spec: TrainSpec, root: str, direct: bool) -> TrainData | None:
    """The set another rank of an MPI job generated for this spec at ``root``, where this host sees it whole
    (a shared filesystem, or a rank of this host); None where it does not. This rank reads it and never
    removes it: its maker does."""
    data = _laid_out(spec, root, sample_sizes(spec, spec.files * spec.samples_per_file), direct)
    for f in data.files:
        try:
            if os.path.getsize(f.path) != f.size:
                return None
        except OSError:
            return None
    return data


# ------------------------------------------------------------------ the user's own files


def scan(spec: TrainSpec) -> TrainData:
    """The user's files under ``--data``, as samples; nothing is written there."""
    root = os.path.abspath(spec.data or "")
    if not os.path.isdir(root):
        raise SpecError("data", f"{spec.data}: no such directory")
    files: list[DataFile] = []
    for dirpath, dirnames, names in os.walk(root):
        dirnames.sort()
        for name in sorted(names):
            path = os.path.join(dirpath, name)
            with contextlib.suppress(OSError):
                if os.path.isfile(path) and not os.path.islink(path) and os.access(path, os.R_OK):
                    size = os.path.getsize(path)
                    if size >= spec.samples_per_file:
                        files.append(DataFile(path, size))
    if not files:
        raise SpecError("data", f"{spec.data}: no readable files there (of at least {spec.samples_per_file} bytes)")
    samples = []
    per = spec.samples_per_file
    for i, f in enumerate(files):
        each = f.size // per
        for j in range(per):
            length = each if j < per - 1 else f.size - each * (per - 1)
            samples.append(SampleRef(i, j * each, length))
    direct = False if spec.buffered else direct_works(files[0].path)
    data = TrainData(root=root, files=files, samples=samples, generated=False, direct=direct)
    if not direct and not spec.buffered:
        data.notes.append("O_DIRECT refused there: reads go through the page cache")
    return data


def page_cache_warning(data: TrainData) -> str | None:
    """MLPerf's rule: through the page cache, the set must be at least 5 times the host's RAM, or the reads may
    come from memory. None when the reads are O_DIRECT or the set is large enough."""
    if data.direct:
        return None
    ram = memory_total()
    if ram is None:
        return None
    total = sum(f.size for f in data.files)
    if total >= 5 * ram:
        return None
    return (
        f"reads go through the page cache and the data set ({format_bytes(total)}) is smaller than 5 times this "
        f"host's RAM ({format_bytes(ram)}): samples may come from memory, not storage (MLPerf Storage asks for 5x)"
    )
