"""`xferscope saturate` through its real entry point, on the real host engine with a small budget: the output,
the JSON and CSV shapes, reading a saturation back, profiles holding a plan, bad input, and MPI."""

from __future__ import annotations

import csv
import io
import json
import os

import pytest
from conftest import xferscope_cli
from test_mpi import mpirun, needs_mpi, rank_dirs

from xferscope.export import load_results
from xferscope.saturate.record import SCHEMA, load_saturation

SMALL = (
    "--path",
    "host",
    "--bs",
    "64K",
    "--max-workers",
    "2",
    "--max-qd",
    "2",
    "--max-rounds",
    "3",
    "-T",
    "0.1",
    "-s",
    "8M",
)


@pytest.fixture(scope="module")
def saturated(module_direct_dir):
    """One small saturation of the host path, which the tests below read: its CLI result, JSON and CSV files,
    and the directory it ran in."""
    out = module_direct_dir / "sat.json"
    table = module_direct_dir / "sat.csv"
    run_dir = module_direct_dir / "run"
    run_dir.mkdir()
    r = xferscope_cli("saturate", *SMALL, "--dir", str(run_dir), "--json", str(out), "--csv", str(table))
    return r, out, table, run_dir


def test_a_small_host_saturation_finds_its_knee_and_says_what_binds(saturated):
    r, out, table, run_dir = saturated
    assert r.code == 0, r.err
    assert "host 64K: " in r.out and "points of the full grid" in r.out
    assert "of 4 points of the full grid" in r.out, "2 workers x qd {1, 2}"
    verdict = next(line for line in r.out.splitlines() if line.strip().startswith("64K: host plateau"))
    assert (" at " in verdict and "→" in verdict and "-bound" in verdict) or "binds" in verdict
    assert "told apart by: verdict:" in r.out and "knee: the smallest concurrency" in r.out
    assert "Little's law:" in r.out and "CPU-s/GiB" in r.out
    assert "searches against 4 points of the full grids" in r.err, "the time is stated up front"
    # once the first run has shown what a run costs, the time left from it
    first = next(line for line in r.err.splitlines() if "s a run with its set-up and teardown" in line)
    assert first.startswith("xferscope: host: ") and "(0.1 s measuring; its first, which started the engine, " in first
    assert "; at most " in first and first.endswith(" left")
    assert os.listdir(run_dir) == [], "the scratch files it created are gone"

    data = json.loads(out.read_text())
    assert data["schema"] == SCHEMA
    assert set(data["rules"]) == {"search", "verdict", "ceilings"}
    [series] = data["series"]
    assert series["path"] == "host" and series["block_size"] == 64 << 10 and series["grid_points"] == 4
    assert 2 <= series["points_measured"] <= 4 and series["runs"] == len(data["results"])
    assert series["knee"]["concurrency"] >= 1 and series["figures"]["plateau_gib_s"] > 0
    assert series["bottleneck"]["kind"] in ("storage", "CPU") and series["verdict_line"] == verdict.strip()
    for point in series["points"]:
        assert len(point["throughput_gib_s"]) == len(point["results"]) >= 3
        assert all(
            data["results"][i]["workers"] == point["workers"] and data["results"][i]["iodepth"] == point["iodepth"]
            for i in point["results"]
        )
    for c in series["comparisons"]:
        assert c["verdict"] in ("faster", "slower", "same", "undecided") and 3 <= c["rounds"] <= 3, "--max-rounds 3"
        if c["stage"] in ("doubling", "limit"):  # the climb: a point against the one below it
            assert c["baseline"]["concurrency"] < c["other"]["concurrency"]
        else:  # the knee: a point against the plateau's, from below
            assert c["stage"] in ("knee", "knee bisection", "knee queue depth")
            below = (c["other"]["concurrency"], c["other"]["workers"]) < (
                c["baseline"]["concurrency"],
                c["baseline"]["workers"],
            )
            assert c["baseline"] == series["plateau"] and below, "less in flight, or as much on fewer workers"

    # every run reads back like any other result (replay --against, the console's Compare view)
    results = load_results(str(out))
    assert len(results) == series["runs"] and all(x.spec.path == "host" and x.bytes > 0 for x in results)

    rows = list(csv.DictReader(io.StringIO(table.read_text())))
    assert len(rows) == series["points_measured"]
    assert sum(row["knee"] == "yes" for row in rows) == 1 and {row["path"] for row in rows} == {"host"}


