"""A path whose plateau is its own overhead is measured once more from the page cache (--source cache), and the
verdict says whether it sits at that ceiling or pays a cost per request. The engines are stood in for by a model
of each path's throughput (a recorded host result with its bytes scaled), so that the verdicts are known."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from xferscope.errors import SpecError
from xferscope.export import result_from_record
from xferscope.records import as_data, as_run, as_saturation
from xferscope.saturate.ceilings import bottleneck
from xferscope.saturate.execute import SaturationRun
from xferscope.saturate.plan import SaturatePlan
from xferscope.saturate.record import saturation_from_record, saturation_to_record
from xferscope.spec import RunSpec

GIB = 1 << 30
RECORDED = Path(__file__).parent / "data" / "host-read-run.json"


def recorded_result():
    return result_from_record(as_run(json.loads(RECORDED.read_text())["result"], str(RECORDED)), str(RECORDED))


class Paths:
    """Each path's throughput in GiB/s: ``storage`` for the host path, ``from_disk`` and ``from_cache`` for the
    others; every worker adds 1 GiB/s up to that."""

    def __init__(self, storage: float, from_disk: float, from_cache: float | Exception):
        self.storage, self.from_disk, self.from_cache = storage, from_disk, from_cache
        self.base = recorded_result()
        self.specs: list[RunSpec] = []

    def __call__(self, spec: RunSpec):
        self.specs.append(spec)
        if spec.source == "cache":
            if isinstance(self.from_cache, Exception):
                raise self.from_cache
            rate = self.from_cache
        else:
            rate = min(float(spec.workers), self.storage if spec.path == "host" else self.from_disk)
        moved = int(rate * GIB * self.base.seconds) // spec.block_size * spec.block_size
        return dataclasses.replace(
            self.base, spec=spec, bytes=moved, read_bytes=moved, ops=moved // spec.block_size, read_ops=0
        )


def saturate(model: Paths, path: str = "bounce-async"):
    base = RunSpec(path=path, block_size=1 << 20, duration=1.0, interval=0.5)
    plan = SaturatePlan(base, [path], [1 << 20], max_workers=8, max_qd=1, min_rounds=2, max_rounds=2).validate()
    outcome = SaturationRun(plan, model).run()
    return next(o for o in outcome.series if o.series.path == path), outcome


def test_a_path_below_storage_is_measured_from_the_page_cache_and_cited():
    model = Paths(storage=4.0, from_disk=2.0, from_cache=9.0)
    o, outcome = saturate(model)
    cached = [s for s in model.specs if s.source == "cache"]
    assert len(cached) == 1 and cached[0].path == "bounce-async" and cached[0].workers == o.found.plateau.workers
    assert o.bottleneck.kind == "path overhead"
    assert o.own_ceiling_gib_s == pytest.approx(9.0, rel=0.01)
    own = next(c for c in o.bottleneck.checks if c.ceiling == "own ceiling")
    assert own.binds is False and "9.00 GiB/s from the page cache, --source cache" in own.text
    assert (
        o.bottleneck.word
        == "path overhead (50% of storage; below its own ceiling from memory: a cost per request, not a rate)"
    )
    # kept in the saturation's JSON, and judged the same when read back
    again = saturation_from_record(
        as_saturation(json.loads(json.dumps(as_data(saturation_to_record(outcome)))), "<json>")
    )
    back = next(s for s in again.series if s.series.path == "bounce-async")
    assert back.own_ceiling_gib_s == pytest.approx(o.own_ceiling_gib_s) and back.bottleneck.word == o.bottleneck.word


def test_a_path_at_its_own_ceiling_says_so():
    o, _ = saturate(Paths(storage=4.0, from_disk=2.0, from_cache=2.1))
    assert o.bottleneck.word == "path overhead (50% of storage; at its own ceiling from memory)"


def test_storage_bound_paths_are_not_measured_again():
    model = Paths(storage=2.0, from_disk=2.0, from_cache=9.0)
    o, _ = saturate(model)
    assert o.bottleneck.kind == "storage" and not [s for s in model.specs if s.source == "cache"]
    assert not [c for c in o.bottleneck.checks if c.ceiling == "own ceiling"]


def test_a_ceiling_that_cannot_be_measured_says_why():
    refused = SpecError("source", "--source cache holds the file in memory, and 64.00 GiB does not fit")
    o, _ = saturate(Paths(storage=4.0, from_disk=2.0, from_cache=refused))
    own = next(c for c in o.bottleneck.checks if c.ceiling == "own ceiling")
    assert own.binds is None and "does not fit" in own.text
    assert o.bottleneck.word == "path overhead (50% of storage)"


def test_the_rule_names_the_own_ceiling():
    from xferscope.saturate.ceilings import CEILING_RULE, Evidence

    assert "--source cache" in CEILING_RULE
    e = Evidence("bounce", 1 << 20, "4 workers", 1.0, storage_gib_s=2.0, own_ceiling_gib_s=None)
    assert bottleneck(e).word == "path overhead (50% of storage)"
