"""`workload train`: AU to DLIO's definition, the accelerator loop with a source of known I/O time, --find-max
against a full scan, the data set generator, the record, and the CLI on real files (host path, host sleep)."""

from __future__ import annotations

import json
import math
import os
import re
import statistics
import subprocess
import sys
import threading
import time

import msgspec
import pytest
from conftest import TRAIN_PROCESS, child_has_read, children_running, interrupted_cli, sends_from_now

from xferscope.errors import FormatError, SpecError
from xferscope.workloads.common.au import Step, percentile, utilisation
from xferscope.workloads.common.data_files import DataFile, SampleRef
from xferscope.workloads.common.fetchers import Fetcher, Slot, slot_capacity
from xferscope.workloads.common.records import encode
from xferscope.workloads.train import train_data
from xferscope.workloads.train.accelerators import Accelerator, check_enough, run_accelerators, step_limit
from xferscope.workloads.train.compute import SleepCompute
from xferscope.workloads.train.find_max import find_max
from xferscope.workloads.train.train_data import TrainData
from xferscope.workloads.train.train_record import TrainResult, decode
from xferscope.workloads.train.train_spec import train_spec

# ------------------------------------------------------------------ AU, as DLIO defines it


def test_au_leaves_the_first_step_out():
    # the first step waited 5 s for its batch (start-up); then 4 steps of 1 s compute after 1 s of wait each
    steps = [Step(5.0, 1.0, 6.0, 2, 200)]
    t = 6.0
    for _ in range(4):
        t += 2.0
        steps.append(Step(1.0, 1.0, t, 2, 200))
    u = utilisation(steps)
    assert u.counted_steps == 4 and u.span_s == pytest.approx(8.0)
    assert u.au == pytest.approx(0.5)  # with the first step: 5/14 = 0.357
    assert u.first_batch_s == 5.0
    assert u.samples_per_s == pytest.approx(8 / 8.0) and u.bytes_per_s == pytest.approx(800 / 8.0)
    assert u.io_wait_p50_s == pytest.approx(1.0)


def test_au_needs_two_steps():
    assert math.isnan(utilisation([Step(0.1, 0.1, 0.2, 1, 1)]).au)
    assert math.isnan(utilisation([]).au)


def test_percentile_interpolates_between_order_statistics():
    assert percentile([1, 2, 3, 4], 50) == 2.5
    assert percentile([5.0], 99) == 5.0
    assert percentile(list(range(101)), 99) == 99


def test_the_run_au_is_the_mean_of_the_accelerators():
    spec = train_spec("cosmoflow", accelerators=2, au_threshold=0.6)
    fast = [Step(0.0, 1.0, 1.0 + i, 1, 10) for i in range(3)]  # AU 1.0
    slow = [Step(1.0, 1.0, 2.0 * (i + 1), 1, 10) for i in range(3)]  # AU 0.5
    r = TrainResult.from_steps(spec, {}, [(0, None, fast, 30), (1, None, slow, 30)], status="ok", seconds=6)
    assert [a.au for a in r.accelerators] == [pytest.approx(1.0), pytest.approx(0.5)]
    assert r.au == pytest.approx(0.75) and r.passed is True
    assert r.accelerators[1].passed is False


# ------------------------------------------------------------------ the loop, with a source of known I/O time


class KnownTimeSource(Fetcher):
    """Each sample takes ``seconds`` to read (the first ``first`` seconds, if given)."""

    def __init__(self, data, seconds: float, first: float | None = None):
        super().__init__(data, 4096)
        self.seconds, self.first = seconds, first
        self.reads = 0

    def read(self, sample, slot, at):
        self.reads += 1
        time.sleep(self.first if (self.first is not None and self.reads == 1) else self.seconds)


def memory_data(samples: int, size: int = 4096) -> TrainData:
    files = [DataFile(f"/nonexistent/{i}", size) for i in range(samples)]
    return TrainData("/nonexistent", files, [SampleRef(i, 0, size) for i in range(samples)], False, False)


