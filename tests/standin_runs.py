"""A stand-in for ``runner.EngineRun`` whose throughput follows a known distribution: a seam for the tests and for
``bench/verdict_goals.py`` that check the comparison's rule of rounds (and a storage of a known concurrency curve,
for the knee search's); not part of xferscope.

Each ``execute()`` returns an ok ``RunResult`` with ``bytes`` for one second at a throughput of
``base x speed of the round x factor of the path x exp(N(0, sd))``: the machine's speed moves from round to
round (what pairing cancels) and each run has its own noise, so the paired ratio of two paths has a median of
their factors' ratio and a spread (sd of its logarithm) of ``sd x sqrt(2)``.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field

from xferscope.engines.base import RunResult
from xferscope.spec import RunSpec


@dataclass
class Distribution:
    factors: dict[str, float]  # by the spec's label (``host#1``) or its path
    sd: float  # of each run's log throughput
    paths: int  # runs per round (the round's speed changes after this many)
    seed: int = 0
    base_mib_s: float = 1000.0
    calls: int = 0
    rng: random.Random = field(default_factory=random.Random)
    speed: float = 1.0


_state: Distribution | None = None


def configure(factors: dict[str, float], sd: float, paths: int, seed: int = 0) -> Distribution:
    global _state
    _state = Distribution(factors, sd, paths, seed, rng=random.Random(seed))
    return _state


class StandInRun:
    """Takes ``runner.EngineRun``'s place (monkeypatched by the caller); touches no file."""

    def __init__(self, spec: RunSpec, **_):
        self.spec = spec
        self.result: RunResult | None = None
        self.labels: list[str] = []
        #: asked to stop (as ``runner.EngineRun``): a stand-in run has always ended by then
        self.stopped_by_user = False

    # the steps the console's batch takes (runner.EngineRun's), each immediate
    def subscribe(self, _consumer) -> None: ...
    def prepare(self, progress=None) -> None: ...
    def start(self) -> None:
        self.execute()

    def join(self, timeout: float | None = None) -> bool:
        return True

    def stop(self) -> None:
        self.stopped_by_user = True

    def close(self) -> None: ...
    def finish(self) -> RunResult:
        assert self.result is not None
        return self.result

    def execute(self, on_sample=None) -> RunResult:
        d = _state
        if d is None:
            raise RuntimeError("standin_runs.configure() first")
        if d.calls % d.paths == 0:
            d.speed = d.rng.uniform(0.6, 1.4)
        d.calls += 1
        factor = d.factors.get(self.spec.name, d.factors.get(self.spec.path, 1.0))
        mib_s = d.base_mib_s * d.speed * factor * math.exp(d.rng.gauss(0, d.sd))
        moved = int(mib_s * (1 << 20))
        self.result = RunResult.totals_only(
            self.spec,
            "ok",
            bytes=moved,
            ops=1,
            read_bytes=moved,
            write_bytes=0,
            read_ops=1,
            seconds=1.0,
            labels=["stand-in engine: a throughput drawn from a known distribution"],
            source="stand-in",
        )
        return self.result


@dataclass(frozen=True)
class Reading:
    """What a knee search's ``measure`` returns: one run's throughput."""

    throughput: float


@dataclass
class ConcurrencyCurve:
    """A storage whose throughput against the I/Os in flight is known, for the knee search's goals
    (``bench/knee_goals.py`` and its tests): in proportion to the concurrency up to ``knee``, then ``plateau``
    (``knee`` 1: flat from the start), each run off by a uniform ±``noise``. Called with a shape (anything with a
    ``concurrency``), as ``KneeSearch`` calls ``measure``."""

    knee: float
    plateau: float = 2.2
    noise: float = 0.15
    seed: int = 0
    runs: int = 0

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)

    def true(self, concurrency: int) -> float:
        return self.plateau * min(1.0, concurrency / self.knee)

    @property
    def true_knee(self) -> float:
        """The least concurrency within 5% of the plateau."""
        return max(1.0, 0.95 * self.knee)

    def within_one_doubling(self, concurrency: int) -> bool:
        return self.true_knee / 2 <= concurrency <= 2 * self.true_knee

    def __call__(self, shape) -> Reading:
        self.runs += 1
        return Reading(self.true(shape.concurrency) * (1 + self.rng.uniform(-self.noise, self.noise)))
