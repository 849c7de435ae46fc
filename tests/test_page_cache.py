"""The page-cache probe: it tells a buffered read from an O_DIRECT one by what the kernel holds."""

from __future__ import annotations

import mmap
import os

import pytest

from xferscope.engines import page_cache

BLOCK = 1 << 20


@pytest.fixture
def data_file(direct_dir):
    path = direct_dir / "probe.dat"
    path.write_bytes(os.urandom(4 * BLOCK))
    page_cache.evict(str(path))
    return str(path)


def _read(path: str, offset: int, direct: bool) -> None:
    fd = os.open(path, os.O_RDONLY | (os.O_DIRECT if direct else 0))
    buf = mmap.mmap(-1, BLOCK)  # page aligned, as O_DIRECT needs
    try:
        assert os.preadv(fd, [buf], offset) == BLOCK
    finally:
        os.close(fd)
        buf.close()


def test_eviction_empties_the_range(data_file):
    _read(data_file, 0, direct=False)
    assert page_cache.resident_bytes(data_file, 0, BLOCK) == BLOCK
    page_cache.evict(data_file)
    assert page_cache.resident_bytes(data_file) == 0


def test_a_buffered_read_passes_through(data_file):
    assert page_cache.passes_through(data_file, BLOCK, BLOCK, lambda: _read(data_file, BLOCK, direct=False)) is True
    assert page_cache.resident_bytes(data_file, BLOCK, BLOCK) == 0, "the probe leaves its range evicted"


def test_an_o_direct_read_does_not(data_file):
    assert page_cache.passes_through(data_file, BLOCK, BLOCK, lambda: _read(data_file, BLOCK, direct=True)) is False


def test_only_the_probed_range_counts(data_file):
    _read(data_file, 0, direct=False)  # another block cached: not the probe's business
    assert (
        page_cache.passes_through(data_file, 2 * BLOCK, BLOCK, lambda: _read(data_file, 2 * BLOCK, direct=True))
        is False
    )
    assert page_cache.resident_bytes(data_file, 0, BLOCK) == BLOCK


def test_unaligned_ranges_count_whole_pages(data_file):
    _read(data_file, 0, direct=False)
    assert page_cache.resident_bytes(data_file, 100, 10) == mmap.PAGESIZE


@pytest.mark.skipif(not os.path.isdir("/dev/shm"), reason="no /dev/shm (tmpfs) here")
def test_tmpfs_cannot_be_told(tmp_path):
    path = f"/dev/shm/xferscope-probe-{os.getpid()}"
    try:
        with open(path, "wb") as fh:
            fh.write(b"x" * BLOCK)
        assert page_cache.passes_through(path, 0, BLOCK, lambda: None) is None
    finally:
        os.unlink(path)


def test_a_missing_file_is_unknown(tmp_path):
    assert page_cache.resident_bytes(str(tmp_path / "absent")) is None
