"""The workloads' bounce paths run the native core's ring, the code of `run --path bounce|bounce-async`
(`_iocore.Stager`), checked here on the host stand-ins for CUDA (tests/gpu_standins.py): every sample's exact
bytes land in "GPU" memory at the place asked, pieces that end past the end of the file are read, the buffer set
stays within what the path allocates, and a failed read gives one clear error."""

from __future__ import annotations

import ctypes

import pytest
from gpu_standins import SimResources

from xferscope.engines import bounce
from xferscope.errors import RunFailed
from xferscope.workloads.common.fetchers import Slot, make_fetcher, slot_capacity
from xferscope.workloads.train.train_data import generate
from xferscope.workloads.train.train_spec import train_spec


@pytest.fixture
def data(direct_dir):
    spec = train_spec(
        "resnet50", files=2, samples_per_file=5, sample_size=700_000, sample_sd=300_000, directory=str(direct_dir)
    )
    made = generate(spec)
    yield made
    made.close()


def gpu_bytes(addr: int, length: int) -> bytes:
    return ctypes.string_at(addr, length)


@pytest.mark.parametrize("path", ["bounce", "bounce-async"])
@pytest.mark.parametrize("bs", [64 << 10, 1 << 20])
def test_every_sample_lands_whole_where_asked(sim_gpu, data, path, bs):
    sim_gpu.configure(copy_ns=20_000, landing=sim_gpu.LAND_EAGER)
    res = SimResources()
    try:
        fetcher = make_fetcher(path, data, bs, 0, res)
        cap = slot_capacity([s.length for s in data.samples], len(data.samples))
        slot = Slot(cap, dev=res.device_memory(0, cap))
        at, placed = 0, []
        for s in data.samples:  # a batch of every sample, side by side as the accelerators place them
            start, length = fetcher.extent(s)
            fetcher.read(s, slot, at)
            placed.append((s, at + s.offset - start))
            at += -(-length // 4096) * 4096
        fetcher.batch_done()
        for s, where in placed:
            with open(data.files[s.file].path, "rb") as fh:
                fh.seek(s.offset)
                assert gpu_bytes(slot.dev + where, s.length) == fh.read(s.length), s
        used, serial, _, _ = fetcher.buffer_use()
        if path == "bounce":
            assert (used, serial) == (1, True)
        else:
            group = bounce.copy_group(bs)
            assert 1 <= used <= (2 if bs >= 1 << 20 else 4) * group
        fetcher.close()
    finally:
        res.release()


def test_a_piece_past_the_end_of_its_file_fails_with_one_line(sim_gpu, data):
    from xferscope.workloads.train.train_data import SampleRef

    res = SimResources()
    try:
        fetcher = make_fetcher("bounce-async", data, 1 << 20, 0, res)
        slot = Slot(8 << 20, dev=res.device_memory(0, 8 << 20))
        size = data.files[0].size
        beyond = SampleRef(offset=size + 4096, length=4096, file=0)
        with pytest.raises(RunFailed, match=r"short read at offset"):
            fetcher.read(beyond, slot, 0)
        fetcher.close()
    finally:
        res.release()
