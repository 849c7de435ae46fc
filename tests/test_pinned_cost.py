"""What a read into pinned memory costs, as doctor measured it, cited by compare: kept per boot and filesystem
(``engines.pinned_cost``); where a bounce path trails host, compare's notes say how much of the gap is the
memory's (or, without a measurement, where to get one); a bounce path level with host gets no note."""

from __future__ import annotations

import os

import pytest

from xferscope.compare.rounds import RoundsComparison
from xferscope.engines import pinned_cost
from xferscope.engines.base import RunResult
from xferscope.spec import RunSpec


@pytest.fixture
def cache_home(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path


def test_doctors_measurement_is_recalled_for_its_filesystem_in_this_boot_only(cache_home, monkeypatch):
    device = os.stat(cache_home).st_dev
    assert pinned_cost.recalled(device) is None
    pinned_cost.remember(str(cache_home), 0.04, 0.07)
    got = pinned_cost.recalled(device)
    assert got is not None and (got.registered, got.allocated, got.directory) == (0.04, 0.07, str(cache_home))
    assert pinned_cost.recalled(device + 1) is None, "another filesystem's is not this one's"
    monkeypatch.setattr(pinned_cost, "_boot_id", lambda: "another boot")
    assert pinned_cost.recalled(device) is None, "a measurement of another boot is not recalled"


def compared(host_mib_s: float, bounce_mib_s: float, device: int) -> RoundsComparison:
    """host against bounce-async over 3 rounds, each run's result as given, its file on ``device``."""
    comp = RoundsComparison([RunSpec(path="host"), RunSpec(path="bounce-async")], 3)
    for run in comp.runs:
        mib_s = host_mib_s if run.slot == 0 else bounce_mib_s
        moved = int(mib_s * (1 << 20))
        run.result = RunResult.totals_only(
            run.spec, "ok", bytes=moved, ops=1, read_bytes=moved, write_bytes=0, read_ops=1, seconds=1.0
        )
        run.files = [(device, 1)]
    return comp


def test_a_bounce_path_that_trails_host_is_told_how_much_of_the_gap_is_the_memorys(cache_home):
    device = os.stat(cache_home).st_dev
    [unmeasured] = compared(1000, 940, device).pinned_notes()
    assert "bounce-async trails host by 6.0%" in unmeasured and "(xferscope doctor)" in unmeasured
    pinned_cost.remember(str(cache_home), 0.04, 0.07)
    [note] = compared(1000, 940, device).pinned_notes()
    assert "cost 4.0% more than into host's" in note and "the rest, 2.0%, is the path's own" in note
    [memory] = compared(1000, 955, device).pinned_notes()
    assert "the gap is the memory's, not the path's" in memory
    assert note in compared(1000, 940, device).notes(), "among the notes under the table"
    assert compared(1000, 1000, device).pinned_notes() == [], "level with host: nothing to explain"
    assert compared(1000, 700, device).pinned_notes() == [], "a gap that large is not the memory's to explain"
