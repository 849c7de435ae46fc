"""Whatever a user hands the parsers (sizes and durations, a profile, a tool's saved output), they give either a
result or our one-line error, never another exception. The inputs are generated (hypothesis): free text, and the
real files in tests/data with one field changed."""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path
from typing import Any

import tomli_w
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from test_mlc_parser import FULL_RUN

from xferscope.errors import FormatError, XferscopeError
from xferscope.importers import elbencho, fio, gdsio
from xferscope.memory.mlc_text import parse_mlc_output
from xferscope.profiles import fields as F
from xferscope.profiles.toml_format import TOP_KEYS, parse_profile
from xferscope.units import format_size, parse_duration, parse_size

DATA = Path(__file__).parent / "data"
# the machine is shared and slow at times: no deadline per example; the same examples on every run
PROPERTY = settings(
    deadline=None,
    max_examples=150,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

# what people type into a number's place, and what tools print there when something went wrong
odd_numbers = st.one_of(
    st.integers(min_value=-(10**30), max_value=10**30).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.sampled_from(
        [
            "",
            " ",
            "-",
            "nan",
            "inf",
            "-inf",
            "1e999",
            "0",
            "-0",
            "0.0",
            "1,000",
            "N/A",
            "9" * 400,
            "١٢٣",
            "1_000",
            "0x10",
            "1.5.2",
            "+3",
            "   7   ",
        ]
    ),
    st.text(max_size=12),
)


def one_line(exc: BaseException) -> bool:
    text = str(exc)
    return bool(text.strip()) and "\n" not in text and "Traceback" not in text


# ------------------------------------------------------------------ sizes and durations
@PROPERTY
@given(
    st.one_of(
        st.text(max_size=24),
        odd_numbers.map(lambda n: n + "K"),
        odd_numbers,
        st.from_regex(r"\A\s*\d{1,30}(\.\d{0,30})?\s*[kKmMgGtTpP]?[iI]?[bB]?\s*\Z"),
    )
)
def test_a_size_is_a_whole_number_of_bytes_or_one_line_saying_why_not(text):
    try:
        value = parse_size(text)
    except ValueError as exc:
        assert one_line(exc), repr(exc)
        return
    assert isinstance(value, int) and value >= 0


@PROPERTY
@given(st.integers(min_value=0, max_value=1 << 62))
def test_a_size_reads_back_as_it_is_printed(n):
    assert parse_size(format_size(n)) == n


@PROPERTY
@given(st.integers(min_value=0, max_value=10**40), st.sampled_from(["", "K", "M", "G", "T", "P"]))
def test_a_size_is_exact_however_large(n, suffix):
    mult = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40, "P": 1 << 50}[suffix]
    assert parse_size(f"{n}{suffix}") == n * mult


@PROPERTY
@given(
    st.one_of(
        st.text(max_size=24),
        odd_numbers,
        odd_numbers.map(lambda n: n + "ms"),
        st.from_regex(r"\A\s*\d{1,400}(\.\d{0,30})?\s*(ms|s|m|h)?\s*\Z"),
    )
)
def test_a_duration_is_a_finite_number_of_seconds_or_one_line_saying_why_not(text):
    try:
        value = parse_duration(text)
    except ValueError as exc:
        assert one_line(exc), repr(exc)
        return
    assert isinstance(value, float) and math.isfinite(value) and value >= 0


# ------------------------------------------------------------------ profiles
def _field_values():
    return st.one_of(
        odd_numbers,
        st.integers(-5, 1 << 40),
        st.floats(allow_nan=True),
        st.booleans(),
        st.lists(st.one_of(st.integers(-3, 1 << 20), st.text(max_size=6)), max_size=4),
        st.sampled_from(["host", "bounce", "cufile", "read", "randwrite", "1M", "4K", "10s", "mem"]),
        st.dictionaries(st.text(max_size=5), st.integers(), max_size=2),
    )


KNOWN_KEYS = sorted(
    {*F.IO_FIELDS, *F.IO_ALIASES, *F.MEM_FIELDS, *F.MEM_ALIASES, *F.SATURATE_FIELDS, *F.SATURATE_ALIASES, *TOP_KEYS}
)
TABLES = ["", "base", "grid", "saturate"]


@st.composite
def profile_documents(draw) -> str:
    doc: dict[str, Any] = {}
    if draw(st.booleans()):
        doc["kind"] = draw(st.sampled_from([*F.KINDS, "nonsense", ""]))
    for _ in range(draw(st.integers(0, 6))):
        table = draw(st.sampled_from(TABLES))
        key = draw(st.one_of(st.sampled_from(KNOWN_KEYS), st.text(min_size=1, max_size=8)))
        value = draw(_field_values())
        if isinstance(value, float) and math.isnan(value):
            value = "nan"
        target = doc if not table else doc.setdefault(table, {})
        if isinstance(target, dict):
            target[key] = value
    return tomli_w.dumps(doc)


