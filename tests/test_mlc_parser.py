"""The MLC text parser, the MLC command lines, the MLC-shaped table and `import mlc`."""

import csv
import json

import pytest

from xferscope.errors import FormatError, SpecError
from xferscope.importers.mlc import import_mlc, parse_mlc_output
from xferscope.memory.mlc import (
    idle_latency_command,
    loaded_latency_command,
    matrix_commands,
    peak_bandwidth_command,
)
from xferscope.memory.report import format_mlc_table
from xferscope.memory.result import curve_points, idle_points, loaded_points, peak_points
from xferscope.memory.sweep import CSV_COLUMNS, MemSpec

# A default `mlc` run as MLC prints it (tab-separated tables), with the warnings it prints
# when it cannot reach the prefetcher MSRs, and sections we do not read.
FULL_RUN = """Intel(R) Memory Latency Checker - v3.11
*** Unable to modify prefetchers (try executing 'modprobe msr')
*** So, enabling random access for latency measurements
Measuring idle latencies for random access (in ns)...
\t\tNuma node
Numa node\t     0\t     1\t
       0\t  81.4\t 139.8\t
       1\t 140.1\t  81.9\t

Measuring Peak Injection Memory Bandwidths for the system
Bandwidths are in MB/sec (1 MB/sec = 1,000,000 Bytes/sec)
Using all the threads from each core if Hyper-threading is enabled
Using traffic with the following read-write ratios
ALL Reads        :\t229432.2\t
3:1 Reads-Writes :\t208066.6\t
2:1 Reads-Writes :\t205839.1\t
1:1 Reads-Writes :\t190624.4\t
Stream-triad like:\t189543.2\t

Measuring Memory Bandwidths between nodes within system
Bandwidths are in MB/sec (1 MB/sec = 1,000,000 Bytes/sec)
Using all the threads from each core if Hyper-threading is enabled
Using Read-only traffic type
\t\tNuma node
Numa node\t     0\t     1\t
       0\t114818.0\t34128.5\t
       1\t34115.2\t114908.8\t

Measuring Loaded Latencies for the system
Using all the threads from each core if Hyper-threading is enabled
Using Read-only traffic type
Inject\tLatency\tBandwidth
Delay\t(ns)\tMB/sec
==========================
 00000\t204.91\t 227633.8
 00002\t205.43\t 227605.6
 00100\t150.12\t 205112.0
 01000\t 92.66\t  41372.4
 20000\t 82.03\t   3411.9

Measuring cache-to-cache transfer latency (in ns)...
Local Socket L2->L2 HIT  latency\t48.7
Local Socket L2->L2 HITM latency\t48.8
Remote Socket L2->L2 HITM latency (data address homed in writer socket)
\t\t\tReader Numa Node
Writer Numa Node     0\t     1\t
            0\t     -\t 113.4\t
            1\t 113.5\t     -\t
"""

# Seed 002: stride 64, W6, all 19 rows as the report gives them.
SEED_W6_64 = [
    (0, 185.86, 71162.7),
    (2, 185.14, 71158.3),
    (8, 201.66, 71061.2),
    (15, 187.80, 71122.5),
    (50, 95.81, 47125.8),
    (100, 89.60, 27759.9),
    (200, 82.71, 14812.7),
    (300, 80.90, 10260.8),
    (400, 79.79, 7936.6),
    (500, 78.85, 6541.1),
    (700, 78.16, 4919.9),
    (1000, 77.45, 3711.3),
    (1300, 77.29, 3052.4),
    (1700, 77.52, 2530.3),
    (2500, 77.15, 1991.7),
    (3500, 76.54, 1668.2),
    (5000, 76.32, 1420.6),
    (9000, 76.48, 1161.1),
    (20000, 76.17, 986.4),
]
SEED_W7_64_HEAD = [
    (0, 241.98, 97352.3),
    (2, 245.82, 97394.8),
    (8, 242.19, 98019.6),
    (15, 242.53, 98523.0),
    (50, 240.91, 102122.1),
    (100, 231.62, 101937.3),
    (200, 113.88, 81454.1),
]