def run_known(io_s: float, compute_s: float, *, steps: int, first: float | None = None, threads: int = 1):
    spec = train_spec(
        "cosmoflow", computation_time=compute_s, read_threads=threads, steps=steps, batch=1, sample_size=4096
    )
    data = memory_data(4 * steps)
    sources = [KnownTimeSource(data, io_s, first) for _ in range(threads)]
    acc = Accelerator(
        0, spec, data, None, sources, SleepCompute(), [Slot(1 << 20)] * spec.slots, step_limit(spec, data)
    )
    run_accelerators([acc], spec, threading.Event())
    assert acc.record.error is None
    # the live AU, kept as the steps come, is the one the result computes from all of them
    assert acc.record.au == pytest.approx(utilisation(acc.record.steps).au)
    return acc.record


def test_reads_slower_than_compute_give_compute_over_read_time():
    rec = run_known(0.040, 0.020, steps=12)
    u = utilisation(rec.steps)
    # one reader, 40 ms a batch, 20 ms of compute: each step waits for its read, so the steps come at the reads'
    # pace (a sleep is never shorter than asked; a loaded machine may make either longer, so no band of AU). The
    # span starts at the first step's end, which a loaded machine may delay by its hand-over and compute while the
    # reader goes on: the 11 reads after it are at least 440 ms, the span a few less, so the period is read against
    # the midpoint of the two paces, not the read's own 40 ms
    assert u.counted_steps == 11
    period, compute = u.span_s / u.counted_steps, u.compute_s / u.counted_steps
    assert period > (0.040 + 0.020) / 2 and compute >= 0.0195 and period > compute
    assert u.au == pytest.approx(u.compute_s / u.span_s)
    assert u.io_wait_p50_s > 0


def test_reads_faster_than_compute_keep_the_accelerator_busy():
    # two readers of 5 ms a batch fill the next batch while a step computes for 100 ms: what AU loses is only the
    # hand-over between the threads, which a loaded machine delays by milliseconds (17 ms a step would fail)
    rec = run_known(0.005, 0.100, steps=10, threads=2)
    assert utilisation(rec.steps).au > 0.85


def test_a_slow_first_batch_does_not_count_against_au():
    rec = run_known(0.002, 0.020, steps=8, first=0.5)
    u = utilisation(rec.steps)
    assert u.first_batch_s >= 0.5
    # DLIO's AU: the steps after the first, from its end to the last one's; counted from the run's start, the
    # first batch's 0.5 s would be in it (under 0.25 here)
    after_first = rec.steps[1:]
    assert u.au == pytest.approx(sum(s.compute_s for s in after_first) / (rec.steps[-1].end_s - rec.steps[0].end_s))
    assert u.au > sum(s.compute_s for s in rec.steps) / rec.steps[-1].end_s


def test_a_failing_reader_ends_the_run_with_its_error():
    class Broken(Fetcher):
        def read(self, sample, slot, at):
            raise OSError("disk gone")

    spec = train_spec("cosmoflow", computation_time=0.0, read_threads=1, steps=5, batch=1)
    data = memory_data(10)
    acc = Accelerator(0, spec, data, None, [Broken(data, 4096)], SleepCompute(), [Slot(1 << 20)] * 2, 5)
    run_accelerators([acc], spec, threading.Event())
    assert isinstance(acc.record.error, OSError) and acc.record.steps == []


