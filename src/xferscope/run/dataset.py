"""One dataset for every path of a comparison: the files prepared once, read by every run, removed at the end.

Without it each path would create (or recreate) its own scratch files and read blocks fresh from the host's
cache; with it every run of every round reads the same files, created and filled once before the first round.
The runs' specs point at these files (``spec_for``); as the files exist and carry xferscope's sidecar, a run
creates and removes nothing of its own.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
from collections.abc import Callable

from xferscope import janitor
from xferscope import target as targets
from xferscope.spec import RunSpec

SCRATCH_NAME = "xferscope-scratch.dat"


class SharedDataset:
    """The files of a comparison's specs (which differ only in their path). ``prepare`` before the first run,
    ``close`` after the last (also on Ctrl-C or failure): it removes what it created, unless ``--keep``."""

    def __init__(self, spec: RunSpec):
        self.spec = spec
        self.temp_dir: str | None = None
        self.target: targets.Target | None = None
        self._file = spec.file
        self._guarded: list[str] = []  # removed by the janitor should this process end before ``close``

    @property
    def files(self) -> list[str]:
        return [f.path for f in self.target.files] if self.target else []

    @property
    def size(self) -> int:
        """Bytes the dataset holds (once planned; before, what the spec asks for)."""
        if self.target is not None:
            return sum(f.size for f in self.target.files)
        return self.spec.file_size * (self.spec.workers if self.spec.directory else 1)

    @property
    def to_fill(self) -> int:
        """Bytes ``prepare`` will write (files to create, or to refill for --verify); 0 when they are there."""
        if self.target is None:
            return self.size
        return sum(f.size for f in self.target.files if f.create or f.refill)

    def plan(self) -> None:
        """Decide the files and check the target (creates nothing but its temporary directory)."""
        if self.target is not None:
            return
        spec = self.spec
        if not spec.file and not spec.directory:
            self.temp_dir = tempfile.mkdtemp(prefix="xferscope-compare-", dir=targets.default_scratch_parent()[0])
            self._guard(self.temp_dir)
            self._file = os.path.join(self.temp_dir, SCRATCH_NAME)
            spec = spec.replace(file=self._file)
        try:
            self.target = targets.plan(spec)
            if self.temp_dir is None and not spec.keep:  # gone with this process, whatever ends it
                for tf in self.target.files:
                    if tf.create:
                        self._guard(tf.path)
                        self._guard(targets.sidecar_path(tf.path))
        except BaseException:
            self.close()
            raise

    def prepare(
        self, cancel: threading.Event | None = None, progress: Callable[[int, int], None] | None = None
    ) -> None:
        """Plan the files (unless done) and create and fill those missing (outside any timed region)."""
        self.plan()
        try:
            targets.materialize(self.target, cancel, progress)
        except BaseException:
            self.close()
            raise

    def spec_for(self, spec: RunSpec) -> RunSpec:
        """``spec`` reading this dataset."""
        return spec.replace(file=self._file, directory=None if self._file else spec.directory)

    def identity(self) -> list[tuple[int, int]]:
        """(st_dev, st_ino) of each file now: the same for every run when every run reads the same files."""
        out = []
        for path in self.files:
            try:
                st = os.stat(path)
                out.append((st.st_dev, st.st_ino))
            except OSError:
                out.append((0, 0))
        return out

    def close(self) -> None:
        """Remove the files this dataset created (kept with ``--keep``, except in its own temporary
        directory) and that directory. Idempotent."""
        if self.target is not None:
            targets.cleanup(self.target, keep=self.spec.keep and self.temp_dir is None)
        if self.temp_dir is not None:
            shutil.rmtree(self.temp_dir, ignore_errors=True)
            self.temp_dir = None
        for path in self._guarded:
            janitor.release(path)
        self._guarded.clear()

    def _guard(self, path: str) -> None:
        janitor.guard(path)
        self._guarded.append(path)
