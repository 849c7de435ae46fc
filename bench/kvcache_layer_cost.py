"""The KV-cache workload's own cost: `workload kvcache` against a plain `xferscope run` of the same path with the
chunk (or layer plane) size as block size and the same concurrency, in interleaved rotated rounds, with an A/A
pair of the plain run beside. The plain run's file is as large as the cache (the same bytes on the disk: a
larger file can sit differently in the virtual disk's own caches). Prints the median ratio of GB/s (kvcache / run) with its range, and "met" where it is
at least 0.95.

    python bench/kvcache_layer_cost.py --dir /var/tmp/xs --path bounce-async [--layout block] [--rounds 3]
        [--prompt-tokens 8192] [--seconds 4] [--concurrency 4]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

XS = [sys.executable, "-m", "xferscope.cli"]


def run(cmd: list[str]) -> dict:
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)}: {proc.stderr.strip()[-300:]}")
    return json.loads(proc.stdout)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--path", default="bounce-async")
    ap.add_argument("--layout", default="block")
    ap.add_argument("--model", default="llama3.1-8b")
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--prompt-tokens", default="8192", help="each request's tokens (a request is read in order)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=4.0)
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="xferscope-kvcost-", dir=a.dir)
    try:
        made = run(
            [
                *XS,
                "workload",
                "kvcache",
                "--model",
                a.model,
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
            ]
        )
        cache = made["cache"]["where"]
        read = made["cache"]["chunk_payload_bytes"] if a.layout == "block" else None
        if read is None:
            _kv, _layers, tokens, hidden = made["cache"]["chunk_shape"]
            read = tokens * hidden * 2
        bs = f"{read // 1024}K"
        size = f"{-(-made['cache']['bytes'] // (1 << 20))}M"
        scratch = os.path.join(work, "plain.dat")
        kvcmd = [
            *XS,
            "workload",
            "kvcache",
            "--cache",
            cache,
            "--model",
            a.model,
            "--prompt-tokens",
            a.prompt_tokens,
            "--layout",
            a.layout,
            "-c",
            str(a.concurrency),
            "-T",
            str(a.seconds),
            "--path",
            a.path,
            "--format",
            "json",
        ]
        plain = [
            *XS,
            "run",
            "--path",
            a.path,
            "--bs",
            bs,
            "-w",
            str(a.concurrency),
            "-T",
            str(a.seconds),
            "--file",
            scratch,
            "--size",
            size,
            "--format",
            "json",
        ]
        runs: dict[str, list[float]] = {"kvcache": [], "run#1": [], "run#2": []}
        order = list(runs)
        for r in range(a.rounds):
            for name in order[r % 3 :] + order[: r % 3]:
                if name == "kvcache":
                    runs[name].append(run(kvcmd)["gb_per_s"])
                else:
                    runs[name].append(run(plain)["throughput_mb_s"] / 1000)
        ratios = [k / p for k, p in zip(runs["kvcache"], runs["run#1"])]
        aa = [x / y for x, y in zip(runs["run#2"], runs["run#1"])]
        med = statistics.median(ratios)
        print(
            f"# {a.path} {a.layout} {bs} x{a.concurrency}, {a.prompt_tokens}-token requests, plain file {size}: kvcache {runs['kvcache']} run {runs['run#1']} A/A {runs['run#2']} GB/s"
        )
        word = "met" if med >= 0.95 else "not met"
        print(
            f"{word}  kvcache / run GB/s ({a.path}, {a.layout}, {bs} x{a.concurrency}): {med:.3f} "
            f"({min(ratios):.3f}-{max(ratios):.3f}); A/A {statistics.median(aa):.3f} ({min(aa):.3f}-{max(aa):.3f})"
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