def test_batches_follow_dlio_sharding_and_change_each_epoch():
    from xferscope.workloads.train.accelerators import BatchPlan

    spec = train_spec("cosmoflow", accelerators=2, batch=3, steps=100)
    data = memory_data(13)
    a, b = BatchPlan(spec, data, 0), BatchPlan(spec, data, 1)
    assert a.per_epoch == 2  # 13 samples, 6 each, 2 batches of 3
    epoch0 = [a.batch(0), a.batch(1), b.batch(0), b.batch(1)]
    flat = [s for batch in epoch0 for s in batch]
    assert len(set(flat)) == 12  # no sample twice within an epoch
    assert a.batch(2) != a.batch(0)  # epoch 1 is shuffled anew
    assert BatchPlan(spec, data, 0).batch(1) == a.batch(1)  # and the same seed gives the same order


def test_run_length_follows_steps_epochs_or_duration():
    data = memory_data(40)
    assert step_limit(train_spec("cosmoflow", batch=4), data) == 10  # one epoch when nothing is given
    assert step_limit(train_spec("cosmoflow", batch=4, epochs=3), data) == 30
    assert step_limit(train_spec("cosmoflow", batch=4, steps=7, epochs=3), data) == 7
    assert step_limit(train_spec("cosmoflow", batch=4, duration=5.0), data) is None


def test_too_few_samples_for_the_accelerators_is_refused():
    with pytest.raises(SpecError, match="need at least 8"):
        check_enough(train_spec("cosmoflow", accelerators=4, batch=2), 7)


def test_batch_buffers_hold_the_largest_batch():
    cap = slot_capacity([10, 5 << 20, 3 << 20, 1], 2)
    assert cap >= (5 << 20) + (3 << 20) + 4 * 4096 and cap % (2 << 20) == 0


# ------------------------------------------------------------------ --find-max


def storage_au(throughput: float, demand: float):
    """A stand-in storage of known throughput shared by n accelerators that each need ``demand``."""
    calls = []

    def measure(n):
        calls.append(n)
        return min(1.0, throughput / (n * demand)), None

    return measure, calls


@pytest.mark.parametrize("throughput", [0.5, 1.0, 6.3, 13.0, 40.0, 64.0, 100.0])
def test_find_max_agrees_with_a_full_scan(throughput):
    upper = 64
    measure, calls = storage_au(throughput, 1.0)
    full = max((n for n in range(1, upper + 1) if measure(n)[0] >= 0.9), default=0)
    calls.clear()
    search = find_max(measure, 0.9, upper)
    assert search.best == full
    assert len(set(calls)) <= upper // 2


def test_find_max_repeats_counts_near_the_threshold():
    answers = {1: [0.99], 2: [0.95], 4: [0.905, 0.86, 0.87], 3: [0.93]}
    seen = {k: iter(v) for k, v in answers.items()}
    search = find_max(lambda n: (next(seen[n]), None), 0.9, 8)
    assert len(search.points[4].aus) == 3 and not search.passed(4)  # mean 0.878
    assert search.best == 3


# ------------------------------------------------------------------ the data set


def test_sample_sizes_follow_the_distribution():
    spec = train_spec("cosmoflow", files=4000)
    sizes = train_data.sample_sizes(spec, 4000)
    assert statistics.mean(sizes) == pytest.approx(2_828_486, rel=0.02)
    assert statistics.stdev(sizes) == pytest.approx(71_311, rel=0.02)
    assert sizes == train_data.sample_sizes(spec, 4000)  # seeded


def test_generated_set_is_dlio_layout_and_goes_away(direct_dir):
    spec = train_spec(
        "resnet50", files=3, samples_per_file=5, sample_size=50_000, sample_sd=9_000, directory=str(direct_dir)
    )
    data = train_data.generate(spec)
    try:
        names = sorted(os.listdir(data.root))
        assert names == ["img_1_of_3.dat", "img_2_of_3.dat", "img_3_of_3.dat"]
        assert len(data.samples) == 15
        for i, f in enumerate(data.files):
            mine = [s for s in data.samples if s.file == i]
            assert os.path.getsize(f.path) == f.size == sum(s.length for s in mine)
            assert [s.offset for s in mine] == [sum(x.length for x in mine[:k]) for k in range(5)]
    finally:
        data.close()
    assert os.listdir(direct_dir) == []


