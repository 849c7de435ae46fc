"""The console's pure parts: braille drawing, number formats, the form's specs, table shapes, GPU figures."""

from __future__ import annotations

import pytest

from xferscope.app import figures
from xferscope.app.braille import Curve, bar, columns, nice_ceiling, plot
from xferscope.app.mem_model import MEM_FIELD_CONTROL, MemFormValues, build_mem_spec, curve_rows, mlc_row
from xferscope.app.session import Batch, SampleBuffer, new_records
from xferscope.app.setup_model import FIELD_CONTROL, FormValues, build_specs
from xferscope.app.widgets.comparison import table_shape
from xferscope.app.widgets.gpu import gpu_text
from xferscope.commands.tui import gpu_label
from xferscope.errors import SpecError
from xferscope.spec import RunSpec


def test_braille_line_rises_from_bottom_left_to_top_right():
    grid = plot([Curve("a", [(0, 0.0), (1, 10.0)], "red")], width=4, height=2, x_range=(0, 1), y_max=10)
    cells = ["".join(ch for ch, _ in row) for row in grid]
    assert cells[1][0] != " " and cells[0][0] == " "  # starts at the bottom left
    assert cells[0][-1] != " " and cells[1][-1] == " "  # ends at the top right
    assert all(color in (None, "red") for row in grid for _, color in row)


def test_columns_average_and_interpolate():
    assert columns([(0, 1.0), (0.1, 3.0), (1, 6.0)], 0, 1, 4) == pytest.approx([2.0, 10 / 3, 14 / 3, 6.0])
    assert columns([(5, 1.0)], 0, 1, 3) == [None, None, None]  # outside the range


@pytest.mark.parametrize("value,ceiling", [(0.3, 0.5), (1.0, 1.0), (19, 20), (2100, 2500), (7e6, 1e7)])
def test_nice_ceiling(value, ceiling):
    assert nice_ceiling(value) == pytest.approx(ceiling)


def test_figures_have_explicit_units_and_dashes_for_nothing():
    assert figures.rate(1.5 * 2**30) == "1.50 GiB/s" and figures.rate(300 * 2**20) == "300.0 MiB/s"
    assert figures.latency(37.54) == "37.5 µs" and figures.latency(1650) == "1.65 ms"
    assert figures.latency(float("nan")) == figures.DASH and figures.pct(None) == figures.DASH
    assert figures.size(487 * 2**20) == "487 MiB" and figures.seconds(125) == "2m05s"
    assert bar(0.5, 4) == "██  " and bar(1.0, 3) == "███"


def test_form_builds_one_spec_per_path_and_names_bad_fields():
    specs = build_specs(FormValues(paths=["host", "bounce"], bs="64K", workers="4", duration="2.5"))
    assert [s.path for s in specs] == ["host", "bounce"]
    assert specs[0].block_size == 65536 and specs[0].workers == 4 and specs[0].duration == 2.5
    assert specs[0].file is None and specs[0].directory is None  # the embedded default
    for values, control in (
        (FormValues(paths=[]), "paths"),
        (FormValues(paths=["host"], bs="1K5"), "bs"),
        (FormValues(paths=["host"], iodepth="x"), "iodepth"),
        (FormValues(paths=["host"], size="1K", bs="1M"), "size"),
    ):
        with pytest.raises(SpecError) as err:
            build_specs(values)
        assert FIELD_CONTROL[err.value.field] == control


def test_comparison_folds_shared_columns_at_80_columns():
    rows = [
        ("host", "read", "1M", "1", "1", "900.0", "900", "1.0", "2.0", "3.0", "4.0", "0.100", "1.00"),
        ("host", "read", "4K", "1", "1", "90.0", "23,000", "1.0", "2.0", "3.0", "4.0", "0.900", "0.10"),
    ]
    _keep, headers, caption = table_shape(rows, 80)
    assert "io" not in headers and "qd" not in headers and caption == "read, qd 1"
    assert headers[:3] == ["path", "bs", "w"] and headers[-1] == "ratio"
    _keep, headers, caption = table_shape(rows, 160)
    assert "io" in headers and "avg lat (us)" in headers and caption == ""


def test_gpu_figures_against_the_measured_ceiling():
    reading = {
        "index": 0,
        "name": "NVIDIA H100",
        "link_gen": 5,
        "link_width": 16,
        "util_pct": 40.0,
        "mem_used_mib": 2048.0,
        "mem_total_mib": 81920.0,
        "pcie_rx_mb_s": 26000.0,
        "link_ceiling_h2d_gb_s": 52.0,
    }
    text = gpu_text([reading], 40).plain
    assert "GPU0 NVIDIA H100  PCIe gen5 x16" in text
    assert "util  40.0%" in text and "mem  2.0 of 80 GiB" in text
    assert "PCIe RX 26.00 GB/s of 52.0 GB/s (50%)" in text and "TX" not in text
    inventory = dict(reading, link_gen=1, link_gen_max=5, link_width_max=16)
    assert gpu_label(inventory) == "0: NVIDIA H100 · PCIe gen1 x16 (max gen5 x16) · 80 GiB"


