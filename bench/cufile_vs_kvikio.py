"""xferscope `cufile` against KvikIO on the same file, block size and thread count, in rotated rounds.

Both sides read one whole file into GPU memory through cuFile: xferscope with N
workers, each reading its slice in blocks of BS (cuFileRead per block, native
threads); KvikIO with `CuFile.pread` on a pool of N threads. KVIKIO_COMPAT_MODE
is set to OFF so that KvikIO calls cuFile too (its AUTO mode may choose its own
POSIX path instead); the cuFile mode (GDS or compat) is printed and is the same
for both sides, as both go through one libcufile.

Variants, run in an order rotated from round to round:

  xferscope          cufile --bs BS -w N
  xferscope_split    cufile --bs BS --split SPLIT -w N (where BS > SPLIT): each block as parallel
                     sub-requests of SPLIT, as KvikIO's task size
  kvikio             pread(task_size=BS): like with like
  kvikio_default     pread with KvikIO's default task size (4 MiB): what a KvikIO user gets
  kvikio_aa          kvikio again: the A/A noise floor
  ..._registered     with --registered, the same with the GPU buffers registered with cuFile
                     (xferscope's default, as gdsio; KvikIO's buffer registered by hand)

Per block size and thread count: each variant's median MiB/s with its spread, and paired verdicts
(xferscope.compare.verdict: the median of the per-round ratios, min-max, faster/slower only when every round
agrees) for xferscope/kvikio (like with like, goal >= 0.98), xferscope_split/kvikio_default (goal >= 0.98),
xferscope/kvikio_default (goal >= 0.98 at 1M) and kvikio_aa/kvikio.

    python bench/cufile_vs_kvikio.py --dir /data --size 2G [--sizes 1M,16M] [--workers 1,8] [--split 4M] \
        [--rounds 5] [--registered] [--json out.json]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import time

os.environ["KVIKIO_COMPAT_MODE"] = "OFF"  # before kvikio is imported: through cuFile, as xferscope

from xferscope.run.runner import EngineRun
from xferscope.spec import RunSpec
from xferscope.units import format_size, parse_size


def make_file(path: str, size: int) -> None:
    """An xferscope scratch file (pattern data, not zeros), kept for both sides."""
    EngineRun(
        RunSpec(
            path="host", file=path, file_size=size, block_size=1 << 20, duration=None, total_bytes=1 << 20, keep=True
        )
    ).execute()


def xferscope_read(
    path: str, size: int, bs: int, workers: int, register: bool, split: int | None = None
) -> tuple[float, dict]:
    """MiB/s reading the whole file once, and the run's environment (cuFile mode)."""
    r = EngineRun(
        RunSpec(
            path="cufile",
            file=path,
            file_size=size,
            block_size=bs,
            workers=workers,
            duration=None,
            total_bytes=size,
            keep=True,
            register_buffers=register,
            split=split,
        )
    ).execute()
    return r.throughput_mib_s, r.environment


class Kvikio:
    def __init__(self, path: str, size: int):
        import cupy
        import kvikio
        import kvikio.defaults

        self.kvikio = kvikio
        self.defaults = kvikio.defaults
        self.buf = cupy.empty(size, dtype=cupy.uint8)
        self.file = kvikio.CuFile(path, "r")
        self.size = size
        self._set("gds_threshold", 0)
        try:  # before this script changes it
            self._default_task_size = int(self.defaults.get("task_size"))
        except Exception:
            self._default_task_size = 4 << 20

    def _set(self, key, value) -> None:
        try:
            self.defaults.set(key, value)
        except Exception:
            pass

    def compat_mode(self) -> str:
        try:
            return str(self.defaults.get("compat_mode"))
        except Exception:
            return "?"

    @staticmethod
    def _make_current() -> None:
        """GPU 0's primary context current in this thread (an xferscope run in between may have left none)."""
        from cuda.bindings import driver

        _, dev = driver.cuDeviceGet(0)
        _, ctx = driver.cuDevicePrimaryCtxRetain(dev)
        driver.cuCtxSetCurrent(ctx)

    def register(self, on: bool) -> bool:
        """Register KvikIO's whole buffer with cuFile (as xferscope registers its own), or not."""
        import kvikio.buffer

        self._make_current()
        try:
            (kvikio.buffer.memory_register if on else kvikio.buffer.memory_deregister)(self.buf)
            return True
        except Exception as exc:
            print(f"KvikIO buffer {'registration' if on else 'deregistration'} failed: {exc}", flush=True)
            return False

    def default_task_size(self) -> int:
        return int(self._default_task_size)

    def read(self, task_size: int | None, workers: int) -> float:
        """MiB/s of one whole-file pread on ``workers`` threads, in tasks of ``task_size`` (None: KvikIO's default)."""
        self._make_current()
        self._set("num_threads", workers)
        task = task_size or self._default_task_size
        self._set("task_size", task)
        t0 = time.perf_counter()
        n = self.file.pread(self.buf, self.size, 0, task_size=task).get()
        dt = time.perf_counter() - t0
        if n != self.size:
            raise RuntimeError(f"KvikIO read {n} of {self.size} bytes")
        return self.size / (1 << 20) / dt

    def close(self) -> None:
        self.file.close()


