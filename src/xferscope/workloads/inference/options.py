"""The options of `workload kvcache` and `workload load`, declared once (``workloads.common.options``): the KV cache's
shape and its requests; a model's shards and how xferscope's paths read them."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Annotated, Any

from xferscope.errors import SpecError
from xferscope.workloads.common.options import (
    CommandShape,
    Given,
    opt,
    optional_duration,
    optional_size,
    paths_of,
)

if TYPE_CHECKING:
    from xferscope.workloads.common.run_options import RunOptions
    from xferscope.workloads.inference.kvcache_spec import KvSpec
    from xferscope.workloads.inference.load_spec import LoadSpec


def _auto_count(text: str, option: str) -> int | None:
    """A whole number, or None for auto."""
    if text.strip().lower() == "auto":
        return None
    try:
        return int(text)
    except ValueError:
        raise SpecError(option, f"a whole number or auto, got {text!r}") from None


@dataclasses.dataclass(frozen=True)
class KvShapeOptions:
    """The KV cache's shape: the model's, its chunks, and how tensor parallelism and the layout cut it."""

    model: Annotated[
        str, opt("--model", "-m", help="llama3.1-8b, llama3.1-70b, deepseek-v3, llama3.2-1b or custom")
    ] = "llama3.1-8b"
    layers: Annotated[int | None, opt("--layers", help="custom (or override): layers")] = None
    kv_heads: Annotated[int | None, opt("--kv-heads", help="custom (or override): KV heads")] = None
    head_dim: Annotated[int | None, opt("--head-dim", help="custom (or override): head dim")] = None
    dtype: Annotated[str | None, opt("--dtype", help="bf16, fp16, fp32, fp8 (the model's when left out)")] = None
    chunk_tokens: Annotated[int, opt("--chunk-tokens", help="tokens per chunk (LMCache's default 256)")] = 256
    tp: Annotated[int, opt("--tp", help="tensor-parallel ranks: the KV heads split over them")] = 1
    layout: Annotated[
        str, opt("--layout", help="block: a read per chunk; layer: a read per K and V plane of a layer")
    ] = "block"


@dataclasses.dataclass(frozen=True)
class KvRequestOptions:
    """The requests: their prompts, how many at once, how much of each is on disk, and how many or how long."""

    prompt_tokens: Annotated[
        str, opt("--prompt-tokens", help="tokens per prompt: 8192, 1024-8192 (uniform) or normal:MEAN,SD")
    ] = "8192"
    concurrency: Annotated[int, opt("--concurrency", "-c", help="requests restored at once")] = 1
    hit_ratio: Annotated[float, opt("--hit-ratio", help="share of a prompt's chunks found on disk")] = 1.0
    requests: Annotated[int | None, opt("--requests", "-n", help="requests to restore")] = None
    duration: Annotated[str | None, opt("--duration", "-T", help="seconds to run")] = None


@dataclasses.dataclass(frozen=True)
class ModelFilesOptions:
    """The model's shards: yours, or generated from a model's shape."""

    files: Annotated[str | None, opt("--files", help="your .safetensors shards: a pattern or a directory")] = None
    model: Annotated[
        str | None, opt("--model", "-m", help="generate shards: llama3.1-8b, llama3.1-70b, llama3.2-1b")
    ] = None
    layers: Annotated[int | None, opt("--layers", help="--model: override the layers")] = None
    dtype: Annotated[str | None, opt("--dtype", help="--model: bf16, fp16, fp32, fp8")] = None
    shard_size: Annotated[str, opt("--shard-size", help="--model: largest shard (Hugging Face's 5GB)")] = "5G"


@dataclasses.dataclass(frozen=True)
class ReadShapeOptions:
    """How xferscope's paths read the shards: reader threads and the pieces a tensor is cut into, or auto."""

    threads: Annotated[
        str,
        opt("--threads", "-t", help="reader threads, or auto: the fastest of 2, 4 and 8, measured on the shards first"),
    ] = "auto"
    split: Annotated[
        str,
        opt(
            "--split",
            help="tensors cut into pieces of at most this, read in parallel; auto: the fastest of 1M, 4M and 16M, "
            "measured on the shards first (with --threads auto, each pair: 9 shapes of 0.4 s, the 3 fastest again "
            "twice, about 7 s)",
        ),
    ] = "auto"


