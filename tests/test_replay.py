"""`xferscope replay`: a small grid on the host path, repetition statistics, resume after Ctrl-C, ratios, plots."""

from __future__ import annotations

import csv
import json
import os
import re
import signal
import subprocess
import sys
import time
import xml.dom.minidom
from pathlib import Path

import pytest
from conftest import communicate_or_dump

from xferscope.engines.registry import unavailable_reason
from xferscope.export import load_results

DATA = Path(__file__).parent / "data"

SMALL = """\
name = "small-host"
description = "2 patterns x 2 block sizes on the host path"
repetitions = 2
duration = {duration}

[base]
path = "host"
file_size = "8M"

[grid]
io = ["read", "randread"]
block_size = ["4K", "64K"]
"""


@pytest.fixture
def small(tmp_path, direct_dir):
    """A 4-point profile, its results path, and the directory it runs in."""
    path = tmp_path / "small.toml"
    path.write_text(SMALL.format(duration=0.3))
    return path, tmp_path / "small.results.json", direct_dir


def _replay(cli, profile, results, directory, *extra):
    return cli("replay", str(profile), "--results", str(results), "--dir", str(directory), *extra)


def _load(path: Path) -> dict:
    return json.loads(path.read_text())


def test_small_grid_gives_one_row_per_point_with_repetition_statistics(cli, small, tmp_path):
    profile, results, directory = small
    plot = tmp_path / "small.svg"
    r = _replay(cli, profile, results, directory, "--plot", str(plot))
    assert r.code == 0, r.err
    data = _load(results)
    assert [p["label"] for p in data["points"]] == [
        "host read 4K w1",
        "host read 64K w1",
        "host randread 4K w1",
        "host randread 64K w1",
    ]
    for point in data["points"]:
        assert point["status"] == "done" and point["repetitions_done"] == 2 and len(point["repetitions"]) == 2
        tp = point["stats"]["throughput_mib_s"]
        measured = [rep["throughput_mib_s"] for rep in point["repetitions"]]
        assert tp["n"] == 2 and tp["min"] == min(measured) and tp["max"] == max(measured) > 0
        assert tp["median"] == pytest.approx(sum(measured) / 2) and tp["stdev"] >= 0
        assert point["stats"]["lat_p99_us"]["median"] > 0 and point["stats"]["iops"]["median"] > 0
    with (results.with_suffix(".csv")).open() as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 4 and {
        "throughput_mib_s_median",
        "throughput_mib_s_stdev",
        "throughput_mib_s_min",
        "throughput_mib_s_max",
        "lat_p99_us_median",
        "first_done_mib_s_median",
    } <= set(rows[0])
    assert [row["repetitions"] for row in rows] == ["2"] * 4
    # the median repetition of each point reads back like any xferscope result
    assert [x.spec.name for x in load_results(str(results))] == [p["label"] for p in data["points"]]
    assert "host randread 64K w1" in r.out and "MiB/s" in r.out
    svg = plot.read_text()
    xml.dom.minidom.parseString(svg)
    assert svg.count("<polyline") == 2  # one line per pattern, over block size
    assert not [n for n in os.listdir(directory) if n.startswith("xferscope-scratch")]  # scratch files removed


def test_interrupted_sweep_resumes_and_keeps_what_was_measured(small):
    profile, results, directory = small
    profile.write_text(SMALL.format(duration=0.4))
    cmd = [
        sys.executable,
        "-m",
        "xferscope.cli",
        "replay",
        str(profile),
        "--results",
        str(results),
        "--dir",
        str(directory),
    ]
    env = {**os.environ, "PYTHONFAULTHANDLER": "1"}  # a hang after Ctrl-C shows every thread's stack
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # Ctrl-C once the first point is finished
        if results.exists() and any(p["status"] == "done" for p in _load(results)["points"]):
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _out, err = communicate_or_dump(proc, 60, "replay after Ctrl-C")
    assert proc.returncode == 130, err
    assert "rerun the same command to resume" in err and "Traceback" not in err
    first = _load(results)["points"]
    done = [p for p in first if p["status"] == "done"]
    assert 1 <= len(done) < 4
    again = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr
    assert f"{len(done)} point(s) finished earlier" in again.stderr
    final = {p["key"]: p for p in _load(results)["points"]}
    assert all(p["status"] == "done" and p["repetitions_done"] == 2 for p in final.values())
    for p in done:  # measured before the interruption, kept as measured
        assert final[p["key"]]["repetitions"] == p["repetitions"]