BASE_VARIANTS = ("xferscope", "xferscope_split", "kvikio", "kvikio_default", "kvikio_aa")
#: (variant, baseline, goal): the paired ratios printed
RATIOS = (
    ("xferscope", "kvikio", ">= 0.98"),
    ("xferscope_split", "kvikio_default", ">= 0.98"),
    ("xferscope", "kvikio_default", ">= 0.98 at 1M"),
    ("kvikio_aa", "kvikio", "within noise"),
)


def main(argv: list[str] | None = None) -> int:
    from xferscope.compare.verdict import RULE, paired_verdict

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dir", default=".", help="directory for the test file (a filesystem cuFile registers)")
    ap.add_argument("--size", default="2G")
    ap.add_argument("--sizes", default="1M,16M", help="block sizes")
    ap.add_argument("--workers", default="1,8", help="thread counts")
    ap.add_argument("--split", default="4M", help="sub-request size of xferscope_split (KvikIO's default task size)")
    ap.add_argument("--rounds", "--reps", type=int, default=5)
    ap.add_argument(
        "--registered",
        action="store_true",
        help="also time both sides with their GPU buffers registered with cuFile (buf_register)",
    )
    ap.add_argument("--json", help="write the figures here")
    args = ap.parse_args(argv)
    size, split = parse_size(args.size), parse_size(args.split)
    path = os.path.join(os.path.abspath(args.dir), "xferscope-vs-kvikio.dat")
    make_file(path, size)
    kv = Kvikio(path, size)
    registered = args.registered and kv.register(True) and kv.register(False)
    rows, env = [], {}

    def measure(variant: str, bs: int, workers: int) -> float:
        nonlocal env
        reg = variant.endswith("_registered")
        base = variant.removesuffix("_registered")
        if base.startswith("xferscope"):
            mib_s, env = xferscope_read(
                path, size, bs, workers, register=reg, split=split if base == "xferscope_split" else None
            )
            return mib_s
        task = None if base == "kvikio_default" else bs
        if reg:
            kv.register(True)
            try:
                return kv.read(task, workers)
            finally:
                kv.register(False)
        return kv.read(task, workers)

    print(
        f"# {args.rounds} rounds, variants in rotated order; load average "
        f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}\n# {RULE}",
        flush=True,
    )
    try:
        for bs in [parse_size(s) for s in args.sizes.split(",")]:
            variants = [v for v in BASE_VARIANTS if v != "xferscope_split" or bs > split]
            if registered:
                variants += [v + "_registered" for v in variants if v != "kvikio_aa"]
            for workers in [int(w) for w in args.workers.split(",")]:
                got: dict[str, list[float]] = {v: [] for v in variants}
                for rnd in range(args.rounds):  # rotate the order, so drift favours no variant
                    k = rnd % len(variants)
                    for v in variants[k:] + variants[:k]:
                        got[v].append(measure(v, bs, workers))
                row = {
                    "block_size": bs,
                    "workers": workers,
                    "split": split,
                    "rounds": got,
                    "medians": {v: statistics.median(r) for v, r in got.items()},
                    "ratios": {},
                }
                print(
                    f"{format_size(bs):>5} x{workers:<2} "
                    + "  ".join(f"{v} {statistics.median(r):.1f} ({min(r):.0f}-{max(r):.0f})" for v, r in got.items())
                    + " MiB/s",
                    flush=True,
                )
                for other, base, goal in RATIOS:
                    for suffix in ("", "_registered") if registered else ("",):
                        o, b = other + suffix, base + ("" if base == "kvikio" and other == "kvikio_aa" else suffix)
                        if o in got and b in got:
                            v = paired_verdict(got[b], got[o])
                            row["ratios"][f"{o}/{b}"] = v.as_dict() | {"goal": goal}
                            print(f"        {o} / {b}: {v.spread()} {v.word} (goal {goal})", flush=True)
                rows.append(row)
        mode = env.get("cufile_mode", "?")
        print(
            f"cuFile mode: {mode} ({env.get('cufile_mode_reason', '')}); cuFile {env.get('cufile_version')}; "
            f"KvikIO {kv.kvikio.__version__}, compat_mode={kv.compat_mode()}, default task size "
            f"{format_size(kv.default_task_size())}"
        )
        print(f"# load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        if args.json:
            with open(args.json, "w") as fh:
                json.dump(
                    {
                        "rows": rows,
                        "cufile_mode": mode,
                        "cufile_mode_reason": env.get("cufile_mode_reason"),
                        "file_size": size,
                        "kvikio": kv.kvikio.__version__,
                        "kvikio_compat_mode": kv.compat_mode(),
                        "kvikio_default_task_size": kv.default_task_size(),
                    },
                    fh,
                    indent=2,
                )
    finally:
        kv.close()
        for p in (path, path + ".xferscope"):
            with contextlib.suppress(OSError):
                os.unlink(p)
    return 0


if __name__ == "__main__":
    sys.exit(main())
