"""`xferscope workload checkpoint`: a training job's checkpoints (MLPerf Storage's llama3 checkpointing), sized
from the model and its parallelism, rank by rank. So far ``--plan``: what each rank would write, nothing written."""

from __future__ import annotations

from typing import Annotated

import typer

from xferscope.commands.options import FormatOpt, JsonOpt, WorkloadDirOpt, check_format, gpu_list
from xferscope.errors import SpecError
from xferscope.output.files import check_outputs


def checkpoint_command(
    model: Annotated[
        str, typer.Argument(help="llama3-8b, llama3-70b, llama3-405b, llama3-1t (MLPerf Storage's) or custom")
    ],
    plan: Annotated[
        bool, typer.Option("--plan", help="print each rank's files and bytes and how they were found; write nothing")
    ] = False,
    ranks: Annotated[
        int | None, typer.Option("--ranks", help="ranks of the world (MLPerf's: 8, 64, 512, 1024); DP follows")
    ] = None,
    subset: Annotated[
        bool, typer.Option("--subset", help="this host writes the share of 8 ranks (MLPerf's subset mode)")
    ] = False,
    scale: Annotated[
        float, typer.Option("--scale", help="each file cut to this share, to fit (the figures say scaled)")
    ] = 1.0,
    layout: Annotated[
        str, typer.Option("--layout", help="dlio (DLIO's torch.save files) or dcp (PyTorch Distributed Checkpoint)")
    ] = "dlio",
    threads: Annotated[int, typer.Option("--threads", help="dcp: writer threads a rank, one file each")] = 1,
    checkpoints: Annotated[int, typer.Option("--checkpoints", help="checkpoints written, then read (MLPerf: 10)")] = 10,
    pinned: Annotated[bool, typer.Option("--async", help="each rank stages its state in pinned host memory")] = False,
    gpu: Annotated[str | None, typer.Option("--gpu", "-d", help="GPUs the ranks' states go round-robin over")] = None,
    layers: Annotated[int | None, typer.Option("--layers", help="custom (or override): layers")] = None,
    hidden: Annotated[int | None, typer.Option("--hidden", help="custom (or override): hidden size")] = None,
    ffn: Annotated[int | None, typer.Option("--ffn", help="custom (or override): MLP hidden size")] = None,
    vocab: Annotated[int | None, typer.Option("--vocab", help="custom (or override): vocabulary")] = None,
    heads: Annotated[int | None, typer.Option("--heads", help="custom (or override): attention heads")] = None,
    kv_heads: Annotated[int | None, typer.Option("--kv-heads", help="custom (or override): KV heads")] = None,
    tp: Annotated[int | None, typer.Option("--tp", help="custom (or override): tensor parallelism")] = None,
    pp: Annotated[int | None, typer.Option("--pp", help="custom (or override): pipeline parallelism")] = None,
    zero_stage: Annotated[int | None, typer.Option("--zero-stage", help="custom (or override): ZeRO stage")] = None,
    directory: WorkloadDirOpt = None,
    json_path: JsonOpt = None,
    fmt: FormatOpt = "table",
) -> None:
    """MLPerf Storage's llama3 checkpoints (DLIO's checkpointing), or PyTorch DCP's: each rank's files and bytes,
    from the model's parameters and its tensor, pipeline and data parallelism with ZeRO."""
    from xferscope.workloads.checkpoint.model import checkpoint_model
    from xferscope.workloads.checkpoint.plan import CheckpointSpec

    check_format(fmt)
    check_outputs(fmt, {"--json": json_path})
    spec = CheckpointSpec(
        checkpoint_model(
            model,
            ranks,
            layers=layers,
            hidden=hidden,
            ffn=ffn,
            vocab=vocab,
            heads=heads,
            kv_heads=kv_heads,
            tp=tp,
            pp=pp,
            zero_stage=zero_stage,
        ),
        layout=layout,
        threads=threads,
        subset=subset,
        scale=scale,
        checkpoints=checkpoints,
        directory=directory,
        pinned_copies=pinned,
        gpus=tuple(gpu_list(gpu)),
    )
    checked = spec.plan()
    if not plan:
        if checked.refusals:
            raise checked.refusals[0]
        raise SpecError(
            "plan", "writing and restoring checkpoints by a path is not built yet; --plan shows what each rank writes"
        )
    from xferscope.output.workload_checkpoint import show_plan

    code = show_plan(checked, fmt=fmt, json_path=json_path)
    if code:
        raise typer.Exit(code)


def register(app: typer.Typer) -> None:
    app.command("checkpoint")(checkpoint_command)
