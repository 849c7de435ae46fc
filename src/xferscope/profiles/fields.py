"""The fields a profile may set, for each kind, and how a TOML or command-line value becomes a field value.

A converter takes the raw value (from TOML: int, float, str, bool or list; from
``--set field=value``: always a string) and returns the field's value or raises
``ValueError`` with a message that names what is accepted.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from xferscope.spec import GDSIO_IO, GDSIO_XFER, IO_PATTERNS, PATHS, SHAPE_FIELDS, SOURCES
from xferscope.units import format_size, parse_duration, parse_size

Converter = Callable[[Any], Any]

KINDS = ("io", "mem", "saturate", "workload")


def _describe(value: Any) -> str:
    return f"{type(value).__name__} {value!r}"


def to_int(value: Any) -> int:
    if isinstance(value, bool):
        raise ValueError(f"expected a whole number, got {_describe(value)}")
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value.strip())
    raise ValueError(f"expected a whole number, got {_describe(value)}")


def to_float(value: Any) -> float:
    if isinstance(value, bool):
        raise ValueError(f"expected a number, got {_describe(value)}")
    if isinstance(value, (int, float)):
        return float(value)
    try:
        return float(str(value).strip())
    except ValueError:
        raise ValueError(f"expected a number, got {_describe(value)}") from None


def to_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "yes", "on", "1"):
        return True
    if text in ("false", "no", "off", "0"):
        return False
    raise ValueError(f"expected true or false, got {_describe(value)}")


def to_str(value: Any) -> str:
    if isinstance(value, str):
        return value
    raise ValueError(f"expected a string, got {_describe(value)}")


def to_size(value: Any) -> int:
    """Bytes from 4096, "4K", "1M", "1G" (binary suffixes, as gdsio and fio)."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise ValueError(f"expected a size such as 4K, 1M or a number of bytes, got {_describe(value)}")
    try:
        return parse_size(value)
    except ValueError:
        raise ValueError(f"expected a size such as 4K, 1M or a number of bytes, got {value!r}") from None


