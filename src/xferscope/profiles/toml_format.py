"""Profiles as TOML files: read with ``tomllib`` (``tomli`` on 3.10), written with ``tomli_w``.

    name = "ssd-block-mix-qd16"          # optional: defaults to the file name
    description = "..."
    source = "..."                       # where the experiment comes from
    kind = "io"                          # io (storage paths) or mem (memory sweeps)
    repetitions = 3
    duration = 10                        # seconds per point (or "500ms")
    ranks = 4                            # optional: replay only with --mpi under 4 MPI ranks
    kind = "saturate"                    # or a saturation plan: [base] for the runs, [saturate] for the
    [saturate]                           # searches: paths, block_sizes, gpu_sets, max_workers, max_qd,
                                         # min_rounds, max_rounds, max_points, storage (no [grid])

    [base]                               # fixed fields
    path = "host"
    iodepth = 16

    [grid]                               # every combination of these, first key outermost
    block_size = ["4K", "32K", "128K"]
    io = ["randwrite", "randrw", "randread"]

Every mistake is a FormatError naming the file, the line and the valid choices.
"""

from __future__ import annotations

import re
import sys
from typing import Any

import tomli_w

from xferscope.errors import FormatError, SpecError
from xferscope.profiles import fields as F
from xferscope.profiles.model import Profile

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - 3.10
    import tomli as tomllib

TOP_KEYS = (
    "name",
    "description",
    "source",
    "kind",
    "repetitions",
    "duration",
    "ranks",
    "base",
    "grid",
    "saturate",
    "workload",
)
TABLES = ("base", "grid")
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")

_HEADER = re.compile(r"^\s*\[\s*([A-Za-z0-9_.\"-]+)\s*\]\s*(#.*)?$")
_KEY = re.compile(r"^\s*\"?([A-Za-z0-9_-]+)\"?\s*=")


def key_lines(text: str) -> dict[tuple[str, str], int]:
    """Line number of each ``key =`` per table ("" for the top level), and of each table header."""
    lines: dict[tuple[str, str], int] = {}
    table = ""
    depth = 0  # open brackets of a multi-line array: keys inside are values, not keys
    for number, line in enumerate(text.splitlines(), start=1):
        code = line.split("#", 1)[0] if '"' not in line else line
        if depth == 0:
            header = _HEADER.match(line)
            if header:
                table = header.group(1).strip('"')
                lines.setdefault(("", table), number)
                continue
            key = _KEY.match(line)
            if key:
                lines.setdefault((table, key.group(1)), number)
        depth = max(0, depth + code.count("[") - code.count("]"))
    return lines