def test_a_saved_saturation_is_shown_again_and_serves_as_the_storage_ceiling(saturated, cli, tmp_path):
    r, out, *_ = saturated
    assert r.code == 0, r.err
    again = cli("saturate", "--from", str(out))
    assert again.code == 0, again.err
    assert again.out.split("Verdicts:")[1] == r.out.split("Verdicts:")[1], "judged again, the same verdicts"
    outcome = load_saturation(str(out))
    assert outcome.series[0].bottleneck is not None

    from xferscope.saturate.record import storage_from_file

    [(bs, (value, note))] = storage_from_file(str(out)).items()
    assert bs == 64 << 10 and value == pytest.approx(outcome.series[0].figures.plateau_gib_s)
    assert note.startswith("from ")

    bad = cli("saturate", "--from", str(tmp_path / "none.json"))
    assert bad.code == 2 and "no such file" in bad.err and "Traceback" not in bad.err
    plain = tmp_path / "run.json"
    plain.write_text(json.dumps({"results": []}))
    assert "not a saturation" in cli("saturate", "--from", str(plain)).err


def test_json_on_stdout(cli, direct_dir):
    r = cli("saturate", *SMALL, "--max-qd", "1", "--dir", str(direct_dir), "--format", "json")
    assert r.code == 0, r.err
    data = json.loads(r.out)
    assert data["schema"] == SCHEMA and "results" not in data and data["series"][0]["grid_points"] == 2


