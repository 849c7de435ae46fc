"""--rounds auto: rounds added while a verdict is undecided, up to --max-rounds, on a stand-in engine whose
throughput follows a known distribution (tests/standin_runs.py), and once with the real host engine."""

import json

import pytest
import standin_runs as _standin

from xferscope import records
from xferscope.compare.rounds import RoundsComparison
from xferscope.compare.verdict import FASTER, MAX_ROUNDS, SAME, SLOWER, START_ROUNDS, UNDECIDED
from xferscope.output.compare import comparison_payload
from xferscope.run import runner
from xferscope.spec import RunSpec


def _compare(monkeypatch, directory, factors, sd, seed, max_rounds=MAX_ROUNDS, rounds=START_ROUNDS):
    from xferscope.commands.compare import run_comparison

    monkeypatch.setattr(runner, "EngineRun", _standin.StandInRun)
    _standin.configure(factors, sd, paths=len(factors), seed=seed)
    spec = RunSpec(path="host", block_size=64 << 10, file_size=64 << 10, duration=1.0, directory=str(directory))
    comp = RoundsComparison([spec] * len(factors), rounds, max_rounds)
    outcome = run_comparison(comp, drop_cache=False, live=False)
    assert not outcome.interrupted and not outcome.failed
    return comp


def test_a_round_is_added_while_a_path_is_undecided_and_no_more_once_it_settles(monkeypatch, tmp_path, capsys):
    # 0.94: inside the 7.5% margin of 3 rounds and past the 5% of "same" (undecided), beyond the 5% of 4 rounds
    comp = _compare(monkeypatch, tmp_path, {"host#1": 1.0, "host#2": 0.94}, sd=0.002, seed=3)
    v = comp.verdict(1)
    assert comp.rounds == 4 == comp.rounds_done() and v.word == SLOWER and v.rounds == 4
    assert comp.added == [
        f"round 4 of at most {MAX_ROUNDS} added: host#2 undecided at {comp.added[0].split(' at ')[-1]}"
    ]
    assert "host#2 undecided at 0.94 (0.9" in comp.added[0]
    assert comp.added[0] in capsys.readouterr().err  # said as it happens
    d = records.as_data(comp.to_record())
    assert (d["rounds_mode"], d["max_rounds"], d["rounds"], d["rounds_added"]) == ("auto", MAX_ROUNDS, 4, comp.added)
    assert d["paths"][1]["verdict"] == SLOWER and d["paths"][1]["interval_high"] < 0.95
    assert [r["round"] for r in d["runs"]] == [1, 1, 2, 2, 3, 3, 4, 4]
    # the added round goes on rotating the order
    assert [r["label"] for r in d["runs"][6:]] == ["host#2", "host#1"]
    # its file, with the reasons rounds were added, opens as a comparison
    written = records.as_data(comparison_payload(comp, samples=False))
    assert records.check("comparison", written, "c.json")["comparison"]["rounds_added"] == comp.added


def test_rounds_stop_at_the_most_allowed_and_the_verdict_says_undecided_after_them(monkeypatch, tmp_path, capsys):
    from xferscope.output.compare import print_comparison

    comp = _compare(monkeypatch, tmp_path, {"host#1": 1.0, "host#2": 0.97}, sd=0.1, seed=4, max_rounds=5)
    v = comp.verdict(1)
    assert comp.rounds == 5 and len(comp.added) == 2 and v.word == UNDECIDED
    capsys.readouterr()
    print_comparison(comp)
    table = capsys.readouterr().out
    assert "undecided after 5 rounds" in table and f"{v.ratio:.2f} ({v.low:.2f}-{v.high:.2f})" in table


def test_a_fixed_number_of_rounds_adds_none(monkeypatch, tmp_path):
    comp = _compare(monkeypatch, tmp_path, {"host#1": 1.0, "host#2": 1.0}, sd=0.15, seed=1, max_rounds=None, rounds=4)
    assert comp.rounds == 4 and comp.added == [] and comp.to_record().rounds_mode == "fixed"


def test_settled_at_three_rounds_runs_three(monkeypatch, tmp_path):
    comp = _compare(monkeypatch, tmp_path, {"host#1": 1.0, "host#2": 1.5}, sd=0.005, seed=2)
    assert comp.rounds == 3 and comp.added == []
    assert comp.verdict(1).word == FASTER


def test_same_waits_for_five_rounds(monkeypatch, tmp_path):
    # within 1 ± 1% from the first round, yet "same" claims the whole interval: it waits for 90% (5 rounds)
    comp = _compare(monkeypatch, tmp_path, {"host#1": 1.0, "host#2": 1.0, "host#3": 1.5}, sd=0.005, seed=2)
    assert comp.rounds == 5 and len(comp.added) == 2
    assert comp.verdict(1).word == SAME and comp.verdict(2).word == FASTER


