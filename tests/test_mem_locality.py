"""Memory latency as MLC and multichase report it: the chase's locality (multichase's -T), page sizes, the
cache-level curve, the NUMA matrix (a fake two-node topology through the sysfs root), the max-bandwidth table,
and several results side by side."""

import csv
import itertools
import json
import os
import re
from pathlib import Path

import pytest

from xferscope import _memcore
from xferscope.errors import EnvironmentProblem, SpecError
from xferscope.memory.machine import cache_levels, huge_pool, numa_topology, pages_obtained
from xferscope.memory.plan import curve_sizes, matrix_cells, resolve_plan
from xferscope.memory.result import CURVE, IDLE, cache_plateaus, rising_plateaus
from xferscope.memory.spec import locality_bytes, locality_label, normalise_locality
from xferscope.memory.sweep import MemSpec, busy_warning, point_from_windows
from xferscope.records import MemPoint

PAGE = _memcore.PAGE_BYTES
TWO_NODES_REAL = os.path.isdir("/sys/devices/system/node/node1")


def two_cpus():
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        pytest.skip("needs two CPUs")
    return cpus[:2]


def make_sysfs(
    root,
    *,
    nodes=None,
    caches=((1, "Data", "16K"), (1, "Instruction", "32K"), (2, "Unified", "128K"), (3, "Unified", "1024K")),
    huge=None,
    cpus=(0, 1),
):
    """A sysfs tree with the files xferscope reads: caches of each CPU, NUMA nodes, hugetlbfs pools."""
    for cpu in cpus:
        for i, (level, kind, size) in enumerate(caches):
            d = root / f"devices/system/cpu/cpu{cpu}/cache/index{i}"
            d.mkdir(parents=True)
            (d / "level").write_text(f"{level}\n")
            (d / "type").write_text(f"{kind}\n")
            (d / "size").write_text(f"{size}\n")
            (d / "shared_cpu_list").write_text(f"{cpu}\n")
    if nodes:
        base = root / "devices/system/node"
        for node, cpulist in nodes.items():
            (base / f"node{node}").mkdir(parents=True)
            (base / f"node{node}/cpulist").write_text(cpulist + "\n")
        (base / "has_memory").write_text(",".join(map(str, nodes)) + "\n")
    for page_kib, (total, free) in (huge or {}).items():
        d = root / f"kernel/mm/hugepages/hugepages-{page_kib}kB"
        d.mkdir(parents=True)
        (d / "nr_hugepages").write_text(f"{total}\n")
        (d / "free_hugepages").write_text(f"{free}\n")
    return str(root)


# ------------------------------------------------------------------ the chase


def walk(succ, start=0):
    order, i = [], start
    for _ in range(len(succ)):
        order.append(i)
        i = succ[i]
    return order, i