@pytest.mark.parametrize(
    "args, message",
    [
        (("--bs", "100"), "block_size"),
        (("--max-workers", "0"), "max-workers"),
        (("--min-rounds", "1"), "one round gives no verdict"),
        (("--path", "nope"), "unknown transfer path"),
        (("--path", "host,host"), "listed twice"),
        (("--storage", "missing.json"), "no such file"),
        (("--duration", "soon"), "duration"),
        (("--profile", "ssd-block-mix-qd16"), "not a saturate plan"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(cli, args, message):
    r = cli("saturate", *args, "--dry-run")
    assert r.code == 2 and message in r.err and len(r.err.strip().splitlines()) == 1, r.err


def test_a_gpu_path_that_cannot_run_here_says_why(cli, direct_dir, no_gpu):
    r = cli(
        "saturate",
        "--path",
        "bounce",
        "--bs",
        "1M",
        "--dir",
        str(direct_dir),
        "-T",
        "0.2",
        "-s",
        "8M",
        env={"XDG_CACHE_HOME": os.environ.get("XDG_CACHE_HOME", "")},
    )
    assert r.code == 3 and "bounce: unavailable" in r.err


def test_dry_run_counts_the_storage_reference_and_the_grids(cli, no_gpu):
    # GPU sets 0 and 0,1 on a machine without GPUs: a GPU machine checks the indices (one GPU refuses 1)
    r = cli("saturate", "--path", "bounce-async,cufile", "--bs", "64K,1M", "--gpu", "0", "--gpu", "0,1", "--dry-run")
    assert r.code == 0, r.err
    lines = r.out.splitlines()
    assert lines[0].split()[1:3] == ["host", "64K"] and "(storage reference)" in lines[0]
    assert sum("bounce-async" in line for line in lines) == 4 and sum("gpu 0,1" in line for line in lines) == 4
    assert "up to 16 of 16 grid points" in r.out and "of 64 grid points" in r.out
    assert "10 searches" in lines[-1]


def test_a_profile_holds_a_saturate_plan(cli, tmp_path, monkeypatch):
    env = {"XDG_DATA_HOME": str(tmp_path / "data")}
    saved = cli(
        "saturate",
        "--path",
        "host",
        "--bs",
        "4K,1M",
        "--max-workers",
        "8",
        "-T",
        "0.5",
        "--save-profile",
        "my-knees",
        env=env,
    )
    assert saved.code == 0, saved.err
    text = (tmp_path / "data" / "xferscope" / "profiles" / "my-knees.toml").read_text()
    assert 'kind = "saturate"' in text and "[saturate]" in text and '"4K"' in text and "max_workers = 8" in text
    listed = cli("profiles", "--json", env=env)
    [mine] = [p for p in json.loads(listed.out) if p["name"] == "my-knees"]
    assert mine["kind"] == "saturate" and mine["paths"] == ["host"] and mine["points"] == 2
    plan = cli("saturate", "--profile", "my-knees", "--max-qd", "4", "--dry-run", env=env)
    assert plan.code == 0, plan.err
    assert "up to 8 workers x qd 4" in plan.out and "each point 0.5 s a run" in plan.out
    replayed = cli("replay", "my-knees", "--dry-run", env=env)
    assert replayed.code == 0 and "host 1M" in replayed.out, replayed.err


def test_a_saturate_profile_refuses_a_grid_and_searched_fields(tmp_path):
    from xferscope.errors import FormatError
    from xferscope.profiles import parse_profile

    with pytest.raises(FormatError, match="no \\[grid\\]"):
        parse_profile('kind = "saturate"\n[grid]\nio = ["read", "write"]\n', "p.toml", "p")
    with pytest.raises(FormatError, match=r"p\.toml:3: .*searches it"):
        parse_profile('kind = "saturate"\n[base]\nworkers = 4\n', "p.toml", "p")
    with pytest.raises(FormatError, match='only kind = "saturate"'):
        parse_profile("[saturate]\nmax_qd = 4\n", "p.toml", "p")
    with pytest.raises(FormatError, match="max_qd: expected 1 or more"):
        parse_profile('kind = "saturate"\n[saturate]\nmax_qd = 0\n', "p.toml", "p")
    ok = parse_profile(
        'kind = "saturate"\nduration = 2\n[base]\nsize = "2G"\n[saturate]\npath = "host,cufile"\n'
        'bs = ["64K", "1M"]\ngpus = ["0", "0-3"]\n',
        "p.toml",
        "p",
    )
    assert ok.saturate == {
        "paths": ["host", "cufile"],
        "block_sizes": [64 << 10, 1 << 20],
        "gpu_sets": [[0], [0, 1, 2, 3]],
    }
    assert ok.base == {"file_size": 2 << 30} and ok.point_count == 8


@needs_mpi
def test_under_mpi_the_concurrency_is_per_rank(tmp_path, direct_dir):
    out = tmp_path / "mpi.json"
    dirs = rank_dirs(direct_dir, 2)
    proc = mpirun(2, "saturate", "--mpi", *SMALL, "--max-qd", "1", "--dir", dirs, "--json", str(out))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("Verdicts:") == 1, "rank 0 alone prints"
    assert "per rank (2 ranks)" in proc.stdout
    data = json.loads(out.read_text())
    [series] = data["series"]
    figures = series["figures"]
    assert figures["ranks"] == 2 and figures["concurrency"] == 2 * series["knee"]["concurrency"]
    for run in data["results"]:
        assert run["environment"]["cluster"]["ranks"] == 2
        assert run["workers"] == run["saturate"]["workers"], "each rank runs the point's workers"
    assert all(not os.listdir(direct_dir / str(r)) for r in range(2))


def test_ctrl_c_keeps_the_points_measured_and_removes_the_scratch_files(direct_dir, tmp_path):
    import signal
    import subprocess
    import sys
    import threading
    import time

    out = tmp_path / "partial.json"
    direct_dir = direct_dir / "run"
    direct_dir.mkdir()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "xferscope.cli",
            "saturate",
            "--path",
            "host",
            "--bs",
            "64K",
            "--max-workers",
            "16",
            "--max-qd",
            "1",
            "-T",
            "1",
            "-s",
            "8M",
            "--dir",
            str(direct_dir),
            "--json",
            str(out),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    # The line on what a run costs comes once the second run has ended; the shortest search, two points of
    # three rounds each, needs six, so the signal lands mid-search, however fast the disk.
    err_lines: list[str] = []
    reader = threading.Thread(target=lambda: err_lines.extend(proc.stderr), daemon=True)
    reader.start()
    deadline = time.monotonic() + 120
    while not any("s a run with its set-up and teardown" in line for line in err_lines):
        assert time.monotonic() < deadline and proc.poll() is None, (proc.stdout.read(), err_lines)
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    stdout = proc.stdout.read()
    proc.wait(timeout=30)
    reader.join(30)
    stderr = "".join(err_lines)
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr and "interrupted" in stderr
    data = json.loads(out.read_text())
    [series] = data["series"]
    assert series["stopped"] == "interrupted" and series["runs"] >= 1 and len(data["results"]) == series["runs"]
    assert all(r["status"] == "ok" for r in data["results"]), "the interrupted run is not counted as a point"
    assert "host 64K: " in stdout
    assert list(direct_dir.iterdir()) == []
