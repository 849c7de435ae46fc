"""`replay --mpi`: a profile's grid across MPI ranks, resumed, refused under the wrong rank count, compared.

Like ``test_mpi``, the tests that launch ranks need `mpirun` and mpi4py and are
skipped with the reason where either is missing; each rank runs on its own
scratch directory (``--dir D/{rank}``).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

import pytest
from conftest import no_files_left
from test_mpi import MPI_CTRL_C_ENV, MPI_ENV, mpirun, mpirun_cmd, needs_mpi, rank_dirs
from test_replay import SMALL

from xferscope.errors import FormatError
from xferscope.export import load_results
from xferscope.profiles import dump_profile, parse_profile

LABELS = ["host read 4K w1", "host read 64K w1"]
TWO_POINTS = ("--set", "io=read", "--reps", "1")  # of the small host grid: read at 4K and 64K, once each


@pytest.fixture
def tiny(tmp_path, direct_dir):
    """The small host grid, the results file, and a {rank} directory template with a directory per rank."""
    profile = tmp_path / "tiny.toml"
    profile.write_text(SMALL.format(duration=0.3))
    return profile, tmp_path / "tiny.results.json", rank_dirs(direct_dir, 2), direct_dir


def _replay(ranks, profile, results, dirs, *extra):
    return mpirun(ranks, *_args(profile, results, dirs, *extra))


def _args(profile, results, dirs, *extra) -> list[str]:
    return ["replay", str(profile), "--mpi", "--results", str(results), "--dir", dirs, *TWO_POINTS, *extra]


def _points(results) -> list[dict]:
    return json.loads(results.read_text())["points"]


@needs_mpi
def test_two_ranks_replay_the_grid_in_step_and_resume(tiny):
    profile, results, dirs, base = tiny
    proc = _replay(2, profile, results, dirs)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("small-host") == 1 and proc.stdout.count("host read 64K w1") == 1  # rank 0 prints
    points = _points(results)
    assert [p["label"] for p in points] == LABELS
    for point in points:
        assert point["status"] == "done" and point["repetitions_done"] == 1
        [rep] = point["repetitions"]
        cluster = rep["environment"]["cluster"]
        assert cluster["ranks"] == 2 and [row["rank"] for row in cluster["per_rank"]] == [0, 1]
        assert all(row["bytes"] > 0 for row in cluster["per_rank"])
        assert rep["bytes"] == sum(row["bytes"] for row in cluster["per_rank"])  # aggregate rows
        assert rep["bytes"] == sum(h["bytes"] for h in rep["hosts"])  # per-host figures kept
        assert point["stats"]["throughput_mib_s"]["median"] == rep["throughput_mib_s"] > 0
    assert [len(r.hosts) for r in load_results(str(results))] == [1, 1]
    assert all(not os.listdir(base / str(r)) for r in range(2))  # every rank removed its scratch files

    # forget the second point: a rerun measures it alone and keeps the first as measured
    data = json.loads(results.read_text())
    data["points"][1].update(status="pending", repetitions=[], repetitions_done=0)
    results.write_text(json.dumps(data))
    again = _replay(2, profile, results, dirs)
    assert again.returncode == 0, again.stderr
    assert "1 point(s) finished earlier" in again.stderr
    resumed = _points(results)
    assert resumed[0]["repetitions"] == points[0]["repetitions"]
    assert resumed[1]["status"] == "done" and resumed[1]["repetitions_done"] == 1
    assert resumed[1]["repetitions"][0]["environment"]["cluster"]["ranks"] == 2


@needs_mpi
def test_a_rank_that_cannot_run_ends_the_sweep_with_its_error(tiny, tmp_path):
    profile, results, _, base = tiny
    (base / "1").rmdir()
    proc = _replay(2, profile, results, str(base / "{rank}"))
    assert proc.returncode == 2, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.startswith("xferscope:")]
    assert len(lines) == 1 and "point 1 (host read 4K w1): rank 1 on " in lines[0], proc.stderr
    assert "does not exist" in lines[0] and "Traceback" not in proc.stderr
    assert [(p["status"], bool(p["reason"])) for p in _points(results)] == [("failed", True), ("pending", False)]
    assert not os.listdir(base / "0")


@needs_mpi
def test_ctrl_c_keeps_the_points_every_rank_finished(tiny):
    profile, results, dirs, base = tiny
    # points longer than the time mpirun takes to pass the signal on (see MPI_CTRL_C_ENV), so it lands in the second
    profile.write_text(SMALL.replace("repetitions = 2", "repetitions = 1").format(duration=6))
    proc = subprocess.Popen(
        mpirun_cmd(2, *_args(profile, results, dirs)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=MPI_CTRL_C_ENV,
    )
    try:
        deadline = time.monotonic() + 120  # a safety net: 16 test workers beside it can slow the first point a lot
        while not (results.exists() and _points(results)[0]["status"] == "done"):
            assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert f"interrupted; rerun the same command to resume from {results}" in err and "Traceback" not in err
    first, second = _points(results)
    assert first["status"] == "done" and first["repetitions"][0]["environment"]["cluster"]["ranks"] == 2
    assert second["repetitions_done"] == 0
    assert no_files_left(base, pattern="*.dat")  # by the ranks, or by a janitor where mpirun killed one first


@needs_mpi
def test_profile_that_needs_other_ranks_is_refused(tiny, cli):
    profile, results, dirs, base = tiny
    profile.write_text("ranks = 3\n" + SMALL.format(duration=0.3))
    plain = cli("replay", str(profile), "--results", str(results), "--dir", str(base / "0"))
    assert plain.code == 2
    assert plain.err.strip() == (
        f"xferscope: ranks: profile small-host needs 3 MPI ranks; start it with "
        f"mpirun -np 3 xferscope replay {profile} --mpi"
    )
    proc = _replay(2, profile, results, dirs)
    assert proc.returncode == 2
    lines = [line for line in proc.stderr.splitlines() if line.startswith("xferscope:")]
    assert lines == [
        f"xferscope: ranks: profile small-host needs 3 MPI ranks, this job has 2; start it with "
        f"mpirun -np 3 xferscope replay {profile} --mpi"
    ]
    assert not results.exists()


def test_ranks_is_a_checked_profile_field():
    profile = parse_profile("ranks = 4\n" + SMALL.format(duration=1), "p.toml", "p")
    assert profile.ranks == 4 and parse_profile(dump_profile(profile), "again.toml", "p").ranks == 4
    assert parse_profile(SMALL.format(duration=1), "p.toml", "p").ranks is None
    for bad, message in (('"four"', "expected a whole number"), ("0", "ranks must be 1 or more")):
        with pytest.raises(FormatError, match=rf"^p.toml:1: .*{message}"):
            parse_profile(f"ranks = {bad}\n" + SMALL.format(duration=1), "p.toml", "p")


@needs_mpi
def test_against_a_cluster_run_matches_the_aggregate(tiny, tmp_path):
    profile, results, dirs, _ = tiny
    run_json = tmp_path / "run.json"
    proc = mpirun(2, "run", "--mpi", "-T", "0.3", "-s", "8M", "--bs", "4K", "--dir", dirs, "--json", str(run_json))
    assert proc.returncode == 0, proc.stderr
    [old] = load_results(str(run_json))
    assert len(old.hosts) == 1 and old.environment["cluster"]["ranks"] == 2
    proc = _replay(2, profile, results, dirs, "--against", str(run_json), "--format", "json")
    assert proc.returncode == 0, proc.stderr
    found = {a["label"]: a for a in json.loads(proc.stdout)["against"]}
    assert found[LABELS[0]]["old"] == pytest.approx(old.throughput_mib_s)
    new = _points(results)[0]["stats"]["throughput_mib_s"]["median"]
    assert found[LABELS[0]]["ratio"] == pytest.approx(new / old.throughput_mib_s)
    assert found[LABELS[1]]["old"] is None and found[LABELS[1]]["ratio"] is None  # no 64K run to match

    # the earlier cluster run was a million times as fast: below 0.9, but one run against one repetition is one
    # noisy point, never a regression: said, not counted (everything is measured: only compares). The factor keeps
    # the ratio printed as 0.00 however much faster the replay ran than the first run on a busy machine.
    data = json.loads(run_json.read_text())
    data["bytes"] *= 10**6
    run_json.write_text(json.dumps(data))
    proc = _replay(2, profile, results, dirs, "--against", str(run_json), "--fail-below", "0.9")
    assert proc.returncode == 0, proc.stderr
    assert "1 point(s) below 0.9 but not slower under the rule" in proc.stderr, proc.stderr
    assert f"{LABELS[0]} (0.0" in proc.stderr, proc.stderr


def test_a_point_another_host_cannot_run_is_skipped_with_its_reason(tmp_path, monkeypatch):
    """A host without what a point needs (no GPU there, say) skips that point, as a single-host replay
    would, and the sweep goes on; a failing run or bad input still ends it (test above)."""
    from xferscope.cluster import replay
    from xferscope.cluster.session import RankFailed
    from xferscope.errors import ExitCode

    calls = []

    def second_host_has_no_gpu(spec, **_):
        calls.append(spec.block_size)
        raise RankFailed("rank 1 on gpu-less: bounce: unavailable: no GPU", ExitCode.ENVIRONMENT, cannot_run_there=True)

    class Everyone:  # every rank takes each step; the scratch files stay as the spec says
        send = staticmethod(lambda step: True)
        adapt = staticmethod(lambda spec: spec)

    monkeypatch.setattr(replay, "run_spec_mpi", second_host_has_no_gpu)
    profile = parse_profile(SMALL.format(duration=0.1), "small.toml", "small-host")
    results = tmp_path / "results.json"
    sweep = replay.ClusterSweep(profile, str(results), steps=Everyone(), scratch=Everyone())
    outcome = sweep.run()
    assert len(calls) == 4 and len(outcome.skipped) == 4 and not outcome.failed and sweep.failure is None
    assert {(p["status"], p["reason"]) for p in _points(results)} == {
        ("skipped", "rank 1 on gpu-less: bounce: unavailable: no GPU")
    }

    def bad_directory(spec, **_):
        raise RankFailed("rank 1 on other: dir: /nowhere does not exist", ExitCode.USAGE)

    monkeypatch.setattr(replay, "run_spec_mpi", bad_directory)
    again = replay.ClusterSweep(profile, str(tmp_path / "again.json"), steps=Everyone(), scratch=Everyone())
    outcome = again.run()
    assert len(outcome.failed) == 1 and "does not exist" in str(again.failure)


@needs_mpi
def test_results_that_cannot_be_written_stop_every_rank_with_the_summary_shown(tiny):
    from xferscope.safe_write import TEST_ERROR_ENV

    profile, results, dirs, _base = tiny
    proc = subprocess.run(
        mpirun_cmd(2, *_args(profile, results, dirs)),
        capture_output=True,
        text=True,
        timeout=90,
        env={**MPI_ENV, TEST_ERROR_ENV: "tiny.results.json=ENOSPC"},
    )
    assert proc.returncode == 4, proc.stderr
    assert proc.stdout.count("host read 4K w1") == 1  # what was measured, printed once by rank 0
    assert f"could not write {results}: no space left on device (results shown above)" in proc.stderr
    assert "Traceback" not in proc.stderr and not results.exists()
    assert not [n for n in os.listdir(results.parent) if n.endswith(".xferscope-tmp")]