def test_a_set_that_does_not_fit_is_refused_before_writing(direct_dir):
    spec = train_spec("unet3d", files=100_000, directory=str(direct_dir))
    with pytest.raises(SpecError, match="does not fit"):
        train_data.generate(spec)
    assert os.listdir(direct_dir) == []


def test_a_presets_own_count_is_refused_before_its_sizes_are_drawn(direct_dir, monkeypatch):
    """resnet50's config counts 1,281,167 files of 1,251 samples (167 TiB): refused with the files that fit,
    without drawing 1.6 billion sample sizes first."""

    def drawn(spec, count):
        raise AssertionError(f"{count} sample sizes drawn before the space was checked")

    monkeypatch.setattr(train_data, "sample_sizes", drawn)
    spec = train_spec("resnet50", directory=str(direct_dir))
    with pytest.raises(SpecError, match=r"does not fit .*lower --files \(about \d+ fit\)"):
        train_data.plan_generated(spec)
    assert os.listdir(direct_dir) == []


def test_user_files_are_cut_into_samples(tmp_path):
    (tmp_path / "a").write_bytes(b"x" * 1000)
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b").write_bytes(b"y" * 10)
    data = train_data.scan(train_spec("cosmoflow", data=str(tmp_path), samples_per_file=3))
    assert [(s.file, s.offset, s.length) for s in data.samples] == [
        (0, 0, 333),
        (0, 333, 333),
        (0, 666, 334),
        (1, 0, 3),
        (1, 3, 3),
        (1, 6, 4),
    ]
    assert data.created_dir is None


# ------------------------------------------------------------------ the record


def sample_result() -> TrainResult:
    spec = train_spec("cosmoflow", accelerators=1)
    steps = [Step(0.01, 0.0035, 0.0135 + 0.004 * i, 1, 2_800_000) for i in range(5)]
    return TrainResult.from_steps(
        spec,
        {"files": 5},
        [(0, None, steps, 14_000_000)],
        status="ok",
        seconds=0.03,
        cpu_seconds=0.01,
        labels=["O_DIRECT"],
    )


def schema() -> dict:
    return msgspec.json.schema(TrainResult)


def test_the_record_round_trips_with_its_schema_version():
    r = sample_result()
    back = decode(encode(r))
    assert back == r and back.schema_version == 1 and back.kind == "workload-train"
    assert "accelerators" in schema()["$defs"]["TrainResult"]["properties"]


def test_a_damaged_record_is_one_line_naming_the_field(tmp_path):
    text = json.loads(encode(sample_result()))
    text["au"] = "high"
    with pytest.raises(FormatError, match=r"\$\.au"):
        decode(json.dumps(text), "r.json")
    with pytest.raises(FormatError, match="not JSON"):
        decode(b"{", "r.json")


# ------------------------------------------------------------------ the CLI, on real files


@pytest.fixture
def set_dir(direct_dir):
    """Where the CLI tests generate their sets (the result files go elsewhere)."""
    d = direct_dir / "sets"
    d.mkdir()
    return d


def small_train(set_dir, *more):
    return (
        "workload",
        "train",
        "cosmoflow",
        "--files",
        "24",
        "--sample-size",
        "1M",
        "--sample-sd",
        "64K",
        "--dir",
        str(set_dir),
        *more,
    )


