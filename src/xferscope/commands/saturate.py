"""`xferscope saturate`: how much concurrency each path needs at each block size, and which ceiling binds."""

from __future__ import annotations

import dataclasses
from typing import Annotated

import typer

from xferscope.commands.option_groups import takes
from xferscope.commands.options import (
    BufferedOpt,
    CpusOpt,
    DirOpt,
    FileOpt,
    ForceOpt,
    FormatOpt,
    HugePagesOpt,
    IoOpt,
    KeepOpt,
    MixOpt,
    MpiOpt,
    NumaOpt,
    RegisterOpt,
    SizeOpt,
    WideOpt,
    check_format,
    gpu_list,
    parse_path,
    parse_sets,
    wide_tables,
)
from xferscope.errors import SpecError
from xferscope.output.files import check_outputs
from xferscope.output.saturate import print_dry_run, report, run_and_report
from xferscope.output.terminal import install_hangup_handlers

PathsOpt = Annotated[
    str | None,
    typer.Option(
        "--path",
        "-x",
        help="path, or a comma list (host first is the storage reference): host, bounce, bounce-async, "
        "cufile, cufile-batch, cufile-async",
    ),
]
BlocksOpt = Annotated[str | None, typer.Option("--bs", "-i", help="block sizes, e.g. 4K,64K,1M,16M (default)")]
MaxWorkersOpt = Annotated[int | None, typer.Option("--max-workers", help="most workers the search tries (16)")]
MaxQdOpt = Annotated[
    int | None,
    typer.Option(
        "--max-qd", help="deepest queue the search tries where the path has one: host io_uring, cufile-batch (64)"
    ),
]
MinRoundsOpt = Annotated[
    int | None, typer.Option("--min-rounds", help="interleaved rounds before two neighbours are judged (3)")
]
MaxRoundsOpt = Annotated[
    int | None,
    typer.Option(
        "--max-rounds",
        help="cap: rounds after which two points that cannot be told apart count as equal (5; the knee's tests "
        "against the best point go to 9 unless this is given)",
    ),
]
MaxPointsOpt = Annotated[int | None, typer.Option("--max-points", help="cap: points per search (24)")]
PointSecondsOpt = Annotated[str | None, typer.Option("--duration", "-T", help="seconds per measurement (default 1)")]
GpuSetsOpt = Annotated[
    list[str] | None,
    typer.Option("--gpu", "-d", help="GPU set, e.g. 0 | 0,1 | 0-3 | all; repeat for several sets (each searched)"),
]
StorageOpt = Annotated[
    str | None,
    typer.Option(
        "--storage",
        help="storage ceiling: auto (search host too when it is not among the paths), none, or the JSON "
        "of an earlier `saturate --path host`",
    ),
]
JsonOut = Annotated[
    str | None, typer.Option("--json", help="write the saturation (searches, runs, verdicts) as JSON to FILE")
]
CsvOut = Annotated[str | None, typer.Option("--csv", help="write one row per measured point as CSV to FILE")]
ProfileOpt = Annotated[
    str | None, typer.Option("--profile", help="take the plan from a saturate profile (options given here override it)")
]
SaveProfileOpt = Annotated[
    str | None, typer.Option("--save-profile", metavar="NAME", help="save this plan as a profile and exit")
]
FromOpt = Annotated[
    str | None,
    typer.Option(
        "--from", metavar="FILE", help="show a saved saturation again (judged by today's rules); no measuring"
    ),
]
DryRunOpt = Annotated[
    bool, typer.Option("--dry-run", help="list the searches, the full grids and the most time they can take")
]


def _sizes(text: str) -> list[int]:
    from xferscope.units import parse_size

    out = []
    for part in text.split(","):
        if part.strip():
            try:
                out.append(parse_size(part.strip()))
            except ValueError as exc:
                raise SpecError("bs", str(exc)) from None
    return out


