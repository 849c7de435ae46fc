"""The record layer: every kind's JSON Schema, files of earlier versions opening, round trips, damaged files."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from xferscope import export, records
from xferscope.errors import FormatError
from xferscope.importers.mlc import read_mem_results
from xferscope.memory.result import with_figures
from xferscope.profiles.toml_format import parse_profile
from xferscope.saturate import record as saturation_record
from xferscope.stats import HIST_NBUCKETS
from xferscope.sweep.against import OldResults
from xferscope.sweep.plan import plan_points
from xferscope.sweep.record import ResultsFile

OLD = Path(__file__).parent / "data" / "records"  # written by xferscope 0.1.0, before schema_version
KINDS = ("run", "comparison", "sweep", "saturation", "mem", "train", "kvcache", "load", "checkpoint")
#: the profile the sweep fixture was measured with
PROFILE = """\
name = "small-host"
description = "2 block sizes on the host path"
repetitions = 2
duration = 0.1

[base]
path = "host"
file_size = "4M"

[grid]
block_size = ["4K", "64K"]
"""


def test_every_kind_has_a_json_schema_with_its_version(cli):
    from xferscope.commands.schema import KIND_NAMES, _kinds

    assert KIND_NAMES == KINDS == tuple(_kinds()), "the help names every kind the command knows"
    for kind in KINDS:
        r = cli("schema", kind)
        assert r.code == 0, r.err
        schema = json.loads(r.out)
        root = schema["$defs"][schema["$ref"].rsplit("/", 1)[1]]
        assert root["type"] == "object" and "schema_version" in root["properties"], kind
    r = cli("schema", "results")
    assert r.code == 2 and r.out == "" and len(r.err.strip().splitlines()) == 1
    assert "'results' is not a kind" in r.err and "comparison" in r.err


@pytest.mark.parametrize(
    ("name", "kind"),
    [("run", "run"), ("comparison", "comparison"), ("sweep", "sweep"), ("saturation", "saturation"), ("mem", "mem")],
)
def test_files_of_earlier_versions_are_their_kind_and_version_0(name, kind):
    data = json.loads((OLD / f"{name}.json").read_text())
    assert "schema_version" not in data and records.kind_of(data) == kind
    assert records.check(kind, data, name) is data
    assert msgspec.convert(data, type=records.KINDS[kind][0]).schema_version == 0


def test_files_of_earlier_versions_open_in_every_reader(tmp_path):
    old = {name: str(OLD / f"{name}.json") for name in ("run", "comparison", "sweep", "saturation", "mem")}
    (run,) = export.load_results(old["run"])
    assert run.bytes > 0 and run.spec.block_size == 64 << 10 and run.fixed_cost_s
    compared = export.load_results(old["comparison"])
    assert len(compared) == 4 and {r.spec.path for r in compared} == {"host"}
    for name in ("sweep", "saturation"):
        assert len(export.load_results(old[name])) == len(json.loads(Path(old[name]).read_text())["results"]) > 1
    outcome = saturation_record.load_saturation(old["saturation"])
    assert outcome.series[0].series.path == "host" and outcome.series[0].found.points
    sweep = OldResults(old["sweep"], "io")
    assert len(sweep.figures) == 2 and all(f[0] > 0 for f in sweep.figures.values())
    assert OldResults(old["mem"], "mem").figures
    (mem,) = read_mem_results(old["mem"])
    assert mem.idle_latency_ns and mem.idle_latency_ns > 0


# ------------------------------------------------------------------ round trips


def _as_written(payload):
    """``payload`` as its file holds it (no NaN in JSON: null)."""
    return json.loads(records.json_text(payload))


def _alike(a, b) -> bool:
    """The same data, numbers alike to the last few bits: statistics derived again from stored values (a standard
    deviation) differ in the last bit from one Python to another (3.11 computes ``statistics.stdev`` otherwise)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_alike(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_alike(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=1e-12)
    return a == b


def _through_file(tmp_path: Path, payload) -> str:
    path = tmp_path / "again.json"
    export.write_json(str(path), payload)
    return str(path)


def test_a_run_round_trips_and_is_written_with_its_version(tmp_path):
    (run,) = export.load_results(str(OLD / "run.json"))
    first = export.result_to_dict(run)
    assert first["schema_version"] == records.SCHEMA_VERSION
    (again,) = export.load_results(_through_file(tmp_path, first))
    assert export.result_to_dict(again) == first


def test_a_comparison_round_trips(tmp_path):
    old = json.loads((OLD / "comparison.json").read_text())
    results = export.load_results(str(OLD / "comparison.json"))
    payload = {
        "schema_version": records.SCHEMA_VERSION,
        "comparison": old["comparison"],
        "results": [export.result_to_dict(r) for r in results],
    }
    path = _through_file(tmp_path, payload)
    data = records.check("comparison", json.loads(Path(path).read_text()), path)
    assert data["comparison"] == old["comparison"]
    assert [export.result_to_dict(r) for r in export.load_results(path)] == payload["results"]


def test_a_saturation_round_trips(tmp_path):
    outcome = saturation_record.load_saturation(str(OLD / "saturation.json"))
    first = records.as_data(saturation_record.saturation_to_record(outcome))
    assert first["schema_version"] == records.SCHEMA_VERSION
    again = saturation_record.load_saturation(_through_file(tmp_path, first))
    assert records.as_data(saturation_record.saturation_to_record(again)) == first


def test_a_sweep_round_trips(tmp_path):
    old = json.loads((OLD / "sweep.json").read_text())
    path = tmp_path / "sweep.json"
    shutil.copy(OLD / "sweep.json", path)
    profile = parse_profile(PROFILE, "small.toml", "small-host")
    first = _as_written(ResultsFile(str(path), profile, plan_points(profile)).to_record())
    assert first["schema_version"] == records.SCHEMA_VERSION and _alike(first["points"], old["points"])
    path.write_text(json.dumps(first))
    again = _as_written(ResultsFile(str(path), profile, plan_points(profile)).to_record())
    assert {k: v for k, v in again.items() if k != "updated"} == {k: v for k, v in first.items() if k != "updated"}


def test_a_memory_sweep_round_trips(tmp_path):
    (mem,) = read_mem_results(str(OLD / "mem.json"))
    first = with_figures(mem)
    assert first.schema_version == records.SCHEMA_VERSION
    (again,) = read_mem_results(_through_file(tmp_path, first))
    assert with_figures(again) == first


# ------------------------------------------------------------------ random valid records

finite = st.floats(min_value=1e-6, max_value=1e12, allow_nan=False, allow_infinity=False)
counts = st.integers(min_value=0, max_value=1 << 50)
latency = st.builds(records.Latency, **dict.fromkeys(("min", "mean", "p50", "p90", "p99", "p999", "max"), finite))
runs = st.builds(
    records.Run,
    schema_version=st.just(records.SCHEMA_VERSION),
    label=st.text(max_size=20),
    path=st.sampled_from(["host", "bounce", "bounce-async", "cufile"]),
    io=st.sampled_from(["read", "write", "randread", "randwrite"]),
    block_size=st.sampled_from([4096, 65536, 1 << 20]),
    workers=st.integers(min_value=1, max_value=64),
    iodepth=st.integers(min_value=1, max_value=128),
    status=st.sampled_from(["ok", "interrupted", "failed"]),
    bytes=counts,
    ops=counts,
    seconds=finite,
    latency_us=latency,
    cpu=st.dictionaries(st.sampled_from(["usr_pct", "sys_pct", "cpu_seconds"]), finite),
    labels=st.lists(st.text(max_size=10), max_size=3),
    fixed_cost_s=st.none() | st.dictionaries(st.sampled_from(["setup", "teardown", "total"]), finite, min_size=1),
    latency_histogram_ns=st.none()
    | st.dictionaries(st.integers(0, HIST_NBUCKETS - 1).map(str), st.integers(1, 10**6), min_size=1),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(runs)
def test_random_valid_runs_round_trip_through_the_file_and_the_reader(rec):
    text = msgspec.json.encode(rec)
    assert msgspec.json.decode(text, type=records.Run) == rec
    data = json.loads(text)
    (result,) = [export.result_from_record(run, "<random>") for run in records.runs_of(data, "<random>")]
    written = export.result_to_dict(result)
    records.check("run", written, "<written>")
    for key in ("path", "io", "block_size", "workers", "iodepth", "status", "bytes", "ops", "labels"):
        assert written[key] == data[key], key
    assert math.isclose(written["seconds"], rec.seconds)
    assert written["latency_us"] == msgspec.to_builtins(rec.latency_us)
    assert written.get("fixed_cost_s") == rec.fixed_cost_s
    assert written.get("latency_histogram_ns") == rec.latency_histogram_ns


# ------------------------------------------------------------------ damaged files


def _damaged(tmp_path: Path, name: str, change) -> str:
    data = json.loads((OLD / f"{name}.json").read_text())
    change(data)
    path = tmp_path / f"damaged-{name}.json"
    path.write_text(json.dumps(data))
    return str(path)


def _one_line(r) -> str:
    assert r.code == 2, (r.code, r.err)
    lines = r.err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.err, r.err
    return lines[0]


def test_five_damaged_files_each_give_one_line(cli, tmp_path, direct_dir):
    profile = tmp_path / "small.toml"
    profile.write_text(PROFILE)

    # 1. a saturation cut short: not JSON
    cut = tmp_path / "cut.json"
    cut.write_text((OLD / "saturation.json").read_text()[:5000])
    line = _one_line(cli("saturate", "--from", str(cut)))
    assert "cut.json" in line and "not valid JSON" in line

    # 2. a saturation whose search has a block size in words
    bad = _damaged(tmp_path, "saturation", lambda d: d["series"][0].update(block_size="1M"))
    line = _one_line(cli("saturate", "--from", bad))
    assert "$.series[0].block_size" in line and "Expected `int`, got `str`" in line

    # 3. a comparison whose first run lost its byte count, given as an earlier result to compare against
    bad = _damaged(tmp_path, "comparison", lambda d: d["results"][0].pop("bytes"))
    line = _one_line(cli("replay", str(profile), "--dry-run", "--against", bad))
    assert "missing required field `bytes`" in line and "$.results[0]" in line

    # 4. the sweep's own results file with a point of no index
    bad = _damaged(tmp_path, "sweep", lambda d: d["points"][0].update(index=None))
    line = _one_line(cli("replay", str(profile), "--results", bad, "--dir", str(direct_dir)))
    assert "$.points[0].index" in line and "Expected `int`, got `null`" in line

    # 5. a memory sweep from a newer xferscope
    bad = _damaged(tmp_path, "mem", lambda d: d.update(schema_version=records.SCHEMA_VERSION + 1))
    line = _one_line(cli("compare", "--mem", bad))
    assert f"schema_version {records.SCHEMA_VERSION + 1}" in line and "newer xferscope" in line


def test_a_damaged_results_file_is_refused_before_any_reader_looks_at_it(tmp_path):
    bad = _damaged(tmp_path, "run", lambda d: d["latency_us"].update(p99="slow"))
    with pytest.raises(FormatError, match=r"\$\.latency_us\.p99"):
        export.load_results(bad)
    listed = tmp_path / "listed.json"
    listed.write_text(json.dumps([json.loads((OLD / "run.json").read_text()), {"path": "host"}]))
    with pytest.raises(FormatError, match=r"\$\[1\]"):
        export.load_results(str(listed))


# ------------------------------------------------------------------ random valid records of every kind

JSON_VALUES = (
    st.none()
    | st.booleans()
    | st.integers(-(2**53), 2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8)
)


def _strategy(hint, ancestors: tuple = ()):
    """Valid values of a record's field type, built from the type itself (a Struct field by field); None for a
    Struct inside itself (a run's hosts), whose lists stay empty."""
    import types
    import typing

    if hint is typing.Any:
        return JSON_VALUES
    if isinstance(hint, type) and issubclass(hint, msgspec.Struct):
        if hint in ancestors:
            return None
        hints = typing.get_type_hints(hint, include_extras=True)
        fields = {name: _strategy(hints[name], (*ancestors, hint)) for name in hint.__struct_fields__}
        if "schema_version" in fields:  # a valid record is of this version or an earlier one
            fields["schema_version"] = st.integers(0, records.SCHEMA_VERSION)
        return st.builds(hint, **fields)
    if typing.is_typeddict(hint):  # its required keys always, the others (total=False) at times
        hints = typing.get_type_hints(hint)
        required = hint.__required_keys__
        return st.fixed_dictionaries(
            {name: _strategy(t, ancestors) for name, t in hints.items() if name in required},
            optional={name: _strategy(t, ancestors) for name, t in hints.items() if name not in required},
        )
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is typing.Annotated:
        return _strategy(args[0], ancestors)
    if origin in (typing.Union, types.UnionType):
        return st.one_of([_strategy(a, ancestors) for a in args])
    if origin is list:
        element = _strategy(args[0], ancestors)
        return st.just([]) if element is None else st.lists(element, max_size=2)
    if origin is dict:
        return st.dictionaries(st.text(max_size=4), _strategy(args[1], ancestors), max_size=2)
    return {
        type(None): st.none(),
        bool: st.booleans(),
        int: st.integers(0, 2**53),
        float: st.floats(allow_nan=False, allow_infinity=False),
        str: st.text(max_size=8),
        msgspec.UnsetType: st.just(msgspec.UNSET),  # a field the file leaves out
    }[hint]


@pytest.mark.parametrize("kind", list(records.KINDS))
def test_random_valid_records_of_every_kind_round_trip(kind):
    record_type = records.KINDS[kind][0]

    @settings(max_examples=10, deadline=None, suppress_health_check=list(HealthCheck))
    @given(_strategy(record_type))
    def round_trip(record):
        text = records.json_text(record)  # as xferscope writes it
        assert msgspec.json.decode(text, type=record_type) == record
        records.check(kind, json.loads(text), "<random>")  # the file it makes opens as its kind

    round_trip()


def test_a_memory_rows_keys_are_the_ones_its_type_names():
    """A replay's memory rows are built from ``MEM_WHERE`` and ``MEM_METRICS``: each row holds every key of
    ``records.MemRow`` and no other."""
    from xferscope.sweep.stats import mem_rows

    point = {"traffic": "R", "stride": 64, "delay": 0, "backend": "builtin", "locality": "64-page"}
    point |= {"latency_ns": 90.0, "bandwidth_mb_s": 1000.0, "read_mb_s": 1000.0, "write_mb_s": 0.0}
    rows = mem_rows([{"status": "ok", "points": [point]}])
    assert len(rows) == 1 and set(rows[0]) == set(records.MemRow.__annotations__)
    assert rows[0]["locality"] == "64-page" and rows[0]["latency_ns"]["median"] == 90.0
