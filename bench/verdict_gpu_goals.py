"""Issue 26's goals on the GPU machine: groups "setup" and "verdicts" of bench/gpu_goals.py.

Group "setup" (the runs of a path share its engine process within one command):
  * `saturate --path cufile --bs 1M` takes at most 1.25 times its measuring time (the sum of its runs' timed
    regions, from its JSON);
  * `saturate --path host,bounce-async,cufile --bs 1M` finishes within 4 minutes.

Group "verdicts":

* the A/A spread: `compare --paths host,host --bs 1M -w 4 -T 3 --rounds 9`, the sd of the log of a round's
  paired ratio (the figure bench/verdict_goals.py takes as --ratio-spread), measured and printed;
* three invocations of `compare --paths host,bounce,bounce-async --bs 1M -w 4 -T 3` (--rounds auto) give no two
  different decided verdicts (faster, slower, same) for any path: "undecided" shows its interval and agrees with
  either (issue 37's rule, whose regions cannot overlap).

Group "knee": `saturate --path host --bs 1M`, the knee and how flat the curve is from there, with the points the
search climbed (workers at qd 1 as well as one worker's queue).
"""

from __future__ import annotations

import json
import math
import os
import statistics
import sys
import time

CMD = [sys.executable, "-m", "xferscope.cli", "compare", "--bs", "1M", "-w", "4", "-T", "3", "-s", "2G"]


def _comparison(g, name: str, args, *extra: str, need: float) -> dict | None:
    out = os.path.join(g.out, f"{name}.json")
    proc = g.run(name, [*CMD, "--dir", args.dir, "--json", out, *extra], need)
    if proc is None or proc.returncode != 0 or not os.path.exists(out):
        return None
    with open(out) as fh:
        return json.load(fh)["comparison"]


def verdict_goals(g, args, spread: bool = True) -> None:
    aa = _comparison(g, "verdict-aa", args, "--paths", "host,host", "--rounds", "9", need=110) if spread else {}
    if aa is None:
        g.say("A/A spread (host,host 1M x4, 9 rounds)", "no result", False)
    elif aa:
        base, other = aa["paths"][0]["rounds"], aa["paths"][1]["rounds"]
        logs = [math.log(o / b) for b, o in zip(base, other) if b and o]
        sd = statistics.stdev(logs) if len(logs) > 1 else float("nan")
        v = aa["paths"][1]
        print(  # a measurement, not a goal: what bench/verdict_goals.py takes as --ratio-spread
            f"# A/A spread (host,host 1M x4, 9 rounds): sd of a round's log paired ratio {sd:.3f} over {len(logs)} "
            f"rounds; host#2/host#1 {v['ratio']:.3f} ({v['interval_low']:.3f}-{v['interval_high']:.3f}), "
            f"{v['verdict_text']}",
            flush=True,
        )
    runs = []
    for i in range(3):
        comp = _comparison(
            g, f"verdict-{i + 1}", args, "--paths", "host,bounce,bounce-async", "--rounds", "auto", need=130
        )
        if comp is None:
            g.say(f"compare host,bounce,bounce-async 1M x4, invocation {i + 1}", "no result", False)
            return
        words = {p["label"]: p["verdict"] for p in comp["paths"][1:]}
        figures = ", ".join(
            f"{p['label']} {p['ratio']:.2f} ({p['interval_low']:.2f}-{p['interval_high']:.2f}) {p['verdict_text']}"
            for p in comp["paths"][1:]
        )
        print(f"# invocation {i + 1}: {comp['rounds']} rounds; {figures}", flush=True)
        runs.append((words, comp["rounds"]))
    decided = {label: {r[0][label] for r in runs} - {"undecided", "single pass: no verdict"} for label in runs[0][0]}
    g.say(
        "three invocations of compare host,bounce,bounce-async 1M x4 -T 3: no two different decided verdicts for a path",
        "; ".join(f"{', '.join(f'{k} {w}' for k, w in words.items())} in {n} rounds" for words, n in runs),
        all(len(words) <= 1 for words in decided.values()),
    )