def test_cli_runs_host_and_reports_au(cli, set_dir, tmp_path, no_gpu):
    js, csv_path = tmp_path / "t.json", tmp_path / "t.csv"
    r = cli(*small_train(set_dir, "-a", "2", "--steps", "6", "--json", str(js), "--csv", str(csv_path)))
    assert r.code == 0, r.err
    assert "AU " in r.out and "no GPU here" in r.out
    data = json.loads(js.read_text())
    assert data["status"] == "ok" and data["spec"]["path"] == "host" and data["spec"]["compute"] == "sleep"
    assert [a["steps"] for a in data["accelerators"]] == [6, 6]
    assert 0 < data["au"] <= 1 and data["cpu_s_per_gib"] > 0 and data["mb_per_s"] > 0
    assert all(a["cpu_s_per_gib"] > 0 for a in data["accelerators"]), "each accelerator's threads' CPU"
    assert data["io_wait_p99_s"] >= data["io_wait_p50_s"] >= 0
    assert data["data"]["generated"] and data["data"]["samples"] == 24
    rows = csv_path.read_text().splitlines()
    assert rows[0].startswith("accelerators,path,accelerator") and len(rows) == 4
    assert os.listdir(set_dir) == []  # the set was removed


def test_cli_keep_leaves_the_set_for_data(cli, set_dir, no_gpu):
    r = cli(*small_train(set_dir, "--steps", "2", "--keep"))
    assert r.code == 0, r.err
    (kept,) = os.listdir(set_dir)
    train = set_dir / kept / "train"
    r2 = cli("workload", "train", "cosmoflow", "--data", str(train), "--steps", "3", "--format", "json")
    assert r2.code == 0, r2.err
    data = json.loads(r2.out)
    assert not data["data"]["generated"] and data["data"]["files"] == 24
    assert sorted(os.listdir(train)) == sorted(f"img_{i}_of_24.dat" for i in range(1, 25))


def test_cli_find_max_reports_the_count(cli, set_dir, no_gpu):
    r = cli(*small_train(set_dir, "--steps", "3", "--find-max", "--max-accelerators", "4", "--format", "json"))
    assert r.code == 0, r.err
    data = json.loads(r.out)
    assert data["kind"] == "workload-train-find-max" and 0 <= data["best"] <= 4
    assert data["points"][0]["accelerators"] == 1
    assert len(data["results"]) == data["runs"]


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (("nope",), "no preset 'nope'; choose one of unet3d, cosmoflow, resnet50"),
        (("cosmoflow", "--accelerators", "0"), "accelerators: must be at least 1"),
        (("cosmoflow", "--files", "3", "-a", "4"), "need at least 4"),
        (("unet3d", "--files", "8", "--prefetch", "100000"), "prefetch:"),
        (("cosmoflow", "--path", "bogus"), "unknown path 'bogus'"),
        (("cosmoflow", "--au-threshold", "abc"), "au-threshold"),
        (("cosmoflow", "--duration", "soon"), "duration: not a duration: 'soon'"),
    ],
)
def test_bad_input_is_one_line(cli, set_dir, no_gpu, args, field):
    r = cli("workload", "train", *args, "--dir", str(set_dir), "--steps", "2")
    assert r.code == 2, r.err
    assert field in r.err and len(r.err.strip().splitlines()) == 1 and "Traceback" not in r.err
    assert os.listdir(set_dir) == []


def test_data_without_readable_files_is_refused(cli, tmp_path, no_gpu):
    (tmp_path / "empty").mkdir()
    r = cli("workload", "train", "cosmoflow", "--data", str(tmp_path / "empty"))
    assert r.code == 2 and "no readable files" in r.err


def test_a_set_too_big_for_the_disk_is_refused_before_writing(cli, set_dir, no_gpu):
    r = cli("workload", "train", "unet3d", "--files", "100000", "--dir", str(set_dir))
    assert r.code == 2 and "does not fit" in r.err
    assert os.listdir(set_dir) == []


def test_ctrl_c_keeps_the_figures_and_removes_the_set(set_dir, tmp_path, no_gpu):
    js = tmp_path / "t.json"
    args = small_train(set_dir, "-T", "60", "--json", str(js))
    code, out, err = interrupted_cli(args, set_dir, until=child_has_read(TRAIN_PROCESS, 4 << 20))
    assert code == 130, err
    assert "Traceback" not in err
    data = json.loads(js.read_text())
    assert data["status"] == "interrupted"
    if data["accelerators"][0]["steps"]:  # interrupted after the set was made: its steps are kept
        assert "INTERRUPTED" in out
    assert os.listdir(set_dir) == []


