"""Several workload processes run as the ranks of one job on this host (a library that runs a process a rank): each
driven by a thread of its own (the first by the caller's, which Ctrl-C reaches), their timed regions begun
together, and each of their meetings mid-run (``process_host.MeetsMidRun``) held until every rank is there, as an
MPI job's ranks meet. A rank that fails or is interrupted stops the others; what each measured is kept."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

from xferscope.errors import RunFailed
from xferscope.workloads.common.process_run import WorkloadChild, WorkloadOutcome


class OtherRankStopped(RunFailed):
    """A rank's set-up ended because another rank's stopped first (the other's error is the one to say)."""


class RankProcesses:
    """``children[i]`` runs ``jobs[i]``; ``stop()`` from any thread stops them all."""

    def __init__(self, children: Sequence[WorkloadChild]):
        self.children = list(children)
        self._meeting = threading.Barrier(len(self.children))

    def stop(self) -> None:
        self._meeting.abort()
        for child in self.children:
            child.stop()

    def _met(self) -> bool:
        try:
            self._meeting.wait()
            return True
        except threading.BrokenBarrierError:  # a rank stopped or failed: the others stop
            return False

    def _ready(self) -> None:
        if not self._met():
            raise OtherRankStopped("another rank's process stopped before the run began")

    def execute(self, jobs: Sequence[Any], on_tick: Callable[[int, Any], None] | None = None) -> list[WorkloadOutcome]:
        """Each rank's outcome, in order (``on_tick(i, progress)``: rank ``i``'s ticks, from its driving thread)."""
        outcomes: list[WorkloadOutcome | None] = [None] * len(jobs)
        errors: list[BaseException] = []

        def one(i: int) -> None:
            tick = None if on_tick is None else (lambda progress, i=i: on_tick(i, progress))
            try:
                outcomes[i] = self.children[i].execute(jobs[i], tick, self._ready, lambda what: self._met())
            except BaseException as exc:  # a set-up error: raised in the caller's thread once every rank is done
                errors.append(exc)
                outcomes[i] = WorkloadOutcome(status="failed", error=str(exc))
            finally:
                out = outcomes[i]
                if out is None or out.status != "ok":
                    self.stop()

        threads = [threading.Thread(target=one, args=(i,), name=f"xferscope-rank-{i}") for i in range(1, len(jobs))]
        for t in threads:
            t.start()
        try:
            one(0)
        finally:
            for t in threads:
                while t.is_alive():
                    try:
                        t.join()
                    except KeyboardInterrupt:  # a second Ctrl-C: the ranks are already stopping
                        self.stop()
        if errors and all(o is not None and o.payload is None for o in outcomes):
            raise next((e for e in errors if not isinstance(e, OtherRankStopped)), errors[0])
        return [o if o is not None else WorkloadOutcome(status="failed") for o in outcomes]
