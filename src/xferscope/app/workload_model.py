"""What the Workload view holds and draws: its form, the spec it makes, and a training run's ticks and result as
they arrive (a bar per accelerator). No Textual here."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from rich.text import Text

from xferscope.workloads.common.options import from_text
from xferscope.workloads.train.accelerators import TrainTick
from xferscope.workloads.train.options import AcceleratorOptions, TrainShapeOptions
from xferscope.workloads.train.train_record import TrainResult
from xferscope.workloads.train.train_spec import TrainSpec, train_spec

#: SpecError field -> the form control that explains it
FIELD_CONTROL = {
    "preset": "wl-preset",
    "path": "wl-path",
    "compute": "wl-compute",
    "accelerators": "wl-accelerators",
    "accelerator-type": "wl-type",
    "files": "wl-files",
    "duration": "wl-seconds",
    "dir": "wl-target",
    "prefetch": "wl-accelerators",
}


@dataclass
class WorkloadFormValues:
    """The form as typed. Path and compute left empty: into the GPU where there is one, else as DLIO."""

    preset: str = "cosmoflow"
    path: str = ""
    compute: str = ""
    accelerators: str = "1"
    accelerator_type: str = "h100"
    files: str = "400"
    seconds: str = "10"
    target: str = ""  # where the set is generated; empty: a temporary directory


def build_spec(values: WorkloadFormValues, has_gpu: bool) -> TrainSpec:
    """The form's spec, validated; SpecError names the field. Its fields are `workload train`'s options, read and
    checked as the command reads them (``workloads.train.options``); one left empty is the command's default."""
    path = values.path.strip() or ("bounce-async" if has_gpu else "host")
    compute = values.compute.strip() or ("gpu" if has_gpu else "sleep")
    note = "" if has_gpu or (values.path.strip() and values.compute.strip()) else "no GPU here: host path, host sleep"
    asked = {"accelerator_type": values.accelerator_type, "accelerators": values.accelerators}
    emulated = from_text(AcceleratorOptions, asked)
    shape = from_text(
        TrainShapeOptions, {"files": values.files, "duration": values.seconds, "directory": values.target}
    )
    return train_spec(
        values.preset.strip(),
        emulated.accelerator_type,
        accelerators=emulated.accelerators,
        path=path,
        compute=compute,
        **shape.spec_fields(),
        defaults_note=note,
    )


def session_entries(results: list[TrainResult], saved: list | None = None):
    """The session's finished training runs, and saved ones opened (``saved``: entries of `workload compare`),
    side by side, ranked as `workload compare` ranks them."""
    from xferscope.workloads.train.train_compare import entry_of_runs, rank

    entries = []
    for i, r in enumerate(results, 1):
        s = r.spec
        entries.append(entry_of_runs(f"{i} x{s.accelerators} {s.path} {s.compute}", [r]))
    return rank(entries + list(saved or []))


def au_bar(au: float | None, threshold: float, width: int = 24) -> Text:
    """AU as a bar of ``width`` cells, green at or above the threshold, red below, the threshold marked ``|``."""
    out = Text(no_wrap=True)
    if au is None or math.isnan(au):
        return out.append("·" * width, style="dim")
    filled = round(max(0.0, min(1.0, au)) * width)
    mark = min(width - 1, round(threshold * width))
    style = "green" if au >= threshold else "red"
    for i in range(width):
        if i == mark:
            out.append("|", style="bold")
        elif i < filled:
            out.append("█", style=style)
        else:
            out.append("·", style="dim")
    return out


@dataclass
class AcceleratorRow:
    index: int
    steps: int = 0
    au: float | None = None
    samples_per_s: float | None = None
    mb_per_s: float | None = None
    wait_p50_s: float | None = None
    wait_p99_s: float | None = None
    first_batch_s: float | None = None


def _known(x: float | None) -> float | None:
    return None if x is None or x != x else x


@dataclass
class WorkloadState:
    """A run as it goes: the set being made, then the ticks, then the result."""

    spec: TrainSpec | None = None
    made: tuple[int, int] | None = None  # (bytes written, of) while the set is made
    rows: dict[int, AcceleratorRow] = field(default_factory=dict)
    steps: dict[int, list] = field(default_factory=dict)  # each accelerator's steps so far (the ticks bring them)
    ticks: int = 0
    t: float = 0.0
    bytes_read: int = 0
    result: TrainResult | None = None

    def start(self, spec: TrainSpec) -> None:
        self.spec = spec
        self.rows = {i: AcceleratorRow(i) for i in range(spec.accelerators)}

    def take(self, tick: TrainTick) -> None:
        self.made = None
        self.t, self.bytes_read = tick.t, tick.bytes_read
        from xferscope.workloads.common.au import utilisation

        self.ticks += 1
        # the percentiles go over every step: on a long run of short steps, recomputed every few ticks only
        every = 1 + sum(len(s) for s in self.steps.values()) // 50_000
        for r in tick.accelerators:
            steps = self.steps.setdefault(r.index, [])
            steps.extend(r.new_steps)
            old = self.rows.get(r.index)
            if old is not None and self.ticks % every:
                old.steps, old.au = r.steps, _known(r.au)
                continue
            u = utilisation(steps)
            self.rows[r.index] = AcceleratorRow(
                r.index,
                r.steps,
                _known(r.au),
                _known(u.samples_per_s),
                _known(u.bytes_per_s / 1e6),
                _known(u.io_wait_p50_s),
                _known(u.io_wait_p99_s),
                _known(u.first_batch_s),
            )

    def finish(self, result: TrainResult) -> None:
        self.result = result
        for a in result.accelerators:
            self.rows[a.index] = AcceleratorRow(
                a.index, a.steps, a.au, a.samples_per_s, a.mb_per_s, a.io_wait_p50_s, a.io_wait_p99_s, a.first_batch_s
            )

    @property
    def au(self) -> float | None:
        if self.result is not None:
            return self.result.au
        aus = [r.au for r in self.rows.values()]
        return None if not aus or any(a is None for a in aus) else sum(a for a in aus if a is not None) / len(aus)

    @property
    def mb_per_s(self) -> float | None:
        return self.bytes_read / self.t / 1e6 if self.t > 0 else None