# ------------------------------------------------------------------ side by side


def test_ranking_puts_sustained_accelerators_first_and_marks_level_entries():
    from xferscope.workloads.train.train_compare import TrainEntry, rank

    def entry(label, au, lo, hi, sustained=None):
        return TrainEntry(
            label=label,
            source="xferscope",
            workload="unet3d",
            path=label,
            accelerators=4,
            runs=3,
            value=au,
            low=lo,
            high=hi,
            au_threshold=0.9,
            passed=au >= 0.9,
            samples_per_s=1.0,
            mb_per_s=1.0,
            sustained=sustained,
        )

    ranked = rank([entry("a", 0.80, 0.70, 0.85), entry("b", 0.95, 0.94, 0.96), entry("c", 0.83, 0.82, 0.84)])
    assert [e.label for e in ranked] == ["b", "c", "a"]
    assert ranked[1].level_with == ["a"] and ranked[0].level_with == []  # c's range lies inside a's
    searched = rank([entry("x", 0.99, 0.99, 0.99, sustained=2), entry("y", 0.91, 0.91, 0.91, sustained=5)])
    assert [e.label for e in searched] == ["y", "x"]
    assert rank([entry("p", 0.985, 0.985, 0.985), entry("q", 0.99, 0.99, 0.99)])[0].level_with == ["p"]


def test_a_training_comparison_is_ranked_as_every_workload_and_keeps_its_au_fields(cli, set_dir, tmp_path, no_gpu):
    js = tmp_path / "c.json"
    r = cli(*small_train(set_dir, "--path", "host,host", "--rounds", "2", "--steps", "4", "--json", str(js)))
    assert r.code == 0, r.err
    entries = json.loads(js.read_text())["entries"]
    for e in entries:  # AU in the fields scripts read, the rate and CPU cost in every workload's entry's
        assert e["au_min"] <= e["au"] <= e["au_max"] and len(e["aus"]) == 2 and e["runs"] == 2
        assert e["gb_per_s"] == pytest.approx(e["mb_per_s"] / 1e3) and e["cpu_s_per_gib"] is not None
    shown = cli("workload", "compare", str(js), "--csv", str(tmp_path / "c.csv"))
    assert shown.code == 0, shown.err
    header = (tmp_path / "c.csv").read_text().splitlines()[0].split(",")
    assert header[:8] == ["rank", "label", "source", "path", "accelerators", "sustained", "runs", "au"]


def test_cli_ranks_paths_in_rotated_rounds_with_an_a_a_pair(cli, set_dir, tmp_path, no_gpu):
    js = tmp_path / "c.json"
    r = cli(*small_train(set_dir, "--path", "host,host", "--rounds", "2", "--steps", "4", "--json", str(js)))
    assert r.code == 0, r.err
    assert "2 rotated rounds over one data set" in r.out and "host#1" in r.out and "host#2" in r.out
    data = json.loads(js.read_text())
    assert data["kind"] == "workload-train-comparison" and len(data["results"]) == 4
    assert {e["label"] for e in data["entries"]} == {"host#1", "host#2"} and all(
        e["runs"] == 2 for e in data["entries"]
    )
    assert os.listdir(set_dir) == []


