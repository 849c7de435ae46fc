"""A data set's files and the samples in them, as every workload reads them (training samples, KV-cache chunks,
model shards)."""

from __future__ import annotations

from dataclasses import dataclass

from xferscope.workloads.common.generated import ALIGN


@dataclass(frozen=True)
class DataFile:
    path: str
    size: int


@dataclass(frozen=True)
class SampleRef:
    file: int  # index into TrainData.files
    offset: int
    length: int

    @property
    def span(self) -> tuple[int, int]:
        """The aligned byte range an O_DIRECT read of this sample covers."""
        start = self.offset - self.offset % ALIGN
        end = -(-(self.offset + self.length) // ALIGN) * ALIGN
        return start, end - start