def make_plan(profile_name: str | None = None, profile=None, **given):
    """The validated SaturatePlan: each value from the command line where given (not None), else from the
    profile (``profile``, or the one named ``profile_name``), else the default. SpecError names the option."""
    from xferscope.commands.options import _size, parse_io
    from xferscope.saturate.plan import plan_from
    from xferscope.spec import parse_int_list
    from xferscope.units import parse_duration

    if profile_name and profile is None:
        from xferscope.profiles import load_profile

        profile = load_profile(profile_name)
    try:
        duration = parse_duration(given["duration"]) if given.get("duration") is not None else None
    except ValueError as exc:
        raise SpecError("duration", str(exc)) from None
    fields = {
        "io": parse_io(given["io"]) if given.get("io") else None,
        "file_size": _size(given["size"], "size") if given.get("size") else None,
        "file": given.get("file"),
        "directory": given.get("directory"),
        "numa_node": given.get("numa"),
        "cpus": parse_int_list(given["cpus"], "cpus") if given.get("cpus") else None,
        "rwmix": given.get("rwmix"),
        "register_buffers": given.get("register"),
        "seed": given.get("seed"),
        "interval": given.get("interval"),
        "split": _size(given["split"], "split") if given.get("split") else None,
        **{flag: True for flag in ("buffered", "force", "keep") if given.get(flag)},
        **({"huge_pages": given["huge_pages"]} if given.get("huge_pages") is not None else {}),
    }
    plan = plan_from(
        profile,
        fields=fields,
        duration=duration,
        paths=[parse_path(p) for p in given["paths"].split(",") if p.strip()] if given.get("paths") else None,
        block_sizes=_sizes(given["bs"]) if given.get("bs") else None,
        gpu_sets=[gpu_list(g) for g in given["gpu"]] if given.get("gpu") else None,
        **{
            k: given.get(k)
            for k in ("max_workers", "max_qd", "min_rounds", "max_rounds", "max_points", "margin", "storage")
        },
    )
    if given.get("gpu") or any(p != "host" for p in plan.paths):
        from xferscope.gpus import check_gpu_indices, gpu_count

        if gpu_count()[0]:
            for gpus in plan.gpu_sets:
                check_gpu_indices(gpus)
    return plan


PlanMarginOpt = Annotated[
    float | None,
    typer.Option(
        "--margin",
        help="the verdict's margin m (default 0.05): a point is on the plateau unless paired rounds put it "
        "below 1 - the larger of m and 0.15/(rounds - 1) of the plateau's point",
    ),
]
SampleIntervalOpt = Annotated[float | None, typer.Option("--interval", help="sample interval in seconds")]
PlanSeedOpt = Annotated[int | None, typer.Option("--seed", help="seed for offsets and the data pattern")]
PlanSplitOpt = Annotated[
    str | None,
    typer.Option(
        "--split",
        help="bounce, bounce-async, cufile: each request as parallel sub-requests of SIZE (host, the "
        "storage reference, runs whole blocks)",
    ),
]


@dataclasses.dataclass(frozen=True)
class PlanOptions:
    """What a saturation searches, and on what: its plan's fields (a profile gives those not given here)."""

    paths: PathsOpt = None
    bs: BlocksOpt = None
    io: IoOpt = None
    max_workers: MaxWorkersOpt = None
    max_qd: MaxQdOpt = None
    min_rounds: MinRoundsOpt = None
    max_rounds: MaxRoundsOpt = None
    max_points: MaxPointsOpt = None
    margin: PlanMarginOpt = None
    duration: PointSecondsOpt = None
    size: SizeOpt = None
    file: FileOpt = None
    directory: DirOpt = None
    gpu: GpuSetsOpt = None
    numa: NumaOpt = None
    cpus: CpusOpt = None
    rwmix: MixOpt = None
    buffered: BufferedOpt = False
    force: ForceOpt = False
    keep: KeepOpt = False
    storage: StorageOpt = None
    interval: SampleIntervalOpt = None
    seed: PlanSeedOpt = None
    register: RegisterOpt = None
    huge_pages: HugePagesOpt = None
    split: PlanSplitOpt = None


