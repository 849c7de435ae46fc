"""Options shared by the commands (run and compare with gdsio's letters as aliases, --format, --set), and the
spec they build."""

from __future__ import annotations

from typing import Annotated

import typer

from xferscope.errors import SpecError
from xferscope.spec import GDSIO_IO, GDSIO_XFER, PATHS, RunSpec, parse_int_list
from xferscope.units import parse_duration, parse_size
from xferscope.workloads.common.options import gpu_list

IoOpt = Annotated[str, typer.Option("--io", "-I", help="read, write, randread, randwrite, randrw, rw (or gdsio's 0-3)")]
BsOpt = Annotated[str, typer.Option("--bs", "-i", help="block (I/O) size, e.g. 4K, 64K, 1M")]
WorkersOpt = Annotated[int, typer.Option("--workers", "-w", help="worker threads")]
DepthOpt = Annotated[int, typer.Option("--iodepth", "--qd", help="I/O in flight per worker (io_uring for host)")]
SizeOpt = Annotated[str, typer.Option("--size", "-s", help="scratch file size (per worker with --dir)")]
DurationOpt = Annotated[str | None, typer.Option("--duration", "-T", help="seconds to run (default 10)")]
TotalOpt = Annotated[str | None, typer.Option("--total", help="stop after this many bytes instead of a duration")]
FileOpt = Annotated[str | None, typer.Option("--file", "-f", help="file to use (created as a scratch file if missing)")]
DirOpt = Annotated[str | None, typer.Option("--dir", "-D", help="directory: one scratch file per worker")]
GpuOpt = Annotated[str | None, typer.Option("--gpu", "-d", help="GPU index or list: 0 | 0,1 | 0-3 | all")]
NumaOpt = Annotated[int | None, typer.Option("--numa", "-n", help="pin workers to this NUMA node's CPUs")]
CpusOpt = Annotated[str | None, typer.Option("--cpus", help="pin workers to these CPUs, e.g. 0-7")]
MixOpt = Annotated[int, typer.Option("--rwmix", "-M", help="read share in percent for randrw/rw")]
VerifyOpt = Annotated[bool, typer.Option("--verify", "-V", help="check the data read against the pattern written")]
BufferedOpt = Annotated[bool, typer.Option("--buffered", help="through the page cache (no O_DIRECT)")]
SourceOpt = Annotated[
    str,
    typer.Option(
        "--source",
        help="storage (default: the file's device, O_DIRECT), or cache: the file read once into the page cache and "
        "kept there, reads buffered, so that storage drops out and each path shows its own ceiling (reads only; "
        "host, bounce, bounce-async)",
    ),
]
ForceOpt = Annotated[bool, typer.Option("--force", help="allow writing over a file xferscope did not create")]
KeepOpt = Annotated[bool, typer.Option("--keep", help="keep the scratch files this run creates, for reuse")]
JsonOpt = Annotated[str | None, typer.Option("--json", help="write the summary as JSON to FILE")]
CsvOpt = Annotated[str | None, typer.Option("--csv", help="write the time series as CSV to FILE")]
FormatOpt = Annotated[str, typer.Option("--format", help="table (default) or json on stdout")]
IntervalOpt = Annotated[float, typer.Option("--interval", help="sample interval in seconds")]
SeedOpt = Annotated[int, typer.Option("--seed", help="seed for offsets and the data pattern")]
RegisterOpt = Annotated[
    bool,
    typer.Option(
        "--register/--no-register",
        help="cuFile paths: register the GPU buffers with cuFile (buf_register), "
        "as gdsio does; in compat mode large reads can be faster without",
    ),
]
HugePagesOpt = Annotated[
    bool | None,
    typer.Option(
        "--huge-pages/--4k-pages",
        help="host and bounce buffers on 2 MiB transparent huge pages, or on 4 KiB pages (host: as fio's malloc; "
        "bounce: CUDA's pinned allocation, cuMemHostAlloc). Default: huge pages where the kernel offers them (on "
        "a VM the 4 KiB pages a run gets change its speed by up to a third, and an O_DIRECT read into them can be "
        "split); the bounce paths pin them with cuMemHostRegister",
    ),
]
SplitOpt = Annotated[
    str | None,
    typer.Option(
        "--split",
        help="host, bounce, bounce-async, cufile: each request of "
        "--bs as parallel sub-requests of this size (KvikIO's task size), "
        "e.g. --bs 16M --split 4M",
    ),
]
MpiOpt = Annotated[
    bool,
    typer.Option(
        "--mpi",
        help="one run across every rank of an MPI job (start with mpirun or "
        "srun); --dir/--file may hold {rank} and {host}",
    ),
]

#: every workload's ``--mpi`` (what its ranks share is in each command's description)
WorkloadMpiOpt = Annotated[
    bool,
    typer.Option(
        "--mpi",
        help="across every rank of an MPI job (mpirun -n N xferscope workload ... --mpi), each rank's part begun "
        "together (the description says what the ranks share); --dir may hold {rank} and {host}, --gpu {local_rank}",
    ),
]
_WIDE_HELP = (
    "in a terminal, every column of the tables at any width (by default the first columns, the rest if they fit)"
)
WideOpt = Annotated[bool, typer.Option("--wide", help=_WIDE_HELP)]