def loaded_run(flags, rows, sep="\t"):
    """MLC's output for `mlc --loaded_latency FLAGS`."""
    body = "\n".join(f" {d:05d}{sep}{lat:.2f}{sep} {bw:.1f}" for d, lat, bw in rows)
    return (
        f"Intel(R) Memory Latency Checker - v3.11\nCommand line parameters: --loaded_latency {flags}\n\n"
        "Using buffer size of 100.000MiB/thread for reads and an additional 100.000MiB/thread for writes\n"
        "*** Unable to modify prefetchers (try executing 'modprobe msr')\n"
        "*** So, enabling random access for latency measurements\n\n"
        "Measuring Loaded Latencies for the system\n"
        "Using all the threads from each core if Hyper-threading is enabled\n"
        f"Inject{sep}Latency{sep}Bandwidth\nDelay{sep}(ns){sep}MB/sec\n==========================\n"
        f"{body}\n"
    )


def rows(result, traffic=None):
    return [
        (p.delay, p.latency_ns, p.bandwidth_mb_s)
        for p in curve_points(result.points)
        if p.latency_ns is not None and (traffic is None or p.traffic == traffic)
    ]


def test_full_run_every_section():
    r = parse_mlc_output(FULL_RUN, "run.txt")
    assert r.backend == "mlc"
    assert r.idle_latency_ns == 81.4 and r.idle_locality == "mlc random"
    assert r.matrix == {
        "cpu_nodes": [0, 1],
        "mem_nodes": [0, 1],
        "latency_ns": [[81.4, 139.8], [140.1, 81.9]],
        "bandwidth_mb_s": [[114818.0, 34128.5], [34115.2, 114908.8]],
    }
    assert r.environment["mlc_version"] == "3.11"
    peak = {p.traffic: p.bandwidth_mb_s for p in peak_points(r.points)}
    assert peak == {"R": 229432.2, "W3": 208066.6, "W2": 205839.1, "W5": 190624.4, "W10": 189543.2}
    assert rows(r, "R") == [
        (0, 204.91, 227633.8),
        (2, 205.43, 227605.6),
        (100, 150.12, 205112.0),
        (1000, 92.66, 41372.4),
        (20000, 82.03, 3411.9),
    ]
    assert {p.locality for p in loaded_points(r.points)} == {"mlc random"}
    assert any("Unable to modify prefetchers" in w for w in r.warnings)
    assert any("enabling random access" in w for w in r.warnings)
    # both 2x2 matrices are cells; cache-to-cache numbers are not points
    assert len(r.points) == 4 + 5 + 4 + 5


def test_spaces_instead_of_tabs_give_the_same_result():
    spaced = parse_mlc_output(FULL_RUN.replace("\t", "   "), "pasted.txt")
    tabbed = parse_mlc_output(FULL_RUN, "run.txt")
    assert spaced.points == tabbed.points


def test_seed_table_w6_stride_64():
    r = parse_mlc_output(loaded_run("-W6 -l64", SEED_W6_64), "seed.txt")
    assert rows(r) == SEED_W6_64
    assert {(p.traffic, p.stride) for p in r.points} == {("W6", 64)}
    # latency is not monotonic near saturation (201.66 at delay 8): no error, no invented order
    assert [p.delay for p in r.points] == [d for d, _, _ in SEED_W6_64]


def test_several_runs_in_one_file_keep_their_traffic_and_stride():
    text = loaded_run("-W6 -l64", SEED_W6_64) + "\n" + loaded_run("-W7 -l256 -t2", SEED_W7_64_HEAD, sep="   ")
    r = parse_mlc_output(text, "two.txt")
    assert rows(r, "W6") == SEED_W6_64
    assert rows(r, "W7") == SEED_W7_64_HEAD
    assert {p.stride for p in r.points if p.traffic == "W7"} == {256}
    table = format_mlc_table(r)
    assert "traffic W6, stride 64 B" in table and "traffic W7, stride 256 B" in table
    # the seed's W7 curve gains 4.9% bandwidth from delay 0 to 50: within the 5% tolerance, no false alarm
    assert not any("bandwidth rises" in w for w in r.warnings)