def test_against_prints_ratios_and_fail_below_sets_the_exit_code(cli, small, tmp_path):
    from xferscope.compare.verdict import RULE_REPEATED

    profile, results, directory = small
    r = _replay(cli, profile, results, directory, "--reps", "2")
    assert r.code == 0, r.err
    # what is checked here is the comparison, not the disk: the first point's two repetitions are made equal (on a
    # loaded 2-core machine two 0.3 s runs of a 4K read can differ by more than the 10x below)
    fresh = _load(results)
    reps = fresh["points"][0]["repetitions"]
    for rep in reps:
        rep["throughput_mib_s"] = reps[0]["throughput_mib_s"]
    results.write_text(json.dumps(fresh))
    old = _load(results)
    # pretend the first point used to be 10x faster: every repetition against every earlier one is beyond the margin
    for rep in old["points"][0]["repetitions"]:
        rep["throughput_mib_s"] *= 10
    old_path = tmp_path / "before.json"
    old_path.write_text(json.dumps(old))
    # every point is finished in the results file, so this only compares
    r = _replay(
        cli,
        profile,
        results,
        directory,
        "--reps",
        "2",
        "--against",
        str(old_path),
        "--fail-below",
        "0.9",
        "--format",
        "json",
    )
    assert r.code == 1, r.err
    out = json.loads(r.out)
    against = {a["label"]: a for a in out["against"]}
    first = against["host read 4K w1"]
    assert first["ratio"] == pytest.approx(0.1) and first["verdict"] == "slower"
    assert first["ratio_max"] == pytest.approx(0.1 * max(first["new_values"]) / min(first["new_values"]))
    for k in ("host read 64K w1", "host randread 4K w1", "host randread 64K w1"):
        assert against[k]["ratio"] == 1.0 and against[k]["verdict"] in ("same", "undecided")
    assert out["rule"] == RULE_REPEATED
    assert "1 of 4 points slower and below 0.9" in r.err and "host read 4K w1 (0.10)" in r.err
    r = _replay(cli, profile, results, directory, "--reps", "2", "--against", str(old_path), "--fail-below", "0.05")
    assert r.code == 0, r.err
    assert "ratio" in r.out and "0.10 (0." in r.out and "slower" in r.out and RULE_REPEATED in r.out
    # one earlier repetition is one noisy point: never called a regression
    for point in old["points"]:
        point["repetitions"] = point["repetitions"][:1]
    old_path.write_text(json.dumps(old))
    r = _replay(cli, profile, results, directory, "--reps", "2", "--against", str(old_path), "--fail-below", "0.9")
    assert r.code == 0, r.err
    assert "single pass: no verdict" in r.out
    assert "point(s) below 0.9 but not slower under the rule" in r.err
    assert re.search(r"host read 4K w1 \(0\.\d\d, single pass: no verdict\)", r.err), r.err
    r = _replay(cli, profile, results, directory, "--fail-below", "0.9")
    assert r.code == 2 and "give --against FILE too" in r.err


def test_against_an_imported_fio_run_matches_by_what_was_measured(cli, tmp_path, direct_dir):
    imported = tmp_path / "fio.json"
    r = cli("import", "fio", str(DATA / "fio-randread-4k-qd16.json"), "--json", str(imported))
    assert r.code == 0, r.err
    profile = tmp_path / "one.toml"
    profile.write_text(
        'duration = 0.3\n[base]\npath = "host"\nio = "randread"\nblock_size = "4K"\niodepth = 16\nfile_size = "8M"\n'
    )
    r = cli(
        "replay",
        str(profile),
        "--results",
        str(tmp_path / "one.json"),
        "--dir",
        str(direct_dir),
        "--against",
        str(imported),
        "--format",
        "json",
    )
    assert r.code == 0, r.err
    (ratio,) = json.loads(r.out)["against"]
    fio_mib_s = load_results(str(imported))[0].throughput_mib_s
    assert ratio["old"] == pytest.approx(fio_mib_s) and ratio["ratio"] > 0


