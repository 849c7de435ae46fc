"""Drive one engine through a run in this process: prepare, start, sample at a fixed rate, stop, clean up.

The sampler is a plain thread that wakes at the sample interval, reads the
engine's cumulative counters and the CPU/GPU meters, and publishes an
immutable ``Sample``. Consumers never slow the workers: they get samples
through callbacks that must not block.

This runs in the engine's own process (``xferscope.run.engine_process``); the
console, the CLI, sweeps and MPI ranks use ``xferscope.run.runner.EngineRun``, which
drives a ``LocalRun`` there and survives its crash. Engine tests use it
directly.
"""

from __future__ import annotations

import math
import os
import platform
import socket
import threading
import time
from collections.abc import Callable

from xferscope import target as targets
from xferscope.engines import page_cache
from xferscope.engines.base import DoneTotals, LatencySummary, RunResult, Sample, Snapshot, WorkerResult
from xferscope.engines.registry import engine_class
from xferscope.errors import EngineUnavailable, RunFailed
from xferscope.spec import RunSpec
from xferscope.stats import Histogram
from xferscope.telemetry.cpu import CpuMeter, ThreadCpuMeter

GRACE_S = 5.0  # workers stop themselves at the deadline; this is only a safety net
STOP_GRACE_S = 5.0  # after a stop request, how long workers get to finish the operation in flight


def _latency(
    hist: Histogram, lat_sum_ns: int, ops: int, lat_min: float | None = None, lat_max: float | None = None
) -> LatencySummary:
    if not ops or not hist.count:
        nan = math.nan
        return LatencySummary(nan, nan, nan, nan, nan, nan, nan)
    p = hist.percentiles()
    lo = hist.min() if lat_min is None else lat_min
    hi = hist.max() if lat_max is None else lat_max
    # a percentile is the middle of its histogram bucket: never past the latencies measured at either end
    p = {k: min(max(v, lo), hi) for k, v in p.items()}
    return LatencySummary(
        min=lo / 1e3,
        mean=lat_sum_ns / ops / 1e3,
        p50=p[50.0] / 1e3,
        p90=p[90.0] / 1e3,
        p99=p[99.0] / 1e3,
        p999=p[99.9] / 1e3,
        max=hi / 1e3,
    )


def _sample_time_ns(snap: Snapshot) -> int:
    """When a snapshot's counters stand: its time, or, once every worker is done, the last one's end (a sampler
    woken late after the end would otherwise date the run's last bytes later than the run, and spread them
    over time no worker spent)."""
    ends = [w.done_ns for w in snap.workers]
    return max(e for e in ends if e) if ends and all(ends) else snap.t_ns


def _lat_sum(snap: Snapshot) -> int:
    return sum(w.read_lat_sum_ns + w.write_lat_sum_ns for w in snap.workers)


class SampleFeed:
    """Samples to whoever listens: callbacks, or an async iterator. ``_publish(None)``
    ends the stream."""

    def __init__(self) -> None:
        self._listeners: list[Callable[[Sample | None], None]] = []
        self._lock = threading.Lock()

    def subscribe(self, callback: Callable[[Sample | None], None]) -> None:
        """Call ``callback(sample)`` for every sample, then ``callback(None)`` at the end. Must not block."""
        with self._lock:
            self._listeners.append(callback)

    def _publish(self, sample: Sample | None) -> None:
        with self._lock:
            listeners = list(self._listeners)
        for cb in listeners:
            try:
                cb(sample)
            except Exception:  # a broken consumer must not stop the measurement
                pass


def run_to_end(
    run, progress: Callable[[int, int], None] | None, *, started: Callable[[], bool], grace_s: float
) -> None:
    """Prepare, start and wait for ``run`` (a ``LocalRun`` or a ``runner.EngineRun``), then close it. On Ctrl-C: ask
    it to stop and wait up to ``grace_s`` for its workers, then leave them behind with what they measured
    (``_abandon``); asked twice, leave at once. Interrupted before the run started raises
    ``target.Interrupted``."""
    try:
        run.prepare(progress)
        run.start()
        while not run.join(0.2):
            pass
    except KeyboardInterrupt:
        run.stop()
        if not started():
            raise targets.Interrupted("interrupted before the run started") from None
        deadline = time.monotonic() + grace_s
        try:
            while not run.join(0.2):
                if time.monotonic() > deadline:
                    run._abandon()
                    break
        except KeyboardInterrupt:  # asked twice: do not wait any longer
            run._abandon()
    finally:
        run.close()


