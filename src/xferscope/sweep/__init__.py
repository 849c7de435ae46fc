"""Sweeps: every point of a profile, repeated, with statistics, resume, ratios against old results, and plots.

from xferscope.sweep import SweepRun
outcome = SweepRun(load_profile("ssd-block-mix-qd16"), "ssd.results.json").run()
"""

from xferscope.sweep.execute import (
    PointFinished,
    PointSkipped,
    RepetitionFinished,
    RepetitionStarted,
    SampleTaken,
    SweepOutcome,
    SweepRun,
)
from xferscope.sweep.plan import Availability, PlannedPoint, plan_points
from xferscope.sweep.record import SCHEMA, PointRecord, ResultsFile

__all__ = [
    "SCHEMA",
    "Availability",
    "PlannedPoint",
    "PointFinished",
    "PointRecord",
    "PointSkipped",
    "RepetitionFinished",
    "RepetitionStarted",
    "ResultsFile",
    "SampleTaken",
    "SweepOutcome",
    "SweepRun",
    "plan_points",
]