def test_memory_form_and_mlc_rows():
    spec = build_mem_spec(MemFormValues(traffic="r,w6", stride="64,256", delays="0,100", seconds="0.5"))
    assert spec.traffic == ("R", "W6") and spec.strides == (64, 256) and spec.delays == (0, 100)
    with pytest.raises(SpecError) as err:
        build_mem_spec(MemFormValues(delays="0,x"))
    assert err.value.field == "delays"
    peak = build_mem_spec(MemFormValues(mode="peak"))
    assert peak.traffic == ("R", "W3", "W2", "W5", "W10") and MemFormValues.from_spec(peak).traffic == ""
    curve = build_mem_spec(MemFormValues(mode="curve", buffer="8M", locality="whole", pages="4k"))
    assert (curve.max_size, curve.buffer_bytes, curve.locality, curve.pages) == (8 << 20, None, "whole", "4k")
    again = MemFormValues.from_spec(build_mem_spec(MemFormValues(locality="128K")))
    assert again.locality == "128K" and again.traffic == ""
    with pytest.raises(SpecError) as err:
        build_mem_spec(MemFormValues(locality="near"))
    assert MEM_FIELD_CONTROL[err.value.field] == "mem-locality"

    class P:
        delay, latency_ns, bandwidth_mb_s = 200, 367.351, 865.14

    assert mlc_row(P) == ("00200", "367.35", "865.1")


def test_curve_marks_each_cache_level_the_sizes_reach_including_the_last():
    class Pt:
        def __init__(self, size):
            self.size_bytes, self.latency_ns = size, 1.0

    caches = [{"name": "L1d", "size": 48 << 10}, {"name": "L2", "size": 2 << 20}, {"name": "L3", "size": 32 << 20}]
    rows = curve_rows([Pt(32 << 10), Pt(64 << 10), Pt(1 << 20), Pt(2 << 20)], caches)
    assert [r[0] for r in rows] == ["32K", "── L1d", "64K", "1M", "2M", "── L2"]  # L3 lies beyond the curve
    assert [r[2] for r in rows if not r[0].startswith("──")] == ["L1d", "L2", "L2", "L2"]


def test_sample_buffer_is_bounded_and_a_stopped_batch_skips_the_rest():
    buf = SampleBuffer(maxlen=3)
    for i in range(5):
        buf.push(i)
    buf.push(None)
    drained = buf.drain()
    assert [s for _, s in drained] == [2, 3, 4] and buf.drain() == []
    assert [t for t, _ in drained] == sorted(t for t, _ in drained)  # when each was taken, in order

    events = []

    class Events:
        def __getattr__(self, name):
            return lambda *args: events.append(name)

    records = new_records([RunSpec(duration=1.0), RunSpec(duration=1.0)], repetitions=2)
    assert [(r.point, r.repetition) for r in records] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert records[1].title.endswith("(1/2) rep 2/2")
    batch = Batch(records, Events())
    batch.stop()
    batch.run()
    assert events == ["stopped"] * 4 + ["done"] and batch.wait(0)


def test_many_cores_become_one_cell_each():
    from xferscope.app.widgets.cpu import core_lines

    few = core_lines([10.0, 90.0], width=30, height=2).plain.splitlines()
    assert few[0].startswith("cpu0") and few[1].rstrip().endswith("90%")
    many = core_lines([float(i) for i in range(64)], width=33, height=0).plain.splitlines()
    assert [len(line) for line in many[:2]] == [32, 32] and "64 cores, one cell each" in many[-1]


def test_console_command_errors_come_before_the_console_opens(cli):
    r = cli("tui", "--profile", "no-such-profile-here")
    assert r.code == 2 and "no profile named 'no-such-profile-here'" in r.err
    r = cli("tui", "--file", "a", "--dir", "b")
    assert r.code == 2 and "either --file or --dir" in r.err


def test_a_profile_made_for_an_mpi_job_is_refused_with_how_to_start_it(tmp_path):
    from test_replay import SMALL

    from xferscope.app.profile_io import open_profile
    from xferscope.errors import SpecError

    profile = tmp_path / "cluster.toml"
    profile.write_text("ranks = 2\n" + SMALL.format(duration=0.3))
    with pytest.raises(SpecError, match=r"ranks: profile .* needs 2 MPI ranks; start it with mpirun -np 2"):
        open_profile(str(profile))


async def test_gpu_panel_draws_a_sample_with_gpu_readings():
    """The panel as the live screen drives it: a run record whose last sample carries NVML readings."""
    from textual.app import App

    from xferscope.app.session import RunRecord
    from xferscope.app.widgets.gpu import GpuPanel
    from xferscope.engines.base import LatencySummary, Sample

    lat = LatencySummary(1, 2, 2, 3, 4, 5, 6)
    reading = {"index": 0, "name": "NVIDIA H200", "util_pct": 12.0, "pcie_rx_mb_s": 2500.0}
    sample = Sample(
        1.0,
        0.1,
        1 << 20,
        1,
        1 << 20,
        0,
        0.01,
        10.0,
        10.0,
        lat,
        5.0,
        5.0,
        1.0,
        1.0,
        (),
        1 << 20,
        1,
        (1 << 20,),
        0,
        gpu=(reading,),
    )
    record = RunRecord(1, RunSpec(path="bounce"))
    record.history.append(sample)

    class One(App):
        def compose(self):
            yield GpuPanel()

    async with One().run_test(size=(60, 12)) as pilot:
        panel = pilot.app.query_one(GpuPanel)
        panel.show(record)
        await pilot.pause()
        assert panel.display and "PCIe RX 2.50 GB/s" in str(panel.render())
        panel.show(RunRecord(2, RunSpec(path="host")))  # no readings, no GPU path: hidden
        assert not panel.display


def test_clearing_a_selection_before_any_screen_is_shown_is_harmless(tmp_path):
    """Textual's Input clears the selection when given its first value; where the setup screen is composed
    before it is on the stack (seen with Python 3.12 in a real terminal), that must not end the console."""
    from tui_helpers import make_app

    app = make_app(tmp_path)  # the form holds a typed path: its Input gets a value while composed
    assert app.top_screen() is None
    app.clear_selection()