def wide_tables(wide: bool) -> None:
    """``--wide``: every column of the tables this command prints."""
    from xferscope.report import show_every_column

    show_every_column(wide)


MARGIN_HELP = (
    "the verdict's margin m, a fraction (default 0.05): same when the interval lies within 1 ± m; faster/slower "
    "when it lies beyond 1 ± the larger of m and 0.15/(rounds - 1)"
)
MarginOpt = Annotated[float, typer.Option("--margin", help=MARGIN_HELP)]


def check_margin(margin: float) -> float:
    """``--margin`` as the rule takes it, or one line saying what it may be."""
    from xferscope.compare.verdict import check_margin as rule_margin

    try:
        return rule_margin(margin)
    except ValueError as e:
        raise SpecError("margin", str(e).removeprefix("--margin ")) from None


def check_format(fmt: str) -> str:
    if fmt not in ("table", "json"):
        raise SpecError("format", f"{fmt!r} is not one of table, json")
    return fmt


def parse_sets(items: list[str]) -> dict[str, str]:
    """['bs=4K', 'workers=8'] -> {'bs': '4K', 'workers': '8'} (``--set`` of replay and saturate)."""
    out: dict[str, str] = {}
    for item in items:
        key, eq, value = item.partition("=")
        if not eq or not key.strip():
            raise SpecError("set", f"{item!r} is not field=value, e.g. --set block_size=64K")
        out[key.strip()] = value.strip()
    return out


def parse_path(text: str) -> str:
    text = text.strip()
    if text.isdigit():
        n = int(text)
        if n in GDSIO_XFER:
            return GDSIO_XFER[n]
        if n == 4:
            raise SpecError("path", "gdsio -x 4 (CPU_CACHED_GPU) is `--path bounce --buffered`")
        raise SpecError("path", f"gdsio transfer type {n} is not supported; use one of {sorted(GDSIO_XFER)}")
    if text not in PATHS:
        raise SpecError("path", f"unknown transfer path {text!r}; choose one of {', '.join(PATHS)}")
    return text


def parse_io(text: str) -> str:
    text = text.strip()
    if text.isdigit():
        if int(text) not in GDSIO_IO:
            raise SpecError(
                "io", f"gdsio I/O type {text} is not one of 0 (read), 1 (write), 2 (randread), 3 (randwrite)"
            )
        return GDSIO_IO[int(text)]
    return text


def _size(text: str, field: str) -> int:
    try:
        return parse_size(text)
    except ValueError as exc:
        raise SpecError(field, str(exc)) from None


WorkloadRoundsOpt = Annotated[
    int, typer.Option("--rounds", help="several paths: rotated rounds, each path once a round")
]
LiveIntervalOpt = Annotated[float, typer.Option("--interval", help="seconds between live updates")]


def check_workload_outputs(fmt: str, json_path: str | None, csv_path: str | None, rounds: int) -> None:
    """A workload command's output choices and --rounds, checked before anything runs."""
    from xferscope.output.files import check_outputs

    check_format(fmt)
    check_outputs(fmt, {"--json": json_path, "--csv": csv_path})
    if rounds < 1:
        raise SpecError("rounds", f"must be at least 1, got {rounds}")


def build_spec(
    *,
    path: str,
    io: str,
    bs: str,
    workers: int,
    iodepth: int,
    size: str,
    duration: str | None,
    total: str | None,
    file: str | None,
    directory: str | None,
    gpu: str | None,
    numa: int | None,
    cpus: str | None,
    rwmix: int,
    verify: bool,
    buffered: bool,
    force: bool,
    keep: bool,
    interval: float,
    seed: int,
    register: bool = True,
    huge_pages: bool | None = None,
    split: str | None = None,
    source: str = "storage",
) -> RunSpec:
    """A validated RunSpec from command-line strings; SpecError names the option and the fix."""
    spec = RunSpec(
        path=parse_path(path),
        io=parse_io(io),
        block_size=_size(bs, "bs"),
        workers=workers,
        iodepth=iodepth,
        file_size=_size(size, "size"),
        duration=_duration(duration, total),
        total_bytes=_size(total, "total") if total else None,
        file=file,
        directory=directory,
        rwmix=rwmix,
        gpus=gpu_list(gpu),
        numa_node=numa,
        cpus=parse_int_list(cpus, "cpus") if cpus else None,
        verify=verify,
        buffered=buffered,
        force=force,
        keep=keep,
        interval=interval,
        seed=seed,
        register_buffers=register,
        huge_pages=huge_pages,
        split=_size(split, "split") if split else None,
        source=source,
    )
    spec.validate()
    if gpu is not None or spec.uses_gpu:
        _check_gpus(spec.gpus)
    return spec


def _duration(duration: str | None, total: str | None) -> float | None:
    """--duration in seconds; without it 10 s, or none where --total bounds the run."""
    try:
        return parse_duration(duration) if duration is not None else (None if total else 10.0)
    except ValueError as exc:
        raise SpecError("duration", str(exc)) from None


def _check_gpus(gpus: list[int]) -> None:
    """Where GPUs exist, a wrong index is bad input. With no GPU at all, a GPU path says so when it is checked
    (exit 3); the host path ignores -d, as gdsio does."""
    from xferscope.gpus import check_gpu_indices, gpu_count

    if gpu_count()[0]:
        check_gpu_indices(gpus)
