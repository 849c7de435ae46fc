"""The MPI world's agreement under Ctrl-C, without MPI: a stop signal in the middle of the exchange is held until
the exchange is over (its result kept), then counts at the next agreement."""

from __future__ import annotations

import os
import signal

from xferscope.cluster.world import World, interrupts_as_flag


class _Done:
    def Test(self) -> bool:
        return True


class _SignalledComm:
    """An exchange during which this process gets SIGINT (as the launcher's Ctrl-C can land)."""

    def __init__(self, signal_during: bool):
        self.signal_during = signal_during

    def Ibarrier(self) -> _Done:
        return _Done()

    def allgather(self, status):
        if self.signal_during:
            self.signal_during = False
            os.kill(os.getpid(), signal.SIGINT)
        return [status, "other rank"]


def _world(comm) -> World:
    return World(MPI=None, comm=comm, rank=0, size=2, launcher="test", library="test")


def test_ctrl_c_during_the_exchange_keeps_its_result_and_counts_at_the_next_agreement():
    world = _world(_SignalledComm(signal_during=True))
    assert world.agree("mine", "a meeting", if_interrupted="interrupted") == ["mine", "other rank"]
    assert world.interrupt_pending
    # the next agreement: this rank, with nothing else to report, reports the interruption, once
    assert world.agree(None, "the next", if_interrupted="interrupted") == ["interrupted", "other rank"]
    assert not world.interrupt_pending
    assert world.agree(None, "after", if_interrupted="interrupted") == [None, "other rank"]


def test_held_interrupts_set_a_flag_and_the_handlers_come_back():
    before = signal.getsignal(signal.SIGTERM)
    with interrupts_as_flag() as came:
        os.kill(os.getpid(), signal.SIGTERM)
    assert came.is_set()
    assert signal.getsignal(signal.SIGTERM) is before


def test_ctrl_c_during_a_plain_exchange_counts_at_the_next_agreement():
    world = _world(_SignalledComm(signal_during=True))
    assert world.allgather("this rank's rows") == ["this rank's rows", "other rank"]
    assert world.interrupt_pending
    assert world.agree(None, "the next step", if_interrupted="interrupted") == ["interrupted", "other rank"]
