"""What happened, as messages: posted by the run thread and the redraw timer, handled by the console."""

from __future__ import annotations

from dataclasses import dataclass

from textual.message import Message

from xferscope.app.session import RunRecord
from xferscope.engines.base import RunResult, Sample


@dataclass
class RunPreparing(Message):
    """The run's files and buffers are being set up (outside the timed region)."""

    record: RunRecord


@dataclass
class PrepareProgressed(Message):
    """Scratch-file fill progress; a newer one replaces an older one still waiting."""

    record: RunRecord
    done: int
    total: int

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, PrepareProgressed) and message.record is self.record


@dataclass
class RunStarted(Message):
    record: RunRecord
    labels: list[str]


@dataclass
class SamplesArrived(Message):
    """Samples taken from the run's buffer at one redraw tick (several per message)."""

    record: RunRecord
    samples: tuple[Sample, ...]


@dataclass
class RunFinished(Message):
    """The run ended: ran its course, or was stopped (``result.status == "interrupted"``)."""

    record: RunRecord
    result: RunResult


@dataclass
class RunFailedMessage(Message):
    """The run could not start, or its engine reported an error, or its engine's process died; ``result``
    holds what was measured, ``detail`` what else explains it (the process's last lines, cuFile's log)."""

    record: RunRecord
    reason: str
    result: RunResult | None
    detail: tuple[str, ...] = ()


@dataclass
class RunStopped(Message):
    """The run was stopped before its timed region began (nothing measured)."""

    record: RunRecord


@dataclass
class BatchFinished(Message):
    records: list[RunRecord]


@dataclass
class RoundAdded(Message):
    """A comparison with --rounds auto planned one more round (``records``, its runs), and ``why``."""

    records: list[RunRecord]
    why: str


@dataclass
class SetupRefused(Message, bubble=False):
    """The setup cannot run as it is; ``where`` is the form control that says why."""

    where: str
    reason: str


@dataclass
class SnapshotExported(Message):
    paths: list[str]


@dataclass
class ResultsLoaded(Message):
    source: str
    results: list[RunResult]


@dataclass
class MemPointMeasured(Message, bubble=False):
    """One point of a memory sweep (``records.MemPoint``), as soon as it is measured."""

    point: object


@dataclass
class MemSweepFinished(Message, bubble=False):
    """A memory sweep ended (``result.cancelled`` when stopped); ``result`` is its ``MemSweep``."""

    result: object


@dataclass
class MemSweepFailed(Message, bubble=False):
    """A memory sweep could not run or its engine failed; ``reason`` in the engine's words, ``detail`` the
    engine process's last words (its stderr's tail) where it died, ``result`` the points it measured
    until then (a ``MemSweep`` with ``error`` set; None when it measured none)."""

    reason: str
    detail: tuple[str, ...] = ()
    result: object = None


@dataclass
class SaturationProgressed(Message, bubble=False):
    """A saturation moved on: one of ``xferscope.saturate.execute``'s events (a measurement, a search ended)."""

    event: object


@dataclass
class SaturationEnded(Message, bubble=False):
    """A saturation ended (finished, stopped or failed in a run); ``outcome`` is its ``SaturationOutcome``."""

    outcome: object


@dataclass
class SaturationFailed(Message, bubble=False):
    """A saturation could not go on (bad target, xferscope's own error); ``reason`` says why."""

    reason: str


@dataclass
class WorkloadPreparing(Message, bubble=False):
    """A workload's data set is being written: ``done`` of ``total`` bytes."""

    done: int
    total: int


@dataclass
class WorkloadTicked(Message, bubble=False):
    """A workload run's tick: for training, per accelerator its steps and AU so far and the bytes read; for the
    inference workloads, the jobs done since the last tick."""

    tick: dict


@dataclass
class WorkloadEnded(Message, bubble=False):
    """A workload run ended (finished, stopped, or failed with what it measured); ``result`` is its record
    (TrainResult, KvResult, LoadResult)."""

    result: object


@dataclass
class WorkloadFailed(Message, bubble=False):
    """A workload run could not start or go on (bad input, no GPU, xferscope's own error); ``reason`` says why."""

    reason: str