def to_seconds(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ValueError(f'expected seconds such as 10 or "500ms", got {_describe(value)}')
    try:
        seconds = parse_duration(value)
    except ValueError:
        raise ValueError(f'expected seconds such as 10 or "500ms", got {value!r}') from None
    if seconds <= 0:
        raise ValueError(f"expected a positive number of seconds, got {value!r}")
    return seconds


def to_int_list(value: Any) -> list[int]:
    """[0, 1], 0, "0,1", "0-3" -> a list of whole numbers."""
    if isinstance(value, list):
        return [to_int(v) for v in value]
    if isinstance(value, int) and not isinstance(value, bool):
        return [value]
    if isinstance(value, str):
        out: list[int] = []
        for part in value.replace(" ", "").split(","):
            if not part:
                continue
            lo, sep, hi = part.partition("-")
            if not lo.isdigit() or (sep and not hi.isdigit()) or (sep and int(hi) < int(lo)):
                raise ValueError(f"expected a list of numbers such as 0,1 or 0-3, got {value!r}")
            out.extend(range(int(lo), int(hi) + 1) if sep else [int(lo)])
        if out:
            return out
    raise ValueError(f'expected a list of numbers such as [0, 1], "0,1" or "0-3", got {_describe(value)}')


def choice(
    options: tuple[str, ...] | list[str], numbers: dict[int, str] | None = None, upper: bool = False
) -> Converter:
    """A converter that accepts one of ``options`` (or, with ``numbers``, a number standing for one)."""

    def convert(value: Any) -> str:
        if numbers and (
            (isinstance(value, int) and not isinstance(value, bool))
            or (isinstance(value, str) and value.strip().isdigit())
        ):
            number = int(value)
            if number in numbers:
                return numbers[number]
        if isinstance(value, str):
            text = value.strip().upper() if upper else value.strip()
            if text in options:
                return text
        raise ValueError(f"{value!r} is not one of {', '.join(options)}")

    return convert


# ------------------------------------------------------------------ io kind

IO_FIELDS: dict[str, Converter] = {
    "path": choice(tuple(PATHS), GDSIO_XFER),
    "io": choice(IO_PATTERNS, GDSIO_IO),
    "block_size": to_size,
    "workers": to_int,
    "iodepth": to_int,
    "file_size": to_size,
    "total_bytes": to_size,
    "file": to_str,
    "directory": to_str,
    "rwmix": to_int,
    "gpus": to_int_list,
    "numa_node": to_int,
    "cpus": to_int_list,
    "verify": to_bool,
    "buffered": to_bool,
    "source": choice(SOURCES),
    "register_buffers": to_bool,
    "huge_pages": to_bool,
    "split": to_size,
    "force": to_bool,
    "keep": to_bool,
    "seed": to_int,
    "interval": to_float,
    "label": to_str,
}
IO_ALIASES = {
    "bs": "block_size",
    "size": "file_size",
    "qd": "iodepth",
    "gpu": "gpus",
    "dir": "directory",
    "xfer": "path",
    "pattern": "io",
    "total": "total_bytes",
}
IO_SIZE_FIELDS = ("block_size", "file_size", "total_bytes", "split")

# Fields that say what a point measures (the rest say where and how long): the identity of a point when
# results are resumed or compared against another file.
IO_IDENTITY = (
    *SHAPE_FIELDS,
    "gpus",
    "buffered",
    "source",
    "register_buffers",
    "huge_pages",
    "split",
)

# ----------------------------------------------------------------- mem kind

MEM_MODES = ("idle", "loaded", "peak", "curve", "matrix")
MEM_PAGES = ("4k", "thp", "2m", "1g")
MEM_BACKENDS = ("builtin", "mlc")
MEM_TRAFFIC = ("R", "W2", "W3", "W5", "W6", "W7", "W8", "W9", "W10")


def to_traffic(value: Any) -> str:
    return choice(MEM_TRAFFIC, upper=True)(value)


MEM_FIELDS: dict[str, Converter] = {
    "mode": choice(MEM_MODES),
    "traffic": to_traffic,
    "stride": to_int,
    "delays": to_int_list,
    "threads": to_int,
    "cpus": to_int_list,
    "latency_cpu": to_int,
    "buffer": to_size,
    "backend": choice(MEM_BACKENDS),
    "mlc": to_str,
    "seed": to_int,
    "locality": to_str,
    "pages": choice(MEM_PAGES),
    "max_size": to_size,
    "per_octave": to_int,
}
MEM_ALIASES = {"strides": "stride", "buffer_bytes": "buffer", "mlc_path": "mlc", "delay": "delays"}
MEM_SIZE_FIELDS = ("buffer", "max_size")
MEM_IDENTITY = ("mode", "traffic", "stride", "backend", "locality", "pages")

# ------------------------------------------------------------ saturate kind
# A saturate plan: [base] holds the run's other fields; the search sets path, block size, GPUs, workers and
# queue depth from the [saturate] table.

SEARCHED = ("path", "block_size", "gpus", "workers", "iodepth", "total_bytes", "verify", "label")
SATURATE_BASE_FIELDS = {k: v for k, v in IO_FIELDS.items() if k not in SEARCHED}
SATURATE_BASE_ALIASES = {k: v for k, v in IO_ALIASES.items() if v in SATURATE_BASE_FIELDS}


def _list_of(convert: Converter) -> Converter:
    """A non-empty list: [a, b] or "a,b"."""

    def of(value: Any) -> list:
        items = value.split(",") if isinstance(value, str) else value
        if not isinstance(items, list) or not items:
            raise ValueError(f'expected a non-empty list such as [a, b] or "a,b", got {_describe(value)}')
        return [convert(v.strip() if isinstance(v, str) else v) for v in items]

    return of


def to_positive(value: Any) -> int:
    number = to_int(value)
    if number < 1:
        raise ValueError(f"expected 1 or more, got {number}")
    return number


def to_gpu_sets(value: Any) -> list[list[int]]:
    """[[0], [0, 1]] or ["0", "0-3"]: one GPU set each."""
    if not isinstance(value, list) or not value:
        raise ValueError(f'expected a list of GPU sets such as [[0], [0, 1]] or ["0", "0-3"], got {_describe(value)}')
    return [to_int_list(v) for v in value]


SATURATE_FIELDS: dict[str, Converter] = {
    "paths": _list_of(choice(tuple(PATHS), GDSIO_XFER)),
    "block_sizes": _list_of(to_size),
    "gpu_sets": to_gpu_sets,
    "max_workers": to_positive,
    "max_qd": to_positive,
    "min_rounds": to_positive,
    "max_rounds": to_positive,
    "max_points": to_positive,
    "margin": to_float,
    "storage": to_str,
}
SATURATE_ALIASES = {
    "path": "paths",
    "bs": "block_sizes",
    "block_size": "block_sizes",
    "gpus": "gpu_sets",
    "gpu": "gpu_sets",
}

#: What a duration means for each kind (saturate: each measurement of a search; workload: each training run).
DEFAULT_DURATION = {"io": 10.0, "mem": 2.0, "saturate": 1.0, "workload": 10.0}

# ------------------------------------------------------------------ workload kind: [workload]

#: what a workload command option's field holds in a profile (the fields are the command's options: the command
#: declares each once and checks them when the profile is replayed, ``commands.workload_kinds``)
OptionValue = str | int | float | bool | list[str | int | float | bool]


def option_value(value: Any) -> OptionValue:
    """A command option's value as a profile holds it: a string, number or true/false, or a list of them (given
    as a comma list)."""
    scalar = (str, int, float, bool)
    if isinstance(value, scalar) or (isinstance(value, list) and all(isinstance(v, scalar) for v in value)):
        return value
    raise ValueError(f"a string, number, true/false or a list of them, got {value!r}")


def fields_of(kind: str) -> dict[str, Converter]:
    return {"io": IO_FIELDS, "mem": MEM_FIELDS, "saturate": SATURATE_BASE_FIELDS, "workload": {}}[kind]


def aliases_of(kind: str) -> dict[str, str]:
    return {"io": IO_ALIASES, "mem": MEM_ALIASES, "saturate": SATURATE_BASE_ALIASES, "workload": {}}[kind]


def canonical_plan(key: str) -> str | None:
    """The [saturate] field a key names (aliases resolved), or None."""
    key = SATURATE_ALIASES.get(key, key)
    return key if key in SATURATE_FIELDS else None


def plan_toml_value(key: str, value: Any) -> Any:
    """A [saturate] value as a profile file writes it: block sizes as "4K"."""
    if key == "block_sizes":
        return [to_toml_value("io", "block_size", v) for v in value]
    return value


def canonical(kind: str, key: str) -> str | None:
    """The field a key names (aliases resolved), or None when the kind has no such field."""
    key = aliases_of(kind).get(key, key)
    return key if key in fields_of(kind) else None


def convert(kind: str, key: str, value: Any) -> Any:
    """The value of field ``key`` (canonical name) from a raw TOML or command-line value."""
    return fields_of(kind)[key](value)


def to_toml_value(kind: str, key: str, value: Any) -> Any:
    """The value as a profile file writes it: sizes as "4K" where that is exact."""
    sizes = MEM_SIZE_FIELDS if kind == "mem" else IO_SIZE_FIELDS
    if key in sizes and isinstance(value, int):
        text = format_size(value)
        return text if not text.isdigit() else value
    return value
