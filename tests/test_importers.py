"""Importers: gdsio lines, fio JSON (from real fio runs), elbencho CSV; exported like native runs; bad input located."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import pytest

from xferscope.errors import FormatError
from xferscope.export import SUMMARY_COLUMNS, load_results, result_to_dict
from xferscope.importers.elbencho import import_elbencho
from xferscope.importers.elbencho import parse_text as parse_elbencho
from xferscope.importers.fio import import_fio
from xferscope.importers.fio import parse_text as parse_fio
from xferscope.importers.gdsio import import_gdsio
from xferscope.importers.gdsio import parse_text as parse_gdsio
from xferscope.report import gdsio_line

DATA = Path(__file__).parent / "data"
GDSIO = DATA / "gdsio-nvme-paths.txt"  # a report with gdsio runs pasted in, text around them
FIO_RANDREAD = DATA / "fio-randread-4k-qd16.json"  # fio 3.33 --output-format=json, one job
FIO_JOBS = DATA / "fio-randrw-and-two-writers.json"  # a 70/30 job, and two writer jobs of one name
ELBENCHO = DATA / "elbencho-results.csv"  # elbencho --csvfile columns


# ------------------------------------------------------------------- gdsio


def test_gdsio_lines_become_results_that_print_the_same_line():
    results = import_gdsio(str(GDSIO))
    lines = [line[line.index("IoType:") :].strip() for line in GDSIO.read_text().splitlines() if "IoType:" in line]
    assert len(results) == len(lines) == 21
    assert [gdsio_line(r) for r in results] == lines  # every figure survives, in gdsio's own format
    first = results[0]
    assert first.source == "gdsio" and first.status == "ok"
    assert (first.spec.path, first.spec.io, first.spec.block_size, first.spec.workers) == ("host", "read", 1 << 20, 1)
    assert first.ops == 14312 and first.seconds == pytest.approx(10.214245)
    assert first.throughput_gib_s == pytest.approx(1.368340, abs=1e-6)
    assert first.latency_us.mean == pytest.approx(713.614380) and math.isnan(first.latency_us.p99)
    assert "-x 1 -I 0" in first.environment["command"] and first.labels == []
    assert results[1].labels == ["C-state Disable"]
    assert {r.spec.path for r in results} == {"host", "bounce", "cufile"}
    assert sum(r.spec.io == "randwrite" for r in results) == 3


def test_gdsio_batch_line_pasted_after_its_command():
    text = (
        "/usr/local/cuda/gds/tools/gdsio -x 6 -d 0 -s 8K -i 4K -D /mnt/gds/dir -I 1 -w 10 IoType: WRITE "
        "XferType: GPU_BATCH Threads: 1 IoDepth: 10 DataSetSize: 80/80(KiB) IOSize: 4(KiB) Throughput: "
        "0.010523 GiB/sec, Avg_Latency: 3476.650000 usecs ops: 20 total_time 0.007250 secs\n"
    )
    (r,) = parse_gdsio(text, "batch.txt")
    assert (r.spec.path, r.spec.io, r.spec.iodepth, r.write_bytes, r.ops) == (
        "cufile-batch",
        "write",
        10,
        80 * 1024,
        20,
    )
    assert r.environment["command"].endswith("gdsio -x 6 -d 0 -s 8K -i 4K -D /mnt/gds/dir -I 1 -w 10")


@pytest.mark.parametrize(
    "text,line,words",
    [
        (
            "run 1\nIoType: READ XferType: GPUD Threads: 1 DataSetSize: 1/2(KiB)\n",
            2,
            "not a complete gdsio result line",
        ),
        (
            "IoType: READ XferType: TAPE Threads: 1 DataSetSize: 1024/1024(KiB) IOSize: 4(KiB) Throughput: 0.1 GiB/sec, "
            "Avg_Latency: 1.0 usecs ops: 1 total_time 1.0 secs\n",
            1,
            "XferType 'TAPE' is not one xferscope measures",
        ),
        ("nothing measured here\n", None, "no gdsio result lines found"),
    ],
)
def test_gdsio_malformed_input_is_located(text, line, words):
    with pytest.raises(FormatError) as info:
        parse_gdsio(text, "paste.txt")
    assert info.value.line == line and words in str(info.value) and str(info.value).startswith("paste.txt")


# --------------------------------------------------------------------- fio


def test_fio_json_figures_come_through():
    raw = json.loads(FIO_RANDREAD.read_text())["jobs"][0]
    (r,) = import_fio(str(FIO_RANDREAD))
    rd = raw["read"]
    assert r.source == "fio" and r.labels == ["io_uring"]
    assert (r.spec.path, r.spec.io, r.spec.block_size, r.spec.iodepth, r.spec.buffered) == (
        "host",
        "randread",
        4096,
        16,
        False,
    )
    assert r.bytes == rd["io_bytes"] and r.ops == rd["total_ios"] and r.seconds == rd["runtime"] / 1e3
    assert r.iops == pytest.approx(rd["iops"], rel=0.01)
    assert r.latency_us.p99 == rd["clat_ns"]["percentile"]["99.000000"] / 1e3
    assert r.latency_us.p999 == rd["clat_ns"]["percentile"]["99.900000"] / 1e3
    assert r.latency_us.mean == pytest.approx(rd["clat_ns"]["mean"] / 1e3)
    assert r.cpu["usr_pct"] == pytest.approx(raw["usr_cpu"], rel=0.01)
    assert r.cpu["sys_pct"] == pytest.approx(raw["sys_cpu"], rel=0.01)


def test_fio_mixed_job_and_jobs_of_one_name():
    mixed, writers = import_fio(str(FIO_JOBS))
    raw = json.loads(FIO_JOBS.read_text())["jobs"]
    assert (mixed.spec.io, mixed.spec.read_pct, mixed.spec.block_size) == ("randrw", 70, 32768)
    assert mixed.read_bytes == raw[0]["read"]["io_bytes"] and mixed.write_bytes == raw[0]["write"]["io_bytes"]
    assert mixed.read_latency_us.p99 == raw[0]["read"]["clat_ns"]["percentile"]["99.000000"] / 1e3
    assert mixed.write_latency_us.p99 == raw[0]["write"]["clat_ns"]["percentile"]["99.000000"] / 1e3
    assert math.isnan(mixed.latency_us.p99)  # fio gives no percentiles of reads and writes together
    assert mixed.latency_us.max == max(raw[0]["read"]["clat_ns"]["max"], raw[0]["write"]["clat_ns"]["max"]) / 1e3
    assert (writers.spec.io, writers.spec.workers, writers.spec.block_size) == ("write", 2, 131072)
    assert writers.write_bytes == raw[1]["write"]["io_bytes"] + raw[2]["write"]["io_bytes"]
    assert len(writers.workers) == 2


def test_fio_malformed_input_is_located(tmp_path):
    text = FIO_RANDREAD.read_text()
    with pytest.raises(FormatError) as info:
        parse_fio(text[: len(text) // 2], "cut.json")
    assert info.value.line and "not valid JSON" in str(info.value)
    with pytest.raises(FormatError) as info:
        parse_fio(text.replace('"rw" : "randread"', '"rw" : "trim"'), "trim.json")
    assert info.value.line == 8 and "rw=trim is not a pattern xferscope measures" in str(info.value)
    with pytest.raises(FormatError) as info:
        parse_fio('fio: some warning\n{\n  "fio version" : "fio-3.33"\n}\n', "empty.json")
    assert info.value.line == 2 and "no 'jobs' list" in str(info.value)
    with pytest.raises(FormatError, match="not fio JSON output"):
        parse_fio("hello\n", "x.txt")


# ---------------------------------------------------------------- elbencho


def test_elbencho_csv_columns_become_results():
    cufile, host, mix = import_elbencho(str(ELBENCHO))  # the SYNC phase moved no data and is left out
    rows = list(csv.DictReader(ELBENCHO.open()))
    assert all(r.source == "elbencho" for r in (cufile, host, mix))
    assert (cufile.spec.path, cufile.spec.gpus, cufile.spec.workers, cufile.spec.block_size) == (
        "cufile",
        [0, 1],
        16,
        1 << 20,
    )
    assert cufile.labels == ["gdsnvme"] and cufile.environment["elbencho_version"] == "3.1-10"
    assert cufile.bytes == int(rows[0]["MiB [last]"]) << 20 and cufile.seconds == int(rows[0]["time ms [last]"]) / 1e3
    assert cufile.first_done.seconds == int(rows[0]["time ms [first]"]) / 1e3
    assert cufile.first_done.throughput_mib_s == pytest.approx(int(rows[0]["MiB/s [first]"]), abs=1)
    assert cufile.last_done.throughput_mib_s == pytest.approx(int(rows[0]["MiB/s [last]"]), abs=1)
    assert cufile.latency_us.mean == 2604 and cufile.cpu == {"sys_busy_pct": 29.0}
    assert (host.spec.path, host.spec.io, host.spec.block_size) == ("host", "read", 65536)
    assert (mix.spec.io, mix.spec.read_pct, mix.spec.iodepth) == ("randrw", 70, 16)
    assert mix.read_bytes == int(rows[3]["rwmix read MiB [last]"]) << 20
    assert mix.write_bytes == int(rows[3]["MiB [last]"]) << 20
    assert mix.read_latency_us.mean == 629 and mix.write_latency_us.mean == 617


def test_elbencho_malformed_input_is_located():
    text = ELBENCHO.read_text()
    lines = text.splitlines()
    with pytest.raises(FormatError) as info:
        parse_elbencho("\n".join(lines[:2] + [lines[2] + ",extra"]) + "\n", "e.csv")
    assert info.value.line == 3 and "fields, the header has" in str(info.value)
    with pytest.raises(FormatError) as info:
        parse_elbencho(lines[0].replace("MiB [last]", "MiB [end]") + "\n" + lines[1] + "\n", "e.csv")
    assert info.value.line == 1 and "lacks 'MiB [last]'" in str(info.value)
    bad = lines[1].replace(",READ,2310,", ",READ,soon,")
    with pytest.raises(FormatError) as info:
        parse_elbencho(lines[0] + "\n" + bad + "\n", "e.csv")
    assert info.value.line == 2 and "'time ms [first]': 'soon' is not a number" in str(info.value)
    with pytest.raises(FormatError, match="no elbencho CSV header before the first row"):
        parse_elbencho(lines[1] + "\n", "e.csv")


# ------------------------------------------------------------ as native runs


def test_imports_export_with_the_keys_of_a_run_and_read_back(tmp_path):
    results = import_fio(str(FIO_JOBS)) + import_elbencho(str(ELBENCHO)) + import_gdsio(str(GDSIO))[:2]
    path = tmp_path / "all.json"
    path.write_text(json.dumps({"results": [result_to_dict(r) for r in results]}))
    back = load_results(str(path))
    assert [(b.source, b.spec.name, round(b.throughput_mib_s, 6)) for b in back] == [
        (r.source, r.spec.name, round(r.throughput_mib_s, 6)) for r in results
    ]


def test_import_command_writes_json_and_csv_like_run(cli, tmp_path):
    out_json, out_csv = tmp_path / "gdsio.json", tmp_path / "gdsio.csv"
    r = cli("import", "gdsio", str(GDSIO), "--json", str(out_json), "--csv", str(out_csv))
    assert r.code == 0, r.err
    assert r.out.count("IoType:") == 21 and "[gdsio]" in r.out
    back = load_results(str(out_json))
    assert len(back) == 21 and {b.source for b in back} == {"gdsio"}
    with out_csv.open() as fh:
        reader = csv.DictReader(fh)
        rows = list(reader)
    assert reader.fieldnames == SUMMARY_COLUMNS and len(rows) == 21 and rows[0]["source"] == "gdsio"
    r = cli("import", "fio", str(FIO_RANDREAD), "--format", "json")
    assert r.code == 0 and json.loads(r.out)["source"] == "fio"


def test_import_command_rejects_bad_input_in_one_line(cli, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{\n  "jobs": [\n    {"jobname": "x",\n')
    r = cli("import", "fio", str(bad))
    assert (
        r.code == 2 and r.err.count("\n") == 1 and r.err.startswith(f"xferscope: {bad}:") and "Traceback" not in r.err
    )
    r = cli("import", "elbencho", str(tmp_path / "missing.csv"))
    assert r.code == 2 and "no such file" in r.err


def test_import_mlc_reads_a_saved_mlc_output(cli, tmp_path):
    text = (
        "Intel(R) Memory Latency Checker - v3.11\n*** Unable to modify prefetchers\n"
        "Measuring Loaded Latencies for the system\nUsing all the threads from each core if Hyper-threading "
        "is enabled\nUsing Read-only traffic type\nInject\tLatency\tBandwidth\nDelay\t(ns)\tMB/sec\n"
        "==========================\n 00000\t185.86\t 71162.7\n 00100\t89.60\t 27759.9\n"
    )
    path = tmp_path / "mlc.txt"
    path.write_text(text)
    out_csv = tmp_path / "mlc.csv"
    r = cli("import", "mlc", str(path), "--csv", str(out_csv))
    assert r.code == 0, r.err
    rows = list(csv.DictReader(out_csv.open()))
    assert [(row["delay"], row["latency_ns"], row["bandwidth_mb_s"]) for row in rows] == [
        ("0", "185.86", "71162.7"),
        ("100", "89.60", "27759.9"),
    ]
