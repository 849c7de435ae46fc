"""A comparison in rounds: each round runs every path once, the order rotated from round to round, and each
path's figure is set against the baseline's figure of the same round (``xferscope.compare.verdict``).

``RoundsComparison`` is the plan (which path runs when) and what was measured; the CLI (``commands/compare.py``),
``compare --mpi`` and the console fill it run by run and show it.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from xferscope import records
from xferscope.compare.verdict import (
    MARGIN,
    MAX_ROUNDS,
    START_ROUNDS,
    Verdict,
    drift,
    paired_verdict,
    resolution_hint,
    rule_text,
)
from xferscope.engines.base import RunResult
from xferscope.engines.host import SMALL_PAGE_BUFFERS
from xferscope.errors import SpecError
from xferscope.export import Cell
from xferscope.spec import RunSpec

#: the share of the files' pages that may stay cached after an eviction (pages another process holds mapped)
EVICTED_ENOUGH = 0.01

DEFAULT_ROUNDS = 3
#: the most rounds --max-rounds may ask for
MOST_ROUNDS = 50

#: the figures of a path shown as a median with its range: (key, how to read it from a result)
FIGURES: dict[str, Callable[[RunResult], float | None]] = {
    "throughput_mib_s": lambda r: r.throughput_mib_s,
    "iops": lambda r: r.iops,
    "lat_mean_us": lambda r: r.latency_us.mean,
    "lat_p99_us": lambda r: r.latency_us.p99,
    "cpu_usr_pct": lambda r: r.cpu.get("usr_pct"),
    "cpu_sys_pct": lambda r: r.cpu.get("sys_pct"),
    "cpu_s_per_gib": lambda r: r.cpu_seconds_per_gib,
}


def rounds_plan(rounds: str, max_rounds: int | None = None) -> tuple[int, int | None]:
    """(rounds to plan now, the most rounds or None for a fixed plan) from --rounds and --max-rounds."""
    text = rounds.strip().lower()
    if text == "auto":
        most = MAX_ROUNDS if max_rounds is None else max_rounds
        if not START_ROUNDS <= most <= MOST_ROUNDS:
            raise SpecError(
                "max-rounds",
                f"from {START_ROUNDS} (auto starts with {START_ROUNDS} rounds) to {MOST_ROUNDS}, got {most}",
            )
        return START_ROUNDS, most
    if not text.isdigit() or int(text) < 1:
        raise SpecError("rounds", f"auto or a whole number of at least 1, got {rounds!r}")
    fixed = int(text)
    if max_rounds is not None and fixed < max_rounds:
        raise SpecError(
            "max-rounds",
            f"goes with --rounds auto; --rounds {fixed} is a fixed plan (leave out --max-rounds, or use --rounds auto)",
        )
    return fixed, None


def round_orders(paths: int, rounds: int) -> list[list[int]]:
    """The order of the paths in each round: rotated by one each round, so no path goes first (or last)
    twice in a row when there are two paths or more."""
    return [[(r + i) % paths for i in range(paths)] for r in range(rounds)]


def path_labels(paths: Sequence[str]) -> list[str]:
    """Names that tell the paths apart: a path given twice (an A/A comparison) is ``host#1`` and ``host#2``."""
    counts = {p: paths.count(p) for p in paths}
    seen: dict[str, int] = {}
    out = []
    for p in paths:
        seen[p] = seen.get(p, 0) + 1
        out.append(f"{p}#{seen[p]}" if counts[p] > 1 else p)
    return out


@dataclass
class PlannedRun:
    """One run of the plan: which round, which place in it, which path (``slot``), and what it measured."""

    round: int  # 0-based
    position: int  # 0-based place in its round
    slot: int  # index of the path in the comparison (0 is the baseline)
    spec: RunSpec
    result: RunResult | None = None
    files: list[tuple[int, int]] = field(default_factory=list)  # (st_dev, st_ino) of the files it read

    @property
    def ok(self) -> bool:
        return self.result is not None and self.result.status == "ok" and self.result.throughput_mib_s > 0


def _finite(v: float | None) -> float | None:
    """A figure that counts in a round (None for a missing, NaN or infinite one)."""
    return None if v is None or (isinstance(v, float) and not math.isfinite(v)) else float(v)


