"""`compare` in rounds: rotation, one dataset for every path, A/A on the real host engine, the JSON and CSV of
rounds, the plan and progress lines, the page cache, and a single pass."""

import csv
import itertools
import json
import os

import pytest

from xferscope.compare.rounds import RoundsComparison, path_labels, round_orders
from xferscope.compare.verdict import RULE, SINGLE_PASS, WORDS, paired_verdict
from xferscope.engines.host import huge_pages_offered
from xferscope.spec import RunSpec


@pytest.mark.parametrize("paths", [2, 3, 4])
@pytest.mark.parametrize("rounds", [2, 3, 5])
def test_rotation_never_puts_a_path_first_twice_in_a_row(paths, rounds):
    orders = round_orders(paths, rounds)
    assert len(orders) == rounds
    for order in orders:
        assert sorted(order) == list(range(paths))  # every path once per round
    for before, after in itertools.pairwise(orders):
        assert before[0] != after[0]
        assert before[-1] != after[-1]
    firsts = [o[0] for o in orders]
    assert max(firsts.count(p) for p in range(paths)) - min(firsts.count(p) for p in range(paths)) <= 1


def test_a_path_given_twice_is_told_apart():
    assert path_labels(["host", "host"]) == ["host#1", "host#2"]
    assert path_labels(["host", "bounce", "host"]) == ["host#1", "bounce", "host#2"]
    comp = RoundsComparison([RunSpec(path="host"), RunSpec(path="host")], 3)
    assert [s.name for s in comp.specs] == ["host#1", "host#2"]
    assert [(r.round, r.position, r.slot) for r in comp.runs] == [
        (0, 0, 0),
        (0, 1, 1),
        (1, 0, 1),
        (1, 1, 0),
        (2, 0, 0),
        (2, 1, 1),
    ]


def _load(path):
    return json.loads(path.read_text())


def test_a_and_a_on_the_host_engine_reads_one_dataset_in_rotated_rounds(cli, direct_dir, tmp_path):
    js, table = tmp_path / "aa.json", tmp_path / "aa.csv"
    data_dir = direct_dir / "data"
    data_dir.mkdir()
    r = cli(
        "compare",
        "--paths",
        "host,host",
        "-i",
        "64K",
        "-s",
        "8M",
        "-w",
        "2",
        "-T",
        "0.3",
        "--rounds",
        "3",
        "--dir",
        str(data_dir),
        "--json",
        str(js),
        "--csv",
        str(table),
    )
    assert r.code == 0, r.err
    # the plan before the start; no progress bar when stderr is not a terminal
    assert "planned: 2 paths x 3 rounds x 0.3 s = 0:02 of runs, plus preparing the 16.00 MiB dataset" in r.err
    assert "ETA" not in r.err and "\r" not in r.err
    data = _load(js)
    comp = data["comparison"]
    assert comp["rounds"] == comp["rounds_done"] == 3 and comp["rule"] == RULE
    assert comp["order"] == [["host#1", "host#2"], ["host#2", "host#1"], ["host#1", "host#2"]]
    base, other = comp["paths"]
    assert (base["label"], other["label"]) == ("host#1", "host#2") and base["baseline"]
    assert len(base["rounds"]) == len(other["rounds"]) == 3 and all(v > 0 for v in base["rounds"] + other["rounds"])
    for p in (base, other):
        tp = p["throughput_mib_s"]
        assert tp["min"] <= tp["median"] <= tp["max"] and tp["n"] == 3
    # the verdict and ratio are the paired rule applied to the figures shown
    v = paired_verdict(base["rounds"], other["rounds"])
    assert other["verdict"] == v.word in WORDS and other["ratio"] == pytest.approx(v.ratio)
    assert (other["ratio_min"], other["ratio_max"]) == (pytest.approx(v.low), pytest.approx(v.high))
    # every run read the same files: one dataset, created once (same device and inode for every path)
    runs = comp["runs"]
    assert [(x["round"], x["position"], x["label"]) for x in runs] == [
        (1, 1, "host#1"),
        (1, 2, "host#2"),
        (2, 1, "host#2"),
        (2, 2, "host#1"),
        (3, 1, "host#1"),
        (3, 2, "host#2"),
    ]
    identities = {tuple(map(tuple, x["files"])) for x in runs}
    assert len(identities) == 1 and len(next(iter(identities))) == 2  # two workers: two files, the same each run
    assert [data["results"][x["result"]]["label"] for x in runs] == [x["label"] for x in runs]
    assert all(res["environment"]["target"] == data["results"][0]["environment"]["target"] for res in data["results"])
    assert list(data_dir.iterdir()) == []  # the dataset is removed at the end
    # the table: both rows, the verdict column and the rule under it
    assert "host#1" in r.out and "host#2" in r.out and "baseline" in r.out and RULE in r.out
    assert "round 2/3: host#2, host#1" in r.out and r.out.count("XferType: CPUONLY") == 6
    # CSV: a row per run with its round, place, paired ratio and verdict
    rows = list(csv.DictReader(table.open()))
    assert [(row["round"], row["position"], row["compared_as"]) for row in rows] == [
        (str(x["round"]), str(x["position"]), x["label"]) for x in runs
    ]
    assert all(row["verdict"] == ("baseline" if row["compared_as"] == "host#1" else other["verdict"]) for row in rows)
    first_round = [row for row in rows if row["round"] == "1"]
    assert float(first_round[1]["ratio_to_baseline"]) == pytest.approx(
        float(first_round[1]["throughput_mib_s"]) / float(first_round[0]["throughput_mib_s"]), rel=1e-4
    )