@pytest.mark.skipif(unavailable_reason("cufile") is None, reason="cuFile runs here: nothing is skipped")
def test_gpu_points_are_skipped_with_the_engines_reason(cli, tmp_path, direct_dir):
    results = tmp_path / "paths.json"
    r = cli(
        "replay",
        "paths-1m-seq-rand",
        "--duration",
        "0.3",
        "--set",
        "file_size=8M",
        "--results",
        str(results),
        "--dir",
        str(direct_dir),
    )
    assert r.code == 0, r.err
    points = _load(results)["points"]
    assert [p["status"] for p in points if p["identity"]["path"] == "host"] == ["done"] * 4
    skipped = [p for p in points if p["status"] == "skipped"]
    assert len(skipped) == 8
    assert all(
        p["reason"].startswith(f"{p['identity']['path']}: {unavailable_reason(p['identity']['path'])}") for p in skipped
    )
    assert f"skipped 4 points (1, 4, 7, 10): cufile: {unavailable_reason('cufile')}" in r.out
    r = cli("replay", "gds-vs-bounce-random", "--duration", "0.1", "--results", str(tmp_path / "gpu-only.json"))
    assert r.code == 3 and "none of the points can run on this machine" in r.err
    assert {p["status"] for p in _load(tmp_path / "gpu-only.json")["points"]} == {"skipped"}


def test_plot_formats_and_options_fail_before_measuring(cli, small, tmp_path):
    profile, results, directory = small
    r = _replay(cli, profile, results, directory, "--plot", str(tmp_path / "p.pdf"))
    assert r.code == 2 and "plots are written as .svg or .png" in r.err
    fake = tmp_path / "nompl" / "matplotlib"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('no matplotlib here')\n")
    r = cli(
        "replay",
        str(profile),
        "--results",
        str(results),
        "--plot",
        str(tmp_path / "p.png"),
        env={"PYTHONPATH": str(fake.parent) + os.pathsep + os.environ.get("PYTHONPATH", "")},
    )
    assert (
        r.code == 2
        and r.err.strip() == "xferscope: plot: a .png plot needs matplotlib: pip install matplotlib, or write .svg"
    )
    r = _replay(cli, profile, results, directory, "--set", "blocksize")
    assert r.code == 2 and "'blocksize' is not field=value" in r.err
    r = _replay(cli, profile, results, directory, "--set", "qd=deep")
    assert r.code == 2 and "iodepth: expected a whole number" in r.err
    assert not results.exists()


def test_dry_run_lists_the_points_and_what_is_left(cli, small):
    profile, results, directory = small
    r = _replay(cli, profile, results, directory, "--dry-run")
    assert r.code == 0, r.err
    assert [line.split()[-2:] for line in r.out.splitlines()[:4]] == [["to", "run"]] * 4
    assert "4 points x 2 repetitions; 8 repetitions to run, about 2.4 s of measuring" in r.out


def test_memory_profile_points_are_sweeps_with_statistics_per_delay(tmp_path):
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("loaded latency needs two CPUs")
    from xferscope.profiles import parse_profile
    from xferscope.sweep import SweepRun

    profile = parse_profile(
        'kind = "mem"\nduration = 0.1\nrepetitions = 2\n[base]\nmode = "loaded"\n'
        'delays = [0, 5000]\nbuffer = "32M"\nthreads = 1\n[grid]\ntraffic = ["R", "W6"]\n',
        "mem.toml",
        "mem-small",
    )
    outcome = SweepRun(profile, str(tmp_path / "mem.json")).run()
    assert not outcome.interrupted
    data = _load(tmp_path / "mem.json")
    rows = {(row["traffic"], row["delay"], row["locality"]): row for p in data["points"] for row in p["rows"]}
    # idle latency at the chosen locality (multichase's default, 64 pages) and over the whole buffer
    assert set(rows) == {
        ("idle", None, "64-page"),
        ("idle", None, "whole-buffer"),
        ("R", 0, "64-page"),
        ("R", 5000, "64-page"),
        ("W6", 0, "64-page"),
        ("W6", 5000, "64-page"),
    }
    for (_traffic, delay, _), row in rows.items():
        assert row["latency_ns"]["n"] == 2 and row["latency_ns"]["min"] <= row["latency_ns"]["median"]
        if delay is not None:
            assert row["bandwidth_mb_s"]["median"] > 0
    # bandwidth falls with the delay: compared at each delay's best repetition (a busy machine only takes time
    # away from the load thread, so the best is the one least disturbed)
    assert rows[("R", 0, "64-page")]["bandwidth_mb_s"]["max"] > rows[("R", 5000, "64-page")]["bandwidth_mb_s"]["max"]
    with open(tmp_path / "mem.csv") as fh:
        table = list(csv.DictReader(fh))
    assert len(table) == 8  # two idle rows, 0 and 5000 for each of the two points
    assert [row["locality"] for row in table[:4]] == ["64-page", "whole-buffer", "64-page", "64-page"]


