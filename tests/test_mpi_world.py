"""The MPI world's exchanges under Ctrl-C, without MPI: a stop signal in the middle of an exchange is held until
the exchange is over (its result kept), then counts at the next agreement; a rank's word that its run ended early
is taken once, never waited for again."""

from __future__ import annotations

import os
import signal

import pytest

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


class _Words:
    """Point-to-point words between ranks: those that have come (source, value), taken in order; SIGINT to this
    process as the first is taken, where asked."""

    ANY_SOURCE = -1

    def __init__(self, came: list[tuple[int, object]], signal_on_take: bool = False):
        self.came, self.signal_on_take, self.waited_for = list(came), signal_on_take, []

    class Status:
        source = -1

        def Get_source(self) -> int:
            return self.source

    def iprobe(self, source, tag, status) -> bool:
        if self.came:
            status.source = self.came[0][0]
        return bool(self.came)

    def recv(self, source, tag):
        if not self.came or self.came[0][0] != source:
            self.waited_for.append(source)  # in MPI: a receive that waits for a word still to come
            return None
        value = self.came.pop(0)[1]  # taken: in MPI, inside the call, before Python sees the signal
        if self.signal_on_take:
            self.signal_on_take = False
            os.kill(os.getpid(), signal.SIGINT)
        return value

    class Request:
        @staticmethod
        def waitall(requests) -> None:
            pass


def _words_world(words: _Words) -> World:
    return World(MPI=words, comm=words, rank=0, size=3, launcher="test", library="test")


def test_a_word_heard_while_running_is_not_waited_for_again():
    """Rank 2's word came while this rank ran; rank 1's came too late to be heard: settling waits for rank 1's only."""
    words = _Words([(2, (2, "c"))])
    world = _words_world(words)
    assert world.heard(73) == (2, "c")
    assert world.heard(73) is None
    world.settle(73, [1, 2], [])
    assert words.waited_for == [1]


def test_ctrl_c_while_a_word_is_taken_is_raised_after_it_is_counted():
    """Ctrl-C lands as the word is taken: the run still stops (KeyboardInterrupt), and the word taken is not
    waited for at the end (the ranks would wait for it for ever)."""
    words = _Words([(1, (1, "b"))], signal_on_take=True)
    world = _words_world(words)
    with pytest.raises(KeyboardInterrupt):
        world.heard(73)
    world.settle(73, [1], [])
    assert words.waited_for == []
