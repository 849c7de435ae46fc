"""The inference workloads' GPU goals (groups "kvcache" and "load" of bench/gpu_goals.py).

* kvcache for llama3.1-8b (256-token chunks of 32 MiB, 8192-token prompts, 4 at once), block and layer, through
  bounce-async and cufile: restore p50/p99, GB/s per GPU, CPU-s/GiB (met: the run ends with requests restored);
* the workload layer's cost: kvcache GB/s >= 0.95 x a plain run of the same path and read size
  (bench/kvcache_layer_cost.py);
* load of a generated 8 GB model (llama3.1-8b in fp8), cold, through every path side by side: time to load,
  first byte on the GPU, GB/s, CPU-s/GiB (met: every path loads);
* against safetensors.torch.load_file(device="cuda") on the same shards, cold (bench/load_vs_safetensors.py):
  xferscope's best path >= 1.2 x faster.
"""

from __future__ import annotations

import json
import os
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
XS = [sys.executable, "-m", "xferscope.cli"]


def _json(g, name: str, cmd: list[str], need: float) -> dict | None:
    proc = g.run(name, cmd, need)
    if proc is None or proc.returncode != 0:
        if proc is not None:
            print(f"#   {proc.stderr.strip()[-400:]}", flush=True)
        return None
    with open(os.path.join(g.out, f"{name}.json"), "w") as fh:
        fh.write(proc.stdout)
    return json.loads(proc.stdout)


def _ms(x) -> str:
    return "-" if x is None else f"{1000 * x:.1f} ms"


def _bench(g, name: str, script: str, args: list[str], need: float, label: str) -> None:
    proc = g.run(name, [sys.executable, os.path.join(HERE, script), *args], need)
    if proc is None:
        g.say(label, "not run: no time left", None)
        return
    said = False
    for line in proc.stdout.splitlines():
        if line.startswith("#"):
            print(line, flush=True)
        if line.strip().startswith(("met", "not met")):
            word, _, text = line.strip().partition("  ")
            g.say(f"{label}: {text.split(':')[0]}", text.partition(": ")[2], word == "met")
            said = True
    if not said:
        g.say(label, f"no figure: {proc.stderr.strip()[-300:]}", False)


def kvcache_goals(g, args) -> None:
    work = os.path.join(args.dir, "kv")
    os.makedirs(work, exist_ok=True)
    try:
        made = _json(
            g,
            "kv-cache",
            [
                *XS,
                "workload",
                "kvcache",
                "--prompt-tokens",
                "8192",
                "-n",
                "1",
                "--keep",
                "--dir",
                work,
                "--path",
                "host",
                "--format",
                "json",
            ],
            60,
        )
        if made is None:
            g.say("kvcache llama3.1-8b", "the cache could not be made", False)
            return
        cache = made["cache"]["where"]
        for layout in ("block", "layer"):
            for path in ("bounce-async", "cufile"):
                r = _json(
                    g,
                    f"kv-{layout}-{path}",
                    [
                        *XS,
                        "workload",
                        "kvcache",
                        "--cache",
                        cache,
                        "--prompt-tokens",
                        "8192",
                        "-c",
                        "4",
                        "-T",
                        "5",
                        "--layout",
                        layout,
                        "--path",
                        path,
                        "--format",
                        "json",
                    ],
                    25,
                )
                if r is None:
                    g.say(f"kvcache llama3.1-8b {layout} through {path}", "no result", False)
                    continue
                gpus = ", ".join(f"{x['gb_per_s']:.2f}" for x in r["per_gpu"])
                g.say(
                    f"kvcache llama3.1-8b {layout} through {path} (8192-token prompts x4)",
                    f"{r['requests']} requests, restore p50 {_ms(r['restore_p50_s'])} p99 {_ms(r['restore_p99_s'])}, "
                    f"{gpus} GB/s per GPU, {r['tokens_per_s']:.0f} tokens/s, {r['cpu_s_per_gib']:.3f} CPU-s/GiB",
                    r["status"] == "ok" and r["requests"] > 0,
                )
        _bench(
            g,
            "kv-layer-cost",
            "kvcache_layer_cost.py",
            # seven rounds: one run against the next moves by up to 16% on a virtual disk (bench/RESULTS.md)
            ["--dir", args.dir, "--path", "bounce-async", "--rounds", "7", "--seconds", "4"],
            210,
            "kvcache layer cost (bounce-async)",
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)


def load_goals(g, args) -> None:
    work = os.path.join(args.dir, "load")
    os.makedirs(work, exist_ok=True)
    try:
        made = _json(
            g,
            "load-shards",
            [
                *XS,
                "workload",
                "load",
                "--model",
                "llama3.1-8b",
                "--dtype",
                "fp8",
                "--keep",
                "--dir",
                work,
                "--path",
                "host",
                "--format",
                "json",
            ],
            90,
        )
        if made is None:
            g.say("load llama3.1-8b fp8 (8 GB)", "the shards could not be made", False)
            return
        pattern = os.path.join(made["data"]["where"], "*.safetensors")
        side = _json(
            g,
            "load-paths",
            [
                *XS,
                "workload",
                "load",
                "--files",
                pattern,
                "--path",
                "host,bounce,bounce-async,cufile",
                "--rounds",
                "1",
                "--format",
                "json",
            ],
            90,
        )
        if side is None:
            g.say("load 8 GB cold through every path", "no result", False)
        else:
            for r in side["results"]:
                g.say(
                    f"load 8 GB (llama3.1-8b fp8) cold through {r['spec']['path']}",
                    f"{r['load_s'] or float('nan'):.2f} s, first byte on the GPU {_ms(r['first_byte_s'])}, "
                    f"{r['gb_per_s'] or float('nan'):.2f} GB/s, {r['cpu_s_per_gib'] or float('nan'):.3f} CPU-s/GiB, "
                    f"slowest shard {r['slowest_shard']}",
                    r["status"] == "ok",
                )
        _bench(
            g,
            "load-vs-safetensors",
            "load_vs_safetensors.py",
            ["--files", pattern, "--rounds", "2"],
            120,
            "load vs safetensors",
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)