def knee_goals(g, args) -> None:
    """`saturate --path host --bs 1M` (issue 37's GPU case): where the knee lies, how flat the curve is from there,
    and that the search climbed the workers at qd 1 as well as one worker's queue."""
    out = os.path.join(g.out, "knee.json")
    proc = g.run(
        "knee",
        [sys.executable, "-m", "xferscope.cli", "saturate", "--path", "host", "--bs", "1M", "--json", out],
        200,
        env={"TMPDIR": args.dir},
    )
    if proc is None or proc.returncode != 0 or not os.path.exists(out):
        g.say("saturate --path host --bs 1M", "no result", False)
        return
    with open(out) as fh:
        [series] = json.load(fh)["series"]
    points = sorted((p["workers"], p["iodepth"]) for p in series["points"])
    knee = series["knee"]
    print(f"# knee: points {points}; {series.get('flat')}", flush=True)
    climbed = any(w >= 4 and q == 1 for w, q in points)
    g.say(
        "saturate --path host --bs 1M climbs workers at qd 1 too, and states how flat the curve is",
        f"knee {knee['workers']}w x qd {knee['iodepth']} ({knee['concurrency']} in flight), plateau "
        f"{series['figures']['plateau_gib_s']:.2f} GiB/s; {series.get('flat')}",
        climbed and series.get("flat") is not None,
    )


def _saturate(g, name: str, paths: str, args, need: float) -> tuple[float, float, int] | None:
    """(wall seconds, measuring seconds, runs) of one `saturate --bs 1M`, or None."""
    out = os.path.join(g.out, f"{name}.json")
    t0 = time.monotonic()
    proc = g.run(
        name,
        [
            sys.executable,
            "-m",
            "xferscope.cli",
            "saturate",
            "--path",
            paths,
            "--bs",
            "1M",
            "--json",
            out,
        ],
        need,
        # the command: its embedded default, one scratch file for every point, here on the disk under test
        env={"TMPDIR": args.dir},
    )
    wall = time.monotonic() - t0
    if proc is None or proc.returncode != 0 or not os.path.exists(out):
        return None
    with open(out) as fh:
        data = json.load(fh)
    results = data.get("results") or []
    costs = [r["fixed_cost_s"] for r in results if r.get("fixed_cost_s")]
    measuring = sum(r["seconds"] for r in results)
    if costs:
        setups = [c["total"] for c in costs]
        steps = sorted({k for c in costs for k in c if k.endswith("_step")} | {"teardown"})
        medians = ", ".join(f"{k} {statistics.median(c.get(k, 0.0) for c in costs) * 1e3:.0f} ms" for k in steps)
        print(
            f"# {name}: fixed cost a run: first {setups[0]:.2f} s, median {statistics.median(setups):.2f} s, "
            f"{sum(setups):.1f} s over {len(setups)} runs; outside the runs {wall - measuring - sum(setups):.1f} s",
            flush=True,
        )
        print(f"# {name}: median steps: {medians}", flush=True)
        slow = sorted(costs, key=lambda c: -c["total"])[:3]
        print(f"# {name}: costliest runs: {slow}", flush=True)
    return wall, measuring, len(results)


#: (name, paths, seconds it needs, goal, met: (wall, measuring) -> bool)
SATURATE_GOALS = (
    ("saturate-cufile", "cufile", 150, "wall / measuring <= 1.25", lambda wall, measuring: wall <= 1.25 * measuring),
    ("saturate-three", "host,bounce-async,cufile", 250, "within 4 min", lambda wall, measuring: wall <= 240),
)


def setup_goals(g, args) -> None:
    for name, paths, need, goal, met in SATURATE_GOALS:
        label = f"saturate --path {paths} --bs 1M: {goal}"
        got = _saturate(g, name, paths, args, need=need)
        if got is None:
            g.say(label, "no result", False)
            continue
        wall, measuring, runs = got
        g.say(
            label,
            f"{wall:.0f} s for {measuring:.0f} s of measuring over {runs} runs ({wall / measuring:.2f} x)",
            met(wall, measuring),
        )