def test_any_number_of_rows_and_markdown_pipes():
    text = (
        "| Inject | Latency (ns) | Bandwidth (MB/sec) |\n|--------|-------------|---------|\n"
        "| 00000  | 235.36  | 44203.3    |\n |09000\t |67.62\t   |2240.8|\n |20000\t |66.14\t  | 1550.2|\n"
    )
    r = parse_mlc_output(text, "report.md")
    assert rows(r) == [(0, 235.36, 44203.3), (9000, 67.62, 2240.8), (20000, 66.14, 1550.2)]
    assert r.points[0].traffic == "unknown"


def test_idle_latency_command_output():
    text = (
        "Intel(R) Memory Latency Checker - v3.5\nCommand line parameters: --idle_latency -l256\n\n"
        "Using buffer size of 2000.000MB\nEach iteration took 201.2 core clocks ( 80.5    ns)\n"
    )
    r = parse_mlc_output(text, "idle.txt")
    assert r.idle_latency_ns == 80.5
    idle = idle_points(r.points)
    assert idle[0].stride == 256 and idle[0].locality == "mlc"
    sequential = parse_mlc_output(
        text.replace(
            "\nUsing buffer", "\nMeasuring idle latencies for sequential access (in ns)...\nUsing buffer"
        ).replace("-l256", "-l256 -b2000000 -L"),
        "s",
    )
    (first, *_) = idle_points(sequential.points)
    assert first.locality == "mlc sequential" and sequential.pages == "2m"
    assert first.size_bytes == 2000000 * 1024


@pytest.mark.parametrize(
    "bad, line",
    [
        (FULL_RUN.replace(" 00100\t150.12\t 205112.0", " 00100\t15O.12\t 205112.0"), 37),
        (FULL_RUN.replace(" 01000\t 92.66\t  41372.4", " 01000\t 92.66"), 38),
        (FULL_RUN.replace("2:1 Reads-Writes :\t205839.1", "2:1 Reads-Writes :\tn/a"), 16),
        (FULL_RUN.replace("       1\t 140.1\t  81.9\t", "       1\t 140.1\t  8l.9\t"), 8),
        (FULL_RUN.replace("       1\t34115.2\t114908.8\t", "       1\t34115.2\t\t"), 27),
    ],
)
def test_malformed_numbers_in_known_sections_name_file_and_line(bad, line):
    with pytest.raises(FormatError) as err:
        parse_mlc_output(bad, "broken.txt")
    assert err.value.path == "broken.txt" and err.value.line == line
    assert str(err.value).startswith(f"broken.txt:{line}: ")


def test_garbage_in_unknown_sections_is_skipped():
    text = "Measuring something new\n 0\tabc\tdef\n 1 2 3 4 5\n" + FULL_RUN
    assert parse_mlc_output(text, "x").points == parse_mlc_output(FULL_RUN, "x").points


