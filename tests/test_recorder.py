"""The recorder of the Python-thread cuFile engines: the native core's buckets and figures."""

from __future__ import annotations

import threading

from conftest import histogram_of

from xferscope.engines.recorder import Recorder
from xferscope.stats import bucket_index


def test_counts_bytes_and_histogram_buckets_match_the_native_layout():
    rec = Recorder(2)
    rec.begin()
    lats = [90, 1_000, 25_000, 25_000, 3_000_000]
    for lat in lats:
        rec.record(0, False, 4096, lat)
    rec.record(1, True, 65536, 40_000, count=3)
    snap = rec.snapshot()
    assert snap.hist_read.counts == histogram_of(lats).counts
    assert snap.hist_write.counts[bucket_index(40_000)] == 3 and snap.hist_write.count == 3
    w0, w1 = snap.workers
    assert (w0.read_ops, w0.read_bytes, w0.read_lat_sum_ns) == (5, 5 * 4096, sum(lats))
    assert (w1.write_ops, w1.write_bytes, w1.write_lat_sum_ns) == (3, 3 * 65536, 120_000)
    assert (snap.lat_min_ns, snap.lat_max_ns) == (90, 3_000_000)
    assert snap.bytes == 5 * 4096 + 3 * 65536 and snap.ops == 8
    assert snap.error is None and snap.done == 0 and snap.first_done is None


def test_first_done_all_done_and_the_first_failure_kept():
    rec = Recorder(2)
    rec.begin()
    rec.record(0, False, 100, 10)
    rec.finish(1)
    assert not rec.all_done.is_set()
    rec.record(0, False, 100, 10)
    rec.finish(0)
    rec.finish(0)  # once only
    snap = rec.snapshot()
    assert snap.first_done[1:] == (100, 1) and snap.done == 2 and rec.all_done.is_set()
    assert snap.workers[1].done_ns is not None and snap.workers[0].done_ns >= snap.workers[1].done_ns
    rec.fail("first", 8)
    rec.fail("second", 16)
    assert rec.snapshot().error == ("first", 8) and rec.failed


def test_threads_recording_at_once_lose_nothing():
    rec = Recorder(4)
    rec.begin()

    def work(i):
        for n in range(5000):
            rec.record(i, n % 2 == 0, 512, 1000 + n)
        rec.finish(i)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    snap = rec.snapshot()
    assert snap.ops == 20000 and (snap.hist_read + snap.hist_write).count == 20000
    assert snap.bytes == 20000 * 512 and snap.done == 4