_PATH = opt(
    "--path",
    "-x",
    help="host, bounce, bounce-async, cufile; load also: the libraries safetensors, fastsafetensors, "
    "fastsafetensors-gds, runai-streamer (where installed, with torch); a comma list runs each over one data "
    "set in rotated rounds and ranks them (a path twice: an A/A pair)",
)
_DIR = opt("--dir", "-D", help="where the data set is generated")


@dataclasses.dataclass(frozen=True)
class KvTargetOptions:
    """Where the cache is and how it is read: the paths, the GPUs, a cache of yours or one generated, the reads."""

    path: Annotated[str | None, _PATH] = None
    gpu: Annotated[str | None, opt("--gpu", "-d", help="GPUs the ranks go round-robin over")] = None
    cache: Annotated[str | None, opt("--cache", help="read an existing cache in LMCache's GDS layout")] = None
    directory: Annotated[str | None, _DIR] = None
    cache_chunks: Annotated[int | None, opt("--cache-chunks", help="chunks per rank in the generated cache")] = None
    bs: Annotated[str | None, opt("--bs", "-i", help="bounce paths: staging per read (default: the read)")] = None
    prefill_rate: Annotated[
        float | None, opt("--prefill-rate", help="tokens/s your GPUs prefill: prints the break-even")
    ] = None
    buffered: Annotated[bool, opt("--buffered", help="through the page cache (no O_DIRECT)")] = False


@dataclasses.dataclass(frozen=True)
class LoadTargetOptions:
    """Where the model loads from and to: the paths, the GPUs, the page cache, and under --mpi each rank's share."""

    path: Annotated[str | None, _PATH] = None
    gpu: Annotated[str | None, opt("--gpu", "-d", help="GPUs the tensors are split over, as tensor parallelism")] = None
    cache: Annotated[str, opt("--cache", help="cold (page cache emptied of the shards, O_DIRECT) or warm")] = "cold"
    directory: Annotated[str | None, _DIR] = None
    verify: Annotated[bool, opt("--verify", "-V", help="after the load, check every tensor's bytes landed")] = False
    share: Annotated[
        str, opt("--share", help="--mpi: copy (each rank its own copy) or tp (its tensor-parallel share)")
    ] = "copy"

    def check_share(self, mpi: bool, path: str) -> None:
        """--share: copy or tp, tp only under --mpi and for xferscope's paths (a library loads the whole model)."""
        if self.share not in ("copy", "tp"):
            raise SpecError(
                "share", f"copy (each rank its own copy) or tp (its tensor-parallel share), got {self.share!r}"
            )
        if self.share != "copy" and not mpi:
            raise SpecError("share", "the ranks share the model under --mpi; on one host, --gpu splits it")
        from xferscope.workloads.common.libraries import LOAD_LIBRARIES  # when checked: not on every start

        if self.share == "tp" and path in LOAD_LIBRARIES:
            raise SpecError(
                "share",
                f"{path} loads the whole model in each process here: --share copy, or one of xferscope's paths",
            )


@dataclasses.dataclass(frozen=True)
class InferenceRequest:
    """What `workload kvcache` or `workload load` runs: the spec, the paths side by side, ``-d`` as given
    (``{local_rank}`` filled in by each rank under --mpi) and, for a load under --mpi, each rank's share."""

    spec: Any
    paths: list[str]
    gpu_text: str | None
    share: str = "copy"


def kv_spec(shape: KvShapeOptions, request: KvRequestOptions, run: RunOptions, **own: Any) -> KvSpec:
    """The KV-cache restores these options ask for (32 requests where neither a count nor a duration is given), as
    ``run`` runs them, ``own``: the rest of ``KvSpec`` (the cache, the reads); validated, SpecError names the option."""
    from xferscope.workloads.inference.kvcache_spec import KvSpec, parse_prompt
    from xferscope.workloads.inference.models import model

    return KvSpec(
        model=model(
            shape.model, layers=shape.layers, kv_heads=shape.kv_heads, head_dim=shape.head_dim, dtype=shape.dtype
        ),
        chunk_tokens=shape.chunk_tokens,
        tp=shape.tp,
        layout=shape.layout,
        prompt=parse_prompt(request.prompt_tokens),
        concurrency=request.concurrency,
        hit_ratio=request.hit_ratio,
        requests=32 if request.requests is None and request.duration is None else request.requests,
        duration=optional_duration(request.duration, "duration"),
        **vars(run),
        **own,
    ).validate()


