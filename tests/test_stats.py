import math
import random

from conftest import histogram_of

from xferscope import _iocore
from xferscope.stats import HIST_NBUCKETS, Histogram, bucket_index, bucket_low, bucket_width, summarize


def test_python_buckets_mirror_the_native_ones():
    assert _iocore.HIST_NBUCKETS == HIST_NBUCKETS
    rng = random.Random(1)
    values = list(range(0, 300)) + [rng.randrange(1, 1 << 40) for _ in range(5000)] + [(1 << 40) + 5]
    for v in values:
        assert bucket_index(v) == _iocore.bucket_index(v), v


def test_every_value_falls_inside_its_bucket_within_two_percent():
    for v in [0, 1, 127, 128, 129, 1000, 4095, 4096, 10**6, 123456789, (1 << 40) - 1]:
        i = bucket_index(v)
        lo, width = bucket_low(i), bucket_width(i)
        assert lo <= v < lo + width
        assert width <= max(1, v / 63)


def test_percentiles_are_ordered_and_close_to_exact():
    rng = random.Random(7)
    values = [rng.lognormvariate(10, 1) for _ in range(20000)]
    h = histogram_of(values)
    p = h.percentiles([50, 90, 99, 99.9])
    assert p[50] <= p[90] <= p[99] <= p[99.9]
    exact = sorted(values)
    for q in (50, 90, 99):
        want = exact[math.ceil(len(exact) * q / 100) - 1]
        assert abs(p[q] - want) / want < 0.02


def test_histograms_subtract_and_merge():
    a = histogram_of([100, 200, 300])
    b = histogram_of([200])
    assert (a - b).count == 2
    assert (a + b).count == 4
    assert Histogram.from_sparse((a + b).to_sparse()).counts == (a + b).counts
    assert math.isnan(Histogram().percentiles([50])[50])


def test_summarize_over_repetitions():
    s = summarize([1.0, 2.0, 3.0, float("nan")])
    assert s == {"median": 2.0, "stdev": 1.0, "min": 1.0, "max": 3.0, "n": 3}


def test_percentiles_never_pass_the_measured_extremes():
    """A percentile is the middle of its bucket; with few samples that middle can lie beyond the max measured."""
    from xferscope.run.local_run import _latency

    values = [30_000] * 998 + [9_488_309, 9_488_309]  # the middle of their bucket is 9,502,720
    hist = histogram_of(values)
    lat = _latency(hist, sum(values), len(values), lat_min=30_000, lat_max=9_488_309)
    assert lat.min <= lat.p50 <= lat.p90 <= lat.p99 <= lat.p999 <= lat.max
    assert lat.p999 == 9488.309
