"""Issue 36's GPU goals (group "shape" of bench/gpu_goals.py): every path and workload at its best on the machine
at hand.

* bounce-async >= bounce and >= 0.95 x host at 64K x8, 1M x4 and 16M x4, and its CPU-s/GiB <= 1.5 x host's at
  1M x4 and 16M x4, <= 2 x at 64K x8 (`compare --paths host,host,bounce,bounce-async`, the storage group);
* --source cache, 1M x8: bounce-async >= 0.9 x host (the cache group);
* doctor's buffer-set ratio (reads into 16 buffers a worker against one) within 5% of the timeline's read times
  for the same sets (bench/bounce_timeline.py, host@n16 against host);
* `workload load` at its defaults within 5% of the best shape of its grid, and >= 1.3 x faster than
  safetensors.torch.load_file(device="cuda"), cold, on an 8 GiB model in 4 shards written by safetensors
  (bench/load_vs_safetensors.py --make);
* `workload train cosmoflow --path bounce-async`'s data rate >= 0.95 x a plain run (bench/train_layer_cost.py).
"""

from __future__ import annotations

import json
import os
import re
import statistics
import sys

from inference_goals import _bench

HERE = os.path.dirname(os.path.abspath(__file__))


def shape_goals(g, args, storage_points, cache_point) -> None:
    """Every goal of the group, the cheapest first: the load's, the longest, last."""
    storage_points(g, args)
    cache_point(g, args)
    buffer_ratio(g, args)
    train_cost(g, args)
    load_shape(g, args)


def buffer_ratio(g, args) -> None:
    """doctor's ratio for 16 buffers against the timeline's read times, same shape (1M x4, O_DIRECT), one right
    after the other."""
    ran = g.run("doctor-probe", [sys.executable, "-m", "xferscope.cli", "doctor", "--dir", args.dir], 30)
    doctor_text = ran.stdout if ran is not None else ""
    name = "timeline-buffer-sets"
    out = os.path.join(g.out, f"{name}.json")
    timeline = g.run(
        name,
        [sys.executable, os.path.join(HERE, "bounce_timeline.py"), "--dir", args.dir, "--size", "512M"]
        + ["--bs", "1M", "--workers", "4", "--seconds", "0.6", "--rounds", "3", "--variants", "host,host@n16"]
        + ["--json", out],
        25,
    )
    label = "doctor's buffer-set ratio within 5% of the timeline's read times (16 buffers against 1, 1M x4)"
    found = re.search(r"into 16 ([0-9.]+)x", doctor_text)
    if found is None or timeline is None or timeline.returncode or not os.path.exists(out):
        g.say(label, "not measured", None)
        return
    with open(out) as fh:
        runs = json.load(fh)["runs"]
    read = {v: statistics.median(r["read_ms"] for r in rs) for v, rs in runs.items()}
    theirs, ours = read["host@n16"] / read["host"], float(found.group(1))
    g.say(
        label,
        f"doctor {ours:.2f}x, timeline {theirs:.2f}x ({read['host@n16']:.3f} against {read['host']:.3f} ms a read)",
        abs(ours / theirs - 1) <= 0.05,
    )


def load_shape(g, args) -> None:
    work = os.path.join(args.dir, "st-model")
    options = ["--make", work, "--paths", "bounce-async", "--shapes", "--rounds", "2", "--goal", "1.3"]
    _bench(g, "load-shapes", "load_vs_safetensors.py", options, 150, "load (8 GiB, 4 shards by safetensors)")


def train_cost(g, args) -> None:
    options = ["--dir", args.dir, "--path", "bounce-async", "--rounds", "5", "--seconds", "3"]
    _bench(g, "train-layer-cost", "train_layer_cost.py", options, 70, "train cosmoflow through bounce-async")
