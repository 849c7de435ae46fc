"""One set of scratch files for a series of runs (a sweep's points, a saturation's searches): made by the first
run that needs them, removed at the end.

Every point of a sweep reads the same data, and a 1 GiB file is filled once, not
once per point. Without ``file`` or ``directory`` the files live in a temporary
directory; with them, the files the sweep creates there are removed at the end
(the user's own files are never touched), unless the profile says ``keep``.
"""

from __future__ import annotations

import os
import shutil
import tempfile

from xferscope import janitor
from xferscope.spec import RunSpec
from xferscope.target import SIDECAR_SUFFIX, default_scratch_parent
from xferscope.units import format_size


class SweepScratch:
    def __init__(self) -> None:
        self.temp_dir: str | None = None
        self._before: dict[str, set[str] | bool] = {}  # directory -> names present before; file -> existed
        self._keep = False

    def adapt(self, spec: RunSpec) -> RunSpec:
        """The spec to run: its scratch files kept between points (and removed by ``cleanup``)."""
        self._keep = self._keep or spec.keep
        if spec.file:
            self._before.setdefault(os.path.abspath(spec.file), os.path.exists(spec.file))
            return spec.replace(keep=True)
        if spec.directory:
            directory = os.path.abspath(spec.directory)
            if directory not in self._before:
                try:
                    self._before[directory] = set(os.listdir(directory))
                except OSError:
                    self._before[directory] = set()
            return spec.replace(keep=True)
        if self.temp_dir is None:
            self.temp_dir = tempfile.mkdtemp(prefix="xferscope-sweep-", dir=default_scratch_parent()[0])
            janitor.guard(self.temp_dir)  # gone with this process, whatever ends it
        name = f"xferscope-sweep-{format_size(spec.file_size)}.dat"
        return spec.replace(file=os.path.join(self.temp_dir, name), keep=True)

    def cleanup(self) -> None:
        if self.temp_dir:
            shutil.rmtree(self.temp_dir, ignore_errors=True)
            janitor.release(self.temp_dir)
            self.temp_dir = None
        if self._keep:
            return
        for place, before in self._before.items():
            if isinstance(before, bool):
                if not before:
                    _remove(place)
                continue
            try:
                names = os.listdir(place)
            except OSError:
                continue
            for name in names:
                if name not in before and name.startswith("xferscope-scratch") and not name.endswith(SIDECAR_SUFFIX):
                    _remove(os.path.join(place, name))
        self._before.clear()


def _remove(path: str) -> None:
    for p in (path, path + SIDECAR_SUFFIX):
        try:
            os.unlink(p)
        except OSError:
            pass