def test_saved_runs_and_a_dlio_summary_side_by_side(cli, set_dir, tmp_path, no_gpu):
    ours = tmp_path / "ours.json"
    assert cli(*small_train(set_dir, "--steps", "4", "--json", str(ours))).code == 0
    dlio = os.path.join(os.path.dirname(__file__), "data", "dlio-summary.json")
    r = cli("workload", "compare", str(ours), dlio, "--format", "json")
    assert r.code == 0, r.err
    entries = {e["label"]: e for e in json.loads(r.out)["entries"]}
    d = entries["dlio-summary.json"]
    assert d["source"] == "dlio" and d["accelerators"] == 4 and d["passed"] is True
    assert d["au"] == pytest.approx(0.9249, abs=1e-4) and d["au_min"] == pytest.approx(0.918214)
    assert d["mb_per_s"] == pytest.approx(11478.2 * 1.048576)  # DLIO's MB/s are MiB/s
    assert entries["ours.json"]["source"] == "xferscope"


@pytest.mark.parametrize(
    ("content", "says"),
    [
        ("{", "not JSON"),
        ('{"metric": {}}', "not a DLIO summary.json"),
        ('{"kind": "workload-train", "au": 1}', "not a training result xferscope can read"),
        ("[1, 2]", "neither a result of `workload train --json` nor DLIO's summary.json"),
    ],
)
def test_a_file_compare_cannot_read_is_one_line(cli, tmp_path, content, says):
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    r = cli("workload", "compare", str(bad))
    assert r.code == 2 and says in r.err and len(r.err.strip().splitlines()) == 1, r.err


# ------------------------------------------------------------------ profiles


WORKLOAD_PROFILE = """
name = "train-small"
kind = "workload"
duration = 30

[workload]
preset = "cosmoflow"
path = "host"
compute = "sleep"
accelerators = 2
files = 24
sample-size = "1M"
sample_sd = "64K"
steps = 4
"""


def test_a_workload_profile_reads_and_writes_back():
    from xferscope.profiles.toml_format import dump_profile, parse_profile

    p = parse_profile(WORKLOAD_PROFILE, "t.toml", "t")
    assert p.kind == "workload" and p.workload["sample_size"] == "1M" and p.workload["accelerators"] == 2
    again = parse_profile(dump_profile(p), "again.toml", "t")
    assert again.workload == p.workload and again.duration == 30 and p.paths() == ["host"]


def test_a_bad_workload_profile_is_one_line(cli, tmp_path):
    """A [grid] is refused as the profile is read; a field the command has no option for, when it is replayed."""
    from xferscope.profiles.toml_format import parse_profile

    with pytest.raises(FormatError, match=re.escape("a workload profile has no [grid]")):
        parse_profile(WORKLOAD_PROFILE + "[grid]\nbatch = [1, 2]\n", "t.toml", "t")
    profile = tmp_path / "bogus.toml"
    profile.write_text(WORKLOAD_PROFILE + "bogus = 1\n")
    r = cli("replay", str(profile), "--dir", str(tmp_path))
    assert r.code == 2 and "no option --bogus" in r.err and len(r.err.strip().splitlines()) == 1, r.err
    assert sorted(os.listdir(tmp_path)) == ["bogus.toml"]


def test_replay_runs_a_workload_profile(cli, set_dir, tmp_path, no_gpu):
    profile = tmp_path / "train-small.toml"
    profile.write_text(WORKLOAD_PROFILE)
    results = tmp_path / "r.json"
    r = cli("replay", str(profile), "--dir", str(set_dir), "--results", str(results))
    assert r.code == 0, r.err
    data = json.loads(results.read_text())
    assert data["kind"] == "workload-train" and [a["steps"] for a in data["accelerators"]] == [4, 4]
    assert data["spec"]["duration"] == 30 and data["spec"]["sample_size"] == 1 << 20
    assert os.listdir(set_dir) == []
    refused = cli("replay", str(profile), "--reps", "3")
    assert refused.code == 2 and "--reps is not for a workload profile" in refused.err