class _Reader:
    """Turns the parsed TOML of one file into a Profile, with the line of every error."""

    def __init__(self, text: str, where: str):
        self.where = where
        self.lines = key_lines(text)

    def fail(self, table: str, key: str | None, message: str) -> FormatError:
        line = self.lines.get((table, key)) if key else None
        if line is None and table:
            line = self.lines.get(("", table))
        return FormatError(self.where, line, message)

    def top(self, data: dict[str, Any], key: str, convert, default):
        if key not in data:
            return default
        try:
            return convert(data[key])
        except ValueError as exc:
            raise self.fail("", key, f"{key}: {exc}") from None

    def read(self, data: dict[str, Any], default_name: str, origin: str) -> Profile:
        for key in data:
            if key not in TOP_KEYS:
                raise self.fail("", key, f"unknown key {key!r}; valid top-level keys: {', '.join(TOP_KEYS)}")
        kind = self.top(data, "kind", F.choice(F.KINDS), "io")
        name = self.top(data, "name", F.to_str, default_name)
        if not NAME_RE.match(name):
            raise self.fail("", "name", f"name {name!r} must be letters, digits, '.', '_' or '-'")
        reps = self.top(data, "repetitions", F.to_int, 1)
        if reps < 1:
            raise self.fail("", "repetitions", f"repetitions must be 1 or more, got {reps}")
        ranks = self.top(data, "ranks", F.to_int, None)
        if ranks is not None and ranks < 1:
            raise self.fail("", "ranks", f"ranks must be 1 or more (the MPI ranks the profile needs), got {ranks}")
        profile = Profile(
            name=name,
            kind=kind,
            repetitions=reps,
            ranks=ranks,
            description=self.top(data, "description", F.to_str, ""),
            source=self.top(data, "source", F.to_str, ""),
            duration=self.top(data, "duration", F.to_seconds, None),
            base=self.table(data, "base", kind),
            grid=self.table(data, "grid", kind),
            saturate=self.plan(data, kind),
            workload=self.workload(data, kind),
            file=self.where,
            origin=origin,
        )
        both = sorted(set(profile.base) & set(profile.grid))
        if both:
            raise self.fail("grid", both[0], f"{both[0]} is in both [base] and [grid]; keep one")
        self.check_points(profile)
        return profile

    def plan(self, data: dict[str, Any], kind: str) -> dict[str, Any]:
        """The [saturate] table of a saturate profile (only those have one; they have no [grid])."""
        if kind != "saturate":
            if "saturate" in data:
                raise self.fail("", "saturate", 'only kind = "saturate" profiles have a [saturate] table')
            return {}
        if data.get("grid"):
            raise self.fail(
                "",
                "grid",
                "a saturate profile has no [grid]: the search chooses workers and queue "
                "depth; list paths, block_sizes and gpu_sets under [saturate]",
            )
        raw = data.get("saturate", {})
        if not isinstance(raw, dict):
            raise self.fail("", "saturate", "saturate must be a table: write [saturate] on a line of its own")
        out: dict[str, Any] = {}
        for key, value in raw.items():
            name = F.canonical_plan(key)
            if name is None:
                raise self.fail(
                    "saturate", key, f"[saturate] unknown field {key!r}; valid fields: {', '.join(F.SATURATE_FIELDS)}"
                )
            if name in out:
                raise self.fail("saturate", key, f"[saturate] {key} sets {name} a second time")
            try:
                out[name] = F.SATURATE_FIELDS[name](value)
            except ValueError as exc:
                raise self.fail("saturate", key, f"[saturate] {key}: {exc}") from None
        return out

    def workload(self, data: dict[str, Any], kind: str) -> dict[str, Any]:
        """The [workload] table of a workload profile (`workload train`'s options; no [base] or [grid])."""
        if kind != "workload":
            if "workload" in data:
                raise self.fail("", "workload", 'only kind = "workload" profiles have a [workload] table')
            return {}
        for table in ("base", "grid"):
            if data.get(table):
                raise self.fail("", table, f"a workload profile has no [{table}]: its fields go under [workload]")
        raw = data.get("workload", {})
        if not isinstance(raw, dict):
            raise self.fail("", "workload", "workload must be a table: write [workload] on a line of its own")
        return self.command_options(raw)

    def command_options(self, raw: dict[str, object]) -> dict[str, F.OptionValue]:
        """The [workload] table: ``workload`` (train where it is left out) and the workload command's options, each a
        value an option takes, its name with underscores; the command checks the names when it runs."""
        out: dict[str, F.OptionValue] = {}
        for key, value in raw.items():
            try:
                out[key.replace("-", "_")] = F.option_value(value)
            except ValueError as exc:
                raise self.fail("workload", key, f"[workload] {key}: {exc}") from None
        return out

    def table(self, data: dict[str, Any], table: str, kind: str) -> dict[str, Any]:
        raw = data.get(table, {})
        if kind == "workload" and raw:
            raise self.fail("", table, f"a workload profile has no [{table}]: its fields go under [workload]")
        if not isinstance(raw, dict):
            raise self.fail("", table, f"{table} must be a table: write [{table}] on a line of its own")
        out: dict[str, Any] = {}
        for key, value in raw.items():
            name = F.canonical(kind, key)
            if name is None and kind == "saturate" and F.canonical("io", key) in F.SEARCHED:
                raise self.fail(
                    table,
                    key,
                    f"[{table}] {key}: a saturate plan searches it; paths, block sizes and "
                    "GPU sets go under [saturate] (workers and queue depth are found)",
                )
            if name is None:
                raise self.fail(
                    table,
                    key,
                    f"[{table}] unknown field {key!r} for {kind} profiles; valid fields: "
                    f"{', '.join(F.fields_of(kind))}",
                )
            if name in out:
                raise self.fail(table, key, f"[{table}] {key} sets {name} a second time")
            out[name] = (
                self.grid_values(kind, name, key, value)
                if table == "grid"
                else self.value(table, kind, name, key, value)
            )
        return out

    def value(self, table: str, kind: str, name: str, key: str, value: Any) -> Any:
        try:
            return F.convert(kind, name, value)
        except ValueError as exc:
            raise self.fail(table, key, f"[{table}] {key}: {exc}") from None

    def grid_values(self, kind: str, name: str, key: str, value: Any) -> list[Any]:
        if not isinstance(value, list) or not value:
            raise self.fail(
                "grid",
                key,
                f"[grid] {key}: a grid field takes a non-empty list of values, "
                f"e.g. {key} = [a, b]; put a single value in [base]",
            )
        values = [self.value("grid", kind, name, key, v) for v in value]
        seen: list[Any] = []
        for v in values:
            if v in seen:
                raise self.fail("grid", key, f"[grid] {key} lists {v!r} twice")
            seen.append(v)
        return values

    def check_points(self, profile: Profile) -> None:
        if profile.kind == "workload":  # its spec is the workload layer's: checked when it is replayed
            return
        for index, combo in enumerate(profile.combos()):
            try:
                profile.spec_for(combo)
            except SpecError as exc:
                name = F.canonical(profile.kind, exc.field) or exc.field
                table = "grid" if name in profile.grid else "base" if name in profile.base else ""
                point = ", ".join(f"{k}={v}" for k, v in combo.items())
                where = f" (point {index + 1}: {point})" if point else ""
                key = _written_key(self.lines, table, profile.kind, name) if table else name
                raise self.fail(table, key, f"{exc}{where}") from None


