"""`workload checkpoint` against DLIO's own checkpointing, side by side in interleaved rotated rounds, on one
machine: the same model (a small Llama, DLIO's formula; ZeRO-3 over ``--np`` data-parallel ranks), the host path
with the states in host memory (DLIO's CPU tensors, `torch.save` through the page cache, fsync per file).

Each round runs, in a rotated order, DLIO (``mpirun -np N dlio_benchmark workload=llama_8b_zero3`` with the model
overridden), xferscope (`workload checkpoint custom ... --ranks N --state host`), and xferscope again (the A/A).
It prints the bytes of a checkpoint (DLIO's ``checkpoint_size_GB``, which is GiB, and xferscope's), each one's
save time as DLIO gives it (rank 0's duration, the mean over the checkpoints), the ratio of xferscope's to DLIO's
with its range over the rounds, and "met" where the median ratio is within ``--within`` (10%).

DLIO does not drop the page cache between its writes and reads in one run, and xferscope does: the restores are
printed, not compared.

DLIO's llama configs say ``fsync: True``, but DLIO 2.0 (argonne-lcf/dlio_benchmark e1919d7) reads that key into
``args.checkpoint_sync`` while its checkpointing reads ``args.checkpoint_fsync`` (default False): it never calls
fsync, and its save time is the time to write into the page cache. ``--no-fsync`` runs xferscope the same way (like
for like with that DLIO); without it, compare with a DLIO whose fsync works (that one line corrected).

    python bench/checkpoint_vs_dlio.py --dlio /path/to/venv/bin/dlio_benchmark --dir /var/tmp/ck --rounds 3 --no-fsync
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

from xferscope.compare.rounds import round_orders
from xferscope.compare.verdict import paired_verdict

#: the small Llama both run: (DLIO's key, xferscope's option, value)
MODEL = (
    ("num_layers", "--layers", 2),
    ("transformer.vocab_size", "--vocab", 32000),
    ("transformer.hidden_size", "--hidden", 1024),
    ("transformer.ffn_hidden_size", "--ffn", 4096),
    ("transformer.num_attention_heads", "--heads", 16),
    ("transformer.num_kv_heads", "--kv-heads", 4),
)
GIB = 1 << 30


def dlio(a) -> tuple[int, float, float]:
    """(bytes a checkpoint, mean save seconds, mean load seconds) of one DLIO run."""
    work = tempfile.mkdtemp(dir=a.dir, prefix="dlio-")
    try:
        mpirun = [shutil.which("mpirun") or "mpirun", "--oversubscribe", "-np", str(a.np)]
        if os.geteuid() == 0:
            mpirun.insert(1, "--allow-run-as-root")
        overrides = [f"++workload.model.{key}={value}" for key, _, value in MODEL] + [
            f"++workload.checkpoint.checkpoint_folder={work}/checkpoints",
            f"++workload.checkpoint.num_checkpoints_write={a.checkpoints}",
            f"++workload.checkpoint.num_checkpoints_read={a.checkpoints}",
            "++workload.checkpoint.time_between_checkpoints=0",
            f"++workload.output.folder={work}/out",
        ]
        proc = subprocess.run(
            [*mpirun, a.dlio, "workload=llama_8b_zero3", *overrides], capture_output=True, text=True, cwd=work
        )
        if proc.returncode != 0:
            raise SystemExit(f"DLIO failed: {(proc.stdout + proc.stderr).strip()[-600:]}")
        with open(os.path.join(work, "out", "summary.json")) as fh:
            metric = json.load(fh)["metric"]
        return (
            round(metric["checkpoint_size_GB"] * GIB),
            metric["save_checkpoint_duration_mean_seconds"],
            metric["load_checkpoint_duration_mean_seconds"],
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)


def xferscope(a) -> tuple[int, float, float]:
    """(bytes a checkpoint, mean save seconds of rank 0 as DLIO times it, mean restore seconds) of one run."""
    model = [str(x) for _, option, value in MODEL for x in (option, value)]
    proc = subprocess.run(
        [sys.executable, "-m", "xferscope.cli", "workload", "checkpoint", "custom", *model, "--ranks", str(a.np),
         "--zero-stage", "3", "--checkpoints", str(a.checkpoints), "--path", "host", "--state", "host",
         "--dir", a.dir, "--format", "json", *(["--no-fsync"] if a.no_fsync else [])],
        capture_output=True,
        text=True,
    )  # fmt: skip
    if proc.returncode != 0:
        raise SystemExit(f"xferscope failed: {proc.stderr.strip()[-600:]}")
    d = json.loads(proc.stdout)
    saves = d["saves"]
    rank0 = [s["bytes"] / (s["dlio_gb_per_s"] * 1e9) for s in saves]  # DLIO's figure: the bytes over rank 0's time
    return (
        d["spec"]["bytes_a_checkpoint_here"],
        statistics.mean(rank0),
        statistics.mean(r["seconds"] for r in d["restores"]),
    )


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dlio", required=True, help="the dlio_benchmark executable")
    p.add_argument("--dir", required=True)
    p.add_argument("--np", type=int, default=8, help="ranks (DLIO's MPI ranks, xferscope's --ranks)")
    p.add_argument("--checkpoints", type=int, default=3)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--within", type=float, default=0.10)
    p.add_argument("--no-fsync", action="store_true", help="xferscope without fsync, as DLIO 2.0 writes (see above)")
    a = p.parse_args()
    print(f"{a.np} ranks, {a.checkpoints} checkpoints a run, xferscope {'without' if a.no_fsync else 'with'} fsync")
    kinds = ("dlio", "xferscope", "xferscope again")
    got: dict[str, list[tuple[int, float, float]]] = {k: [] for k in kinds}
    for order in round_orders(len(kinds), a.rounds):
        for i in order:
            got[kinds[i]].append(dlio(a) if kinds[i] == "dlio" else xferscope(a))
        print("  round: " + ", ".join(f"{k} save {v[-1][1]:.3f} s, restore {v[-1][2]:.3f} s" for k, v in got.items()))
    sizes = {k: {b for b, _, _ in v} for k, v in got.items()}
    print(f"bytes a checkpoint: DLIO {sizes['dlio']}, xferscope {sizes['xferscope']}")
    # higher is better for the verdict: rates, the reciprocal of the times
    ours = [1 / s for _, s, _ in got["xferscope"]]
    theirs = [1 / s for _, s, _ in got["dlio"]]
    again = [1 / s for _, s, _ in got["xferscope again"]]
    v, same = paired_verdict(theirs, ours), paired_verdict(again, ours)
    time_ratio = 1 / v.ratio  # xferscope's save time over DLIO's
    print(
        f"save time, xferscope / DLIO: {time_ratio:.3f} (rounds {1 / v.range_high:.3f}-{1 / v.range_low:.3f}); "
        f"A/A xferscope / xferscope: {1 / same.ratio:.3f} ({1 / same.range_high:.3f}-{1 / same.range_low:.3f})"
    )
    met = sizes["dlio"] == sizes["xferscope"] and abs(time_ratio - 1) <= a.within
    print(f"goal: the same bytes, and the time within {a.within:.0%}: {'met' if met else 'not met'}")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
