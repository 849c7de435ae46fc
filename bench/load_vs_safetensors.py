"""A model load by xferscope's paths against `safetensors.torch.load_file(..., device="cuda")` on the same shards,
cold (the shards' pages evicted before each load), in interleaved rotated rounds. Prints each one's median load
time with its range and the ratio of safetensors' time to xferscope's best path ("met" at 1.2 or more).

    python bench/load_vs_safetensors.py --files 'DIR/*.safetensors' [--paths host,bounce-async,cufile] [--rounds 3]
"""

from __future__ import annotations

import argparse
import glob
import json
import statistics
import subprocess
import sys
import time

from xferscope.engines import page_cache


def safetensors_load(paths: list[str]) -> float:
    import torch
    from safetensors.torch import load_file

    t0 = time.perf_counter()
    kept = [load_file(p, device="cuda") for p in paths]
    torch.cuda.synchronize()
    seconds = time.perf_counter() - t0
    del kept
    torch.cuda.empty_cache()
    return seconds


def xferscope_load(pattern: str, path: str) -> float:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "xferscope.cli",
            "workload",
            "load",
            "--files",
            pattern,
            "--path",
            path,
            "--format",
            "json",
        ],
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        raise SystemExit(proc.stderr.strip()[-300:])
    return json.loads(proc.stdout)["load_s"]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", required=True)
    ap.add_argument("--paths", default="host,bounce-async,cufile")
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    shards = sorted(glob.glob(a.files))
    import torch

    torch.zeros(1, device="cuda")  # CUDA's set-up outside the timed loads, as xferscope's is
    names = ["safetensors", *a.paths.split(",")]
    times: dict[str, list[float]] = {n: [] for n in names}
    for r in range(a.rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            page_cache.evict_files(shards)
            times[name].append(safetensors_load(shards) if name == "safetensors" else xferscope_load(a.files, name))
    med = {n: statistics.median(v) for n, v in times.items()}
    for n, v in times.items():
        print(f"# {n:<12} load {med[n]:.2f} s ({min(v):.2f}-{max(v):.2f})")
    best = min((n for n in names if n != "safetensors"), key=lambda n: med[n])
    ratio = med["safetensors"] / med[best]
    word = "met" if ratio >= 1.2 else "not met"
    print(
        f"{word}  load, cold: safetensors / xferscope {best}: {ratio:.2f} ({med['safetensors']:.2f} s against {med[best]:.2f} s)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
