"""xferscope's paths against the libraries users load models and save checkpoints with, each in one command of
rotated rounds, bounce-async twice for an A/A pair. Prints each path's median with its range, then each goal of
the libraries' issue with its paired ratio (the median of the per-round ratios, with their range) and "met" or
"not met".

Load (the default): one `workload load` of every path and library over the same shards, cold:

* xferscope's fastest path at least 1.1 x the fastest library (fastsafetensors either way, the streamer,
  safetensors), and at least 1.3 x safetensors;
* host, xferscope's imitation of safetensors, within 10% of safetensors itself.

With --make DIR the model is first written there by the safetensors library (``load_vs_safetensors.make_model``:
bf16, --model-gib in --shards shards), removed at the end.

Checkpoint (``--checkpoint DIR``): one `workload checkpoint llama3-8b --subset --scale S` of xferscope's paths,
torch.save and DCP (each a process a rank), a checkpoint a run, fsync on:

* xferscope's fastest path saves at least 1.2 x faster than torch-save and than dcp, and restores at least 1.0 x
  as fast as each;
* host, xferscope's imitation of torch.save, within 10% of torch-save itself.

Then, where the restores are level, what bounds them: each path's restore GB/s (the slowest rank's, every rank's
range) against the storage's own rate, a plain O_DIRECT read of 8 files of the ranks' size by `xferscope run`
(16M x8, host memory) right after the comparison (--no-ceiling leaves it out).

A library that is not installed is left out, and said so.

    python bench/libraries_goals.py --make /var/tmp/model --rounds 3 [--json out.json]
    python bench/libraries_goals.py --files 'DIR/*.safetensors'
    python bench/libraries_goals.py --checkpoint /var/tmp/xs --scale 0.05 --rounds 3  [--no-ceiling]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from load_vs_safetensors import model_options, on_model

from xferscope.compare.rounds import path_labels, round_orders
from xferscope.workloads.common.libraries import CHECKPOINT_LIBRARIES, LOAD_LIBRARIES, refusal

OURS = ("host", "bounce", "bounce-async", "cufile")


def per_round(paths: list[str], rounds: int, results: list[dict], key=lambda res: res["load_s"]):
    """Each label's figure (``key``: a load's time) in each round (None where it did not finish), from the results
    in the order run."""
    labels = path_labels(paths)
    times: dict[str, list[float | None]] = {lab: [None] * rounds for lab in labels}
    it = iter(results)
    for r, order in enumerate(round_orders(len(labels), rounds)):
        for i in order:
            res = next(it, None)
            if res is not None:
                times[labels[i]][r] = key(res) if res["status"] == "ok" else None
    return times


def ratio(times: dict[str, list[float | None]], slow: str, fast: str) -> tuple[float, float, float] | None:
    """The median of the per-round ratios ``slow`` / ``fast``, with their range; None without a paired round."""
    pairs = [a / b for a, b in zip(times[slow], times[fast]) if a and b]
    return (statistics.median(pairs), min(pairs), max(pairs)) if pairs else None


def goal(name: str, r: tuple[float, float, float] | None, ok) -> None:
    if r is None:
        print(f"not met  {name}: no round paired them")
        return
    print(f"{'met' if ok(r[0]) else 'not met':<8} {name}: {r[0]:.2f} ({r[1]:.2f}-{r[2]:.2f})")


def main() -> int:
    ap = argparse.ArgumentParser()
    model_options(ap)
    ap.add_argument("--ours", default="host,bounce-async,cufile", help="xferscope's paths (bounce-async runs twice)")
    ap.add_argument("--json", help="the comparison's record")
    ap.add_argument("--checkpoint", metavar="DIR", help="the checkpoint goals, written under DIR (not the load's)")
    ap.add_argument("--scale", type=float, default=0.05, help="checkpoint: each file's share (0.05: 5.24 GiB)")
    ap.add_argument("--no-ceiling", action="store_true", help="checkpoint: no plain read of the storage after")
    a = ap.parse_args()
    return checkpoint(a) if a.checkpoint else on_model(a, compare)


def available(ours: str, libraries: dict) -> tuple[list[str], list[str]]:
    """xferscope's paths of ``ours`` that can run here, and the libraries that can (those left out said so)."""
    from xferscope.engines.registry import unavailable_reason

    mine = [p for p in ours.split(",") if p in ("host", "mmap") or not unavailable_reason(p)]
    libs = []
    no_gpu = unavailable_reason("bounce")
    for p, lib in libraries.items():
        why = refusal(lib) or (f"no GPU here ({no_gpu})" if no_gpu and p == "fastsafetensors-gds" else None)
        if why:
            print(f"# {p} left out: {why}")
        else:
            libs.append(p)
    return mine, libs