def test_command_lines(monkeypatch):
    for module in ("spec", "mlc"):
        monkeypatch.setattr(f"xferscope.memory.{module}.allowed_cpus", lambda: tuple(range(16)))
    spec = MemSpec(
        traffic=("W6",),
        strides=(256,),
        delays=(100,),
        point_seconds=2,
        cpus=(1, 2, 3, 5),
        latency_cpu=0,
        buffer_bytes=512 << 20,
    ).validated()
    assert loaded_latency_command("mlc", spec, "W6", 256) == [
        "mlc",
        "--loaded_latency",
        "-W6",
        "-l256",
        "-t2",
        "-d100",
        "-b524288",
        "-k1-3,5",
        "-c0",
    ]
    listed = MemSpec(traffic=("R",), delays=(0, 50, 500), point_seconds=1).validated()
    cmd = loaded_latency_command("mlc", listed, "R", 64, "/tmp/delays")
    assert cmd[:5] == ["mlc", "--loaded_latency", "-R", "-l64", "-t1"] and "-g/tmp/delays" in cmd
    default = MemSpec().validated()
    assert not any(a.startswith(("-d", "-g")) for a in loaded_latency_command("mlc", default, "R", 64))
    assert idle_latency_command("mlc", spec, 64) == ["mlc", "--idle_latency", "-l64", "-b524288", "-c0"]
    assert idle_latency_command("mlc", spec, 64, size=48 << 10)[3] == "-b48"  # a point of the curve
    assert peak_bandwidth_command("mlc", spec) == ["mlc", "--max_bandwidth", "-b524288", "-k1-3,5"]
    whole = MemSpec(mode="matrix", locality="whole", pages="1g").validated()
    assert matrix_commands("mlc", whole, 64) == [
        ["mlc", "--latency_matrix", "-l64", "-r", "-h"],
        ["mlc", "--bandwidth_matrix", "-h"],
    ]
    assert loaded_latency_command("mlc", MemSpec(pages="2m").validated(), "R", 64)[-1] == "-L"
    for bad, message in (
        (dict(locality="256K"), "mlc has no locality window"),
        (dict(pages="4k"), "no option for 4 KiB pages"),
    ):
        with pytest.raises(SpecError, match=message):
            MemSpec(backend="mlc", **bad).validated()


def test_mlc_shaped_table():
    table = format_mlc_table(parse_mlc_output(FULL_RUN, "run.txt"))
    assert "Idle latency: 81.40 ns (mlc random), CPU node 0 to its own memory" in table
    assert "Idle latency matrix (ns), mlc random, mlc" in table and "Read bandwidth matrix (MB/sec)" in table
    assert any(line.split() == ["1", "140.1", "81.9"] for line in table.splitlines())
    assert "Maximum bandwidth (MB/sec" in table
    assert "traffic R, stride not given, mlc random, mlc" in table
    assert "ALL Reads" in table and "229432.2" in table and "Stream-triad like" in table
    head = next(line for line in table.splitlines() if "Inject Delay" in line)
    assert "Latency (ns)" in head and "Bandwidth (MB/sec)" in head
    assert any(line.split() == ["00100", "150.12", "205112.0"] for line in table.splitlines())


def test_import_writes_the_mem_columns(cli, tmp_path):
    src = tmp_path / "mlc.txt"
    src.write_text(FULL_RUN)
    js, cs = tmp_path / "r.json", tmp_path / "r.csv"
    out = cli("import", "mlc", str(src), "--json", str(js), "--csv", str(cs))
    assert out.code == 0, out.err
    assert "Inject Delay" in out.out and "warning: mlc: Unable to modify prefetchers" in out.err
    with open(cs) as fh:
        table = list(csv.reader(fh))
    assert tuple(table[0]) == CSV_COLUMNS
    assert table[1] == ["", "81.40", "", "", "", "idle", "", "mlc", "mlc random", "", "0", "0"]
    assert ["100", "150.12", "205112.0", "", "", "R", "", "mlc", "mlc random", "", "", ""] in table
    data = json.loads(js.read_text())
    assert data["backend"] == "mlc" and data["idle_latency_ns"] == 81.4 and len(data["points"]) == 18
    assert data["matrix"]["latency_ns"] == [[81.4, 139.8], [140.1, 81.9]] and data["idle_locality"] == "mlc random"


def test_import_json_format_and_errors(cli, tmp_path):
    src = tmp_path / "mlc.txt"
    src.write_text(loaded_run("-W8 -l64", SEED_W6_64[:3]))
    out = cli("import", "mlc", str(src), "--format", "json")
    assert out.code == 0, out.err
    data = json.loads(out.out)
    assert [p["traffic"] for p in data["points"]] == ["W8"] * 3
    empty = tmp_path / "notes.txt"
    empty.write_text("nothing from mlc here\n")
    with pytest.raises(FormatError, match="no MLC section"):
        import_mlc(str(empty))
    with pytest.raises(FormatError, match="cannot read"):
        import_mlc(str(tmp_path / "missing.txt"))
    bad = cli("import", "mlc", str(empty))
    assert bad.code == 2 and "no MLC section" in bad.err and "Traceback" not in bad.err