class LocalRun(SampleFeed):
    """One run of one spec in this process. Use ``execute()`` for the simple case, or the steps.

    ``target``: the files, planned already (``xferscope.target.plan``); planned by ``prepare`` when None."""

    def __init__(self, spec: RunSpec, *, gpu_telemetry: bool = True, target: targets.Target | None = None):
        self.spec = spec.validate()
        self.engine = None
        self.target = target
        self.samples: list[Sample] = []
        self.result: RunResult | None = None
        self.state = "new"  # new, preparing, running, finished, closed
        self._gpu_telemetry = gpu_telemetry
        self._cancel = threading.Event()
        self._stopped_by_user = False
        SampleFeed.__init__(self)
        self._thread: threading.Thread | None = None
        self._final: Snapshot | None = None
        #: the counters behind the latest sample (set before the sample is published)
        self.last_snapshot: Snapshot | None = None
        self._cpu: CpuMeter | None = None
        self._engine_cpu: ThreadCpuMeter | None = None
        self._gpu_meter = None
        self._started_at = 0.0
        self._sampler_error: BaseException | None = None
        self._finished = threading.Event()
        #: workers did not stop when asked (stuck in a driver call): their threads are left behind
        self.stuck = False
        self._sampler_cpu = 0.0  # CPU time of the sampler thread over the run
        self._gpu_meter_cpu0 = 0.0
        #: --source cache: the share of the file in the page cache before and after the run
        self._resident_before: float | None = None
        self._resident_after: float | None = None
        #: seconds of this process's set-up steps, in the result's ``fixed_cost_s`` (where a run's set-up goes)
        self.setup_steps: dict[str, float] = {}

    # ---------------------------------------------------------------- steps
    def check_available(self) -> None:
        """Raise EngineUnavailable (saying why) when this path cannot run here."""
        reason = engine_class(self.spec.path).unavailable_reason()
        if reason:
            raise EngineUnavailable(self.spec.path, reason)

    def prepare(self, progress: Callable[[int, int], None] | None = None) -> None:
        """Check the path, plan and create files, set up the engine. Outside the timed region."""
        self.state = "preparing"
        self.check_available()
        cls = engine_class(self.spec.path)
        t0 = time.monotonic()
        if self.target is None:
            self.target = targets.plan(self.spec)
        targets.materialize(self.target, self._cancel, progress)
        if self.spec.source == "cache":
            self._resident_before = page_cache.hold(self._files(), self._cancel.is_set)
        if self._cancel.is_set():
            raise targets.Interrupted("interrupted before the run started")
        t1 = time.monotonic()
        self.engine = cls(self.spec, self.target)
        self.engine.prepare()
        if self.spec.source == "cache":
            self.engine.labels.append(cache_source_label(self._resident_before))
        t2 = time.monotonic()
        if self._gpu_telemetry:
            self._gpu_meter = _gpu_meter(self.spec, self.engine)
        self.setup_steps.update(files=t1 - t0, path=t2 - t1, telemetry=time.monotonic() - t2)

    def start(self) -> None:
        t0 = time.monotonic()
        self._cpu = CpuMeter()
        self.engine.start()
        self.setup_steps["start"] = time.monotonic() - t0
        self._cpu.mark()
        self._gpu_meter_cpu0 = self._gpu_meter.cpu_seconds if self._gpu_meter is not None else 0.0
        self._engine_cpu = ThreadCpuMeter(self.engine.thread_ids())
        self._started_at = time.monotonic()
        self.state = "running"
        self._thread = threading.Thread(target=self._sample_loop, name="xferscope-sampler", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop early and keep what was measured."""
        self._stopped_by_user = True
        self._cancel.set()
        if self.engine is not None:
            self.engine.stop()

    def join(self, timeout: float | None = None) -> bool:
        """Wait for the sampler to finish; True when it has."""
        if self._thread is None:
            return True
        # an Event, not Thread.join: Ctrl-C during join() can leave a live thread marked stopped
        return self._finished.wait(timeout)

    def _abandon(self) -> None:
        """Workers ignore the stop request (a driver call that never returns): keep what they measured
        and let the caller go; their threads and buffers are left to the process's exit."""
        self.stuck = True
        try:
            self._final = self.engine.snapshot()
        except Exception:
            pass
        self._sampler_error = RuntimeError(
            f"workers did not stop within {STOP_GRACE_S:.0f} s of the stop request (stuck in a driver call?); "
            "the figures measured until then are kept"
        )
        self._finished.set()

    def close(self) -> None:
        """Free the engine and remove the files this run created (unless --keep). Idempotent."""
        try:
            if self.engine is not None and not self.stuck:
                self.engine.stop()
                self.engine.close()
            if self._gpu_meter is not None:
                self._gpu_meter.close()
        finally:
            if self.target is not None:
                if self.spec.writes and not self.spec.verify and self._final is not None:
                    targets.mark_written(self.target)
                targets.cleanup(self.target, keep=self.spec.keep)
            self.state = "closed"

    def execute(
        self,
        on_sample: Callable[[Sample | None], None] | None = None,
        progress: Callable[[int, int], None] | None = None,
    ) -> RunResult:
        """Prepare, run to the end (or Ctrl-C), close. Returns the result, partial when interrupted.

        Raises RunFailed (with ``.result`` holding what was measured) when an engine reports an error.
        """
        if on_sample:
            self.subscribe(on_sample)
        run_to_end(self, progress, started=lambda: self._thread is not None, grace_s=STOP_GRACE_S)
        result = self.finish()
        if result.status == "failed":
            err = RunFailed(f"{self.spec.path}: {result.error}")
            err.result = result
            raise err
        return result

    # -------------------------------------------------------------- sampling
    def _sample_loop(self) -> None:
        cpu0 = time.thread_time()
        try:
            self._sample_until_done()
        finally:
            self._sampler_cpu = time.thread_time() - cpu0

    def _sample_until_done(self) -> None:
        interval = self.spec.interval
        deadline = (self.spec.duration + GRACE_S) if self.spec.duration else None
        prev = None
        next_tick = self._started_at + interval
        try:
            while True:
                done = self.engine.wait(max(0.0, next_tick - time.monotonic()))
                snap = self.engine.snapshot()
                sample = self._make_sample(prev, snap)
                prev = snap
                self.last_snapshot = snap
                self.samples.append(sample)
                self._publish(sample)
                if done:
                    break
                now = time.monotonic()
                if deadline and now - self._started_at > deadline:
                    self.engine.stop()
                next_tick += interval
                if next_tick < now:  # fell behind (suspended terminal): skip, don't burst
                    next_tick = now + interval
            self._final = self.engine.snapshot()
        except BaseException as exc:  # keep what we have; the run reports the failure
            self._sampler_error = exc
            try:
                self.engine.stop()
                self._final = self.engine.snapshot()
            except Exception:
                pass
        finally:
            self.state = "finished"
            self._finished.set()
            self._publish(None)

    def _make_sample(self, prev: Snapshot | None, snap: Snapshot) -> Sample:
        t0 = _sample_time_ns(prev) if prev else 0
        t_ns = _sample_time_ns(snap)
        dt = max((t_ns - t0) / 1e9, 1e-9)
        b0 = prev.bytes if prev else 0
        o0 = prev.ops if prev else 0
        rb0 = sum(w.read_bytes for w in prev.workers) if prev else 0
        wb0 = sum(w.write_bytes for w in prev.workers) if prev else 0
        hist = snap.hist_read + snap.hist_write
        lat_sum = _lat_sum(snap)
        if prev:
            hist = hist - (prev.hist_read + prev.hist_write)
            lat_sum -= _lat_sum(prev)
        nbytes, nops = snap.bytes - b0, snap.ops - o0
        cpu = self._cpu.read()
        engine_usr, engine_sys = (
            self._engine_cpu.read() if self._engine_cpu and self._engine_cpu.tids else (math.nan, math.nan)
        )
        gpu = ()
        if self._gpu_meter is not None:
            try:
                gpu = tuple(self._gpu_meter.read())
            except Exception:
                gpu = ()
        return Sample(
            t=t_ns / 1e9,
            dt=dt,
            bytes=nbytes,
            ops=nops,
            read_bytes=sum(w.read_bytes for w in snap.workers) - rb0,
            write_bytes=sum(w.write_bytes for w in snap.workers) - wb0,
            throughput_gib_s=nbytes / dt / (1 << 30),
            throughput_mb_s=nbytes / dt / 1e6,
            iops=nops / dt,
            latency_us=_latency(hist, lat_sum, nops),
            cpu_usr_pct=cpu.proc_usr_pct,
            cpu_sys_pct=cpu.proc_sys_pct,
            sys_usr_pct=cpu.sys_usr_pct,
            sys_sys_pct=cpu.sys_sys_pct,
            per_core_pct=cpu.per_core_busy_pct,
            total_bytes=snap.bytes,
            total_ops=snap.ops,
            worker_bytes=tuple(w.bytes for w in snap.workers),
            workers_done=snap.done,
            gpu=gpu,
            engine_usr_pct=engine_usr,
            engine_sys_pct=engine_sys,
        )

    # ---------------------------------------------------------------- result
    def finish(self) -> RunResult:
        """Build the RunResult from the last counters (call after the sampler ended)."""
        if self.result is not None:
            return self.result
        snap = self._final
        if snap is None:
            raise RunFailed("the run ended before it measured anything")
        cpu = self._cpu.since_mark() if self._cpu else None
        cpu_d = {}
        if cpu:
            cpu_d = {
                "usr_pct": cpu.proc_usr_pct,
                "sys_pct": cpu.proc_sys_pct,
                "sys_usr_pct": cpu.sys_usr_pct,
                "sys_sys_pct": cpu.sys_sys_pct,
                "sys_iowait_pct": cpu.sys_iowait_pct,
                "cpu_seconds": cpu.proc_cpu_seconds,
                "per_core_pct": list(cpu.per_core_busy_pct),
                "telemetry_cpu_seconds": self._telemetry_cpu(),
            }
        if self.engine is not None:
            self.engine.after_run()
        if self.spec.source == "cache" and self.target is not None:
            self._resident_after = page_cache.resident_share(self._files())
            note = cache_left_note(self._resident_after)
            if note and self.engine is not None:
                self.engine.labels.append(note)
        status, error = "ok", None
        if snap.error:
            status, error = "failed", snap.error[0]
        elif self.stuck:
            status, error = "interrupted", str(self._sampler_error)
        elif self._sampler_error is not None:
            status, error = "failed", f"sampler failed: {self._sampler_error!r}"
        elif self._stopped_by_user:
            status = "interrupted"
        self.result = build_result(
            self.spec,
            snap,
            self.samples,
            cpu=cpu_d,
            status=status,
            error=error,
            worker_gpus=list(self.engine.worker_gpus) if self.engine else None,
            labels=list(self.engine.labels) if self.engine else [],
            environment=self.environment(),
        )
        self.result.fixed_cost_s = {f"{name}_step": seconds for name, seconds in self.setup_steps.items()} or None
        return self.result

    def _telemetry_cpu(self) -> float:
        """CPU time of xferscope's own sampling threads in this process over the run (the sampler, NVML's meter):
        measured, and taken out of the path's CPU-s/GiB."""
        meter = self._gpu_meter.cpu_seconds - self._gpu_meter_cpu0 if self._gpu_meter is not None else 0.0
        return self._sampler_cpu + max(0.0, meter)

    def environment(self) -> dict:
        env = {
            "host": socket.gethostname(),
            "kernel": platform.release(),
            "os": targets.os_name(),
            "python": platform.python_version(),
            "cpu_count": os.cpu_count(),
            "cpu_model": targets.cpu_model(),
        }
        from xferscope import __version__

        env["xferscope"] = __version__
        if self.target is not None:
            fs = self.target.filesystem
            env.update(
                {
                    "target": self.target.description,
                    "filesystem": fs.fstype,
                    "mountpoint": fs.mountpoint,
                    "device": fs.device,
                    "logical_block_size": fs.logical_block,
                    "dataset_bytes": sum(f.size for f in self.target.files),
                    "io_mode": "O_DIRECT" if self.target.direct else "buffered",
                }
            )
        if self.engine is not None:
            env.update(self.engine.environment())
        if self.spec.source == "cache":
            env["source"] = "page cache"
            env["resident_before"] = self._resident_before
            env["resident_after"] = self._resident_after
        return env

    def _files(self) -> list[str]:
        return [f.path for f in self.target.files] if self.target is not None else []


#: below this share of the file in the page cache after a --source cache run, part of it came from storage
RESIDENT_ENOUGH = 0.99


def cache_source_label(resident: float | None) -> str:
    """The label of a --source cache run: where its data came from."""
    if resident is None:
        return "source: page cache (how much of the file is resident cannot be told here)"
    return f"source: page cache, {resident:.0%} of the file resident (storage drops out: the path's own ceiling)"


def cache_left_note(resident: float | None) -> str | None:
    """A --source cache run whose file did not stay in the page cache: a line saying so, else None."""
    if resident is None or resident >= RESIDENT_ENOUGH:
        return None
    return (
        f"page cache: only {resident:.0%} of the file was resident after the run (memory pressure): part of it "
        "was read from storage"
    )


def build_result(
    spec: RunSpec,
    snap: Snapshot,
    samples: list[Sample],
    *,
    cpu: dict,
    status: str,
    error: str | None,
    worker_gpus: list[int | None] | None,
    labels: list[str],
    environment: dict,
    error_detail: list[str] | None = None,
) -> RunResult:
    """A RunResult from the last cumulative counters of a run and its samples.

    ``cpu``: the process's figures over the timed region (usr_pct, sys_pct, sys_usr_pct, sys_sys_pct,
    sys_iowait_pct, cpu_seconds, per_core_pct); CPU-seconds per GiB and the workers' own figures
    are added here."""
    done_times = [w.done_ns for w in snap.workers if w.done_ns]
    seconds = (max(done_times) if done_times else snap.t_ns) / 1e9
    workers = _worker_results(snap, worker_gpus)
    hist = snap.hist_read + snap.hist_write
    read_ops = sum(w.read_ops for w in snap.workers)
    write_ops = sum(w.write_ops for w in snap.workers)
    cpu_d = _cpu_figures(cpu, snap, seconds if done_times else 0.0)
    first = DoneTotals(snap.first_done[0] / 1e9, snap.first_done[1], snap.first_done[2]) if snap.first_done else None
    last = DoneTotals(seconds, snap.bytes, snap.ops) if done_times else None
    return RunResult(
        spec=spec,
        status=status,
        bytes=snap.bytes,
        ops=snap.ops,
        read_bytes=sum(w.read_bytes for w in snap.workers),
        write_bytes=sum(w.write_bytes for w in snap.workers),
        read_ops=read_ops,
        write_ops=write_ops,
        seconds=seconds,
        latency_us=_latency(hist, _lat_sum(snap), snap.ops, snap.lat_min_ns, snap.lat_max_ns),
        read_latency_us=_latency(snap.hist_read, sum(w.read_lat_sum_ns for w in snap.workers), read_ops)
        if read_ops and write_ops
        else None,
        write_latency_us=_latency(snap.hist_write, sum(w.write_lat_sum_ns for w in snap.workers), write_ops)
        if read_ops and write_ops
        else None,
        cpu=cpu_d,
        workers=workers,
        first_done=first,
        last_done=last,
        environment=environment,
        labels=list(labels),
        samples=list(samples),
        error=error,
        histogram=hist,
        gpus=_gpu_figures(workers, samples, seconds),
        error_detail=list(error_detail or []),
    )


def _worker_results(snap: Snapshot, worker_gpus: list[int | None] | None) -> list[WorkerResult]:
    out = []
    for i, w in enumerate(snap.workers):
        ws = (w.done_ns or snap.t_ns) / 1e9
        out.append(
            WorkerResult(
                i,
                w.bytes,
                w.ops,
                ws,
                w.bytes / (1 << 20) / ws if ws > 0 else 0.0,
                worker_gpus[i] if worker_gpus and i < len(worker_gpus) else None,
            )
        )
    return out


def _cpu_figures(cpu: dict, snap: Snapshot, seconds: float) -> dict:
    """The process's CPU figures with CPU-seconds per GiB (the path's: xferscope's own sampling threads taken
    out) and, once the workers finished (``seconds`` > 0), their own from their rusage."""
    cpu_d = dict(cpu)
    if not cpu_d:
        return cpu_d
    gib = snap.bytes / (1 << 30)
    cpu_s = cpu_d.get("cpu_seconds", math.nan) - cpu_d.get("telemetry_cpu_seconds", 0.0)
    cpu_d["cpu_s_per_gib"] = cpu_s / gib if gib > 0 else math.nan
    engine_usr = sum(w.cpu_usr_us + w.lanes_usr_us for w in snap.workers) / 1e6
    engine_sys = sum(w.cpu_sys_us + w.lanes_sys_us for w in snap.workers) / 1e6
    if engine_usr + engine_sys > 0 and seconds > 0:
        # the workers alone, from their own rusage: what the path costs without xferscope's sampler/UI
        cpu_d.update(
            {
                "engine_usr_pct": 100 * engine_usr / seconds,
                "engine_sys_pct": 100 * engine_sys / seconds,
                "engine_cpu_seconds": engine_usr + engine_sys,
                "engine_busiest_thread_pct": _busiest_thread_pct(snap.workers, snap.t_ns),
            }
        )
    return cpu_d


def _gpu_figures(workers: list[WorkerResult], samples: list[Sample], seconds: float) -> dict[int, dict[str, float]]:
    """Per GPU: the bytes, operations and workers of the workers on it, its throughput, and the run's means of
    its telemetry."""
    gpus: dict[int, dict[str, float]] = {}
    for wr in workers:
        if wr.gpu is not None:
            g = gpus.setdefault(wr.gpu, {"bytes": 0, "ops": 0, "workers": 0})
            g["bytes"] += wr.bytes
            g["ops"] += wr.ops
            g["workers"] += 1
    for g in gpus.values():
        g["throughput_gib_s"] = g["bytes"] / (1 << 30) / seconds if seconds > 0 else 0.0
    if any(s.gpu for s in samples):
        from xferscope.telemetry.gpu import run_means

        for index, means in run_means([s.gpu for s in samples]).items():
            gpus.setdefault(index, {}).update(means)
    return gpus


def _busiest_thread_pct(workers, t_ns: int) -> float:
    """The busiest worker thread's (or lane's) CPU time over its own time in the timed region, percent of one core."""
    busiest = 0.0
    for w in workers:
        seconds = (w.done_ns or t_ns) / 1e9
        if seconds > 0:
            busiest = max(busiest, 100 * max(w.cpu_usr_us + w.cpu_sys_us, w.lane_max_us) / 1e6 / seconds)
    return busiest


def cpu_from_samples(samples: list[Sample]) -> dict:
    """The process's CPU over a run from its samples (each interval weighted by its length): for a run
    whose process ended before it could read its own totals."""
    total = sum(s.dt for s in samples)
    if total <= 0:
        return {}

    def mean(field: str) -> float:
        pairs = [(getattr(s, field), s.dt) for s in samples if math.isfinite(getattr(s, field))]
        t = sum(dt for _, dt in pairs)
        return sum(v * dt for v, dt in pairs) / t if t > 0 else math.nan

    usr, sys_ = mean("cpu_usr_pct"), mean("cpu_sys_pct")
    ncores = min((len(s.per_core_pct) for s in samples), default=0)
    cores = [sum(s.per_core_pct[i] * s.dt for s in samples) / total for i in range(ncores)]
    return {
        "usr_pct": usr,
        "sys_pct": sys_,
        "sys_usr_pct": mean("sys_usr_pct"),
        "sys_sys_pct": mean("sys_sys_pct"),
        "cpu_seconds": (usr + sys_) / 100.0 * total,
        "per_core_pct": cores,
    }


def _gpu_meter(spec: RunSpec, engine):
    """A GPU telemetry meter for the GPUs this run uses, when NVML is there; None otherwise."""
    gpus = sorted({g for g in engine.worker_gpus if g is not None})
    if not gpus:
        return None
    try:
        from xferscope.engines.link_ceiling import measure_link_ceiling
        from xferscope.telemetry.gpu import GpuMeter
    except ImportError:
        return None
    try:
        return GpuMeter(gpus, ceiling_of=measure_link_ceiling)
    except Exception:
        return None