def compared(cmd: list[str], rounds: int, out: str) -> dict | int:
    """``cmd``'s comparison of ``rounds`` rounds, its output printed: its JSON record, or its exit code where it
    failed."""
    proc = subprocess.run([*cmd, "--rounds", str(rounds), "--json", out], capture_output=True, text=True)
    print(proc.stdout.rstrip())
    if proc.returncode != 0:
        print(proc.stderr.strip()[-2000:])
        return proc.returncode
    with open(out) as fh:
        return json.load(fh)


def median_of(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def checkpoint(a) -> int:
    """The checkpoint goals: every path and library in one `workload checkpoint` of rotated rounds."""
    ours, libraries = available(a.ours, CHECKPOINT_LIBRARIES)
    paths = [*ours, *libraries, *(["bounce-async"] if "bounce-async" in ours else [])]
    out = a.json or os.path.join(a.checkpoint, "libraries-checkpoint.json")
    cmd = [sys.executable, "-m", "xferscope.cli", "workload", "checkpoint", "llama3-8b", "--subset", "--scale",
           str(a.scale), "--checkpoints", "1", "--dir", a.checkpoint, "--path", ",".join(paths)]  # fmt: skip
    print("# " + " ".join(cmd[2:]), flush=True)
    d = compared(cmd, a.rounds, out)
    if isinstance(d, int):
        return d
    save = per_round(paths, a.rounds, d["results"], lambda r: median_of([s["seconds"] for s in r["saves"]]))
    restore = per_round(paths, a.rounds, d["results"], lambda r: median_of([s["seconds"] for s in r["restores"]]))
    said = {r["library"]["path"]: r["library"] for r in d["results"] if r.get("library")}
    for lib in said.values():
        print(f"# {lib['path']}: torch {lib['torch']}; {lib['io_mode']}; set-up {lib['setup_s']}")
    med = {lab: statistics.median([t for t in v if t]) for lab, v in save.items() if any(v)}
    for what, times in (("save", save), ("restore", restore)):
        if "bounce-async#1" in times:
            r = ratio(times, "bounce-async#2", "bounce-async#1")
            print(
                f"# A/A {what} bounce-async#2 / #1: {r[0]:.3f} ({r[1]:.3f}-{r[2]:.3f})" if r else "# A/A: none paired"
            )
    mine = [lab for lab in med if lab.split("#")[0] in OURS]
    if not mine or not any(lab in CHECKPOINT_LIBRARIES for lab in med):
        print("not met  no library (or none of xferscope's paths) ran here")
        return 0
    best = min(mine, key=lambda lab: med[lab])
    print(f"# xferscope's fastest save: {best} {med[best]:.2f} s")
    for lib in (p for p in CHECKPOINT_LIBRARIES if p in med):
        goal(f"save {lib} / {best} >= 1.2", ratio(save, lib, best), lambda x: x >= 1.2)
        goal(f"restore {lib} / {best} >= 1.0", ratio(restore, lib, best), lambda x: x >= 1.0)
    if "torch-save" in med and "host" in med:
        goal(
            "save host / torch-save (the imitation) within 10%", ratio(save, "host", "torch-save"),
            lambda x: abs(x - 1) <= 0.1,
        )  # fmt: skip
    if not a.no_ceiling:
        restores_against_storage(a, paths, d["results"])
    return 0


def restores_against_storage(a, paths: list[str], results: list[dict]) -> None:
    """Each path's restore GB/s (median over its rounds) and every rank's restore seconds (their range over the
    rounds), then the same bytes' worth of plain O_DIRECT reads by `xferscope run` (16M x8 into host memory, a file a
    rank): the storage's own rate, which a restore at its ceiling meets whatever path reads it."""
    per_path = per_round(paths, a.rounds, results, lambda r: [p["gb_per_s"] for p in r["restores"]])
    per_ranks = per_round(paths, a.rounds, results, lambda r: [x["restore_seconds"] for x in r["ranks"]])
    rates = {lab: [g for each in v if each for g in each] for lab, v in per_path.items()}
    rates = {lab: v for lab, v in rates.items() if v}
    ranks = {lab: [s for each in v if each for s in each if s] for lab, v in per_ranks.items()}
    if not rates:
        return
    per_rank = max(r["bytes"] for r in results[0]["ranks"]) if results and results[0].get("ranks") else 0
    where = os.path.join(a.checkpoint, "ceiling")
    out = os.path.join(a.checkpoint, "ceiling.json")
    cmd = [sys.executable, "-m", "xferscope.cli", "run", "--path", "host", "--bs", "16M", "-w", "8", "-s",
           str(max(per_rank, 1 << 28)), "-T", "3", "--dir", where, "--json", out]  # fmt: skip
    print("# " + " ".join(cmd[2:]), flush=True)
    os.makedirs(where, exist_ok=True)
    proc = subprocess.run(cmd, capture_output=True, text=True)
    os.rmdir(where)  # its scratch files are gone with the run
    plain = None
    if proc.returncode == 0 and os.path.exists(out):
        with open(out) as fh:
            plain = json.load(fh)["throughput_mb_s"] / 1000
    else:
        print(proc.stderr.strip()[-600:])
    print(f"# the storage, a plain O_DIRECT read 16M x8: {plain:.2f} GB/s" if plain else "# the plain read failed")
    for lab, v in sorted(rates.items(), key=lambda kv: -statistics.median(kv[1])):
        gbs = statistics.median(v)
        share = f", {gbs / plain:.2f} of the plain read" if plain else ""
        rs = ranks.get(lab)
        each = f"; ranks {min(rs):.2f}-{max(rs):.2f} s" if rs else ""
        print(f"# restore {lab}: {gbs:.2f} GB/s ({min(v):.2f}-{max(v):.2f}){share}{each}")


def compare(a, pattern: str) -> int:
    ours, libraries = available(a.ours, LOAD_LIBRARIES)
    paths = [*ours, *libraries, *(["bounce-async"] if "bounce-async" in ours else [])]
    out = a.json or "/tmp/xferscope-libraries-goals.json"
    cmd = [sys.executable, "-m", "xferscope.cli", "workload", "load", "--files", pattern, "--path", ",".join(paths)]
    d = compared(cmd, a.rounds, out)
    if isinstance(d, int):
        return d
    times = per_round(paths, a.rounds, d["results"])
    med = {lab: statistics.median([t for t in v if t]) for lab, v in times.items() if any(v)}
    said = {r["library"]["path"]: r["library"] for r in d["results"] if r.get("library")}
    for p, lib in said.items():
        print(f"# {p}: {lib['package']} {lib['version']}, torch {lib['torch']}: {lib['io_mode']}")
    ours_labels = [lab for lab in med if lab.split("#")[0] in OURS]
    lib_labels = [lab for lab in med if lab in LOAD_LIBRARIES]
    if "bounce-async#1" in times:
        r = ratio(times, "bounce-async#2", "bounce-async#1")
        print(f"# A/A bounce-async#2 / #1: {r[0]:.3f} ({r[1]:.3f}-{r[2]:.3f})" if r else "# A/A: no paired round")
    if not ours_labels or not lib_labels:
        print("not met  no library (or none of xferscope's paths) ran here")
        return 0
    best_ours = min(ours_labels, key=lambda lab: med[lab])
    best_lib = min(lib_labels, key=lambda lab: med[lab])
    print(f"# fastest: xferscope {best_ours} {med[best_ours]:.2f} s, library {best_lib} {med[best_lib]:.2f} s")
    goal(
        f"{best_lib} / {best_ours} (fastest library / xferscope's fastest) >= 1.1",
        ratio(times, best_lib, best_ours),
        lambda x: x >= 1.1,
    )
    if "safetensors" in med:
        goal(f"safetensors / {best_ours} >= 1.3", ratio(times, "safetensors", best_ours), lambda x: x >= 1.3)
        if "host" in med:
            goal(
                "host / safetensors (the imitation) within 10%",
                ratio(times, "host", "safetensors"),
                lambda x: abs(x - 1) <= 0.1,
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
