"""The console: setup, live view, comparison and memory sweeps over the engines, redrawn at a steady rate.

Runs execute in a thread worker (``session.Batch``); samples reach the console
through a bounded buffer per run that a timer drains four times a second, so
the engine never waits for the screen. State changes arrive as messages.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from textual.app import App, ScreenStackError
from textual.binding import Binding
from textual.css.query import NoMatches

from xferscope.app.commands import ConsoleCommands
from xferscope.app.grid_model import GridRun
from xferscope.app.messages import (
    BatchFinished,
    PrepareProgressed,
    ResultsLoaded,
    RoundAdded,
    RunFailedMessage,
    RunFinished,
    RunPreparing,
    RunStarted,
    RunStopped,
    SamplesArrived,
    SnapshotExported,
)
from xferscope.app.screens.compare import CompareScreen
from xferscope.app.screens.dialogs import ProfilePicker, TextPrompt
from xferscope.app.screens.grid import GridScreen
from xferscope.app.screens.help import HelpScreen
from xferscope.app.screens.live import LiveScreen
from xferscope.app.screens.memory import MemoryScreen
from xferscope.app.screens.saturation import SaturationScreen
from xferscope.app.screens.setup import SetupScreen
from xferscope.app.screens.too_small import MIN_HEIGHT, MIN_WIDTH, TooSmallScreen
from xferscope.app.screens.view import ViewScreen
from xferscope.app.screens.workload_run import WorkloadScreen
from xferscope.app.session import (
    SERIES_KEPT,
    Batch,
    ConsoleCpu,
    CpuLog,
    RunRecord,
    compact,
    comparison_records,
    new_records,
)
from xferscope.app.setup_model import FormValues
from xferscope.app.snapshot import export_dir, write_snapshot
from xferscope.compare.rounds import RoundsComparison
from xferscope.engines.base import RunResult
from xferscope.errors import NotWritten, XferscopeError
from xferscope.spec import RunSpec
from xferscope.workloads.registry import console_views

REDRAW_HZ = 4
#: the views of the workloads, as their packages declare them (``workloads.registry``)
WORKLOAD_VIEWS = console_views()


@dataclass
class Machine:
    """What the setup offers on this machine: GPUs, and which paths can run (with the reason when not)."""

    gpus: list[tuple[str, int]]
    no_gpu_reason: str
    availability: dict[str, str | None]
    descriptions: dict[str, str] = field(default_factory=dict)


@dataclass
class ConsoleOptions:
    values: FormValues
    machine: Machine
    start: bool = False
    profile_name: str | None = None
    profile_points: list[RunSpec] | None = None
    profile_repetitions: int = 1  # runs of each profile point
    mem_points: list | None = None  # a memory-sweep profile's MemSpecs: opens on the memory screen
    saturate_plan: object | None = None  # a saturate profile's SaturatePlan: opens on the saturation screen
    export_to: str | None = None  # directory for CSV snapshots (default: the current one)


class _PostEvents:
    """``BatchEvents`` for the console: each event becomes a message (thread-safe ``post_message``)."""

    def __init__(self, app: App):
        self.app = app

    def preparing(self, record):
        self.app.post_message(RunPreparing(record))

    def progress(self, record, done, total):
        self.app.post_message(PrepareProgressed(record, done, total))

    def started(self, record, labels):
        self.app.post_message(RunStarted(record, labels))

    def finished(self, record, result):
        self.app.post_message(RunFinished(record, result))

    def failed(self, record, reason, result, detail=None):
        self.app.post_message(RunFailedMessage(record, reason, result, tuple(detail or ())))

    def stopped(self, record):
        self.app.post_message(RunStopped(record))

    def done(self, records):
        self.app.post_message(BatchFinished(records))

    def round_added(self, records, why):
        self.app.post_message(RoundAdded(records, why))


class XferscopeApp(App):
    CSS_PATH = "xferscope.tcss"
    TITLE = "xferscope"
    COMMANDS = App.COMMANDS | {ConsoleCommands}
    MODES = {
        "setup": SetupScreen,
        "live": LiveScreen,
        "compare": CompareScreen,
        "grid": GridScreen,
        "memory": MemoryScreen,
        "saturation": SaturationScreen,
        **{view.name: partial(WorkloadScreen, view) for view in WORKLOAD_VIEWS},
    }
    DEFAULT_MODE = "setup"
    BINDINGS = [
        Binding("question_mark", "help", "Help", id="help"),
        Binding("s", "show('setup')", "Setup", id="show-setup"),
        Binding("l", "show('live')", "Live", id="show-live"),
        Binding("c", "show('compare')", "Compare", id="show-compare"),
        Binding("g", "show('grid')", "Grid", id="show-grid"),
        Binding("m", "show('memory')", "Memory", id="show-memory"),
        Binding("t", "show('saturation')", "Saturation", id="show-saturation"),
        *(Binding(v.key, f"show('{v.name}')", v.label, id=f"show-{v.name}") for v in WORKLOAD_VIEWS),
        Binding("e", "export", "Export CSV", id="export"),
        Binding("q", "quit", "Quit", id="quit"),
    ]

    def __init__(self, options: ConsoleOptions):
        super().__init__()
        self.options = options
        self.records: list[RunRecord] = []
        self.loaded: list[RunResult] = []
        self.batch: Batch | None = None
        self.last_specs: list[RunSpec] | None = None
        self.last_repetitions = 1
        self.grid: GridRun | None = None  # the last profile grid started (several points or repetitions)
        self.comparison: RoundsComparison | None = None  # the last comparison in rounds started (several paths)
        #: rounds of the last batch when it was a comparison: (planned, the most with auto or None)
        self.last_rounds: tuple[int, int | None] | None = None
        self.comparison_baseline = 0  # the path the comparison's ratios are against (b on the Compare view)
        self.current_record: RunRecord | None = None
        self.last_failure: RunRecord | None = None
        self.baseline = 0
        self.console_log: CpuLog | None = None  # the console process's own CPU time, read every tick
        self._console_cpu: ConsoleCpu | None = None
        self._cpu_read_at = 0.0
        self._dirty = True
        self._worker = None
        self.setup_screen: SetupScreen | None = None  # set by the screen when it mounts
        #: the screens that run work of their own (the saturation, the workloads), by name, each added as it mounts:
        #: whether it is ``busy``, what stopping it does (``leaving``), and ``stop_and_wait``
        self.working: dict[str, Any] = {}

    # ------------------------------------------------------------- life
    def on_mount(self) -> None:
        self._console_cpu = ConsoleCpu()
        self.console_log = CpuLog(self._console_cpu)
        self.console_log.take()
        self.set_interval(1 / REDRAW_HZ, self._tick, name="redraw")
        opts = self.options
        if opts.profile_points:
            self.call_after_refresh(self._load_initial_profile)
        if opts.mem_points:
            self.call_after_refresh(self._open_initial_sweep)
        elif opts.saturate_plan is not None:
            self.call_after_refresh(self._open_initial_plan)
        elif opts.start:
            self.call_after_refresh(self._start_from_setup)
        self.check_size()

    def _load_initial_profile(self) -> None:
        self.setup_screen.load_profile(
            self.options.profile_name or "profile", self.options.profile_points, self.options.profile_repetitions
        )

    async def _open_initial_plan(self) -> None:
        await self.open_saturation_plan(self.options.saturate_plan)
        if self.options.start:
            self.screen.action_start()

    async def _open_initial_sweep(self) -> None:
        await self.open_memory_sweep(self.options.mem_points)
        if self.options.start:
            self.screen.action_start()

    def _start_from_setup(self) -> None:
        self.setup_screen.action_start()

    def top_screen(self):
        """The screen on top, or None in the moment a mode switch has put none on its stack yet
        (a redraw tick or a resize can land there)."""
        try:
            return self.screen
        except ScreenStackError:
            return None

    def clear_selection(self) -> None:
        """Textual's Input clears the text selection when it is given a value, even while the screen
        being composed is not on the stack yet (seen with Python 3.12): nothing is selected then."""
        if self.top_screen() is not None:
            super().clear_selection()

    def check_size(self) -> None:
        """Cover the screen with a message while the terminal is too small; uncover it after."""
        w, h = self.size
        small = w < MIN_WIDTH or h < MIN_HEIGHT
        top = self.top_screen()
        if top is None:
            return
        shown = isinstance(top, TooSmallScreen)
        if small and not shown:
            self.push_screen(TooSmallScreen())
        elif not small and shown:
            self.pop_screen()

    async def action_quit(self) -> None:
        if self.batch is not None:
            self.batch.stop()
            self.notify("stopping the run and removing its scratch files…")
            if self._worker is not None:
                try:
                    await self._worker.wait()
                except Exception:
                    pass
        for screen in self.working.values():
            if screen.busy:
                import asyncio

                self.notify(screen.leaving)
                await asyncio.to_thread(screen.stop_and_wait)
        self.exit()

    def wait_for_runs(self, timeout: float = 30.0) -> None:
        """After the console closed: stop what runs and let it clean up (scratch files)."""
        if self.batch is not None:
            self.batch.stop()
            self.batch.wait(timeout)
        for screen in self.working.values():
            screen.stop_and_wait(timeout)

    # ------------------------------------------------------------ redraw
    def _tick(self) -> None:
        if self.console_log is not None:  # before the samples: every sample drained is inside the readings
            self.console_log.take()
        for record in self.records:
            if record.active:
                samples = record.take_samples()
                if samples:
                    self.post_message(SamplesArrived(record, tuple(samples)))
        now = time.monotonic()
        if now - self._cpu_read_at >= 1.0:
            self._cpu_read_at = now
            self._dirty = self._dirty or self.batch is not None
        if self._dirty:
            self._dirty = False
            self._redraw()

    def _redraw(self) -> None:
        screen = self.top_screen()
        if not (isinstance(screen, ViewScreen) and screen.ready and screen.is_attached):
            return
        try:
            screen.refresh_view()
        except NoMatches:
            if screen.is_attached and screen.is_running:
                raise
            # the screen was taken down (the app closing mid-run) between the check and the draw

    def _changed(self) -> None:
        self._dirty = True

    # ------------------------------------------------------------ runs
    def start_batch(self, specs: list[RunSpec], repetitions: int = 1) -> None:
        """Run ``specs`` one after another, each ``repetitions`` times; several points or repetitions
        (a profile's grid) are also drawn on the grid view as they finish."""
        if self.batch is not None:
            self.notify("a run is in progress: stop it (x) first", severity="warning")
            return
        records = new_records(specs, repetitions)
        if GridRun.is_grid(specs, repetitions):
            self.grid = GridRun(records)
        self.last_rounds = None
        self._start(specs, records, repetitions)

    def start_comparison(self, specs: list[RunSpec], rounds: int, max_rounds: int | None = None) -> None:
        """Compare ``specs`` (the same but for the path; the first is the baseline) in ``rounds`` rounds with
        the order rotated, over one dataset prepared once; the Compare view shows the rounds as they finish.
        With ``max_rounds`` (auto), a round is added while a path is undecided, up to that many."""
        if self.batch is not None:
            self.notify("a run is in progress: stop it (x) first", severity="warning")
            return
        self.comparison = RoundsComparison(specs, rounds, max_rounds)
        self.comparison_baseline = 0
        records = comparison_records(self.comparison)
        self.last_rounds = (rounds, max_rounds)
        self._start(specs, records, 1, self.comparison)

    def _start(
        self,
        specs: list[RunSpec],
        records: list[RunRecord],
        repetitions: int,
        comparison: RoundsComparison | None = None,
    ) -> None:
        self.records.extend(records)
        self.last_specs = list(specs)
        self.last_repetitions = repetitions
        self.last_failure = None
        self.current_record = records[0]
        self.batch = Batch(records, _PostEvents(self), comparison)
        self._worker = self.run_worker(
            self.batch.run, thread=True, exclusive=True, group="runs", exit_on_error=False, name="runs"
        )
        self._changed()
        self.switch_mode("live")

    def stop_batch(self) -> None:
        if self.batch is None:
            self.notify("nothing is running", severity="information")
            return
        self.batch.stop()
        self.notify("stopping: what was measured is kept")

    def restart_batch(self) -> None:
        if self.last_specs is None:
            self.notify("nothing to restart yet: start from the setup (s, then r)", severity="warning")
            return
        if self.last_rounds is not None:
            self.start_comparison(self.last_specs, *self.last_rounds)
        else:
            self.start_batch(self.last_specs, self.last_repetitions)

    def on_run_preparing(self, message: RunPreparing) -> None:
        message.record.state = "preparing"
        self.current_record = message.record
        self._changed()

    def on_prepare_progressed(self, message: PrepareProgressed) -> None:
        message.record.prepared_bytes = (message.done, message.total)
        self._changed()

    def on_run_started(self, message: RunStarted) -> None:
        record = message.record
        record.state = "running"
        record.labels = list(message.labels)
        if self._console_cpu is not None:
            record.mark_console(self._console_cpu.times())
        self._changed()

    def on_samples_arrived(self, message: SamplesArrived) -> None:
        self._changed()

    def _ended(self, record: RunRecord, result: RunResult | None, state: str) -> None:
        samples = record.take_samples()
        if samples:
            self.post_message(SamplesArrived(record, tuple(samples)))
        record.result = result
        record.state = state
        if record.planned is not None:
            record.planned.result = result
        if self._console_cpu is not None:
            record.settle_console(self._console_cpu.times())
        compact(self.records)
        self._changed()

    def on_run_finished(self, message: RunFinished) -> None:
        interrupted = message.result.status == "interrupted"
        self._ended(message.record, message.result, "stopped" if interrupted else "finished")

    def on_run_failed_message(self, message: RunFailedMessage) -> None:
        record = message.record
        record.error = message.reason
        record.error_detail = list(message.detail)
        self.last_failure = record
        self._ended(record, message.result, "failed")
        self.notify(message.reason, title=f"{record.spec.name} failed", severity="error", timeout=10)

    def on_run_stopped(self, message: RunStopped) -> None:
        message.record.state = "stopped" if message.record is self.current_record else "skipped"
        self._changed()

    def on_round_added(self, message: RoundAdded) -> None:
        self.records.extend(message.records)
        self.notify(message.why, title="comparison")
        self._changed()

    def on_batch_finished(self, message: BatchFinished) -> None:
        self.batch = None
        self._changed()
        measured = [r for r in message.records if r.result is not None]
        if len(measured) > 1 and self.current_mode == "live":
            grid = self.grid is not None and self.grid.records is message.records
            self.switch_mode("grid" if grid else "compare")

    # ------------------------------------------------------ comparison
    def compared_results(self) -> list[RunResult]:
        return [r.result for r in self.records if r.result is not None] + list(self.loaded)

    def console_cost_note(self) -> str:
        timed = [r for r in self.records if r.result is not None]
        cpu = sum(r.console_cpu_s for r in timed)
        secs = sum(r.result.seconds for r in timed)
        kept = (
            f" Time series of the newest {SERIES_KEPT} runs are kept; older runs keep their summaries."
            if any(r.compacted for r in self.records)
            else ""
        )
        if not timed or secs <= 0:
            return (
                "CPU % is the engine process's (percent of one core); the console runs in a process of its own." + kept
            )
        return (
            f"CPU % is the engine process's; the console runs in a process of its own: it used {cpu:.2f} "
            f"CPU-s over {secs:.1f} s of runs ({100 * cpu / secs:.1f}% of one core)." + kept
        )

    # ------------------------------------------------------------ actions
    def action_show(self, mode: str) -> None:
        if mode in self.MODES:
            self.switch_mode(mode)

    def action_help(self) -> None:
        if isinstance(self.screen, HelpScreen):
            return
        keys = []
        for active in self.screen.active_bindings.values():
            b = active.binding
            if b.description and b.show is not False:
                keys.append((self.get_key_display(b), b.description))
        keys.append(("ctrl+p", "Command palette: every action by name"))
        self.push_screen(HelpScreen(keys))

    def action_export(self) -> None:
        try:
            directory = export_dir(self.options.export_to)
            if isinstance(self.screen, MemoryScreen):
                paths = [self.screen.export_csv(directory)]
            else:
                paths = write_snapshot(directory, self.records, self.loaded)
        except NotWritten as exc:  # a full disk, no permission: say which file and why; the session goes on
            self.notify(str(exc), title="CSV snapshot not written", severity="error", timeout=15)
            return
        except XferscopeError as exc:
            self.notify(str(exc), severity="warning")
            return
        self.notify("\n".join(paths), title="CSV snapshot written", timeout=10)
        self.post_message(SnapshotExported(paths))

    def action_stop(self) -> None:
        self.stop_batch()

    def action_restart(self) -> None:
        self.restart_batch()

    def action_start(self) -> None:
        self.setup_screen.action_start()

    def action_pause(self) -> None:
        if isinstance(self.screen, LiveScreen):
            self.screen.action_pause()
        else:
            self.notify("pausing applies to the live view: press l, then space")

    # ------------------------------------------------------------ profiles
    def ask_save_profile(self, specs: list[RunSpec]) -> None:
        saved: list[str] = []

        def save(name: str) -> str | None:
            try:
                from xferscope.app.profile_io import save_setup

                saved.append(save_setup(specs, name))
            except XferscopeError as exc:
                return str(exc)
            return None

        def done(name: str | None) -> None:
            if name and saved:
                self.notify(saved[-1], title=f"profile {name} saved")

        self.push_screen(TextPrompt("Save this setup as a profile: name", "letters, digits, . _ -", check=save), done)

    def action_save_profile(self) -> None:
        self.switch_mode("setup")
        self.setup_screen.action_save_profile()

    def ask_open_profile(self) -> None:
        from xferscope.app.profile_io import available_profiles, open_profile

        opened: list = []

        def check(name: str) -> str | None:
            if not name:
                return "pick a profile, or type the path of a .toml file"
            try:
                opened.append(open_profile(name))
            except XferscopeError as exc:
                return str(exc)
            return None

        def done(name: str | None) -> None:
            if name and opened:
                self.show_profile(*opened[-1])

        self.push_screen(ProfilePicker(available_profiles(), check), done)

    def show_profile(self, name: str, kind: str, points: list, repetitions: int = 1) -> None:
        if kind == "mem":
            self.call_next(self.open_memory_sweep, points)
            return
        if kind == "saturate":
            self.call_next(self.open_saturation_plan, points[0])
            return
        self.switch_mode("setup")
        self.setup_screen.load_profile(name, points, repetitions)

    async def open_saturation_plan(self, plan) -> None:
        await self.switch_mode("saturation")
        self.screen.load_plan(plan)

    async def open_memory_sweep(self, specs: list) -> None:
        await self.switch_mode("memory")
        self.screen.load(specs)

    def action_open_profile(self) -> None:
        self.ask_open_profile()

    def ask_open_results(self) -> None:
        from xferscope.app.mem_model import load_mem_file
        from xferscope.export import load_results

        loaded: list[RunResult] = []
        memory: list = []  # MemResults: memory sweeps and MLC output open in the memory view

        def check(path: str) -> str | None:
            loaded.clear()
            memory.clear()
            try:
                loaded.extend(load_results(path))
            except XferscopeError as exc:
                try:
                    memory.extend(load_mem_file(path))
                except XferscopeError as mem_exc:
                    return str(exc if path.endswith(".json") else mem_exc)
            except OSError as exc:
                return f"{path}: {exc.strerror or exc}"
            return None

        def done(path: str | None) -> None:
            if path and memory:
                self.call_next(self._open_memory_results, path, list(memory))
            elif path and loaded:
                self.loaded.extend(loaded)
                self.post_message(ResultsLoaded(path, list(loaded)))
                self.switch_mode("compare")
                self._changed()

        self.push_screen(
            TextPrompt(
                "Open saved results (JSON from run, compare, replay, mem or import; mlc output)",
                "path of a .json or mlc text file",
                check=check,
            ),
            done,
        )

    async def _open_memory_results(self, path: str, results: list) -> None:
        await self.switch_mode("memory")
        self.screen.add_results(results, path)

    def action_open_results(self) -> None:
        self.ask_open_results()
