"""The console's Inference view (i): a KV-cache restore and a model load on the host path through Textual's pilot,
on real files; x stops a run and keeps what it measured; bad form values explained; a saved run opens beside the
session's."""

from __future__ import annotations

import json
import os

from test_workload_inference import _shards
from tui_helpers import Messages, held_text, make_app, paste, retype, screen_text, wait_for

from xferscope.app.messages import WorkloadEnded, WorkloadTicked
from xferscope.app.screens.workload_run import WorkloadScreen
from xferscope.workloads.inference.console import InferenceFormValues, build_spec


async def _open(pilot, app) -> None:
    await pilot.press("i")
    await wait_for(pilot, lambda: isinstance(app.screen, WorkloadScreen) and app.screen.view.name == "inference")


async def test_a_kvcache_restore_then_a_load_rank_in_the_session(direct_dir, tmp_path, no_gpu, monkeypatch):
    monkeypatch.setattr("xferscope.workloads.inference.kvcache_data.DEFAULT_CACHE_BYTES", 64 << 20)  # a small cache
    sets = direct_dir / "sets"
    sets.mkdir()
    shards = tmp_path / "shards"
    shards.mkdir()
    _shards(shards)
    messages = Messages()
    app = make_app(tmp_path)
    async with app.run_test(size=(120, 40), message_hook=messages) as pilot:
        await _open(pilot, app)
        await wait_for(pilot, lambda: "workload kvcache · idle" in screen_text(app))
        for selector, text in (("#inf-model", "llama3.2-1b"), ("#inf-prompt", "1024"), ("#inf-seconds", "1")):
            await retype(pilot, selector, text)
        await paste(pilot, "#inf-target", str(sets))
        await pilot.press("escape", "r")
        await wait_for(pilot, lambda: len(messages.of(WorkloadEnded)) == 1, timeout=120)
        # the title and the figures under the tables (drawn once the layout has made room for them)
        await wait_for(pilot, lambda: "workload kvcache · finished" in (t := screen_text(app)) and "restored" in t)
        kv_text = screen_text(app)
        kv_rows = app.screen.query_one("#inf-session").row_count
        await retype(pilot, "#inf-kind", "load")
        # the title follows the Kind field: what r would start, not the run before it
        await wait_for(pilot, lambda: "workload load · idle" in screen_text(app))
        assert "workload kvcache" not in screen_text(app).splitlines()[0]
        await paste(pilot, "#inf-files", str(shards))
        await pilot.press("escape", "r")
        await wait_for(pilot, lambda: len(messages.of(WorkloadEnded)) == 2, timeout=120)
        await wait_for(pilot, lambda: "workload load · finished" in (t := screen_text(app)) and "loaded in" in t)
        load_text = screen_text(app)
        load_rows = app.screen.query_one("#inf-session").row_count
        gpu_rows = app.screen.query_one("#inf-table").row_count
    kv, loaded = (m.result for m in messages.of(WorkloadEnded))
    assert messages.of(WorkloadTicked), "the ticks arrive while it runs"
    assert kv.status == "ok" and kv.requests > 0 and loaded.status == "ok"
    assert "kvcache llama3.2-1b, prompts of 1024 tokens x4 through host" in kv_text
    assert f"{kv.requests} requests restored" in kv_text and "32,768 B per token" in kv_text
    assert kv_rows == 1 and load_rows == 1, "each kind ranks its own runs"
    assert "loaded in" in load_text and gpu_rows == 1, load_text
    assert os.listdir(sets) == [], "the generated cache is gone"


