#!/usr/bin/env python3
"""Has the suite grown slower, test for test, since an earlier commit?

The whole suite's time grows with every test a feature adds, so it says nothing of whether the same tests got
slower. This runs only the tests both trees have (the same node ids), once in each tree per round, in rotated
order (round 1 the earlier tree first, round 2 this one first, ...), and prints each round's times and the ratio
this tree / the earlier one, their median and range, and the A/A of each tree (its runs against each other, round
to round): a ratio inside that noise is no change.

    python bench/suite_against.py c147d37 --rounds 2

The earlier tree is checked out in a temporary git worktree, its C extensions built in place, and removed at the
end; each tree runs with its own `src` first on the import path, so the installed xferscope does not matter.
Nothing else should run on the machine meanwhile: the suite is CPU-bound.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
SUMMARY = re.compile(r"(\d+) passed.* in ([\d.]+)s")


def test_ids(tree: Path) -> set[str]:
    """The node ids pytest collects in ``tree`` (its own source first on the path)."""
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-n", "0", "-p", "no:cacheprovider"],
        cwd=tree,
        env={**os.environ, "PYTHONPATH": str(tree / "src")},
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    return {line for line in out.splitlines() if "::" in line}


def run_suite(tree: Path, ids_file: Path) -> tuple[int, float]:
    """The tests named in ``ids_file``, run in ``tree`` with the suite's own options: (passed, seconds)."""
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"@{ids_file}"],
        cwd=tree,
        env={**os.environ, "PYTHONPATH": str(tree / "src")},
        capture_output=True,
        text=True,
        check=False,
    )
    found = SUMMARY.search(proc.stdout.splitlines()[-1] if proc.stdout else "")
    if proc.returncode != 0 or not found:
        tail = "\n".join(proc.stdout.splitlines()[-15:])
        raise SystemExit(f"suite_against: the run in {tree} failed (exit {proc.returncode}):\n{tail}")
    return int(found.group(1)), float(found.group(2))


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):.3f} ({min(values):.3f}-{max(values):.3f})"


@contextlib.contextmanager
def earlier_tree(rev: str, script: str, build: bool = False) -> Iterator[Path]:
    """The tree of commit ``rev`` in a temporary git worktree (its C extensions built in place with ``build``),
    removed at the end; ``script`` names the caller in the one line that refuses an unknown commit."""
    known = ["git", "rev-parse", "--quiet", "--verify", f"{rev}^{{commit}}"]
    if subprocess.run(known, cwd=HERE, capture_output=True, check=False).returncode != 0:
        raise SystemExit(f"{script}: {rev!r} is not a commit of this repository")
    with tempfile.TemporaryDirectory(prefix=f"xs-{script}-") as tmp:
        earlier = Path(tmp) / "earlier"
        subprocess.run(["git", "worktree", "add", "-q", "--detach", str(earlier), rev], cwd=HERE, check=True)
        try:
            if build:
                subprocess.run(
                    [sys.executable, "setup.py", "-q", "build_ext", "--inplace"],
                    cwd=earlier,
                    check=True,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            yield earlier
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(earlier)], cwd=HERE, check=False)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("rev", help="the earlier commit")
    ap.add_argument("--rounds", type=int, default=2, help="rounds, each running both trees (default 2)")
    ap.add_argument("--match", default="", help="only the tests whose node id holds this text (default: all)")
    args = ap.parse_args()
    if args.rounds < 1:
        raise SystemExit("suite_against: --rounds must be at least 1")
    with earlier_tree(args.rev, "suite_against", build=True) as earlier, tempfile.TemporaryDirectory() as tmp:
        common = sorted(i for i in test_ids(earlier) & test_ids(HERE) if args.match in i)
        if not common:
            raise SystemExit("suite_against: the two trees have no test in common")
        ids_file = Path(tmp) / "ids.txt"
        ids_file.write_text("\n".join(common) + "\n")
        print(f"{len(common)} tests in both trees; {args.rounds} round(s)", flush=True)
        times: dict[str, list[float]] = {"earlier": [], "this": []}
        ratios = []
        for r in range(args.rounds):
            order = [("earlier", earlier), ("this", HERE)]
            if r % 2:
                order.reverse()
            for name, tree in order:
                passed, seconds = run_suite(tree, ids_file)
                times[name].append(seconds)
                print(f"round {r + 1}: {name:8} {seconds:7.1f} s ({passed} passed)", flush=True)
            ratios.append(times["this"][-1] / times["earlier"][-1])
        print(f"this / {args.rev}: {spread(ratios)}")
        for name, values in times.items():
            if len(values) > 1:
                print(f"A/A {name}: {spread([v / values[0] for v in values[1:]])} (its later runs / its first)")


if __name__ == "__main__":
    main()
