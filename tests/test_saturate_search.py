"""The knee search on synthetic throughput models with a known knee and noise. No engine runs here: the models
stand in for ``measure``."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

import pytest

from xferscope.saturate.search import InFlight, KneeSearch, StopSearch, knee_of, ladder, midpoint, resolution


@dataclass
class Reading:
    throughput: float


class Model:
    """Throughput of a path that needs ``per_io`` per I/O in flight, is held to ``per_thread`` by one thread's
    CPU, and to ``plateau`` by the device; each reading off by gaussian noise (relative ``noise``)."""

    def __init__(
        self,
        *,
        per_io: float,
        plateau: float,
        per_thread: float = float("inf"),
        noise: float = 0.02,
        seed: int = 7,
        peak_then_drop: int | None = None,
    ):
        self.per_io, self.plateau, self.per_thread = per_io, plateau, per_thread
        self.noise = noise
        self.rng = random.Random(seed)
        self.peak_then_drop = peak_then_drop
        self.calls: list[InFlight] = []

    def true(self, shape: InFlight) -> float:
        value = min(self.per_io * shape.concurrency, self.per_thread * shape.workers, self.plateau)
        if self.peak_then_drop and shape.workers > self.peak_then_drop:  # thrashing past a point
            value *= 0.8
        return value

    def __call__(self, shape: InFlight) -> Reading:
        self.calls.append(shape)
        return Reading(self.true(shape) * (1 + self.rng.gauss(0, self.noise)))


def search(model, **kwargs) -> KneeSearch:
    return KneeSearch(model, **{"max_workers": 16, "max_qd": 1, **kwargs})


@pytest.mark.parametrize(
    "per_io, plateau, knee", [(100.0, 1000.0, 10), (400.0, 1200.0, 3), (70.0, 1000.0, 14), (1000.0, 1000.0, 1)]
)
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_workers_knee_is_found_within_one_step_and_within_the_budget(per_io, plateau, knee, seed):
    model = Model(per_io=per_io, plateau=plateau, seed=seed)
    found = search(model, max_workers=32, max_points=12).run()
    assert found.stopped is None
    step = resolution(knee)
    assert abs(found.knee.workers - knee) <= step, (found.knee, [(p.shape, round(p.median)) for p in found.points])
    assert found.knee.iodepth == 1
    assert len(found.points) <= 12
    assert found.measurements == len(model.calls), "every measurement is kept with its point"
    assert model.true(found.plateau) >= 0.95 * plateau


def test_one_worker_s_queue_then_workers_then_the_least_queue_at_that_many_workers():
    # one thread's CPU holds a worker to 250 whatever its queue; the device gives 100 per I/O in flight up to 1000
    model = Model(per_io=100.0, per_thread=250.0, plateau=1000.0, seed=5)
    found = search(model, max_workers=4, max_qd=64).run()
    assert found.knee == InFlight(4, 3), [(p.shape, round(p.median)) for p in found.points]
    assert found.unsaturated == ["workers"], "the last step of the climb, to 4 workers, still gained"
    assert InFlight(4, 64) in {p.shape for p in found.points}, "the climb reached the knee at the deepest queue"
    assert {p.stage for p in found.points} >= {"doubling", "knee queue depth"}
    assert len(found.points) <= 16


def test_a_curve_that_rises_again_at_depth_is_found_by_the_limit_check():
    # flat up to 8 in flight, then rising to 1.6x at 64 (a virtual disk with many queues behind it)
    model = Model(per_io=1.0, plateau=1.0, noise=0.01, seed=2)
    model.true = lambda shape: 1000.0 * (1 + 0.2 * max(0.0, math.log2(shape.concurrency) - 3))
    found = search(model, max_workers=1, max_qd=64).run()
    assert found.comparisons[0].gain is False, "the first doubling is flat"
    assert any(c.stage == "limit" and c.gain for c in found.comparisons)
    true_knee = 49  # 1000 (1 + 0.2 (log2 q - 3)) >= 0.95 x 1600
    assert abs(found.knee.iodepth - true_knee) <= resolution(64), found.knee
    assert model.true(found.plateau) >= 0.95 * 1600


def test_the_climb_goes_on_with_workers_at_the_deepest_queue():
    # a device that wants 600 I/Os in flight: one worker's queue is not enough
    model = Model(per_io=2.0, plateau=1200.0, noise=0.01, seed=3)
    found = search(model, max_workers=16, max_qd=64).run()
    assert found.knee.workers > 1
    true_concurrency = 570  # 2 x c >= 0.95 x 1200
    assert abs(found.knee.concurrency - true_concurrency) <= 64, found.knee
    assert len(found.points) <= 24


def test_the_search_stops_at_its_point_budget_and_keeps_what_it_measured():
    model = Model(per_io=10.0, plateau=10_000.0)
    found = search(model, max_workers=1024, max_points=4).run()
    assert found.stopped == "point budget of 4 reached"
    assert len(found.points) == 4 and all(p.measurements for p in found.points)
    assert found.knee is not None


def test_a_flat_path_stops_after_two_steps_on_each_ladder_and_the_limit_check():
    model = Model(per_io=1e9, plateau=500.0, noise=0.01)
    found = search(model, max_qd=64).run()
    assert found.knee == InFlight(1, 1)
    assert {p.shape for p in found.points} == {
        *(InFlight(1, q) for q in (1, 2, 4)),
        InFlight(16, 64),
        *(InFlight(w, 1) for w in (2, 4)),
        InFlight(16, 1),
    }, "two steps and the limit, the queue's ladder and the workers' at qd 1"
    assert not found.unsaturated
    assert found.flat is not None and found.flat.from_first and found.flat.start == InFlight(1, 1)
    assert found.flat.until == InFlight(16, 64) and 480 < found.flat.low <= found.flat.high < 520


def test_a_path_that_thrashes_past_its_peak_keeps_the_peak():
    model = Model(per_io=150.0, plateau=1000.0, peak_then_drop=8)
    found = search(model, max_workers=32).run()
    assert found.knee.workers == 7 and model.true(found.plateau) == 1000.0
    assert not found.unsaturated


def test_neighbours_that_cannot_be_told_apart_count_as_flat_after_the_round_cap():
    model = Model(per_io=1e9, plateau=1000.0, noise=0.10, seed=4)  # the same throughput, 10% noise
    found = search(model, max_rounds=4).run()
    first = found.comparisons[0]
    assert first.verdict.rounds == 4 and not first.told_apart and not first.gain
    assert {p.shape for p in found.points} == {InFlight(1), InFlight(2), InFlight(4), InFlight(16)}, (
        "two steps, the limit"
    )


def test_measuring_alternates_the_order_of_neighbours():
    model = Model(per_io=1000.0, plateau=1000.0, noise=0.5, seed=3)  # noisy: every comparison goes to the cap
    search(model, max_workers=2, max_rounds=4).run()
    pairs = [model.calls[i : i + 2] for i in range(0, 8, 2)]
    assert [p[0] for p in pairs] == [InFlight(1), InFlight(2), InFlight(1), InFlight(2)], "rotated every round"


def test_a_stop_keeps_the_points_so_far():
    model = Model(per_io=100.0, plateau=1000.0)

    def measure(shape):
        if len(model.calls) == 7:
            raise StopSearch
        return model(shape)

    found = KneeSearch(measure, max_workers=16).run()
    assert found.stopped == "interrupted" and found.measurements == 7


def test_helpers():
    assert midpoint(1, 64) == 8 and midpoint(8, 16) == 12 and midpoint(3, 5) == 4
    assert ladder(3, 4) == [
        InFlight(1, 1),
        InFlight(1, 2),
        InFlight(1, 3),
        InFlight(1, 4),
        InFlight(2, 4),
        InFlight(3, 4),
    ]
    assert ladder(3, 1) == [InFlight(1), InFlight(2), InFlight(3)]
    assert resolution(3) == 1 and resolution(16) == 2 and resolution(64) == 8
    assert knee_of([]) == (None, None)
    with pytest.raises(ValueError):
        KneeSearch(lambda s: None, max_workers=4, min_rounds=1)


def test_the_time_left_comes_from_each_paths_runs_so_far():
    from xferscope.saturate.eta import SaturationClock

    now = [0.0]
    clock = SaturationClock(["host", "cufile"], [10, 20], duration=1.0, clock=lambda: now[0])
    assert clock.left() == 10 * 1.0 + 20 * 1.0  # nothing run yet: the measuring time alone

    def run(wall: float) -> bool:
        clock.run_started()
        now[0] += wall
        return clock.run_ended()

    clock.series_started(1)
    assert run(2.2) is False  # host's first run, which started its engine process
    assert clock.run_seconds("host") == pytest.approx(2.2) and clock.first_run_seconds("cufile") == pytest.approx(2.2)
    assert run(1.2) is True  # the second: a run's cost with the process kept is known now
    # 8 host runs left at 1.2 s; cufile, not started: a first run at host's first's cost, then 19 at 1.2 s
    assert clock.left() == pytest.approx(8 * 1.2 + 2.2 + 19 * 1.2)
    clock.series_started(2)
    for wall in (4.1, 1.5, 1.5, 1.1):
        run(wall)
    assert clock.run_seconds("cufile") == pytest.approx(1.5) and clock.first_run_seconds("cufile") == 4.1
    assert clock.left() == pytest.approx(16 * 1.5)


@pytest.mark.parametrize(
    "knee, limits",
    [(4, {"max_workers": 16, "max_qd": 64}), (32, {"max_workers": 16, "max_qd": 64}), (8, {"max_workers": 64})],
)
def test_with_15_percent_noise_a_run_the_knee_is_within_one_doubling_in_18_of_20_searches(knee, limits):
    from standin_runs import ConcurrencyCurve

    hits, knees = 0, []
    for seed in range(20):
        curve = ConcurrencyCurve(knee, noise=0.15, seed=seed)
        found = KneeSearch(curve, **limits).run()
        assert found.stopped is None
        knees.append(found.knee.concurrency)
        hits += curve.within_one_doubling(found.knee.concurrency)
    assert hits >= 18, knees
    assert max(knees) < 1024, "the 2-CPU machine's case: a flat curve's best median is luck, not the knee"


@pytest.mark.parametrize("limits", [{"max_workers": 16, "max_qd": 64}, {"max_workers": 16}])
def test_with_15_percent_noise_a_flat_curve_is_called_flat_in_18_of_20_searches(limits):
    from standin_runs import ConcurrencyCurve

    flat = 0
    for seed in range(20):
        found = KneeSearch(ConcurrencyCurve(1, noise=0.15, seed=seed), **limits).run()
        flat += bool(found.flat and found.flat.from_first)
    assert flat >= 18


def test_one_noisy_step_does_not_end_the_climb_and_workers_at_qd_1_are_climbed_too():
    # the GPU machine's case: the step from qd 2 to qd 4 shows no gain by noise, yet 4 workers read faster
    from standin_runs import Reading

    def measure(shape):
        if shape == InFlight(1, 4):
            return Reading(1.0)  # the unlucky step
        return Reading(min(2.8, 1.2 * shape.concurrency**0.5))

    found = KneeSearch(measure, max_workers=8, max_qd=64).run()
    climbed = {p.shape for p in found.points}
    assert InFlight(1, 8) in climbed, "a second step after the flat one"
    assert {InFlight(2, 1), InFlight(4, 1)} <= climbed, "the workers at queue depth 1"
    assert found.knee.concurrency >= 4 and found.plateau_value == pytest.approx(2.8)


def test_the_plateau_is_not_the_luckiest_point():
    from standin_runs import Reading

    from xferscope.saturate.search import Point, plateau_of

    points = [
        Point(InFlight(1, q), "doubling", [Reading(v) for v in vs])
        for q, vs in (
            (1, [1.0, 1.1, 0.9]),
            (2, [2.0, 2.1, 1.9]),
            (4, [2.0, 2.2, 2.1]),
            (8, [2.6, 2.5, 2.1]),  # the luckiest point: the best median
            (16, [2.1, 2.0, 2.2]),
        )
    ]
    plateau = plateau_of(points)
    assert plateau.value == pytest.approx(2.1) and plateau.shape == InFlight(1, 4)
    assert InFlight(1, 1) not in plateau.shapes and InFlight(1, 8) in plateau.shapes