@takes(PlanOptions)
def saturate_command(
    options: PlanOptions,
    json_path: JsonOut = None,
    csv_path: CsvOut = None,
    fmt: FormatOpt = "table",
    profile: ProfileOpt = None,
    save_profile: SaveProfileOpt = None,
    from_file: FromOpt = None,
    dry_run: DryRunOpt = False,
    mpi: MpiOpt = False,
    wide: WideOpt = False,
) -> None:
    """Find each path's knee (the least concurrency the verdict rule cannot tell from its plateau) per block size, adaptively, and
    say which ceiling binds the plateau: storage, PCIe, CPU, memory copies or the path itself."""
    check_format(fmt)
    wide_tables(wide)
    check_outputs(fmt, {"--json": json_path, "--csv": csv_path}, folders=not mpi)
    if from_file:
        from xferscope.saturate.record import load_saturation

        written = report(load_saturation(from_file), fmt=fmt, json_path=json_path, csv_path=csv_path)
        if written:
            raise typer.Exit(written)
        return

    def make():
        return make_plan(profile, **dataclasses.asdict(options))

    if mpi:
        from xferscope.cluster.saturate import saturate_mpi

        return saturate_mpi(
            make, gpu_given=bool(options.gpu), fmt=fmt, json_path=json_path, csv_path=csv_path, dry_run=dry_run
        )
    plan = make()
    if save_profile:
        from xferscope.profiles import save_profile as save
        from xferscope.saturate.plan import profile_of

        typer.echo(f"profile {save_profile} saved to {save(profile_of(plan, save_profile))}")
        return
    if dry_run:
        print_dry_run(plan)
        return
    run_plan(plan, fmt=fmt, json_path=json_path, csv_path=csv_path)


def run_plan(plan, *, fmt: str, json_path: str | None, csv_path: str | None) -> None:
    from xferscope.saturate.execute import LocalRunner

    install_hangup_handlers()
    run_and_report(plan, LocalRunner(), fmt=fmt, json_path=json_path, csv_path=csv_path)


def replay_plan(
    profile,
    *,
    duration: str | None,
    sets: list[str],
    directory: str | None,
    file: str | None,
    results: str | None,
    fmt: str,
    dry_run: bool,
    mpi: bool,
    not_for_plans: dict,
) -> None:
    """`xferscope replay NAME` of a saturate profile: its plan, run as `saturate --profile NAME` would, the
    saturation written to ``--results`` (default NAME.saturate.json, a CSV of its points beside it)."""
    given = [option for option, value in not_for_plans.items() if value]
    if given:
        raise SpecError(
            given[0].lstrip("-"),
            f"{given[0]} does not apply to a saturate plan ({profile.name}); "
            "its searches repeat each point until it can be told apart",
        )
    if directory and file:
        raise SpecError("dir", "give either --dir or --file, not both")
    profile = profile.with_changes(sets=parse_sets(sets))
    from xferscope.safe_write import is_stream

    json_path = results or f"{profile.name}.saturate.json"
    csv_path = (
        None if is_stream(json_path) else json_path[:-5] + ".csv" if json_path.endswith(".json") else json_path + ".csv"
    )
    check_format(fmt)
    check_outputs(fmt, {"--results": json_path}, folders=not mpi)

    def make():
        return make_plan(profile=profile, duration=duration, directory=directory, file=file)

    if mpi:
        from xferscope.cluster.saturate import saturate_mpi

        return saturate_mpi(
            make,
            gpu_given="gpu_sets" in profile.saturate,
            fmt=fmt,
            json_path=json_path,
            csv_path=csv_path,
            dry_run=dry_run,
        )
    plan = make()
    if dry_run:
        print_dry_run(plan)
        typer.echo(f"results: {json_path}")
        return
    run_plan(plan, fmt=fmt, json_path=json_path, csv_path=csv_path)


def register(app: typer.Typer) -> None:
    app.command("saturate")(saturate_command)