def load_spec(shards: ModelFilesOptions, reads: ReadShapeOptions, run: RunOptions, **own: Any) -> LoadSpec:
    """The model load these options ask for (threads and split None: auto, chosen by a probe), as ``run`` runs it,
    ``own``: the rest of ``LoadSpec`` (the page cache, --verify); validated, SpecError names the option."""
    from xferscope.workloads.inference.load_spec import LoadSpec
    from xferscope.workloads.inference.models import model

    shard_size = optional_size(shards.shard_size, "shard-size")
    assert shard_size is not None
    return LoadSpec(
        files=shards.files,
        model=model(shards.model, layers=shards.layers, dtype=shards.dtype) if shards.model is not None else None,
        shard_size=shard_size,
        threads=_auto_count(reads.threads, "threads"),
        split=None if reads.split.strip().lower() == "auto" else optional_size(reads.split, "split") or 0,
        **vars(run),
        **own,
    ).validate()


def _paths(path: str | None, mpi: bool) -> tuple[list[str], str]:
    """The paths asked for, or the default: into the GPU by bounce-async where there is one, else host."""
    if path is not None:
        return paths_of(path, mpi), ""
    from xferscope.gpus import gpu_count

    n, why = gpu_count()
    return (["bounce-async"], "") if n else (["host"], f"no GPU here ({why}): --path host")


def _checked(spec: Any, paths: list[str], gpu_text: str | None, share: str = "copy") -> InferenceRequest:
    """The spec holds for every path after the first too (an unknown path: one line, before anything runs)."""
    for p in paths[1:]:
        dataclasses.replace(spec, path=p).validate()
    return InferenceRequest(spec, paths, gpu_text, share)


def kvcache_request(given: Given) -> InferenceRequest:
    target = given[KvTargetOptions]
    paths, note = _paths(target.path, given.mpi)
    spec = kv_spec(
        given[KvShapeOptions],
        given[KvRequestOptions],
        given.run_options(paths[0], target.gpu, target.directory, note),
        cache=target.cache,
        cache_chunks=target.cache_chunks,
        block_size=optional_size(target.bs, "bs"),
        prefill_rate=target.prefill_rate,
        buffered=target.buffered,
    )
    return _checked(spec, paths, target.gpu)


def load_request(given: Given) -> InferenceRequest:
    target = given[LoadTargetOptions]
    paths, note = _paths(target.path, given.mpi)
    target.check_share(given.mpi, paths[0])
    spec = load_spec(
        given[ModelFilesOptions],
        given[ReadShapeOptions],
        given.run_options(paths[0], target.gpu, target.directory, note),
        cache=target.cache,
        verify=target.verify,
    )
    return _checked(spec, paths, target.gpu, target.share)


KVCACHE_COMMAND = CommandShape(
    help="Restore KV-cache chunks (LMCache's GDS layout) by a path into GPU memory, as requests arrive: time to "
    "restore a request, GB/s per GPU, chunks and tokens per second, CPU cost, and with --prefill-rate the prompt "
    "length above which restoring beats recomputing. Under --mpi, the requests spread over the ranks.",
    argument=None,
    groups=(KvShapeOptions, KvRequestOptions, KvTargetOptions),
    make=kvcache_request,
)
LOAD_COMMAND = CommandShape(
    help="Load a model's safetensors shards into GPU memory by a path (cold start): time to load, time to the first "
    "byte on the GPU, GB/s overall and per GPU, the slowest shard, CPU cost. Under --mpi, every rank loads the "
    "model, the loads begun together: the time to load is the slowest rank's.",
    argument=None,
    groups=(ModelFilesOptions, LoadTargetOptions, ReadShapeOptions),
    make=load_request,
)