async def test_x_stops_a_restore_and_keeps_what_it_measured(direct_dir, tmp_path, no_gpu, monkeypatch):
    monkeypatch.setattr("xferscope.workloads.inference.kvcache_data.DEFAULT_CACHE_BYTES", 64 << 20)
    sets = direct_dir / "sets"
    sets.mkdir()
    messages = Messages()
    app = make_app(tmp_path)
    async with app.run_test(size=(120, 40), message_hook=messages) as pilot:
        await _open(pilot, app)
        for selector, text in (("#inf-model", "llama3.2-1b"), ("#inf-prompt", "1024"), ("#inf-seconds", "120")):
            await retype(pilot, selector, text)
        await paste(pilot, "#inf-target", str(sets))
        await pilot.press("escape", "r")
        await wait_for(pilot, lambda: messages.of(WorkloadTicked), timeout=60)
        await pilot.press("x")
        await wait_for(pilot, lambda: messages.of(WorkloadEnded), timeout=60)
        await wait_for(pilot, lambda: "workload kvcache · stopped" in (t := screen_text(app)) and "INTERRUPTED" in t)
        text = screen_text(app)
    [result] = [m.result for m in messages.of(WorkloadEnded)]
    assert result.status == "interrupted" and result.seconds < 60 and result.requests > 0
    assert "INTERRUPTED" in text
    assert os.listdir(sets) == []


async def test_bad_form_values_are_explained_and_nothing_starts(tmp_path, no_gpu):
    app = make_app(tmp_path)
    async with app.run_test(size=(120, 32)) as pilot:
        await _open(pilot, app)
        await retype(pilot, "#inf-model", "gpt-9")
        await pilot.press("escape", "r")
        await wait_for(pilot, lambda: "unknown model 'gpt-9'" in screen_text(app))
        assert "workload kvcache · idle" in screen_text(app)
        await retype(pilot, "#inf-model", "llama3.1-8b")
        await retype(pilot, "#inf-kind", "train")
        await wait_for(pilot, lambda: "kvcache (KV-cache restores) or load" in screen_text(app))


def test_the_form_defaults_follow_the_machine():
    assert build_spec(InferenceFormValues(), has_gpu=False).path == "host"
    assert build_spec(InferenceFormValues(), has_gpu=True).path == "bounce-async"
    assert build_spec(InferenceFormValues(kind="load"), has_gpu=True).model.name == "llama3.1-8b"


def _a_load(tmp_path):
    """A real load of one small shard (host path, no GPU): its record."""
    from xferscope.workloads.inference.load import LoadSession
    from xferscope.workloads.inference.load_spec import LoadSpec

    shards = tmp_path / "shards"
    shards.mkdir()
    _shards(shards, 1)
    session = LoadSession(LoadSpec(files=str(shards)).validate())
    try:
        session.prepare()
        return session.run()
    finally:
        session.close()


async def _open_saved(tmp_path, saved) -> tuple[int, str]:
    """The load view, ``saved`` opened (after a path that is not there): its rows and its text."""
    app = make_app(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await _open(pilot, app)
        await retype(pilot, "#inf-kind", "load")
        await pilot.press("escape", "o")
        await wait_for(pilot, lambda: "Open a saved run" in screen_text(app))
        await paste(pilot, "#prompt-input", str(tmp_path / "missing.json"))
        await pilot.press("enter")
        await wait_for(pilot, lambda: "No such file" in held_text(app, "#prompt-error"))
        await paste(pilot, "#prompt-input", str(saved))
        await pilot.press("enter")
        await wait_for(pilot, lambda: saved.name in screen_text(app))
        return app.screen.query_one("#inf-session").row_count, screen_text(app)


async def test_a_saved_load_opens_beside_the_sessions_runs(tmp_path, no_gpu):
    from xferscope.workloads.common.records import encode

    saved = tmp_path / "l.json"
    saved.write_bytes(encode(_a_load(tmp_path)))
    load_s = json.loads(saved.read_text())["load_s"]
    rows, text = await _open_saved(tmp_path, saved)
    assert rows == 1 and f"{load_s:.2f} s" in text


async def test_a_saved_mpi_load_opens_as_its_job_and_a_row_a_host(tmp_path, no_gpu):
    from xferscope.workloads.common.job_ranks import JobFacts, RankResult
    from xferscope.workloads.common.records import encode
    from xferscope.workloads.inference.load_cluster import cluster_result

    one = _a_load(tmp_path)
    ranks = [RankResult(i, host, one, 1 << 30, 2) for i, host in enumerate(["node-a", "node-b"])]
    saved = tmp_path / "job.json"
    saved.write_bytes(encode(cluster_result(ranks, JobFacts("mpirun", "Open MPI", True), "copy")))
    rows, text = await _open_saved(tmp_path, saved)
    assert rows == 3 and "job.json@node-a" in text and "job.json@node-b" in text