@pytest.mark.parametrize(("factor", "allowed"), [(1.0, {SAME, UNDECIDED}), (0.85, {SLOWER})])
def test_with_a_3_percent_spread_an_a_a_never_differs_and_0_85_is_always_slower(monkeypatch, tmp_path, factor, allowed):
    words = [
        _compare(monkeypatch, tmp_path, {"host#1": 1.0, "host#2": factor}, sd=0.03 / 2**0.5, seed=seed).verdict(1).word
        for seed in range(30)
    ]
    assert set(words) <= allowed, words


def test_auto_on_the_host_engine_plans_three_rounds_and_records_what_it_added(cli, direct_dir):
    r = cli(
        "compare",
        "--paths",
        "host,host",
        "--max-rounds",
        "4",
        "-s",
        "8M",
        "--bs",
        "64K",
        "-T",
        "0.2",
        "--dir",
        str(direct_dir),
        "--margin",
        "0.1",
        "--format",
        "json",
    )
    assert r.code == 0, r.err
    assert "planned: 2 paths x 3 to 4 rounds (more while a verdict is undecided) x 0.2 s = 0:01 to 0:02" in r.err
    comp = json.loads(r.out)["comparison"]
    assert comp["rounds_mode"] == "auto" and comp["max_rounds"] == 4 and 3 <= comp["rounds"] <= 4
    assert len(comp["rounds_added"]) == comp["rounds"] - 3 == comp["rounds_done"] - 3
    for line in comp["rounds_added"]:
        assert line in r.err
    assert comp["paths"][1]["verdict"] in (SAME, UNDECIDED, FASTER, SLOWER)
    assert comp["paths"][1]["interval_low"] <= comp["paths"][1]["ratio"] <= comp["paths"][1]["interval_high"]
    assert comp["margin"] == 0.1 and "within 1 ± 10%" in comp["rule"], "the margin asked for, kept in the JSON"


@pytest.mark.parametrize("command", [("compare",), ("saturate", "--dry-run"), ("replay", "seq-read-sweep")])
@pytest.mark.parametrize("margin", ["0", "0.9", "-0.05", "x"])
def test_a_margin_out_of_range_is_one_line_and_nothing_runs(cli, tmp_path, command, margin):
    r = cli(*command, "--margin", margin, "--dir", str(tmp_path))
    assert r.code != 0
    lines = [line for line in r.err.splitlines() if line.strip()]
    assert "Traceback" not in r.err and len(lines) <= 6, r.err
    assert "margin" in r.err
    assert list(tmp_path.iterdir()) == [], "nothing ran"


def test_a_wider_margin_calls_a_4_percent_difference_the_same(monkeypatch, tmp_path):
    from xferscope.commands.compare import run_comparison

    monkeypatch.setattr(runner, "EngineRun", _standin.StandInRun)
    _standin.configure({"host#1": 1.0, "host#2": 0.96}, 0.002, paths=2, seed=5)
    spec = RunSpec(path="host", block_size=64 << 10, file_size=64 << 10, duration=1.0, directory=str(tmp_path))
    narrow = RoundsComparison([spec, spec], START_ROUNDS, MAX_ROUNDS, margin=0.03)
    run_comparison(narrow, drop_cache=False, live=False)
    _standin.configure({"host#1": 1.0, "host#2": 0.96}, 0.002, paths=2, seed=5)
    wide = RoundsComparison([spec, spec], START_ROUNDS, MAX_ROUNDS, margin=0.05)
    run_comparison(wide, drop_cache=False, live=False)
    assert narrow.verdict(1).word == SLOWER and wide.verdict(1).word == SAME
    assert "within 1 ± 3%" in narrow.notes()[0] and "within 1 ± 5%" in wide.notes()[0]


def test_ctrl_c_as_a_run_ends_stops_the_comparison_after_it(monkeypatch, tmp_path):
    """Ctrl-C that lands as a run finishes: that run counts, and no further run starts."""
    from xferscope.commands.compare import run_comparison

    class CtrlCAtTheEnd(_standin.StandInRun):
        def execute(self, on_sample=None):
            result = super().execute(on_sample)
            self.stop()  # what run_to_end does with a KeyboardInterrupt that came after the run's end
            return result

    monkeypatch.setattr(runner, "EngineRun", CtrlCAtTheEnd)
    _standin.configure({"host#1": 1.0, "host#2": 1.0}, 0.01, paths=2, seed=5)
    spec = RunSpec(path="host", block_size=64 << 10, file_size=64 << 10, duration=1.0, directory=str(tmp_path))
    comp = RoundsComparison([spec, spec], START_ROUNDS, MAX_ROUNDS)
    outcome = run_comparison(comp, drop_cache=False, live=False)
    assert outcome.interrupted
    assert [r.result is not None and r.result.status for r in comp.runs][:2] == ["ok", False]