class RoundsComparison:
    """The runs of a comparison in the order they run, and what they measured."""

    def __init__(
        self,
        specs: Sequence[RunSpec],
        rounds: int = DEFAULT_ROUNDS,
        max_rounds: int | None = None,
        margin: float = MARGIN,
    ):
        """``rounds`` planned now; with ``max_rounds`` (``--rounds auto``), one more is added after each whole
        round while any path's verdict is undecided, up to ``max_rounds``. ``margin``: the verdict rule's m."""
        if rounds < 1:
            raise ValueError("rounds must be 1 or more")
        self.margin = margin
        self.labels = path_labels([s.path for s in specs])
        self.specs = [s.replace(label=label) if label != s.path else s for s, label in zip(specs, self.labels)]
        self.rounds = rounds
        self.max_rounds = max_rounds
        #: why each round beyond the first plan was added, in order
        self.added: list[str] = []
        self.runs = [
            PlannedRun(r, pos, slot, self.specs[slot])
            for r, order in enumerate(round_orders(len(self.specs), rounds))
            for pos, slot in enumerate(order)
        ]
        #: how the page cache was handled: None (not yet said), True dropped before every run, or the reason not
        self.cache_note: str | None = None
        self.cache_dropped: bool | None = None

    # ------------------------------------------------------------ progress
    @property
    def paths(self) -> int:
        return len(self.specs)

    def done(self) -> list[PlannedRun]:
        return [r for r in self.runs if r.result is not None]

    def rounds_done(self) -> int:
        """Rounds whose every run has a result."""
        return sum(1 for r in range(self.rounds) if all(run.result is not None for run in self.runs if run.round == r))

    @property
    def from_cache(self) -> bool:
        """The paths read a file held in the page cache (--source cache): it stays there between runs."""
        return any(spec.source == "cache" for spec in self.specs)

    def before_run(self, drop: bool, files: Sequence[str] = (), why_not: str = "--no-drop-cache") -> str | None:
        """Ready the page cache for the next run: the compared ``files`` written back and their pages evicted
        (posix_fadvise; no root needed, and nothing else in the host's cache is touched), where that is wanted;
        kept for --source cache. Returns a warning to show once (the first time pages stay), else None."""
        from xferscope.engines import page_cache

        if self.from_cache:
            self.cache_dropped = False
            self.cache_note = "page cache kept (--source cache: the file is read from memory in every round)"
            return None
        if not drop:
            self.note_cache(False, why_not)
            return None
        stayed = page_cache.evict_files(list(files))
        if stayed is not None and stayed <= EVICTED_ENOUGH:
            self.note_cache(True)
            return None
        why = "its filesystem cannot tell" if stayed is None else f"{stayed:.0%} of the files' pages stayed"
        first = self.cache_dropped is None
        self.note_cache(False, why)
        return f"cannot evict the compared files from the page cache ({why}); the result will say so" if first else None

    def note_cache(self, dropped: bool, why_not: str = "") -> None:
        """Record whether the files' pages were evicted before a run; once not, the comparison says so."""
        if dropped and self.cache_dropped is None:
            self.cache_dropped, self.cache_note = True, "the files' pages evicted from the page cache before every run"
        elif not dropped and self.cache_dropped is not False:
            self.cache_dropped, self.cache_note = False, f"page cache not emptied ({why_not})"

    @property
    def auto(self) -> bool:
        """Rounds are added while a verdict is undecided (``--rounds auto``)."""
        return self.max_rounds is not None

    def add_round_if_undecided(self) -> str | None:
        """With ``--rounds auto``, once every planned round is done: plan one more while any path's verdict is
        undecided and ``max_rounds`` allows, and return why (a line for the progress and the console)."""
        if self.max_rounds is None or self.rounds >= self.max_rounds or self.rounds_done() < self.rounds:
            return None
        verdicts = [(label, self.verdict(slot)) for slot, label in enumerate(self.labels)]
        undecided = [(label, v) for label, v in verdicts if v is not None and not v.settled]
        if not undecided:
            return None
        why = f"round {self.rounds + 1} of at most {self.max_rounds} added: " + ", ".join(
            f"{label} undecided at {v.spread()}" for label, v in undecided
        )
        self.add_round(why)
        return why

    def add_round(self, why: str) -> None:
        """Plan one more round (its order rotated on from the last), noting why."""
        r = self.rounds
        order = round_orders(self.paths, r + 1)[r]
        self.runs += [PlannedRun(r, pos, slot, self.specs[slot]) for pos, slot in enumerate(order)]
        self.rounds += 1
        self.added.append(why)

    # ------------------------------------------------------------ figures
    def figures(self, slot: int, key: str = "throughput_mib_s") -> list[float | None]:
        """The figure of ``slot`` in each round (None where that round's run failed or has not run)."""
        get = FIGURES[key]
        out: list[float | None] = [None] * self.rounds
        for run in self.runs:
            if run.slot == slot and run.ok:
                out[run.round] = _finite(get(run.result))
        return out

    def spread(self, slot: int, key: str = "throughput_mib_s") -> dict[str, float | int | None]:
        """Median, min and max over the rounds measured, and how many."""
        values = [v for v in self.figures(slot, key) if v is not None]
        if not values:
            return {"median": None, "min": None, "max": None, "n": 0}
        return {"median": statistics.median(values), "min": min(values), "max": max(values), "n": len(values)}

    def verdict(self, slot: int, baseline: int = 0) -> Verdict | None:
        """``slot`` against ``baseline`` over the rounds where both were measured; None for the baseline
        itself or when no round has both."""
        if slot == baseline:
            return None
        base, other = self.figures(baseline), self.figures(slot)
        pairs = [(b, o) for b, o in zip(base, other) if b and o]
        if not pairs:
            return None
        return paired_verdict([b for b, _ in pairs], [o for _, o in pairs], self.margin)

    def drift(self, baseline: int = 0) -> str | None:
        values = [v for v in self.figures(baseline) if v]
        return drift(values) if len(values) >= 2 else None

    def notes(self, baseline: int = 0) -> list[str]:
        """The lines printed under the table: the rule, then drift and the page cache where they apply."""
        lines = [rule_text(self.margin)]
        for slot, label in enumerate(self.labels):
            v = self.verdict(slot, baseline)
            hint = resolution_hint(label, v) if v else None
            if hint:
                lines.append(hint)
        d = self.drift(baseline)
        if d:
            lines.append(d)
        lines += self.pinned_notes()
        small = {
            run.slot
            for run in self.runs
            if run.result is not None and run.result.environment.get("host_buffers_huge") is False
        }
        if small:
            lines.append(
                f"{', '.join(self.labels[slot] for slot in sorted(small))}: buffers on {SMALL_PAGE_BUFFERS}; on a "
                "virtual machine a run's speed depends on the pages it gets, which widens every round's spread "
                "(2 MiB pages: --huge-pages; xferscope doctor)"
            )
        if self.cache_dropped is False and not self.from_cache:
            lines.append(f"{self.cache_note}: figures may come from the host's cache")
        elif self.from_cache:
            lines.append(f"{self.cache_note}: storage drops out, and each path shows its own ceiling")
        return lines

    def pinned_notes(self) -> list[str]:
        """Where a bounce path trails host (their paired rounds' median ratio between 0.85 and 0.995): how much of
        it is what a read into pinned memory costs on the files' filesystem, as doctor last measured it in this
        boot (``engines.pinned_cost``); without that measurement, where to get it."""
        from xferscope.engines.pinned_cost import recalled

        host = next((slot for slot, spec in enumerate(self.specs) if spec.path == "host"), None)
        if host is None:
            return []
        lines = []
        for slot, spec in enumerate(self.specs):
            pairs = [(h, b) for h, b in zip(self.figures(host), self.figures(slot)) if h and b]
            if spec.path not in ("bounce", "bounce-async") or not pairs:
                continue
            gap = 1 - statistics.median(b / h for h, b in pairs)
            if not 0.005 < gap <= 0.15:
                continue
            device = next((run.files[0][0] for run in self.runs if run.slot == slot and run.files), None)
            cost = recalled(device) if device is not None else None
            said = f"{self.labels[slot]} trails host by {gap:.1%} (the median of its paired rounds)"
            if cost is None:
                lines.append(f"{said}: part of it may be what a read into pinned memory costs here (xferscope doctor)")
                continue
            rest = gap - cost.registered
            lines.append(
                f"{said}; a read into pinned memory (its buffers' memory) cost {cost.registered:.1%} more than into "
                f"host's on this filesystem when doctor measured it ({cost.measured}): "
                + (
                    "the gap is the memory's, not the path's"
                    if rest <= 0.01
                    else f"the rest, {rest:.1%}, is the path's own"
                )
            )
        return lines

    # ------------------------------------------------------------- output
    def to_record(self, result_index: Callable[[RunResult], int | None] | None = None) -> records.ComparisonSummary:
        """What ``compare --json`` writes beside the runs' results: the plan, each path's figures per round
        with median and range, the paired ratio and verdict, the rule, drift and the page cache."""
        return records.ComparisonSummary(
            rounds=self.rounds,
            rounds_done=self.rounds_done(),
            rounds_mode="auto" if self.auto else "fixed",
            max_rounds=self.max_rounds,
            rounds_added=list(self.added),
            baseline=self.labels[0],
            order=[[self.labels[s] for s in order] for order in round_orders(self.paths, self.rounds)],
            rule=rule_text(self.margin),
            margin=self.margin,
            drift=self.drift(),
            page_cache=self.cache_note,
            page_cache_dropped=self.cache_dropped,
            notes=self.notes(),
            paths=[self._path_record(slot) for slot in range(len(self.labels))],
            runs=[self._run_record(run, result_index) for run in self.runs],
        )

    def _path_record(self, slot: int) -> records.ComparedPath:
        figures = {key: records.Spread(**self.spread(slot, key)) for key in FIGURES}
        entry = records.ComparedPath(
            label=self.labels[slot], path=self.specs[slot].path, rounds=self.figures(slot), **figures
        )
        v = self.verdict(slot)
        if slot == 0:
            entry.baseline = True
        elif v is not None:
            entry.verdict, entry.verdict_text, entry.ratio = v.word, v.text, v.ratio
            entry.interval_low, entry.interval_high, entry.interval_coverage = v.low, v.high, v.coverage
            entry.ratio_min, entry.ratio_max, entry.paired_rounds = v.range_low, v.range_high, v.rounds
        return entry

    def _run_record(self, run: PlannedRun, result_index: Callable[[RunResult], int | None] | None) -> records.RoundRun:
        return records.RoundRun(
            round=run.round + 1,
            position=run.position + 1,
            label=self.labels[run.slot],
            status=run.result.status if run.result else "not run",
            throughput_mib_s=run.result.throughput_mib_s if run.result else None,
            files=[list(f) for f in run.files],
            result=result_index(run.result) if result_index is not None and run.result is not None else None,
        )


def ratio_in_round(comp: RoundsComparison, run: PlannedRun, baseline: int = 0) -> float | None:
    """The run's throughput over the baseline's in the same round (1.0 for the baseline itself)."""
    if not run.ok:
        return None
    base = comp.figures(baseline)[run.round]
    mine = _finite(run.result.throughput_mib_s)
    return mine / base if base and mine is not None else None


ROUNDS_CSV_COLUMNS = ["round", "position", "compared_as", "ratio_to_baseline", "verdict"]


def csv_rows(comp: RoundsComparison) -> list[dict[str, Cell]]:
    """One row per run that has a result, in the order they ran: where it ran (round, place), its paired
    ratio to the baseline in that round, its path's verdict, then the columns of ``export.SUMMARY_COLUMNS``."""
    from xferscope.export import summary_row

    rows = []
    for run in comp.runs:
        if run.result is None:
            continue
        v = comp.verdict(run.slot)
        rows.append(
            {
                "round": run.round + 1,
                "position": run.position + 1,
                "compared_as": comp.labels[run.slot],
                "ratio_to_baseline": ratio_in_round(comp, run),
                "verdict": "baseline" if run.slot == 0 else (v.word if v else ""),
                **summary_row(run.result),
            }
        )
    return rows
