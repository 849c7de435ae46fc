"""The MPI world of a cluster run: loading mpi4py, who launched us, and agreement with a time limit.

mpi4py is an optional extra (``xferscope[mpi]``); without it ``--mpi`` fails with
one line and exit code 3. Only the main thread of each rank calls MPI, so the
library's lowest thread level is enough.

Every synchronisation point before and after the timed region is an
*agreement*: each rank contributes its status (None, or the error it hit) and
all ranks learn every rank's status, so one rank's failure stops all of them
cleanly. A rank that never arrives (stuck on a hung mount, say) is not waited
for forever: after ``XFERSCOPE_MPI_TIMEOUT`` seconds (default 600) the job is
aborted with a message.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from xferscope.errors import EnvironmentProblem

#: tags of the point-to-point messages of the timed region
TAG_RECORD = 71  # rank -> rank 0: one interval record
TAG_STOP = 72  # rank 0 -> rank: stop now (another rank failed, or the user interrupted)
TAG_HALT = 73  # a workload's rank -> every other rank: my run ended early (failed or interrupted), stop yours

DEFAULT_SYNC_TIMEOUT_S = 600.0
POLL_S = 0.002


def sync_timeout() -> float:
    """Seconds a rank waits for the others at an agreement (``XFERSCOPE_MPI_TIMEOUT``)."""
    text = os.environ.get("XFERSCOPE_MPI_TIMEOUT", "")
    try:
        value = float(text) if text else DEFAULT_SYNC_TIMEOUT_S
    except ValueError:
        value = DEFAULT_SYNC_TIMEOUT_S
    return value if value > 0 else DEFAULT_SYNC_TIMEOUT_S


def load_mpi():
    """The ``mpi4py.MPI`` module, initialised; EnvironmentProblem (exit 3) when it cannot be had."""
    try:
        import mpi4py
    except ImportError:
        raise EnvironmentProblem(
            "--mpi needs mpi4py: pip install 'xferscope[mpi]' (and an MPI library such as Open MPI)"
        ) from None
    # only the main thread calls MPI; ask for no more than that
    mpi4py.rc.thread_level = "funneled"
    try:
        from mpi4py import MPI
    except (ImportError, RuntimeError, OSError) as exc:
        raise EnvironmentProblem(
            f"--mpi: mpi4py cannot load an MPI library ({exc}); install Open MPI or MPICH "
            "(e.g. apt-get install openmpi-bin)"
        ) from None
    return MPI


def launcher() -> str:
    """Who started this process, from the environment the launchers set."""
    if "OMPI_COMM_WORLD_SIZE" in os.environ:
        return "mpirun (Open MPI)"
    if "SLURM_STEP_ID" in os.environ or "SLURM_PROCID" in os.environ:
        return "srun"
    if "PMI_RANK" in os.environ or "PMIX_RANK" in os.environ:
        return "mpiexec"
    return "none"


class SyncTimeout(Exception):
    """Not every rank reached an agreement in time."""


@contextlib.contextmanager
def interrupts_as_flag() -> Iterator[threading.Event]:
    """Ctrl-C, SIGTERM and SIGHUP set a flag instead of raising, so that nothing is lost half-handled: a record
    in the timed region's loops (which look at the flag every tick), or the result of a collective call (raised in
    the middle of it, KeyboardInterrupt would lose it on this rank and leave the rank out of step)."""
    flag = threading.Event()
    previous = {}
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        try:
            previous[sig] = signal.signal(sig, lambda signum, frame: flag.set())
        except (ValueError, OSError):  # not the main thread, or not settable here
            pass
    try:
        yield flag
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


@dataclass
class World:
    """This process's place in the job, and the few collective steps a cluster run needs."""

    MPI: Any
    comm: Any
    rank: int
    size: int
    launcher: str
    library: str
    #: a stop signal came during the last collective call: the next agreement counts as interrupted
    interrupt_pending: bool = field(default=False)
    #: messages ``heard`` took, by (tag, source), that ``settle`` is not to wait for
    taken: dict[tuple[int, int], int] = field(default_factory=dict)

    @property
    def is_root(self) -> bool:
        return self.rank == 0

    def agree(self, status: Any, what: str, *, if_interrupted: Any = None, timeout: float | None = None) -> list[Any]:
        """Every rank's ``status`` (in rank order), once all ranks got here.

        Ctrl-C is never raised here, where it could leave this rank out of step with the others: while waiting
        it is noted, and a rank that had nothing to report (None) reports ``if_interrupted`` instead; during the
        exchange itself it marks ``interrupt_pending`` (the next agreement counts as interrupted). Raises
        SyncTimeout when the others do not come.
        """
        limit = sync_timeout() if timeout is None else timeout
        if not self.is_root:
            limit += 5.0  # rank 0 gives up first, so it is the one that says what happened
        pending, self.interrupt_pending = self.interrupt_pending, False
        with interrupts_as_flag() as came:
            req = self.comm.Ibarrier()
            deadline = time.monotonic() + limit
            while not req.Test():
                if time.monotonic() > deadline:
                    raise SyncTimeout(
                        f"not every rank reached {what} within {limit:.0f} s "
                        "(a rank is stuck, or XFERSCOPE_MPI_TIMEOUT is too short)"
                    )
                time.sleep(POLL_S)
            if (pending or came.is_set()) and status is None:
                status = if_interrupted
            came.clear()
            said = self.comm.allgather(status)
        self.interrupt_pending = came.is_set()
        return said

    def allgather(self, value: Any) -> list[Any]:
        """Every rank's ``value``, in rank order (a collective call: every rank makes it), Ctrl-C held until it is
        over and then pending (``interrupt_pending``: the next agreement counts as interrupted)."""
        with interrupts_as_flag() as came:
            said = self.comm.allgather(value)
        self.interrupt_pending = self.interrupt_pending or came.is_set()
        return said

    def bcast(self, value: Any) -> Any:
        """Rank 0's ``value`` on every rank (a collective call), Ctrl-C held as by ``allgather``."""
        with interrupts_as_flag() as came:
            got = self.comm.bcast(value, root=0)
        self.interrupt_pending = self.interrupt_pending or came.is_set()
        return got

    def tell_others(self, tag: int, value: Any) -> list[Any]:
        """``value`` sent to every other rank without waiting for it to arrive (Ctrl-C held until every send is
        made, as by ``allgather``); the sends, for ``settle``."""
        with interrupts_as_flag() as came:
            sent = [self.comm.isend(value, dest=r, tag=tag) for r in range(self.size) if r != self.rank]
        self.interrupt_pending = self.interrupt_pending or came.is_set()
        return sent

    def heard(self, tag: int) -> Any:
        """The first message with ``tag`` that has come from any rank, taken (and counted, for ``settle``); None
        where none has. Never waits. Ctrl-C is held while a message is taken, then raised."""
        got = None
        with interrupts_as_flag() as came:
            status = self.MPI.Status()
            if self.comm.iprobe(source=self.MPI.ANY_SOURCE, tag=tag, status=status):
                source = status.Get_source()
                got = self.comm.recv(source=source, tag=tag)
                self.taken[(tag, source)] = self.taken.get((tag, source), 0) + 1
        if came.is_set():
            raise KeyboardInterrupt
        return got

    def settle(self, tag: int, sources: list[int], sent: list[Any]) -> None:
        """One message with ``tag`` from each of ``sources`` taken, less those ``heard`` took, and this rank's
        ``sent`` arrived, so that none is left over; Ctrl-C held as by ``allgather``."""
        with interrupts_as_flag() as came:
            for source in sources:
                if self.taken.get((tag, source), 0):
                    self.taken[(tag, source)] -= 1
                else:
                    self.comm.recv(source=source, tag=tag)
            self.MPI.Request.waitall(sent)
        self.interrupt_pending = self.interrupt_pending or came.is_set()

    def barrier(self) -> None:
        """A plain barrier: call only when every rank is known to be on its way (right after ``agree``)."""
        self.comm.Barrier()

    def abort(self, code: int, message: str | None = None) -> None:
        """End the whole job now (every rank), after one line on stderr."""
        if message:
            try:
                sys.stderr.write(f"xferscope: {message}\n")
                sys.stderr.flush()
            except OSError:
                pass
        self.comm.Abort(int(code) or 1)

    def abort_at_exit(self, code: int) -> None:
        """Abort the job when this process exits: for a rank that must not wait for a lost one."""
        atexit.register(self.comm.Abort, int(code) or 1)


_world: World | None = None


def open_world() -> World:
    """Initialise MPI (once per process) and describe this rank."""
    global _world
    if _world is None:
        MPI = load_mpi()
        comm = MPI.COMM_WORLD
        try:
            library = " ".join(MPI.Get_library_version().split()[:3]).rstrip(",")
        except Exception:
            library = "MPI"
        _world = World(
            MPI=MPI, comm=comm, rank=comm.Get_rank(), size=comm.Get_size(), launcher=launcher(), library=library
        )
    return _world