def test_without_a_target_every_path_reads_one_scratch_file(cli, tmp_path):
    js = tmp_path / "c.json"
    r = cli(
        "compare",
        "--paths",
        "host,host,host",
        "-i",
        "64K",
        "-s",
        "4M",
        "-T",
        "0.2",
        "--rounds",
        "2",
        "--json",
        str(js),
        "--no-drop-cache",
        env={"TMPDIR": str(tmp_path)},
    )
    assert r.code == 0, r.err
    comp = _load(js)["comparison"]
    assert [p["label"] for p in comp["paths"]] == ["host#1", "host#2", "host#3"]
    assert len({tuple(map(tuple, x["files"])) for x in comp["runs"]}) == 1
    assert comp["page_cache_dropped"] is False and "--no-drop-cache" in comp["page_cache"]
    assert "page cache not emptied (--no-drop-cache)" in r.out
    # the notes under the table are in the file too, the rule first and the cache's last
    assert comp["notes"][0] == comp["rule"] and comp["notes"][-1].startswith(comp["page_cache"])
    assert all(note in " ".join(r.out.split()) for note in (" ".join(n.split()) for n in comp["notes"]))
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith("xferscope")] == []


#: a short A/A comparison on the host engine (add --rounds and the target)
SHORT_A_A = ("compare", "--paths", "host,host", "-i", "64K", "-s", "4M", "-T", "0.2")


def test_a_single_pass_gives_no_verdict(cli, direct_dir):
    single = (*SHORT_A_A, "--rounds", "1", "--dir", str(direct_dir))
    r = cli(*single, "--format", "json")
    assert r.code == 0, r.err
    out = json.loads(r.out)
    assert out["comparison"]["paths"][1]["verdict"] == SINGLE_PASS
    assert "samples" not in out["results"][0]
    r = cli(*single)
    assert r.code == 0 and SINGLE_PASS in r.out and "round 1/1" not in r.out
    assert "4 KiB pages" not in r.out or not huge_pages_offered()


def test_host_buffers_on_4k_pages_are_named_under_the_table(cli, direct_dir):
    r = cli(*SHORT_A_A, "--rounds", "2", "--dir", str(direct_dir), "--4k-pages")
    assert r.code == 0, r.err
    assert "host#1, host#2: buffers on 4 KiB pages" in r.out and "--huge-pages" in r.out


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--rounds", "0"], "auto or a whole number of at least 1"),
        (["--rounds", "many"], "auto or a whole number of at least 1"),
        (["--rounds", "2.5"], "auto or a whole number of at least 1"),
        (["--max-rounds", "2"], "from 3"),
        (["--rounds", "auto", "--max-rounds", "1"], "from 3"),
        (["--max-rounds", "51"], "to 50, got 51"),
        (["--rounds", "4", "--max-rounds", "9"], "goes with --rounds auto"),
    ],
)
def test_bad_rounds_are_one_line_and_exit_2_before_anything_runs(cli, tmp_path, args, says):
    r = cli("compare", "--paths", "host,host", "--dir", str(tmp_path), *args)
    assert r.code == 2 and "Traceback" not in r.err and says in r.err, r.err
    assert len(r.err.strip().splitlines()) == 1 and os.listdir(tmp_path) == []


def test_the_help_names_auto_and_the_most_rounds(cli):
    r = cli("compare", "--help")
    assert "--rounds" in r.out and "auto (default)" in r.out and "--max-rounds" in r.out


