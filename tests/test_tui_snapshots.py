"""The console's main screens, drawn at 80x24 and 120x40, against pictures kept in tests/snapshots.

Each screen shows recorded results (gdsio's and mlc's own output in tests/data and test_mlc_parser.py, and a run of
the host engine recorded with its samples in tests/data/host-read-run.json), so every figure on it comes from a file
and the pictures hold still; the console's own CPU figure, which is this test's process, is left out. The machine the setup offers is written out here, so
that no host's GPUs, mounts or paths show; nothing is run and no clock is read.

Two pictures per screen and size: ``.txt``, the characters the terminal shows (compared everywhere), and ``.svg``,
Textual's own screenshot with colours and styles (compared where the Textual and Rich that drew it are installed:
another version draws the same layout in other SVG). After a deliberate change of a screen, draw them again with

    python -m pytest tests/test_tui_snapshots.py --update-snapshots

and look at the new ``.svg`` files (a browser shows them) before committing them.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import time
from importlib.metadata import version
from pathlib import Path

import pytest
from test_mlc_parser import FULL_RUN
from tui_helpers import screen_text

from xferscope.app.app import ConsoleOptions, Machine, XferscopeApp
from xferscope.app.grid_model import GridRun
from xferscope.app.messages import ResultsLoaded
from xferscope.app.session import RunRecord
from xferscope.app.setup_model import FormValues
from xferscope.engines.base import LatencySummary, Sample
from xferscope.export import result_from_record
from xferscope.importers import gdsio
from xferscope.memory.mlc_text import parse_mlc_output
from xferscope.records import as_run

SNAPSHOTS = Path(__file__).parent / "snapshots"
DATA = Path(__file__).parent / "data"
SIZES = [(80, 24), (120, 40)]
DRAWN_BY = SNAPSHOTS / "DRAWN_BY"
NO_GPU = "no NVIDIA GPU"
MACHINE = Machine(
    gpus=[],
    no_gpu_reason="no NVIDIA driver loaded",
    availability={
        "host": None,
        "bounce": NO_GPU,
        "bounce-async": NO_GPU,
        "cufile": NO_GPU,
        "cufile-batch": NO_GPU,
        "cufile-async": NO_GPU,
        "kvikio": "kvikio needs kvikio-cu13, which is not installed: pip install kvikio-cu13",
    },
)


def _drawn_by() -> str:
    return f"textual {version('textual')}, rich {version('rich')}\n"


def _app() -> XferscopeApp:
    form = FormValues(paths=["host"], duration="10", size="1G", bs="1M", workers="1", typed_path="/data/bench")
    return XferscopeApp(ConsoleOptions(form, MACHINE))


def _gdsio_results(*wanted: tuple[str, str]):
    """The first gdsio line of each (IoType, XferType) asked for, imported."""
    lines = (DATA / "gdsio-nvme-paths.txt").read_text().splitlines()
    picked = []
    for io, xfer in wanted:
        picked.append(next(line for line in lines if f"IoType: {io} " in line and f"XferType: {xfer} " in line))
    return gdsio.parse_text("\n".join(picked), "gdsio-nvme-paths.txt")


def _record(run_id: int, result, **fields) -> RunRecord:
    return RunRecord(
        run_id=run_id, spec=result.spec, state="finished", result=result, labels=list(result.labels), **fields
    )


async def _setup(app, pilot) -> None:
    await pilot.pause()


def _recorded_run():
    """A run of the host engine as it was recorded (tests/data/host-read-run.json): its summary and its samples."""
    saved = json.loads((DATA / "host-read-run.json").read_text())
    samples = [
        Sample(
            **{
                **s,
                "latency_us": LatencySummary(**s["latency_us"]),
                "per_core_pct": tuple(s["per_core_pct"]),
                "worker_bytes": tuple(s["worker_bytes"]),
                "gpu": tuple(s["gpu"]),
            }
        )
        for s in saved["samples"]
    ]
    return dataclasses.replace(result_from_record(as_run(saved["result"], "<json>")), samples=samples)


async def _live(app, pilot) -> None:
    result = _recorded_run()
    record = _record(1, result)
    record.history.extend(result.samples)
    app.records.append(record)
    app.current_record = record
    # the console's own CPU figure is this test process's, read as it runs: not shown here
    app.console_log = None
    await app.switch_mode("live")


async def _compare(app, pilot) -> None:
    results = _gdsio_results(("READ", "CPUONLY"), ("READ", "CPU_GPU"), ("READ", "GPUD"))
    app.loaded.extend(results)
    app.post_message(ResultsLoaded("gdsio-nvme-paths.txt", list(results)))
    await app.switch_mode("compare")


async def _grid(app, pilot) -> None:
    lines = [line for line in (DATA / "gdsio-nvme-paths.txt").read_text().splitlines() if "IoType:" in line]
    results = gdsio.parse_text("\n".join(lines), "gdsio-nvme-paths.txt")
    keys: dict[tuple, int] = {}
    records = []
    for i, result in enumerate(results):
        key = (result.spec.path, result.spec.io)
        point = keys.setdefault(key, len(keys))
        repetition = sum(1 for r in records if r.point == point)
        records.append(
            _record(
                i + 1, result, point=point, repetition=repetition, repetitions=2, batch_index=i, batch_size=len(results)
            )
        )
    app.records.extend(records)
    app.grid = GridRun(records)
    await app.switch_mode("grid")


async def _memory(app, pilot) -> None:
    result = parse_mlc_output(FULL_RUN, "mlc.txt")
    await app._open_memory_results("mlc.txt", [result])


async def _workload(app, pilot) -> None:
    from xferscope.workloads.common.au import Step
    from xferscope.workloads.train.train_record import TrainResult
    from xferscope.workloads.train.train_spec import train_spec

    spec = train_spec("cosmoflow", accelerators=3, files=400, duration=10.0, path="bounce-async", compute="gpu")
    runs = []
    for i, wait in enumerate((0.0002, 0.001, 0.004)):
        steps = [Step(0.01, 0.0035, 0.0135 + (0.0035 + wait) * k, 1, 2_828_486) for k in range(200)]
        runs.append((i, 0, steps, 200 * 2_828_486))
    data = {"where": "/data/train", "files": 400, "samples": 400, "bytes": 1_131_394_400, "generated": True}
    result = TrainResult.from_steps(
        spec, data, runs, status="ok", seconds=1.6, cpu_seconds=0.2, labels=["O_DIRECT", "batches land in GPU memory"]
    )
    host = TrainResult.from_steps(
        dataclasses.replace(spec, path="host", compute="sleep"), data, runs[:1], status="ok", seconds=1.6
    )
    await app.switch_mode("workload")
    screen = app.screen
    screen.session_results = [host, result]
    screen.state.start(spec)
    screen.state.finish(result)
    screen.status = "finished"
    screen.redraw()


SCREENS = {
    "setup": _setup,
    "live": _live,
    "compare": _compare,
    "grid": _grid,
    "memory": _memory,
    "workload": _workload,
}
CASES = [(name, size) for name in SCREENS for size in SIZES] + [("too-small", (60, 16))]


async def _settled(pilot, timeout: float = 30.0) -> str:
    """The screen's text once three redraw ticks in a row leave it as it was (the console redraws on a timer;
    on a busy machine the first ticks come late)."""
    deadline = time.monotonic() + timeout
    text, same = screen_text(pilot.app), 0
    while same < 3:
        if time.monotonic() > deadline:
            raise AssertionError("the screen never held still; it shows:\n" + text)
        await pilot.pause(0.15)
        now = screen_text(pilot.app)
        same = same + 1 if now == text else 0
        text = now
    return text


@pytest.fixture(scope="module")
def update(request) -> bool:
    return bool(request.config.getoption("--update-snapshots"))


def _check(name: str, text: str, svg: str, update: bool) -> None:
    txt_path, svg_path = SNAPSHOTS / f"{name}.txt", SNAPSHOTS / f"{name}.svg"
    if update:
        SNAPSHOTS.mkdir(exist_ok=True)
        txt_path.write_text(text)
        svg_path.write_text(svg)
        DRAWN_BY.write_text(_drawn_by())
        return
    if not txt_path.exists():
        pytest.fail(f"no snapshot {txt_path.name}: draw it with --update-snapshots and look at it")
    kept = txt_path.read_text()
    if text != kept:
        diff = "\n".join(difflib.unified_diff(kept.splitlines(), text.splitlines(), "kept", "now", lineterm=""))
        pytest.fail(f"{name}: the screen changed (--update-snapshots draws it again):\n{diff}")
    if DRAWN_BY.exists() and DRAWN_BY.read_text() == _drawn_by():
        assert svg == svg_path.read_text(), f"{name}: same characters, other colours or styles than {svg_path.name}"


@pytest.mark.parametrize(("screen", "size"), CASES, ids=[f"{n}-{w}x{h}" for n, (w, h) in CASES])
async def test_the_screen_looks_as_kept(screen, size, update):
    app = _app()
    async with app.run_test(size=size) as pilot:
        if screen in SCREENS:
            await SCREENS[screen](app, pilot)
        text = await _settled(pilot)
        svg = app.export_screenshot(title="xferscope")
    _check(f"{screen}-{size[0]}x{size[1]}", text, svg, update)


def test_a_changed_screen_fails_with_what_changed(tmp_path, monkeypatch):
    monkeypatch.setattr(__import__(__name__), "SNAPSHOTS", tmp_path)
    (tmp_path / "s.txt").write_text(" xferscope · setup\n Workers 1\n")
    (tmp_path / "s.svg").write_text("<svg/>")
    _check("s", " xferscope · setup\n Workers 1\n", "<svg/>", update=False)
    with pytest.raises(pytest.fail.Exception, match=r"(?s)the screen changed.*-  ?Workers 1.*\+  ?Workers 2"):
        _check("s", " xferscope · setup\n Workers 2\n", "<svg/>", update=False)
