"""The console's Memory view: the locality named, the cache-level curve with its cache sizes, the NUMA matrix,
the max-bandwidth table, and a built-in run beside an opened MLC output."""

from __future__ import annotations

from test_mlc_parser import FULL_RUN
from textual.widgets import DataTable, Select
from tui_helpers import held_text, memory_view, paste, retype, screen_text, wait_for

from xferscope.app.messages import MemSweepFinished
from xferscope.memory.result import cache_curve


async def sweep(pilot, msgs, mode: str, **fields) -> None:
    """Set the form as a person would, start, and wait for the sweep to finish."""
    app = pilot.app
    app.screen.query_one("#mem-mode", Select).value = mode
    for cid, text in fields.items():
        await retype(pilot, f"#mem-{cid}", text)
    done = len(msgs.of(MemSweepFinished))
    await pilot.press("escape", "r")
    await wait_for(pilot, lambda: len(msgs.of(MemSweepFinished)) > done, timeout=90)


async def test_idle_names_the_locality_and_the_whole_buffer_figure(direct_dir):
    async with memory_view(direct_dir) as (app, pilot, msgs):
        await sweep(pilot, msgs, "idle", seconds="0.1", buffer="16M", pages="4k")
        await wait_for(pilot, lambda: "got 100% 4K" in held_text(app, "#mem-notes"))
        text = held_text(app, "#mem-notes")
    result = msgs.of(MemSweepFinished)[-1].result
    assert result.idle_locality == "64-page" and result.whole_idle_latency_ns > 0
    assert (
        f"idle latency {result.idle_latency_ns:.1f} ns (64-page locality; whole-buffer "
        f"{result.whole_idle_latency_ns:.1f} ns)"
    ) in text
    assert "pages: asked 4 KiB pages, got 100% 4K" in text


PEAK_ROWS = ("ALL Reads", "3:1 Reads-Writes", "2:1 Reads-Writes", "1:1 Reads-Writes", "Stream-triad like")


async def test_the_curve_the_matrix_and_the_peak_table(direct_dir):
    async with memory_view(direct_dir) as (app, pilot, msgs):
        await sweep(pilot, msgs, "curve", seconds="0.05", buffer="2M")
        curve = msgs.of(MemSweepFinished)[0].result
        caches = [c for c in curve.environment["caches"] if c["size"] <= 2 << 20]
        table = app.screen.query_one("#mem-table", DataTable)
        rows = len(cache_curve(curve.points)) + len(caches)  # a row a size, and one a cache level (the view fills it)
        await wait_for(pilot, lambda: "Curve, 64-page locality" in screen_text(app) and table.row_count == rows)
        curve_text = screen_text(app)
        curve_rows = [" ".join(str(c) for c in table.get_row_at(i)) for i in range(table.row_count)]
        await sweep(pilot, msgs, "matrix", seconds="0.05", buffer="16M")
        await wait_for(pilot, lambda: "0 (MB/s)" in screen_text(app))
        matrix_text = screen_text(app)
        await sweep(pilot, msgs, "peak", seconds="0.05", buffer="8M")
        # the whole table drawn, not one label of it (a word the screen can show before the table is there)
        await wait_for(pilot, lambda: all(label in screen_text(app) for label in ("Maximum bandwidth", *PEAK_ROWS)))
        peak_text = screen_text(app)
        await pilot.press("v")
        await wait_for(pilot, lambda: "3 results side by side" in screen_text(app))
        side_text = screen_text(app)
    sizes = [p.size_bytes for p in cache_curve(curve.points)]
    assert sizes[0] == 4096 and sizes[-1] == 2 << 20
    assert "Curve, 64-page locality" in curve_text and "Latency ns vs working set" in curve_text
    for c in caches:  # the sysfs cache sizes, marked in the table and on the chart
        assert any(row.startswith(f"── {c['name']}") for row in curve_rows)
    assert len(curve_rows) == len(sizes) + len(caches)
    if caches:
        assert "┊" in curve_text and f"┊ {caches[0]['name']}" in curve_text
    assert "NUMA matrix" in matrix_text and "mem 0" in matrix_text and "0 (ns)" in matrix_text
    assert ("0 (MB/s)" in matrix_text and "one NUMA node" in " ".join(matrix_text.split())) or len(
        msgs.of(MemSweepFinished)[1].result.matrix["cpu_nodes"]
    ) > 1
    assert "Maximum bandwidth" in peak_text
    for label in PEAK_ROWS:
        assert label in peak_text
    assert "3 results side by side" in side_text and "curve plateau L1d" in side_text


async def test_an_opened_mlc_output_sits_beside_a_builtin_run(direct_dir, tmp_path):
    saved = tmp_path / "full.txt"
    saved.write_text(FULL_RUN)
    async with memory_view(direct_dir, size=(110, 30)) as (app, pilot, msgs):
        await sweep(pilot, msgs, "idle", seconds="0.1", buffer="16M")
        await pilot.press("o")
        await wait_for(pilot, lambda: bool(app.screen.query("#prompt-input")))
        await paste(pilot, "#prompt-input", str(tmp_path / "missing.txt"))
        await pilot.press("enter")
        await wait_for(pilot, lambda: held_text(app, "#prompt-error") != "")
        refused = held_text(app, "#prompt-error")
        await paste(pilot, "#prompt-input", str(saved))
        await pilot.press("enter")
        await wait_for(pilot, lambda: "2 results side by side" in screen_text(app))
        text = screen_text(app)
    assert "cannot read" in refused or "no such file" in refused
    assert "2 results side by side" in text and "1 builtin" in text and "2 mlc (full.txt)" in text
    assert "81.40" in text and "mlc random" in text and "64-page locality" in text
    assert "node 1->0 latency" in text
