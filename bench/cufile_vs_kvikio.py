"""xferscope `cufile` against KvikIO on the same file, block size and thread count.

Both sides read one whole file into GPU memory through cuFile: xferscope with N
workers, each reading its slice in blocks of BS (cuFileRead per block, native
threads); KvikIO with `CuFile.pread(task_size=BS)` on a pool of N threads.
KVIKIO_COMPAT_MODE is set to OFF so that KvikIO calls cuFile too (its AUTO
mode may choose its own POSIX path instead); the cuFile mode (GDS or compat)
is printed and is the same for both sides, as both go through one libcufile.

    python bench/cufile_vs_kvikio.py --dir /data --size 2G [--reps 3] [--registered] [--json out.json]

Prints the median throughput of each side and the ratio xferscope / KvikIO, like with like: both with
unregistered GPU buffers (KvikIO's default; xferscope `--no-register`) and, with --registered, both with
their buffers registered with cuFile (xferscope's default, as gdsio).
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

from xferscope.runner import Run  # noqa: E402
from xferscope.spec import RunSpec  # noqa: E402
from xferscope.units import format_size, parse_size  # noqa: E402


def make_file(path: str, size: int) -> None:
    """An xferscope scratch file (pattern data, not zeros), kept for both sides."""
    Run(RunSpec(path="host", file=path, file_size=size, block_size=1 << 20, duration=None,
                total_bytes=1 << 20, keep=True)).execute()


def xferscope_read(path: str, size: int, bs: int, workers: int, register: bool) -> tuple[float, dict]:
    """MiB/s reading the whole file once, and the run's environment (cuFile mode)."""
    r = Run(RunSpec(path="cufile", file=path, file_size=size, block_size=bs, workers=workers, duration=None,
                    total_bytes=size, keep=True, register_buffers=register)).execute()
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

    def read(self, bs: int, workers: int) -> float:
        self._make_current()
        self._set("num_threads", workers)
        self._set("task_size", bs)
        t0 = time.perf_counter()
        n = self.file.pread(self.buf, self.size, 0, task_size=bs).get()
        dt = time.perf_counter() - t0
        if n != self.size:
            raise RuntimeError(f"KvikIO read {n} of {self.size} bytes")
        return self.size / (1 << 20) / dt

    def close(self) -> None:
        self.file.close()


VARIANTS = ("xferscope", "kvikio", "xferscope_registered", "kvikio_registered")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dir", default=".", help="directory for the test file (a filesystem cuFile registers)")
    ap.add_argument("--size", default="2G")
    ap.add_argument("--sizes", default="64K,1M,16M", help="block sizes")
    ap.add_argument("--workers", default="1,8", help="thread counts")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--registered", action="store_true",
                    help="also time both sides with their GPU buffers registered with cuFile (buf_register)")
    ap.add_argument("--json", help="write the figures here")
    args = ap.parse_args(argv)
    size = parse_size(args.size)
    path = os.path.join(os.path.abspath(args.dir), "xferscope-vs-kvikio.dat")
    make_file(path, size)
    kv = Kvikio(path, size)
    registered = args.registered and kv.register(True) and kv.register(False)
    variants = VARIANTS if registered else VARIANTS[:2]
    rows, env = [], {}

    def measure(variant: str, bs: int, workers: int) -> float:
        nonlocal env
        if variant.startswith("xferscope"):
            mib_s, env = xferscope_read(path, size, bs, workers, register=variant.endswith("registered"))
            return mib_s
        if variant.endswith("registered"):
            kv.register(True)
            try:
                return kv.read(bs, workers)
            finally:
                kv.register(False)
        return kv.read(bs, workers)

    try:
        for bs in [parse_size(s) for s in args.sizes.split(",")]:
            for workers in [int(w) for w in args.workers.split(",")]:
                got: dict[str, list[float]] = {v: [] for v in variants}
                for rep in range(args.reps):  # alternate the order, so drift favours neither side
                    for v in (variants if rep % 2 == 0 else tuple(reversed(variants))):
                        got[v].append(measure(v, bs, workers))
                row = {"block_size": bs, "workers": workers,
                       **{f"{v}_mib_s": statistics.median(r) for v, r in got.items()},
                       **{f"{v}_reps": r for v, r in got.items()}}
                row["ratio"] = row["xferscope_mib_s"] / row["kvikio_mib_s"]
                line = (f"{format_size(bs):>5} x{workers:<2}  unregistered: xferscope {row['xferscope_mib_s']:8.1f} "
                        f"kvikio {row['kvikio_mib_s']:8.1f} MiB/s ratio {row['ratio']:.3f}")
                if registered:
                    row["ratio_registered"] = row["xferscope_registered_mib_s"] / row["kvikio_registered_mib_s"]
                    line += (f" | registered: xferscope {row['xferscope_registered_mib_s']:8.1f} kvikio "
                             f"{row['kvikio_registered_mib_s']:8.1f} ratio {row['ratio_registered']:.3f}")
                rows.append(row)
                print(line, flush=True)
                print("        spread: " + "  ".join(f"{v} {min(r):.0f}-{max(r):.0f}" for v, r in got.items()),
                      flush=True)
        mode = env.get("cufile_mode", "?")
        print(f"cuFile mode: {mode} ({env.get('cufile_mode_reason', '')}); cuFile {env.get('cufile_version')}; "
              f"KvikIO {kv.kvikio.__version__}, compat_mode={kv.compat_mode()}")
        for key in ("ratio", "ratio_registered")[:1 + bool(registered)]:
            print(f"{key.replace('_', ' ')} xferscope/KvikIO: min {min(r[key] for r in rows):.3f}, "
                  f"median {statistics.median(r[key] for r in rows):.3f}")
        if args.json:
            with open(args.json, "w") as fh:
                json.dump({"rows": rows, "cufile_mode": mode, "cufile_mode_reason": env.get("cufile_mode_reason"),
                           "file_size": size, "kvikio": kv.kvikio.__version__,
                           "kvikio_compat_mode": kv.compat_mode()}, fh, indent=2)
    finally:
        kv.close()
        for p in (path, path + ".xferscope"):
            with contextlib.suppress(OSError):
                os.unlink(p)
    return 0


if __name__ == "__main__":
    sys.exit(main())