@pytest.mark.parametrize(
    "n, window", [(1000, 64), (4096, 64), (4096, 4096), (777, 100), (64, 7), (10, 0), (65536, 4096)]
)
@pytest.mark.parametrize("stride", [64, 256])
def test_every_line_once_per_cycle_and_the_window_respected(n, window, stride):
    succ = _memcore.chase_successors(n, stride, 99 + n, window)
    order, back = walk(succ)
    assert back == 0 and sorted(order) == list(range(n)), "one cycle through every element, each once"
    w = window or n
    windows = (n + w - 1) // w
    # the walk starts inside some window: seen as a cycle, each window is one contiguous run of visits
    first = order[0] // w
    k = next((i for i, e in enumerate(order) if e // w != first), len(order))
    rotated = order[k:] + order[:k]
    runs = [rotated[0] // w] + [b // w for a, b in itertools.pairwise(rotated) if a // w != b // w]
    assert sorted(runs) == list(range(windows)), "every window visited as one block, each once per cycle"
    for start in range(0, n, w):
        block = [e for e in order if start <= e < start + w]
        assert len(block) == min(w, n - start)


def test_windows_and_lines_are_in_random_order():
    n, w = 64 * 256, 64  # 256 windows of 64 lines
    order, _ = walk(_memcore.chase_successors(n, 64, 5, w))
    blocks = [order[i] // w for i in range(0, n, w)]
    assert sum(1 for a, b in itertools.pairwise(blocks) if b == a + 1) < 10, "windows are not visited in order"
    steps = sum(1 for a, b in itertools.pairwise(order) if b == a + 1)
    assert steps < n // 20, "lines inside a window are not visited in order"
    assert _memcore.chase_successors(n, 64, 5, w) != _memcore.chase_successors(n, 64, 6, w)


def test_the_second_chase_shares_the_buffer_without_touching_the_first():
    n = 4096
    local = _memcore.chase_successors(n, 64, 1, 64, 0)
    whole = _memcore.chase_successors(n, 64, 1, 0, 8)
    for succ in (local, whole):
        order, back = walk(succ)
        assert back == 0 and sorted(order) == list(range(n))
    assert local != whole


def test_a_session_measures_both_chases_and_says_what_it_built():
    cpu = sorted(os.sched_getaffinity(0))[0]
    s = _memcore.Session(8 << 20, 64, cpu, [], 0, [], pages="4k", window=256 << 10, whole_chase=True)
    assert s.start()
    info = s.info()
    assert (info["pages"], info["window_bytes"], info["whole_chase"], info["bind_errno"]) == ("4k", 256 << 10, True, 0)
    for whole in (False, True):
        for _ in range(50):  # on a busy machine the chase thread can miss a 20 ms window: measure again
            out = s.measure("R", 0, False, True, 0.0, 0.02, 2, whole=whole)
            if all(steps > 0 for _, steps, _, _ in out["windows"]):
                break
        assert all(ns > 0 and steps > 0 and ran >= 0 for ns, steps, _, ran in out["windows"])
    got = pages_obtained(s.regions())
    assert set(got) == {4096} and got[4096] >= 8 << 20, "4k asks the kernel for no huge pages"
    s.close()
    lonely = _memcore.Session(1 << 20, 64, cpu, [], 0, [], window=4096)
    assert lonely.start()
    with pytest.raises(ValueError, match="no whole-buffer chase"):
        lonely.measure("R", 0, False, True, 0.0, 0.01, 1, whole=True)
    lonely.close()
    with pytest.raises(ValueError, match="pages must be"):
        _memcore.Session(1 << 20, 64, cpu, [], 0, [], pages="8k")
    with pytest.raises(ValueError, match="multiple of stride"):
        _memcore.Session(1 << 20, 256, cpu, [], 0, [], window=100)


def test_memory_bound_to_a_node_the_kernel_lacks_is_reported_not_fatal():
    cpu = sorted(os.sched_getaffinity(0))[0]
    s = _memcore.Session(1 << 20, 64, cpu, [], 0, [], mem_node=900)
    assert s.start()
    assert s.info()["bind_errno"] != 0
    s.close()


# ------------------------------------------------------------------ the spec


def test_locality_names_and_errors():
    strides = (64,)
    assert normalise_locality("default", strides) == "default"
    assert normalise_locality("Whole", strides) == "whole"
    assert normalise_locality("page", strides) == str(PAGE)
    assert normalise_locality("64pages", strides) == str(64 * PAGE)
    assert normalise_locality("256K", strides) == str(256 << 10)
    assert locality_bytes("default") == 64 * PAGE and locality_bytes("whole") is None
    assert locality_label(64 * PAGE) == "64-page" and locality_label(None) == "whole-buffer"
    assert locality_label(3 * PAGE, 64 << 20) == "3-page" and locality_label(PAGE + 64) == str(PAGE + 64)
    assert locality_label(1 << 30, 1 << 20) == "whole-buffer"
    for bad, words in (("near", "not a locality"), ("100", "multiple of 64"), ("128", "at least the stride")):
        with pytest.raises(SpecError, match=words):
            normalise_locality(bad, (256,))
    with pytest.raises(SpecError, match="mlc has no locality window"):
        normalise_locality("256K", strides, backend="mlc")
    with pytest.raises(SpecError, match="pages"):
        MemSpec(pages="8k").validated()
    spec = MemSpec(mode="peak").validated()
    assert spec.traffic == ("R", "W3", "W2", "W5", "W10") and spec.point_seconds == 2.0
    assert MemSpec(mode="curve").validated().point_seconds == 0.25


def test_curve_sizes_are_sub_octave_from_4k():
    sizes = curve_sizes(4096, 64 << 20, 4, 64)
    assert sizes[0] == 4096 and sizes[-1] == 64 << 20
    assert all(b > a for a, b in itertools.pairwise(sizes))
    ratios = [b / a for a, b in itertools.pairwise(sizes)]
    assert max(ratios) < 1.5 and len(sizes) >= 4 * 14, "four sizes per doubling"


def test_the_plan_reads_caches_and_hugepage_pools_from_the_sysfs_root(tmp_path):
    root = make_sysfs(tmp_path, huge={1048576: (2, 1), 2048: (0, 0)})
    assert [(c.name, c.size) for c in cache_levels(0, root)] == [("L1d", 16 << 10), ("L2", 128 << 10), ("L3", 1 << 20)]
    assert huge_pool(1 << 30, root).free == 1
    plan = resolve_plan(MemSpec(mode="curve", sysfs=root).validated())
    assert plan.curve_sizes[0] == 4096 and plan.curve_sizes[-1] == 64 << 20  # 8x the LLC, at least 64 MiB
    assert resolve_plan(MemSpec(mode="idle", pages="1g", buffer_bytes=1 << 30, sysfs=root).validated())  # fits
    with pytest.raises(EnvironmentProblem, match="needs 2 free hugetlbfs 1 GiB pages and 1 of 2"):
        resolve_plan(MemSpec(mode="idle", pages="1g", buffer_bytes=(1 << 30) + 4096, sysfs=root).validated())
    with pytest.raises(EnvironmentProblem, match="needs 1 free hugetlbfs 2 MiB pages and 0 of 0"):
        resolve_plan(MemSpec(mode="idle", pages="2m", buffer_bytes=1 << 20, sysfs=root).validated())


def test_matrix_cells_on_a_fake_two_node_topology(tmp_path):
    root = make_sysfs(tmp_path, nodes={0: "0", 1: "1"})
    nodes = numa_topology(root, usable=(0, 1))
    assert [(n.node, n.cpus, n.memory) for n in nodes] == [(0, (0,), True), (1, (1,), True)]
    cells = matrix_cells(nodes, MemSpec(mode="matrix").validated(), None)
    assert [(c.cpu_node, c.mem_node, c.latency_cpu, c.load_cpus, c.touch_cpu) for c in cells] == [
        (0, 0, 0, (0,), 0),
        (0, 1, 0, (0,), 1),
        (1, 0, 1, (1,), 0),
        (1, 1, 1, (1,), 1),
    ]
    assert [n.node for n in numa_topology(str(tmp_path / "nothing"), usable=(0, 1))] == [0]


# ------------------------------------------------------------------ results


def curve_points(latency_of_size):
    return [
        MemPoint(
            latency_ns=v, latency_min_ns=v, latency_max_ns=v, traffic=CURVE, stride=64, backend="builtin", size_bytes=k
        )
        for k, v in latency_of_size.items()
    ]


def test_plateaus_are_found_in_the_measurements_and_named_by_the_cache_that_holds_them():
    caches = [{"name": "L1d", "size": 48 << 10}, {"name": "L2", "size": 1 << 20}, {"name": "L3", "size": 32 << 20}]
    kib = 1 << 10
    lat = {
        4 * kib: 1.1,
        8 * kib: 1.0,
        16 * kib: 1.1,
        32 * kib: 1.2,
        64 * kib: 3.7,
        128 * kib: 3.9,
        256 * kib: 3.8,
        512 * kib: 4.1,
        1024 * kib: 7.0,
        1448 * kib: 10.0,  # a transition, left out
        2048 * kib: 12.5,
        2896 * kib: 13.1,
        4096 * kib: 12.8,
        8192 * kib: 131.0,
        16384 * kib: 128.0,
        32768 * kib: 250.0,  # one disturbed point does not split a plateau in two
        65536 * kib: 133.0,
        131072 * kib: 135.0,
    }
    plateaus = cache_plateaus(curve_points(lat), caches)
    assert [(p["level"], p["from_bytes"] // kib, p["to_bytes"] // kib) for p in plateaus] == [
        ("L1d", 4, 32),
        ("L2", 64, 512),
        ("L3", 2048, 4096),
        ("memory", 8192, 131072),
    ]
    assert [p["latency_ns"] for p in plateaus] == pytest.approx([1.1, 3.85, 12.8, 132.0])
    assert rising_plateaus(plateaus) == 4
    assert [p["ends_early"] for p in plateaus] == [False, False, True, False]  # a 4 MiB plateau of a 32 MiB L3
    flat = cache_plateaus(curve_points(dict.fromkeys(lat, 5.0)), caches)
    assert len(flat) == 1 and rising_plateaus(flat) == 1


def idle_point(windows):
    return point_from_windows(
        windows,
        traffic=IDLE,
        stride=64,
        delay=None,
        read_bytes=0,
        write_bytes=0,
        backend="builtin",
        ns_per_iter=None,
        latency=True,
        bandwidth=False,
    )


def test_windows_the_latency_thread_missed_are_left_out():
    clean, busy = (100_000_000, 1_000_000, 0, 99_500_000), (100_000_000, 500_000, 0, 50_000_000)
    p = idle_point([clean, busy, clean])
    assert p.latency_ns == 100.0 and p.windows_short == 1
    worst = idle_point([busy, busy])
    assert worst.latency_ns == 100.0 and worst.windows_short == 2  # the thread's own running time per load
    text = busy_warning([p, worst])
    assert "off its CPU in 3 of 5 windows" in text and "1 point(s) had no clean window" in text
    assert (
        busy_warning(
            [
                point_from_windows(
                    [clean],
                    traffic=IDLE,
                    stride=64,
                    delay=None,
                    read_bytes=0,
                    write_bytes=0,
                    backend="builtin",
                    ns_per_iter=None,
                    latency=True,
                    bandwidth=False,
                )
            ]
        )
        is None
    )


# ------------------------------------------------------------------ the CLI


def test_idle_names_its_locality_everywhere(cli, tmp_path):
    js, cs = tmp_path / "idle.json", tmp_path / "idle.csv"
    r = cli(
        "mem",
        "--mode",
        "idle",
        "--buffer",
        "32M",
        "--point-seconds",
        "0.1",
        "--pages",
        "4k",
        "--json",
        str(js),
        "--csv",
        str(cs),
    )
    assert r.code == 0, r.err
    line = r.out.splitlines()[0]
    assert re.match(r"Idle latency: [\d.]+ ns \(64-page locality; whole-buffer [\d.]+ ns\) \(min", line), line
    assert "Pages: asked 4 KiB pages, got 100% 4K" in r.out
    data = json.loads(js.read_text())
    assert data["idle_locality"] == "64-page" and data["whole_idle_latency_ns"] > 0 and data["pages"] == "4k"
    assert data["pages_obtained"] == {"4K": 1.0}
    assert [(p["locality"], p["locality_bytes"], p["size_bytes"]) for p in data["points"]] == [
        ("64-page", 64 * PAGE, 32 << 20),
        ("whole-buffer", None, 32 << 20),
    ]
    rows = list(csv.DictReader(Path(cs).read_text().splitlines()))
    assert [(row["traffic"], row["locality"]) for row in rows] == [("idle", "64-page"), ("idle", "whole-buffer")]
    r = cli(
        "mem", "--mode", "idle", "--buffer", "16M", "--point-seconds", "0.1", "--locality", "whole", "--format", "json"
    )
    assert r.code == 0, r.err
    assert [p["locality"] for p in json.loads(r.out)["points"]] == ["whole-buffer"]
    r = cli(
        "mem", "--mode", "idle", "--buffer", "16M", "--point-seconds", "0.1", "--locality", "16K", "--no-whole-idle"
    )
    assert r.code == 0 and "(4-page locality)" in r.out and "whole-buffer" not in r.out, r.out


def test_loaded_latency_uses_the_chosen_locality(cli, tmp_path):
    two_cpus()
    r = cli(
        "mem",
        "--traffic",
        "R",
        "--delays",
        "0",
        "--buffer",
        "16M",
        "--threads",
        "1",
        "--point-seconds",
        "0.1",
        "--locality",
        "page",
        "--format",
        "json",
    )
    assert r.code == 0, r.err
    points = json.loads(r.out)["points"]
    assert [(p["traffic"], p["locality"]) for p in points] == [
        (IDLE, "1-page"),
        (IDLE, "whole-buffer"),
        ("R", "1-page"),
    ]


@pytest.mark.parametrize(
    "args, option",
    [
        (["--locality", "near"], "--locality"),
        (["--pages", "8k"], "--pages"),
        (["--mode", "curve", "--max-size", "1K"], "--max-size"),
        (["--mode", "curve", "--plot", "/tmp/x.gif"], "--plot"),
        (["--backend", "mlc", "--locality", "64K"], "--locality"),
    ],
)
def test_bad_new_options_are_one_line_and_exit_2(cli, args, option):
    r = cli("mem", *args)
    assert r.code == 2, (r.out, r.err)
    assert r.err.startswith(f"xferscope: {option}: ") and len(r.err.strip().splitlines()) == 1


def test_hugetlb_pages_that_are_not_reserved_exit_3(cli, tmp_path):
    root = make_sysfs(tmp_path, huge={1048576: (0, 0)})
    r = cli("mem", "--mode", "idle", "--pages", "1g", "--buffer", "64M", "--sysfs", root)
    assert r.code == 3, (r.out, r.err)
    assert "hugetlbfs 1 GiB pages" in r.err and "reserve them as root" in r.err and "Traceback" not in r.err


def test_the_curve_marks_the_sysfs_cache_sizes_in_table_json_csv_and_plot(cli, tmp_path):
    root = make_sysfs(tmp_path / "sys", cpus=tuple(sorted(os.sched_getaffinity(0))))
    js, cs, svg = tmp_path / "c.json", tmp_path / "c.csv", tmp_path / "c.svg"
    r = cli(
        "mem",
        "--mode",
        "curve",
        "--max-size",
        "4M",
        "--per-octave",
        "2",
        "--point-seconds",
        "0.05",
        "--sysfs",
        root,
        "--json",
        str(js),
        "--csv",
        str(cs),
        "--plot",
        str(svg),
    )
    assert r.code == 0, r.err
    lines = r.out.splitlines()
    assert lines[0] == "Cache-level curve: latency against working set, stride 64 B, 64-page locality, builtin"
    marks = [line.strip() for line in lines if line.strip().startswith("----")]
    assert marks == ["---- L1d 16K (sysfs) ----", "---- L2 128K (sysfs) ----", "---- L3 1M (sysfs) ----"]
    assert re.search(r"^Plateaus: (\S+ [\d.]+ ns \(\w+-\w+\)(, )?)+; \d rise in order$", r.out, re.M), r.out
    data = json.loads(js.read_text())
    sizes = [p["size_bytes"] for p in data["points"]]
    assert data["mode"] == "curve" and sizes[0] == 4096 and sizes[-1] == 4 << 20 and sizes == sorted(sizes)
    assert {p["traffic"] for p in data["points"]} == {CURVE} and all(p["latency_ns"] > 0 for p in data["points"])
    assert all(c["level"] in ("L1d", "L2", "L3", "memory") for c in data["cache_levels"])
    assert data["environment"]["caches"] == [
        {"name": "L1d", "size": 16384},
        {"name": "L2", "size": 131072},
        {"name": "L3", "size": 1048576},
    ]
    rows = list(csv.DictReader(Path(cs).read_text().splitlines()))
    assert [int(row["size_bytes"]) for row in rows] == sizes and {row["locality"] for row in rows} == {"64-page"}
    drawing = svg.read_text()
    assert drawing.startswith("<svg") and "L1d 16K" in drawing and "L2 128K" in drawing and "L3 1M" in drawing
    assert "working set (bytes)" in drawing and "stroke-dasharray" in drawing


def test_the_matrix_on_a_fake_two_node_topology(cli, tmp_path):
    a, b = two_cpus()
    root = make_sysfs(tmp_path / "sys", nodes={0: str(a), 1: str(b)}, cpus=(a, b))
    js, cs = tmp_path / "m.json", tmp_path / "m.csv"
    r = cli(
        "mem",
        "--mode",
        "matrix",
        "--sysfs",
        root,
        "--buffer",
        "16M",
        "--point-seconds",
        "0.1",
        "--json",
        str(js),
        "--csv",
        str(cs),
    )
    assert r.code == 0, r.err
    data = json.loads(js.read_text())
    matrix = data["matrix"]
    assert matrix["cpu_nodes"] == [0, 1] and matrix["mem_nodes"] == [0, 1]
    assert all(v > 0 for row in matrix["latency_ns"] for v in row)
    assert all(v > 0 for row in matrix["bandwidth_mb_s"] for v in row)
    assert [n["node"] for n in data["environment"]["numa_nodes"]] == [0, 1]
    assert "one NUMA node" not in r.out
    lines = r.out.splitlines()
    assert lines[0].startswith("Idle latency: ") and "(64-page locality), CPU node 0 to its own memory" in lines[0]
    table = lines[lines.index("Idle latency matrix (ns), 64-page locality, builtin") :]
    assert table[2].split() == ["CPU", "node", "0", "1"] and table[3].split()[0] == "0" and len(table[4].split()) == 3
    assert any(line.startswith("Read bandwidth matrix (MB/sec), builtin") for line in lines)
    if not TWO_NODES_REAL:  # this kernel has no node 1: the memory lands on node 0, and the result says so
        assert "memory for node 1: the kernel refused to bind it there" in r.err
        assert f"placed by first touch from CPU {b}; pages obtained: 100% on node 0" in r.err
    rows = list(csv.DictReader(Path(cs).read_text().splitlines()))
    assert sorted((row["traffic"], row["cpu_node"], row["mem_node"]) for row in rows) == sorted(
        [(t, str(i), str(j)) for t in ("idle", "R") for i in (0, 1) for j in (0, 1)]
    )


def test_the_matrix_of_one_node_is_1x1_with_a_note(cli, tmp_path):
    root = make_sysfs(
        tmp_path / "sys",
        nodes={0: ",".join(map(str, sorted(os.sched_getaffinity(0))))},
        cpus=tuple(sorted(os.sched_getaffinity(0))),
    )
    r = cli("mem", "--mode", "matrix", "--sysfs", root, "--buffer", "16M", "--point-seconds", "0.1", "--format", "json")
    assert r.code == 0, r.err
    data = json.loads(r.out)
    assert data["matrix"]["cpu_nodes"] == [0] and len(data["matrix"]["latency_ns"][0]) == 1
    assert data["notes"] == ["one NUMA node: the matrix is 1x1 (local memory only)"]


def test_peak_is_one_table_of_mlc_max_bandwidth_rows(cli):
    r = cli("mem", "--mode", "peak", "--buffer", "8M", "--point-seconds", "0.1")
    assert r.code == 0, r.err
    lines = r.out.splitlines()
    assert lines[0].startswith("Maximum bandwidth (MB/sec, 1 MB = 10^6 bytes), stride 64 B, builtin")
    assert [line.rsplit(":", 1)[0].strip() for line in lines[1:6]] == [
        "ALL Reads",
        "3:1 Reads-Writes",
        "2:1 Reads-Writes",
        "1:1 Reads-Writes",
        "Stream-triad like",
    ]


# ------------------------------------------------------------------ mlc and side by side


def test_mlc_backend_curve_matrix_and_max_bandwidth(cli, tmp_path):
    from test_mem_cli import FAKE_MLC

    fake = tmp_path / "mlc"
    fake.write_text(f"#!{os.sys.executable}\n" + FAKE_MLC)
    fake.chmod(0o755)
    log = tmp_path / "log"
    env = {"FAKE_MLC_LOG": str(log)}
    root = make_sysfs(tmp_path / "sys", caches=((1, "Data", "48K"), (2, "Unified", "1024K"), (3, "Unified", "32768K")))
    r = cli(
        "mem",
        "--backend",
        "mlc",
        "--mlc",
        str(fake),
        "--mode",
        "curve",
        "--max-size",
        "256M",
        "--per-octave",
        "1",
        "--sysfs",
        root,
        "--format",
        "json",
        env=env,
    )
    assert r.code == 0, r.err
    data = json.loads(r.out)
    calls = log.read_text().splitlines()
    assert calls[0] == "--idle_latency -l64 -b4" and calls[-1] == "--idle_latency -l64 -b262144"
    assert [p["size_bytes"] for p in data["points"]] == [4096 << k for k in range(17)]
    assert [c["latency_ns"] for c in data["cache_levels"]] == [1.2, 4.5, 18.0, 79.3]
    log.unlink()
    r = cli(
        "mem",
        "--backend",
        "mlc",
        "--mlc",
        str(fake),
        "--mode",
        "matrix",
        "--locality",
        "whole",
        "--format",
        "json",
        env=env,
    )
    assert r.code == 0, r.err
    data = json.loads(r.out)
    assert log.read_text().splitlines() == ["--latency_matrix -l64 -r", "--bandwidth_matrix"]
    assert data["matrix"] == {"cpu_nodes": [0], "mem_nodes": [0], "latency_ns": [[80.1]], "bandwidth_mb_s": [[99000.5]]}
    assert data["notes"] == ["one NUMA node: the matrix is 1x1 (local memory only)"]
    assert data["points"][0]["locality"] == "mlc random"
    r = cli("mem", "--backend", "mlc", "--mlc", str(fake), "--mode", "peak", "--pages", "2m", env=env)
    assert r.code == 0, r.err
    assert "--max_bandwidth -L" in log.read_text() and "Maximum bandwidth (MB/sec" in r.out


def test_a_builtin_run_an_mlc_run_and_an_imported_mlc_output_side_by_side(cli, tmp_path):
    from test_mem_cli import FAKE_MLC
    from test_mlc_parser import FULL_RUN

    fake = tmp_path / "mlc"
    fake.write_text(f"#!{os.sys.executable}\n" + FAKE_MLC)
    fake.chmod(0o755)
    ours, theirs, saved = tmp_path / "ours.json", tmp_path / "mlc-run.json", tmp_path / "old-mlc.txt"
    saved.write_text(FULL_RUN)
    r = cli("mem", "--mode", "idle", "--buffer", "16M", "--point-seconds", "0.1", "--json", str(ours))
    assert r.code == 0, r.err
    r = cli(
        "mem",
        "--backend",
        "mlc",
        "--mlc",
        str(fake),
        "--mode",
        "idle",
        "--json",
        str(theirs),
        env={"FAKE_MLC_LOG": str(tmp_path / "log")},
    )
    assert r.code == 0, r.err
    r = cli("compare", "--mem", f"{ours},{theirs},{saved}")
    assert r.code == 0, r.err
    lines = r.out.splitlines()
    assert lines[0].split() == ["builtin", "(ours.json)", "mlc", "(mlc-run.json)", "mlc", "(old-mlc.txt)"]
    idle = next(line for line in lines if line.startswith("idle latency (ns)")).split()
    assert idle[-2:] == ["79.30", "81.40"] and float(idle[3]) > 0
    locality = next(line for line in lines if line.startswith("  locality"))
    assert "64-page locality" in locality and locality.rstrip().endswith("mlc random")
    assert "node 1->0 latency" in r.out and "ALL Reads (MB/s)" in r.out and "whole-buffer (ns)" in r.out
    r = cli("compare", "--mem", f"{ours},{saved}", "--format", "json")
    assert [d["backend"] for d in json.loads(r.out)] == ["builtin", "mlc"]
    bad = tmp_path / "run.json"
    bad.write_text(json.dumps({"throughput_mib_s": 1.0, "points": []}))
    r = cli("compare", "--mem", str(bad))
    assert r.code == 2 and "not a memory result" in r.err and "Traceback" not in r.err


def test_results_are_printed_before_files_and_a_full_disk_is_one_line(cli, tmp_path):
    js = tmp_path / "idle.json"
    r = cli(
        "mem",
        "--mode",
        "idle",
        "--buffer",
        "8M",
        "--point-seconds",
        "0.05",
        "--json",
        str(js),
        env={"XFERSCOPE_TEST_WRITE_ERROR": "*.json=ENOSPC"},
    )
    assert r.code == 4, (r.out, r.err)
    assert r.out.startswith("Idle latency: ") and "could not write" in r.err and "Traceback" not in r.err
    assert not js.exists()


def test_a_curve_profile_replays_with_one_line_per_point(tmp_path):
    from xferscope.profiles import parse_profile
    from xferscope.sweep import SweepRun
    from xferscope.sweep.plot import render_plot

    profile = parse_profile(
        'kind = "mem"\nduration = 0.05\n[base]\nmode = "curve"\nmax_size = "64K"\n'
        'per_octave = 1\n[grid]\npages = ["4k", "thp"]\nlocality = ["default", "whole"]\n',
        "curve.toml",
        "curve-pages",
    )
    outcome = SweepRun(profile, str(tmp_path / "curve.json")).run()
    assert not outcome.interrupted
    data = json.loads((tmp_path / "curve.json").read_text())
    labels = [p["label"] for p in data["points"]]
    assert labels == [
        "curve stride 64 pages 4k",
        "curve stride 64 whole pages 4k",
        "curve stride 64",
        "curve stride 64 whole",
    ]
    rows = data["points"][1]["rows"]
    assert [r["size_bytes"] for r in rows] == [4096, 8192, 16384, 32768, 65536]
    assert {r["locality"] for r in rows} == {"whole-buffer"}
    drawing = render_plot(str(tmp_path / "c.svg"), outcome.results)
    for label in labels:
        assert f">{label}<" in drawing