def _reads_or_says_why(text: str) -> None:
    try:
        parse_profile(text, "p.toml", "p")
    except XferscopeError as exc:
        assert one_line(exc), repr(exc)


@PROPERTY
@given(profile_documents())
def test_a_profile_is_read_or_refused_in_one_line(text):
    _reads_or_says_why(text)


@PROPERTY
@given(st.text(max_size=200))
def test_any_text_as_a_profile_is_read_or_refused_in_one_line(text):
    _reads_or_says_why(text)


# ------------------------------------------------------------------ importers
def _imports_or_says_why(parse, text: str) -> None:
    try:
        results = parse(text, "saved")
    except FormatError as exc:
        assert one_line(exc), repr(exc)
        return
    for r in results:
        assert r.seconds > 0 and r.bytes >= 0 and r.ops >= 0


@PROPERTY
@given(st.text(max_size=300))
def test_any_text_is_imported_or_refused_in_one_line(text):
    for parse in (gdsio.parse_text, fio.parse_text, elbencho.parse_text):
        _imports_or_says_why(parse, text)
    try:
        parse_mlc_output(text, "saved")
    except FormatError as exc:
        assert one_line(exc), repr(exc)


GDSIO_LINES = [line for line in (DATA / "gdsio-nvme-paths.txt").read_text().splitlines() if "IoType:" in line]


@PROPERTY
@given(st.sampled_from(GDSIO_LINES), st.data())
def test_a_gdsio_line_with_one_figure_changed_is_imported_or_refused_in_one_line(line, data):
    words = line.split()
    i = data.draw(st.integers(0, len(words) - 1))
    words[i] = data.draw(odd_numbers)
    _imports_or_says_why(gdsio.parse_text, " ".join(words))


def _leaves(node: Any, path: tuple = ()) -> list[tuple]:
    if isinstance(node, dict):
        return [p for k, v in node.items() for p in _leaves(v, (*path, k))] or [path]
    if isinstance(node, list):
        return [p for i, v in enumerate(node) for p in _leaves(v, (*path, i))] or [path]
    return [path]


def _replace(node: Any, path: tuple, value: Any) -> Any:
    if not path:
        return value
    head, rest = path[0], path[1:]
    copy = dict(node) if isinstance(node, dict) else list(node)
    copy[head] = _replace(node[head], rest, value)
    return copy


json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-(10**20), 10**20), st.floats(allow_nan=False), odd_numbers),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=6), inner, max_size=3)),
    max_leaves=6,
)


@PROPERTY
@given(st.sampled_from(sorted(DATA.glob("fio-*.json"))), st.data())
def test_fio_json_with_one_value_changed_is_imported_or_refused_in_one_line(path, data):
    text = path.read_text()
    start = text.index("{")
    document = json.loads(text[start:])
    leaves = _leaves(document)
    where = data.draw(st.sampled_from(leaves))
    changed = _replace(document, where, data.draw(json_values))
    _imports_or_says_why(fio.parse_text, text[:start] + json.dumps(changed))


ELBENCHO = (DATA / "elbencho-results.csv").read_text()


@PROPERTY
@given(st.data())
def test_an_elbencho_csv_with_one_cell_changed_is_imported_or_refused_in_one_line(data):
    rows = list(csv.reader(io.StringIO(ELBENCHO)))
    r = data.draw(st.integers(0, len(rows) - 1))
    assume(rows[r])
    c = data.draw(st.integers(0, len(rows[r]) - 1))
    rows[r][c] = data.draw(st.one_of(odd_numbers, st.sampled_from(["READ", "WRITE", "RWMIX", "RWMIX70", "MKDIRS"])))
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(rows)
    _imports_or_says_why(elbencho.parse_text, out.getvalue())


MLC_LINES = FULL_RUN.splitlines()


@PROPERTY
@given(st.data())
def test_mlc_output_with_one_line_changed_is_read_or_refused_in_one_line(data):
    lines = list(MLC_LINES)
    i = data.draw(st.integers(0, len(lines) - 1))
    words = lines[i].split("\t")
    j = data.draw(st.integers(0, len(words) - 1))
    words[j] = data.draw(odd_numbers)
    lines[i] = "\t".join(words)
    try:
        result = parse_mlc_output("\n".join(lines), "saved")
    except FormatError as exc:
        assert one_line(exc), repr(exc)
        return
    for point in result.points:
        for figure in (point.latency_ns, point.bandwidth_mb_s):
            assert figure is None or isinstance(figure, float)
