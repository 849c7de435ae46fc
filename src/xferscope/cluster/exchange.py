"""The timed region of a cluster run: each rank sends interval records, rank 0 sums them live.

Only non-blocking MPI calls are made here, from the main thread of each rank,
between waits on the rank's own run; the engine's workers and the sampler
thread never touch MPI and never wait for it.

* A rank ticks at the sample interval: it reads its engine's counters, sends
  one record to rank 0 (``isend``), and looks for a stop message from rank 0.
  When its run ends it sends a final record with its own result and leaves.
* Rank 0 does the same for itself, receives every record that arrived, emits
  the aggregate and per-host samples, and tells all ranks to stop when one
  failed or the user interrupted. It leaves once every rank's final record is
  in, or gives up on a rank that sent nothing for ``stall_s`` seconds.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from xferscope.cluster.aggregate import LiveAggregate
from xferscope.cluster.layout import Layout
from xferscope.cluster.records import RankRecord, RecordMaker, failure_record
from xferscope.cluster.world import TAG_RECORD, TAG_STOP, World, interrupts_as_flag
from xferscope.export import result_to_record
from xferscope.records import Run as RunRecord
from xferscope.run.runner import EngineRun

#: after a stop was requested, how long rank 0 still waits for the ranks' final records
STOP_WAIT_S = 15.0


def rank_summary(run: EngineRun) -> tuple[str, RunRecord | None, str | None]:
    """(status, its own result's record, why it could not be finished) of a rank whose run has ended: sent once."""
    try:
        result = run.finish()
    except Exception as exc:
        return "failed", None, str(exc)
    return result.status, result_to_record(result), None


def own_record(run: EngineRun, maker: RecordMaker, finished: bool, start_error: str | None) -> RankRecord:
    """This rank's record now: final (with its result) once its run has ended."""
    if start_error:
        return failure_record(maker.rank, start_error)
    try:
        snap = run.snapshot()
    except Exception as exc:  # the engine is broken: stop and report it as this rank's failure
        run.stop()
        return failure_record(maker.rank, f"cannot read the engine's counters: {exc}")
    if not finished:
        return maker.make(snap)
    status, summary, error = rank_summary(run)
    if summary is None:
        rec = maker.make(snap, status="failed")
        rec.error = rec.error or error
        return rec
    return maker.make(snap, status=status, summary=summary)


class Ticker:
    """Wake every ``interval`` seconds; after a stall, skip ahead instead of bursting."""

    def __init__(self, interval: float):
        self.interval = interval
        self.next = time.monotonic() + interval

    def remaining(self) -> float:
        return max(0.0, self.next - time.monotonic())

    def advance(self) -> None:
        now = time.monotonic()
        self.next += self.interval
        if self.next < now:
            self.next = now + self.interval


class Follower:
    """A rank other than 0."""

    def __init__(self, world: World, run: EngineRun, maker: RecordMaker, start_error: str | None = None):
        self.world, self.run, self.maker = world, run, maker
        self.start_error = start_error
        self._sends: list = []

    def loop(self) -> None:
        with interrupts_as_flag() as interrupted:
            self._loop(interrupted)

    def _loop(self, interrupted: threading.Event) -> None:
        comm = self.world.comm
        ticker = Ticker(self.run.spec.interval)
        while True:
            finished = self.run.join(ticker.remaining()) or self.start_error is not None
            if interrupted.is_set():  # the launcher's SIGTERM/SIGINT: stop, and still report
                self.run.stop()
            ticker.advance()
            rec = own_record(self.run, self.maker, finished, self.start_error)
            self._sends.append(comm.isend(rec, dest=0, tag=TAG_RECORD))
            self._sends = [r for r in self._sends if not r.Test()]
            while comm.iprobe(source=0, tag=TAG_STOP):
                comm.recv(source=0, tag=TAG_STOP)
                self.run.stop()
            if rec.status != "running":
                break
        self.world.MPI.Request.Waitall(self._sends)

    def drain_stops(self) -> None:
        """Receive stop messages that crossed this rank's final record (after the outcome is known)."""
        comm = self.world.comm
        while comm.iprobe(source=0, tag=TAG_STOP):
            comm.recv(source=0, tag=TAG_STOP)


class Leader:
    """Rank 0: its own run, plus the live aggregate of every rank."""

    def __init__(
        self,
        world: World,
        layout: Layout,
        run: EngineRun,
        maker: RecordMaker,
        *,
        on_sample: Callable | None = None,
        on_interrupt: Callable[[LiveAggregate], None] | None = None,
        start_error: str | None = None,
    ):
        self.world, self.run, self.maker = world, run, maker
        self.live = LiveAggregate(layout)
        self.on_sample = on_sample
        self.on_interrupt = on_interrupt
        self.start_error = start_error
        self.interrupted = False
        self.stall_s = max(30.0, 50 * run.spec.interval)
        self._stop_sent: set[int] = set()
        self._stop_asked_at: float | None = None
        self._sends: list = []

    def loop(self) -> None:
        with interrupts_as_flag() as interrupted:
            self._loop(interrupted)

    def _loop(self, interrupted: threading.Event) -> None:
        ticker = Ticker(self.run.spec.interval)
        started = time.monotonic()
        for st in self.live.states:
            st.last_seen = started
        own_done = False
        while True:
            if own_done:
                time.sleep(ticker.remaining())
                finished = True
            else:
                finished = self.run.join(ticker.remaining()) or self.start_error is not None
            if interrupted.is_set() and not self.interrupted:
                self._interrupt()
            ticker.advance()
            now = time.monotonic()
            if not own_done:
                rec = own_record(self.run, self.maker, finished, self.start_error)
                self.live.add(rec, now)
                own_done = rec.status != "running"
            self._receive(now)
            sample, per_host = self.live.emit(now - started)
            if self.on_sample is not None:
                try:
                    self.on_sample(sample, per_host)
                except Exception:  # a broken display must not stop the cluster
                    pass
            self._stop_if_needed(now, own_done)
            self._give_up_on_silent(now)
            if self.live.settled:
                break

    def finish_sends(self) -> None:
        """Complete the stop messages (call after the outcome went out: every rank has drained them)."""
        self.world.MPI.Request.Waitall(self._sends)

    def _interrupt(self) -> None:
        self.interrupted = True
        self.run.stop()
        if self.on_interrupt is not None:
            try:
                self.on_interrupt(self.live)  # save what we have now: the launcher may kill us soon
            except Exception:
                pass

    def _receive(self, now: float) -> None:
        comm, MPI = self.world.comm, self.world.MPI
        status = MPI.Status()
        while comm.iprobe(source=MPI.ANY_SOURCE, tag=TAG_RECORD, status=status):
            rec = comm.recv(source=status.Get_source(), tag=TAG_RECORD)
            self.live.add(rec, now)

    def _stop_if_needed(self, now: float, own_done: bool) -> None:
        if not (self.interrupted or self.live.failed() or any(st.status == "interrupted" for st in self.live.states)):
            return
        if self._stop_asked_at is None:
            self._stop_asked_at = now
        if not own_done:
            self.run.stop()
        for st in self.live.pending():
            if st.rank != 0 and st.rank not in self._stop_sent:
                self._sends.append(self.world.comm.isend("stop", dest=st.rank, tag=TAG_STOP))
                self._stop_sent.add(st.rank)

    def _give_up_on_silent(self, now: float) -> None:
        for st in self.live.pending():
            if st.rank == 0:
                continue
            silent = now - st.last_seen
            if silent > self.stall_s:
                self.live.give_up(st, f"sent nothing for {silent:.0f} s (hung, or its host is overloaded)")
            elif self._stop_asked_at is not None and now - self._stop_asked_at > STOP_WAIT_S:
                self.live.give_up(st, f"did not stop within {STOP_WAIT_S:.0f} s of being asked to")

    @property
    def lost_ranks(self) -> list[int]:
        return [st.rank for st in self.live.states if st.lost]
