"""`workload load --split auto --threads auto` (the defaults): a probe reads the load's own pieces at each shape of
a small grid, in the engine's transfer code, and the load runs with the fastest. Checked on a stand-in storage whose
speed depends on the request size and the readers in flight (a table), so that the best shape is known."""

from __future__ import annotations

import dataclasses
import threading
import time

import pytest

from xferscope.workloads.common.fetchers import Fetcher
from xferscope.workloads.inference import load_data, load_shape, transfer_process
from xferscope.workloads.inference.load import direct_for, transfer_job
from xferscope.workloads.inference.load_spec import LoadSpec
from xferscope.workloads.inference.models import model as model_shape
from xferscope.workloads.inference.transfer import Files

M = 1 << 20
#: the stand-in storage's speed (MB/s, all readers together) by request size and readers: best at 4 MiB x 4
SPEED = {
    (1 * M, 2): 60, (1 * M, 4): 90, (1 * M, 8): 80, (1 * M, 16): 70,
    (4 * M, 2): 110, (4 * M, 4): 400, (4 * M, 8): 150, (4 * M, 16): 120,
    (16 * M, 2): 120, (16 * M, 4): 160, (16 * M, 8): 100, (16 * M, 16): 90,
}  # fmt: skip


class StandInStorage(Fetcher):
    """Reads nothing: each piece takes the time the table gives for this request size and the readers reading
    (rounded up to 2, 4, 8 or 16: the others of a trial are asleep in their reads as one enters)."""

    readers = 0  # open
    reading = 0
    lock = threading.Lock()

    def __init__(self, data, block_size):
        super().__init__(data, block_size)
        with StandInStorage.lock:
            StandInStorage.readers += 1

    def read(self, sample, slot, at):
        with StandInStorage.lock:
            StandInStorage.reading += 1
            n = next(k for k in (2, 4, 8, 16) if StandInStorage.reading <= k)
        try:
            time.sleep(sample.length * n / (SPEED[(self.bs, n)] * 1e6))
        finally:
            with StandInStorage.lock:
                StandInStorage.reading -= 1

    def close(self):
        with StandInStorage.lock:
            StandInStorage.readers -= 1


@pytest.fixture
def stand_in_storage(monkeypatch):
    monkeypatch.setattr(transfer_process, "make_fetcher", lambda path, data, bs, gpu, res: StandInStorage(data, bs))


def probe_with(spec: LoadSpec, seconds: float = 0.2) -> load_shape.LoadShape:
    """The probe as ``workload load`` runs it, with its transfer job run here (in this process) on the stand-in."""
    shards = load_data.planned(spec)
    base, _ = transfer_job(load_shape.widest(spec), shards)

    def run(job):
        job = dataclasses.replace(job, files=Files(job.files.files, True))  # nothing to evict: nothing was read
        setup = transfer_process.TransferSetup(job)
        setup.build()
        try:
            payload, error = setup.run(threading.Event(), lambda tick: None)
        finally:
            setup.close()
        assert error is None
        return payload

    return load_shape.choose(
        spec, shards, direct_for(spec, shards), base, run, seconds, min_bytes=0, final_seconds=seconds
    )


def spec_of(**kw) -> LoadSpec:
    model = model_shape("llama3.2-1b", layers=1, dtype="fp8")
    return LoadSpec(model=model, shard_size=64 * M, path="host", **kw).validate()


def test_the_probe_picks_the_fastest_shape_and_says_from_what(stand_in_storage):
    shape = probe_with(spec_of())
    assert shape.chosen_by == "probe"
    first = [(t.split, t.threads) for t in shape.trials if t.round == 1]
    assert first == [(s, n) for s in load_shape.SPLITS for n in (2, 4, 8, 16)]
    finals = load_shape.final_rates(shape.trials)
    assert len(finals) == load_shape.FINALISTS and all(len(v) == 2 for v in finals.values())
    assert (4 * M, 4) in finals, "the fastest shape of the first round is among the finalists"
    assert (shape.split, shape.threads) == (4 * M, 4), shape.line()
    assert "the fastest of 12 shapes probed" in shape.line() and "4M x4" in shape.line()
    assert StandInStorage.readers == 0, "every trial's readers were closed"


def test_only_what_the_user_left_open_is_probed(stand_in_storage):
    shape = probe_with(spec_of(threads=8))
    assert {t.threads for t in shape.trials} == {8} and len([t for t in shape.trials if t.round == 1]) == 3
    assert shape.threads == 8 and shape.split == 4 * M  # 150 MB/s, the best at 8 readers
    given = probe_with(spec_of(threads=2, split=M))
    assert (given.chosen_by, given.split, given.threads, given.trials) == ("given", M, 2, [])


def test_a_load_too_small_for_a_probe_runs_with_the_defaults_and_says_so():
    spec = spec_of()
    shards = load_data.planned(spec)
    base, _ = transfer_job(load_shape.widest(spec), shards)
    shape = load_shape.choose(spec, shards, False, base, lambda job: pytest.fail("no probe should run"))
    assert (shape.chosen_by, shape.split, shape.threads) == ("defaults", 16 * M, 8)
    assert "a load takes less than a probe" in shape.line()
