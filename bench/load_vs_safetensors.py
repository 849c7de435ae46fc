"""A model load by xferscope's paths against `safetensors.torch.load_file(..., device="cuda")` on the same shards,
cold (the shards' pages evicted before each load), in interleaved rotated rounds. Prints each one's median load
time with its range and the ratio of safetensors' time to xferscope's best path ("met" at --goal or more).

With --shapes, each shape of `workload load`'s grid (pieces of 1, 4 and 16 MiB x 2, 4 and 8 threads) runs too,
given explicitly, through the first path; the load at its defaults (the shape its probe chooses) is then set
against the best of them ("met" within 5%). With --make DIR, the model is first written there by the safetensors
library (`safetensors.torch.save_file`, bf16, --model-gib in --shards shards) and removed at the end.

    python bench/load_vs_safetensors.py --files 'DIR/*.safetensors' [--paths host,bounce-async,cufile] [--rounds 3]
    python bench/load_vs_safetensors.py --make /var/tmp/model --paths bounce-async --shapes --rounds 2 --goal 1.3
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


SPLITS, THREADS = ("1M", "4M", "16M"), ("2", "4", "8")


def xferscope_load(pattern: str, path: str, *shape: str) -> tuple[float, str]:
    """(load time, the shape line) of one `workload load` at its defaults, or with ``shape``'s options."""
    proc = subprocess.run(
        [sys.executable, "-m", "xferscope.cli", "workload", "load", "--files", pattern, "--path", path, *shape]
        + ["--format", "json"],
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        raise SystemExit(proc.stderr.strip()[-300:])
    r = json.loads(proc.stdout)
    s = r.get("shape") or {}
    return r["load_s"], f"{s.get('split', 0) >> 20}M x{s.get('threads')} ({s.get('chosen_by')})"


def make_model(directory: str, gib: float, shards: int) -> str:
    """A model of ``gib`` GiB of bf16 tensors in ``shards`` shards, written by safetensors.torch.save_file."""
    import os

    import torch
    from safetensors.torch import save_file

    os.makedirs(directory, exist_ok=True)
    per_shard = int(gib * (1 << 30)) // shards
    rows = 4096
    for i in range(shards):
        tensors, left, k = {}, per_shard, 0
        while left > 0:
            cols = min(16384, max(1, left // (2 * rows)))
            tensors[f"layer.{i}.{k}.weight"] = torch.full((rows, cols), 1.5 + k, dtype=torch.bfloat16)
            left -= rows * cols * 2
            k += 1
        save_file(tensors, os.path.join(directory, f"model-{i + 1:05d}-of-{shards:05d}.safetensors"))
    return os.path.join(directory, "*.safetensors")


def model_options(ap: argparse.ArgumentParser) -> None:
    """The shards to load: the user's (--files), or a model written first (--make, --model-gib, --shards)."""
    ap.add_argument("--files", help="the shards (a pattern); or --make")
    ap.add_argument("--make", help="write the model here first (safetensors.torch.save_file), removed at the end")
    ap.add_argument("--model-gib", type=float, default=8.0)
    ap.add_argument("--shards", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=3)


def on_model(a: argparse.Namespace, compare) -> int:
    """``compare(a, pattern)`` over the shards of ``model_options``; a model written by --make is removed after."""
    import shutil

    pattern = make_model(a.make, a.model_gib, a.shards) if a.make else a.files
    try:
        return compare(a, pattern)
    finally:
        if a.make:
            shutil.rmtree(a.make, ignore_errors=True)


def main() -> int:
    ap = argparse.ArgumentParser()
    model_options(ap)
    ap.add_argument("--paths", default="host,bounce-async,cufile")
    ap.add_argument("--shapes", action="store_true", help="also every shape of the grid, through the first path")
    ap.add_argument("--goal", type=float, default=1.2, help="safetensors / xferscope at least this")
    return on_model(ap.parse_args(), compare)


def compare(a, pattern: str) -> int:
    shards = sorted(glob.glob(pattern))
    import torch

    torch.zeros(1, device="cuda")  # CUDA's set-up outside the timed loads, as xferscope's is
    paths = a.paths.split(",")
    shapes = {f"{s} x{t}": ("--split", s, "--threads", t) for s in SPLITS for t in THREADS} if a.shapes else {}
    names = ["safetensors", *paths, *shapes]
    times: dict[str, list[float]] = {n: [] for n in names}
    chosen: list[str] = []
    for r in range(a.rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            page_cache.evict_files(shards)
            if name == "safetensors":
                times[name].append(safetensors_load(shards))
                continue
            seconds, shape = xferscope_load(pattern, name if name in paths else paths[0], *shapes.get(name, ()))
            times[name].append(seconds)
            if name == paths[0]:
                chosen.append(shape)
    med = {n: statistics.median(v) for n, v in times.items()}
    for n, v in times.items():
        print(f"# {n:<12} load {med[n]:.2f} s ({min(v):.2f}-{max(v):.2f})")
    print(f"# {paths[0]} at its defaults ran with: {', '.join(chosen)}")
    best = min(paths, key=lambda n: med[n])
    ratio = med["safetensors"] / med[best]
    word = "met" if ratio >= a.goal else "not met"
    print(
        f"{word}  load, cold: safetensors / xferscope {best} >= {a.goal:g}: {ratio:.2f} "
        f"({med['safetensors']:.2f} s against {med[best]:.2f} s)"
    )
    if shapes:
        fastest = min(shapes, key=lambda n: med[n])
        over = med[paths[0]] / med[fastest]
        word = "met" if over <= 1.05 else "not met"
        print(
            f"{word}  load at its defaults within 5% of the grid's best shape: {over:.3f} x "
            f"({med[paths[0]]:.2f} s against {fastest} {med[fastest]:.2f} s)"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