def test_the_bundled_workload_profile_is_its_command_line():
    from xferscope.commands.profile_options import command_line, command_of
    from xferscope.commands.workload_kinds import command_named
    from xferscope.profiles import load_profile

    p = load_profile("train-cosmoflow-h100")
    fields = {k: v for k, v in p.workload.items() if k != "workload"}
    argv = command_line(command_of(command_named("train"), "train"), fields, "workload train")
    assert argv[0] == "cosmoflow" and p.duration == 20
    assert (
        " ".join(argv[1:]) == "--accelerator-type h100 --accelerators 2 --path bounce-async --compute gpu --files 1000"
    )


def test_a_killed_engine_is_a_failed_run_that_keeps_its_steps(set_dir, tmp_path, no_gpu):
    import psutil

    js = tmp_path / "t.json"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "xferscope.cli",
            *small_train(set_dir, "-T", "60", "--interval", "0.2", "--json", str(js)),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "XFERSCOPE_NO_GPU": "1"},
    )
    engine = None
    deadline = time.time() + 60
    while engine is None and time.time() < deadline:
        for child in psutil.Process(proc.pid).children(recursive=True):
            if "xferscope.workloads.train.train_process:serve" in " ".join(child.cmdline()):
                engine = child
        time.sleep(0.1)
    assert engine is not None, "the run's own process"
    # steps taken: it has read more batches (of about 1 MiB) than its 5 batch buffers hold, so a step freed one
    deadline = time.time() + 60
    while engine.io_counters().read_bytes < 12 << 20:
        assert time.time() < deadline and proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    sent = sends_from_now(engine)
    while not sent():  # a tick since: the steps taken are sent
        assert time.time() < deadline and proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    engine.kill()
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 1, err
    assert "Traceback" not in err and "SIGKILL" in err
    data = json.loads(js.read_text())
    assert data["status"] == "failed" and "died" in data["error"]
    assert sum(a["steps"] for a in data["accelerators"]) > 0, "the steps sent before it died are kept"
    assert os.listdir(set_dir) == []


def test_presets_cite_their_configs_and_refuse_a_type_they_lack():
    from xferscope.workloads.train.presets import PRESETS

    assert train_spec("unet3d", "b200").computation_time == 0.162
    assert train_spec("unet3d", "a100").computation_time == 0.636
    for p in PRESETS.values():
        assert set(p.source) == set(p.computation_time) and all("@" in s for s in p.source.values())
    with pytest.raises(SpecError, match="cosmoflow has no computation_time for 'b200'"):
        train_spec("cosmoflow", "b200")
    assert train_spec("cosmoflow", "b200", computation_time=0.002).computation_time == 0.002


def test_compare_takes_saved_training_runs(cli):
    dlio = os.path.join(os.path.dirname(__file__), "data", "dlio-summary.json")
    r = cli("compare", "--workload", dlio, "--format", "json")
    assert r.code == 0, r.err
    (entry,) = json.loads(r.out)["entries"]
    assert entry["source"] == "dlio" and entry["au"] == pytest.approx(0.9249, abs=1e-4)
    bad = cli("compare", "--workload", "/nonexistent.json")
    assert bad.code == 2 and "cannot read it" in bad.err


def test_an_interrupted_search_keeps_the_counts_it_judged():
    calls = []

    def measure(n):
        calls.append(n)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return 0.99, None

    search = find_max(measure, 0.9, 64)
    assert search.stopped and search.best == 2 and sorted(search.points) == [1, 2, 4]
    assert search.points[4].aus == []  # the count in flight has no figure


def test_ctrl_c_during_find_max_keeps_the_runs(set_dir, tmp_path, no_gpu):
    js = tmp_path / "f.json"
    args = small_train(set_dir, "-T", "2", "--find-max", "--json", str(js))
    # the first count judged, the second under way (each count runs in a process of its own)
    code, out, err = interrupted_cli(args, set_dir, until=children_running(TRAIN_PROCESS, 2))
    assert code == 130, err
    data = json.loads(js.read_text())
    assert data["status"] == "interrupted" and data["results"], data
    assert "INTERRUPTED" in out
    assert os.listdir(set_dir) == []