def test_a_point_that_measures_the_same_as_another_is_one_row(cli, tmp_path, direct_dir):
    """`host` does not use GPUs: varying the GPU set gives the same point, measured and listed once."""
    profile = tmp_path / "gpus.toml"
    profile.write_text(
        'name = "host-over-gpus"\nrepetitions = 1\nduration = 0.2\n\n[base]\npath = "host"\n'
        'file_size = "8M"\n\n[grid]\ngpus = ["0", "0,1"]\nblock_size = ["4K", "64K"]\n'
    )
    results = tmp_path / "gpus.results.json"
    r = _replay(cli, profile, results, direct_dir)
    assert r.code == 0, r.err
    data = _load(results)
    assert [p["label"] for p in data["points"]] == ["host read 4K w1", "host read 64K w1"]
    assert [p["index"] for p in data["points"]] == [1, 2], "numbered as first planned"
    assert len(data["results"]) == 2 and len(load_results(str(results))) == 2
    with (results.with_suffix(".csv")).open() as fh:
        assert [row["label"] for row in csv.DictReader(fh)] == ["host read 4K w1", "host read 64K w1"]


def test_ctrl_c_as_a_repetition_ends_keeps_it_and_stops_the_sweep(tmp_path, monkeypatch):
    """Ctrl-C that lands as a run finishes: the run ran its course and counts, and the sweep stops there (it used
    to go on to the end as if nothing had been asked)."""
    from xferscope.profiles.toml_format import parse_profile
    from xferscope.sweep import SweepRun

    profile = parse_profile(SMALL.format(duration=0.2), "small.toml", "small-host")
    real = SweepRun._execute_io

    def ended_as_ctrl_c_came(self, point, scratch, on_sample):
        result = real(self, point, scratch, on_sample)
        self._current._stopped_by_user = True  # run_to_end caught the KeyboardInterrupt after the run's end
        return result

    monkeypatch.setattr(SweepRun, "_execute_io", ended_as_ctrl_c_came)
    results = tmp_path / "r.json"
    outcome = SweepRun(profile, str(results)).run()
    assert outcome.interrupted and outcome.ran == 1
    points = _load(results)["points"]
    assert [p["repetitions_done"] for p in points] == [1, 0, 0, 0]
    assert points[0]["repetitions"][0]["status"] == "ok", "the repetition that ran its course is kept"


def test_a_points_key_is_what_results_files_hold():
    """Resume and --against find a point in a results file by this key: its fields, their order and their words
    are part of the file format (written by earlier versions too)."""
    from xferscope.profiles.fields import IO_IDENTITY
    from xferscope.profiles.model import point_identity
    from xferscope.spec import RunSpec
    from xferscope.sweep.plan import key_of

    spec = RunSpec(
        path="bounce",
        io="randread",
        block_size=1 << 20,
        workers=4,
        iodepth=8,
        gpus=[0, 1],
        split=262144,
        huge_pages=True,
    )
    assert list(point_identity(spec)) == list(IO_IDENTITY)
    assert key_of(point_identity(spec)) == (
        "path=bounce io=randread block_size=1048576 workers=4 iodepth=8 rwmix=100 gpus=0,1 buffered=false "
        "source=storage register_buffers=true huge_pages=true split=262144"
    )