def _written_key(lines: dict[tuple[str, str], int], table: str, kind: str, name: str) -> str:
    """The key as the file wrote it (an alias or the field name)."""
    for t, key in lines:
        if t == table and F.canonical(kind, key) == name:
            return key
    return name


def parse_profile(text: str, where: str, default_name: str, origin: str = "file") -> Profile:
    """A Profile from TOML text; ``where`` names the file in errors."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        match = re.search(r"line (\d+)", str(exc))
        message = re.sub(r"\s*\(at line \d+, column \d+\)", "", str(exc))
        raise FormatError(where, int(match.group(1)) if match else None, f"not valid TOML: {message}") from None
    return _Reader(text, where).read(data, default_name, origin)


def read_profile_file(path: str, origin: str = "file") -> Profile:
    import os

    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except FileNotFoundError:
        raise FormatError(path, None, "no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise FormatError(path, None, f"cannot read: {exc}") from None
    stem = os.path.basename(path)
    stem = stem[:-5] if stem.endswith(".toml") else stem
    return parse_profile(text, path, stem, origin)


def profile_to_dict(profile: Profile) -> dict[str, Any]:
    """The TOML document of a profile (defaults left out, sizes written as 4K/1M where exact)."""
    doc: dict[str, Any] = {"name": profile.name}
    if profile.description:
        doc["description"] = profile.description
    if profile.source:
        doc["source"] = profile.source
    doc["kind"] = profile.kind
    doc["repetitions"] = profile.repetitions
    if profile.duration is not None:
        doc["duration"] = int(profile.duration) if float(profile.duration).is_integer() else profile.duration
    if profile.ranks is not None:
        doc["ranks"] = profile.ranks
    doc["base"] = {k: F.to_toml_value(profile.kind, k, v) for k, v in profile.base.items() if v is not None}
    if profile.grid:
        doc["grid"] = {k: [F.to_toml_value(profile.kind, k, v) for v in values] for k, values in profile.grid.items()}
    if profile.saturate:
        doc["saturate"] = {k: F.plan_toml_value(k, v) for k, v in profile.saturate.items() if v is not None}
    if profile.workload:
        doc["workload"] = {k: v for k, v in profile.workload.items() if v is not None}
        del doc["base"]
    return doc


def dump_profile(profile: Profile) -> str:
    return tomli_w.dumps(profile_to_dict(profile))
