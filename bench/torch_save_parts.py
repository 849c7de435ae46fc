"""Where torch.save's time goes when it saves a GPU tensor, against xferscope's host path, which imitates it: one
rank's share of llama3-8b's subset checkpoint at --scale 0.05 (670 MiB, uint8) in GPU memory, saved to a new file
and fsynced, in rounds:

* ``torch.save(gpu tensor)``: the whole call, as the torch-save path times it;
* its parts, done by hand: ``t.cpu()`` (the whole storage copied to pageable host memory, before the first byte
  is written), then ``torch.save`` of the host tensor (the zip archive's writes), then ``os.fsync``.

xferscope's host path copies and writes the same bytes in 16 MiB pieces, one piece's write after its copy; the
parts say how much of torch.save's time is the whole-tensor copy it makes first.

    python bench/torch_save_parts.py --dir /var/tmp/xs [--mib 670] [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--mib", type=int, default=670)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    import torch

    t = torch.randint(0, 255, (a.mib << 20,), dtype=torch.uint8, device="cuda:0")
    torch.cuda.synchronize()
    path = os.path.join(a.dir, "torch-save-parts.pt")
    figures: dict[str, list[float]] = {
        "whole torch.save + fsync": [],
        "t.cpu()": [],
        "save host tensor": [],
        "fsync": [],
    }

    def synced(p: str) -> float:
        t0 = time.perf_counter()
        fd = os.open(p, os.O_RDONLY)
        os.fsync(fd)
        os.close(fd)
        return time.perf_counter() - t0

    try:
        for _ in range(a.rounds):
            t0 = time.perf_counter()
            torch.save({"model": t}, path)
            figures["whole torch.save + fsync"].append(time.perf_counter() - t0 + synced(path))
            os.unlink(path)
            t0 = time.perf_counter()
            host = t.cpu()
            figures["t.cpu()"].append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            torch.save({"model": host}, path)
            figures["save host tensor"].append(time.perf_counter() - t0)
            figures["fsync"].append(synced(path))
            os.unlink(path)
            del host
    finally:
        if os.path.exists(path):
            os.unlink(path)
    gb = (a.mib << 20) / 1e9
    print(f"# {a.mib} MiB from GPU memory, torch {torch.__version__}, {a.rounds} rounds: median (range), GB/s")
    for name, values in figures.items():
        m = statistics.median(values)
        print(f"{name:>26}: {m:.3f} s ({min(values):.3f}-{max(values):.3f}), {gb / m:.2f} GB/s")
    parts = sum(statistics.median(figures[k]) for k in ("t.cpu()", "save host tensor", "fsync"))
    whole = statistics.median(figures["whole torch.save + fsync"])
    print(
        f"# the copy first: {statistics.median(figures['t.cpu()']) / whole:.0%} of the whole call; parts sum {parts:.3f} s"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
