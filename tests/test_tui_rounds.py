"""The console compares paths in rounds: one dataset, rotated order, rounds shown as they finish, whiskers,
the verdict column and the rule; the setup's rounds field."""

from __future__ import annotations

import os
import re

import standin_runs as _standin
from tui_helpers import Messages, make_app, retype, screen_text, until_shown, wait_for

from xferscope.app import session
from xferscope.app.messages import BatchFinished, RoundAdded, RunFinished, RunStarted, SetupRefused
from xferscope.app.widgets.rounds import whisker_bar
from xferscope.compare.rounds import RoundsComparison
from xferscope.compare.verdict import RULE, WORDS
from xferscope.spec import RunSpec


def test_the_whisker_runs_from_the_lowest_to_the_highest_round_on_one_scale():
    assert whisker_bar(50, 40, 80, 100, 10).plain == "████▓──┤  "
    assert whisker_bar(100, 100, 100, 100, 10).plain == "█" * 10
    assert whisker_bar(None, None, None, 100, 4).plain == "    "
    assert whisker_bar(0.1, 0.01, 1, 1000, 4).plain == "▓   "  # a path far slower than the fastest still shows


async def test_with_rounds_auto_the_console_adds_a_round_while_a_path_is_undecided(direct_dir, monkeypatch):
    # the stand-in engine: host#2 at 0.94 of host#1, 0.2% noise (undecided at 3 rounds, slower at 4)
    monkeypatch.setattr(session, "EngineRun", _standin.StandInRun)
    _standin.configure({"host#1": 1.0, "host#2": 0.94}, 0.002, paths=2, seed=3)
    app = make_app(direct_dir)
    spec = RunSpec(path="host", block_size=64 << 10, file_size=64 << 10, duration=1.0, directory=str(direct_dir))
    msgs = Messages()
    async with app.run_test(size=(100, 30), message_hook=msgs) as pilot:
        app.start_comparison([spec, spec], 3, 9)
        await wait_for(pilot, lambda: msgs.of(BatchFinished), timeout=30)
        await pilot.press("c")
        await wait_for(pilot, lambda: "4/4 rounds" in screen_text(app))
        text = " ".join(screen_text(app).split())
    [added] = msgs.of(RoundAdded)
    assert added.why.startswith("round 4 of at most 9 added: host#2 undecided at 0.94") and len(added.records) == 2
    assert len(msgs.of(RunFinished)) == 8 and app.comparison.rounds == 4 and len(app.records) == 8
    assert app.comparison.verdict(1).word == "slower" and "slower" in text


async def test_a_comparison_in_rounds_on_the_host_engine(direct_dir, monkeypatch):
    app = make_app(direct_dir, duration="0.4", size="8M", bs="64K")
    spec = RunSpec(path="host", block_size=64 << 10, file_size=8 << 20, duration=0.4, directory=str(direct_dir))
    msgs = Messages()
    files_during: list[str] = []
    before_run = RoundsComparison.before_run

    def looked_at_before_run(comparison, *args, **kwargs):  # in the runs' thread: the data set as round 2 finds it
        if comparison.rounds_done() == 1 and not files_during:
            files_during.extend(sorted(os.listdir(direct_dir)))
        return before_run(comparison, *args, **kwargs)

    monkeypatch.setattr(RoundsComparison, "before_run", looked_at_before_run)
    async with app.run_test(size=(80, 24), message_hook=msgs) as pilot:
        app.start_comparison([spec, spec], 3)
        await wait_for(pilot, lambda: app.comparison.rounds_done() >= 1)
        await pilot.press("c")
        during = await until_shown(pilot, "comparison ·", "/3 rounds")
        await wait_for(pilot, lambda: msgs.of(BatchFinished), timeout=60)
        v = app.comparison.verdict(1)
        after = await until_shown(pilot, "3/3 rounds", f"{v.ratio:.2f} ({v.low:.2f}-{v.high:.2f})")
        await pilot.press("a")

        def every_run_shown() -> bool:
            return len([x for x in screen_text(app).splitlines() if re.match(r"\W*[1-6] host ", x)]) == 6

        await wait_for(pilot, every_run_shown)
        all_runs = screen_text(app)
    comp = app.comparison
    started = [m.record.spec.name for m in msgs.of(RunStarted)]
    assert started == ["host#1", "host#2", "host#2", "host#1", "host#1", "host#2"]  # rotated each round
    assert len(msgs.of(RunFinished)) == 6 and comp.rounds_done() == 3
    # one dataset: every run read the same files (device and inode), created once, removed at the end
    assert len({tuple(run.files) for run in comp.runs}) == 1 and comp.runs[0].files
    assert files_during == ["xferscope-scratch-8M-w0.dat", "xferscope-scratch-8M-w0.dat.xferscope"]
    assert os.listdir(direct_dir) == []
    # rounds as they finish, then the whole comparison: medians, whiskers, the verdict, the rule
    assert "comparison ·" in during and "/3 rounds" in during
    assert "3/3 rounds" in after and "host#1" in after and "host#2" in after and "baseline" in after
    row = next(line for line in after.splitlines() if "host#2" in line and "3/3" in line)
    v = comp.verdict(1)
    assert v.word in WORDS and v.word in row and f"{v.ratio:.2f} ({v.low:.2f}-{v.high:.2f})" in row, row
    # the bar: solid to the lowest round, then to the median, a whisker to the highest (on a noisy machine a median
    # near 0 on the scale of the fastest round still shows one cell)
    assert any(mark in row for mark in "█▓┤"), row
    assert RULE[:60] in after.replace("\n", " ") or RULE[:40] in after
    assert comp.cache_dropped is True and "not emptied" not in after  # the dataset's pages, no root needed
    for line in after.splitlines():
        assert len(line.rstrip()) <= 80
    # a: every run of the session instead, one row each
    assert len([line for line in all_runs.splitlines() if re.match(r"\W*[1-6] host ", line)]) == 6, all_runs


async def test_the_setup_refuses_zero_rounds(direct_dir):
    app = make_app(direct_dir)
    msgs = Messages()
    async with app.run_test(size=(100, 40), message_hook=msgs) as pilot:
        await retype(pilot, "#rounds", "0")
        await pilot.press("escape", "r")
        await wait_for(pilot, lambda: msgs.of(SetupRefused))
    refused = msgs.of(SetupRefused)[-1]
    assert refused.where == "rounds" and "auto or a whole number of at least 1" in refused.reason