def test_each_run_starts_with_the_files_pages_evicted_and_nothing_else(monkeypatch, direct_dir, tmp_path):
    from xferscope.commands.compare import run_comparison
    from xferscope.engines import page_cache

    evicted: list[str] = []
    real_evict = page_cache.evict
    monkeypatch.setattr(page_cache, "evict", lambda path, *a: (evicted.append(path), real_evict(path, *a)))

    # a file the comparison does not read, cached: it stays cached (the rest of the host's cache is left alone)
    other = tmp_path / "other.dat"
    other.write_bytes(os.urandom(1 << 20))
    page_cache.hold([str(other)])
    before = page_cache.resident_share([str(other)])
    spec = RunSpec(
        path="host", block_size=64 << 10, file_size=4 << 20, duration=0.2, directory=str(direct_dir), buffered=True
    )
    comp = RoundsComparison([spec, spec], 2)
    outcome = run_comparison(comp, drop_cache=True, live=False)
    assert not outcome.interrupted and not outcome.failed and all(run.ok for run in comp.runs)
    assert comp.cache_dropped is True
    assert comp.cache_note == "the files' pages evicted from the page cache before every run"
    if before is not None:  # a filesystem whose cached pages can be counted: the file was held, and stays held
        assert before == 1.0 and page_cache.resident_share([str(other)]) == before
    # before each of the 4 runs, the dataset's one file (buffered reads had cached it) and no other
    assert len(evicted) == 4 and {os.path.dirname(p) for p in evicted} == {str(direct_dir)}, evicted


def test_where_the_files_pages_stay_the_warning_comes_once_and_the_result_says_so(monkeypatch, direct_dir, capsys):
    from xferscope.commands.compare import run_comparison
    from xferscope.engines import page_cache

    monkeypatch.setattr(page_cache, "resident_share", lambda paths: 0.5)
    spec = RunSpec(path="host", block_size=64 << 10, file_size=4 << 20, duration=0.2, directory=str(direct_dir))
    comp = RoundsComparison([spec, spec], 2)
    outcome = run_comparison(comp, drop_cache=True, live=False)
    assert not outcome.interrupted and not outcome.failed
    assert all(run.ok for run in comp.runs)
    err = capsys.readouterr().err
    assert err.count("cannot evict the compared files from the page cache (50% of the files' pages stayed)") == 1
    assert comp.cache_dropped is False
    assert any("page cache not emptied (50% of the files' pages stayed)" in n for n in comp.notes())
    assert os.listdir(direct_dir) == []


def test_on_a_terminal_a_bar_shows_the_round_the_path_and_the_time_left(direct_dir):
    import pty
    import subprocess
    import sys

    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "xferscope.cli",
            "compare",
            "--paths",
            "host,host",
            "-i",
            "64K",
            "-s",
            "4M",
            "-T",
            "0.6",
            "--rounds",
            "2",
            "--dir",
            str(direct_dir),
        ],
        stdout=subprocess.PIPE,
        stderr=follower,
        text=True,
    )
    os.close(follower)
    out, _ = proc.communicate(timeout=120)
    err = b""
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:
            break
        if not chunk:
            break
        err += chunk
    os.close(leader)
    assert proc.returncode == 0
    text = err.decode()
    assert "planned: 2 paths x 2 rounds x 0.6 s = 0:02 of runs" in text
    assert "round 1/2 host#1 [" in text and "round 2/2 host#1 [" in text and "ETA 0:0" in text
    assert "host#2" in out and any(word in out for word in ("within noise", "faster", "slower"))


def test_a_file_of_the_user_is_read_by_every_path_and_left_as_it_was(cli, direct_dir):
    user = direct_dir / "mine.dat"
    user.write_bytes(os.urandom(4 << 20))
    before = (user.stat().st_ino, user.stat().st_mtime_ns, user.read_bytes())
    r = cli(
        "compare",
        "--paths",
        "host,host",
        "-i",
        "64K",
        "-T",
        "0.2",
        "--rounds",
        "2",
        "--file",
        str(user),
        "--format",
        "json",
    )
    assert r.code == 0, r.err
    assert "plus setting up each run (the 4.00 MiB dataset is there already)" in r.err
    comp = json.loads(r.out)["comparison"]
    assert {tuple(map(tuple, x["files"])) for x in comp["runs"]} == {((user.stat().st_dev, before[0]),)}
    assert (user.stat().st_ino, user.stat().st_mtime_ns, user.read_bytes()) == before
    assert sorted(p.name for p in direct_dir.iterdir()) == ["mine.dat"]
