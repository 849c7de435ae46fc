"""Sweeps: every point of a profile, repeated, with statistics, resume, ratios against old results, and plots.

from xferscope.sweep import Sweep
outcome = Sweep(load_profile("ssd-block-mix-qd16"), "ssd.results.json").run()
"""

from xferscope.sweep.execute import (
    PointFinished,
    PointSkipped,
    RepetitionFinished,
    RepetitionStarted,
    SampleTaken,
    Sweep,
    SweepOutcome,
)
from xferscope.sweep.plan import Availability, SweepPoint, plan_points
from xferscope.sweep.record import SCHEMA, PointRecord, ResultsFile

__all__ = [
    "SCHEMA",
    "Availability",
    "PointFinished",
    "PointRecord",
    "PointSkipped",
    "RepetitionFinished",
    "RepetitionStarted",
    "ResultsFile",
    "SampleTaken",
    "Sweep",
    "SweepOutcome",
    "SweepPoint",
    "plan_points",
]
