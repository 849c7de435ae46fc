"""Running the checks: those that call NVML, CUDA or cuFile in a process of their own, the others here; each path's
ceiling on request; the report as text."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, TypedDict

from xferscope.doctor.checks import CHECKS, FAIL, NATIVE_CHECKS, OK, PROBES, SCHEMA, WARN, Check, Facts


def _check_name(fn: Callable) -> str:
    return fn.__name__.replace("check_", "").replace("_", " ")


def _run_one(fn: Callable[[Facts], list[Check]], facts: Facts) -> list[Check]:
    try:
        return fn(facts)
    except Exception as exc:  # a check that breaks says so; the others still run
        return [Check(_check_name(fn), WARN, f"could not check: {exc}")]


def native_facts(directory: str) -> Facts:
    """What the checks learn from NVML, CUDA and cuFile (in the checks' own process)."""
    from xferscope.engines import cufile_driver, gpu_setup
    from xferscope.telemetry.gpu import gpu_inventory

    return Facts(
        directory=directory,
        gpus=gpu_inventory(),
        cuda_reason=gpu_setup.unavailable_reason(),
        cufile_reason=cufile_driver.library_status()[0],
    )


def native_check(check: Callable[[Facts], list[Check]], facts: Facts) -> tuple[list[Check], Facts]:
    """One of NATIVE_CHECKS, in the checks' own process: its checks and the facts it updated."""
    return _run_one(check, facts), facts


class _NativeSide:
    """The process the native checks run in; after a crash, a fresh one for the next check."""

    def __init__(self) -> None:
        from xferscope.engines import cufile_driver
        from xferscope.isolation import CallWorker

        env, self.log = cufile_driver.child_env("cufile")
        self.worker = CallWorker("doctor's GPU checks", env=env)

    def call(self, fn: Callable[..., Any], what: str, *args):
        """(value, None), or (None, a failed Check naming the signal) when its process died."""
        from xferscope.isolation import ChildDied

        try:
            return self.worker.call(fn, *args, timeout=600), None
        except ChildDied as exc:
            detail = f"its process died by {exc.how}" if exc.signal_name else str(exc).split(": ", 1)[-1]
            last = next((ln.strip() for ln in reversed(exc.stderr_tail) if ln.strip()), "")
            if last and exc.signal_name:
                detail += f" (last words: {last[:200]})"
            return None, Check(
                what,
                FAIL,
                f"{detail}; the checks after it still ran",
                "run it again; if it crashes again, report it with `xferscope doctor --json`",
            )

    def close(self) -> None:
        from xferscope import janitor

        self.worker.close()
        if self.log:
            janitor.discard(self.log)


class CheckRow(TypedDict):
    """One check in the report: its name, ok, warn or fail, what it found, and the fix (empty where none)."""

    name: str
    status: str
    detail: str
    fix: str


class DoctorReport(TypedDict):
    """`xferscope doctor --json`: the directory checked, whether there is a GPU, every check, and how many of each
    status."""

    schema: str
    directory: str
    gpu: bool
    checks: list[CheckRow]
    summary: dict[str, int]


def run_checks(directory: str | None = None, *, ceilings: bool = False, probes: bool = True) -> DoctorReport:
    """Every check, for ``directory`` (default: where xferscope puts scratch files); with ``ceilings``, each
    path's own ceiling measured too (``check_ceilings``); without ``probes``, none of the checks that measure
    (``PROBES``).

    The checks that call NVML, CUDA or cuFile run in a process of their own: one that crashes there
    is a failed check that names the signal, and the others still run."""
    from xferscope.target import default_scratch_parent

    directory = os.path.abspath(directory or default_scratch_parent()[0])
    native = _NativeSide()
    checks: list[Check] = []
    try:
        facts, failed = native.call(native_facts, "GPU facts", directory)
        if failed is not None:
            checks.append(failed)
            why = "the GPU facts could not be read (their process crashed)"
            facts = Facts(directory=directory, gpus=[], cuda_reason=why, cufile_reason=why)
        for fn in CHECKS:
            if fn in PROBES and not probes:
                continue
            if fn in NATIVE_CHECKS:
                answer, failed = native.call(native_check, NATIVE_CHECKS[fn], fn, facts)
                if failed is not None:
                    checks.append(failed)
                    continue
                found, facts = answer
                checks.extend(found)
            else:
                checks.extend(_run_one(fn, facts))
    finally:
        native.close()
    if ceilings:
        checks.extend(check_ceilings(directory))
    summary = {s: sum(c.status == s for c in checks) for s in (OK, WARN, FAIL)}
    return {
        "schema": SCHEMA,
        "directory": directory,
        "gpu": bool(facts.gpus),
        "checks": [CheckRow(name=c.name, status=c.status, detail=c.detail, fix=c.fix) for c in checks],
        "summary": summary,
    }


#: doctor --ceilings: what each path moves when storage drops out (--source cache)
CEILING_PATHS = ("host", "bounce", "bounce-async")
CEILING_BLOCK, CEILING_WORKERS, CEILING_SECONDS, CEILING_FILE = 1 << 20, 4, 2.0, 256 << 20


def check_ceilings(directory: str) -> list[Check]:
    """Each path's own ceiling: one run of each, reading a file held in the page cache (``--source cache``), so
    that storage drops out. A path that cannot run here says why."""
    from xferscope.engines.registry import unavailable_reason
    from xferscope.errors import XferscopeError
    from xferscope.run.dataset import SharedDataset
    from xferscope.run.runner import EngineRun
    from xferscope.spec import RunSpec

    shape = f"1M x {CEILING_WORKERS} workers, {CEILING_SECONDS:g} s"
    base = RunSpec(
        path="host",
        block_size=CEILING_BLOCK,
        workers=CEILING_WORKERS,
        duration=CEILING_SECONDS,
        file_size=CEILING_FILE,
        directory=None,
        file=os.path.join(directory, "xferscope-ceilings.dat"),
        source="cache",
    )
    checks: list[Check] = []
    dataset = SharedDataset(base)
    try:
        dataset.prepare()
        for path in CEILING_PATHS:
            name = f"ceiling {path}"
            why = unavailable_reason(path)
            if why:
                checks.append(Check(name, WARN, f"not measured: {why}"))
                continue
            try:
                r = EngineRun(dataset.spec_for(base.replace(path=path))).execute()
            except XferscopeError as exc:
                checks.append(Check(name, FAIL, f"the run failed: {exc}"))
                continue
            checks.append(
                Check(
                    name,
                    OK,
                    f"{r.throughput_gib_s:.2f} GiB/s from the page cache ({shape}; "
                    f"{r.cpu_seconds_per_gib:.3f} CPU-s/GiB): what the path moves when storage drops out",
                )
            )
    except XferscopeError as exc:
        checks.append(Check("ceilings", FAIL, f"not measured: {exc}"))
    finally:
        dataset.close()
    return checks


def format_report(report: DoctorReport) -> str:
    """The report as text: one line a check, the fix indented under it."""
    checks = report["checks"]
    width = max((len(c["name"]) for c in checks), default=10)
    lines = [f"xferscope doctor: {report['directory']}"]
    for c in checks:
        lines.append(f"  {c['status']:<4}  {c['name']:<{width}}  {c['detail']}")
        if c["fix"]:
            lines.append(f"        {'':<{width}}  fix: {c['fix']}")
    s = report["summary"]
    lines.append(
        f"{s[OK]} ok, {s[WARN]} warn, {s[FAIL]} fail"
        + ("" if report["gpu"] else "; no GPU here: host and memory paths work, GPU paths need one")
    )
    return "\n".join(lines)
