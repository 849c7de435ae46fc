"""The options of `workload kvcache` and `workload load`, declared once (``workloads.common.options``): the KV cache's
shape and its requests; a model's shards and how xferscope's paths read them."""

from __future__ import annotations

import dataclasses
from typing import Annotated, Any

from xferscope.errors import SpecError
from xferscope.workloads.common.options import opt, optional_duration, optional_size


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

    def spec_fields(self) -> dict[str, Any]:
        """These options as ``KvSpec``'s keywords (SpecError names a bad one)."""
        from xferscope.workloads.inference.models import model as model_shape

        shape = model_shape(
            self.model, layers=self.layers, kv_heads=self.kv_heads, head_dim=self.head_dim, dtype=self.dtype
        )
        return {"model": shape, "chunk_tokens": self.chunk_tokens, "tp": self.tp, "layout": self.layout}


KV_SHAPE = KvShapeOptions()


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

    def spec_fields(self) -> dict[str, object]:
        """These options as ``KvSpec``'s keywords (32 requests where neither a count nor a duration is given)."""
        from xferscope.workloads.inference.kvcache_spec import parse_prompt

        return {
            "prompt": parse_prompt(self.prompt_tokens),
            "concurrency": self.concurrency,
            "hit_ratio": self.hit_ratio,
            "requests": 32 if self.requests is None and self.duration is None else self.requests,
            "duration": optional_duration(self.duration, "duration"),
        }


KV_REQUESTS = KvRequestOptions()


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

    def spec_fields(self) -> dict[str, object]:
        """These options as ``LoadSpec``'s keywords (SpecError names a bad one)."""
        from xferscope.workloads.inference.models import model as model_shape

        size = optional_size(self.shard_size, "shard-size")
        assert size is not None
        shape = model_shape(self.model, layers=self.layers, dtype=self.dtype) if self.model is not None else None
        return {"files": self.files, "model": shape, "shard_size": size}


MODEL_FILES = ModelFilesOptions()


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

    def spec_fields(self) -> dict[str, object]:
        """These options as ``LoadSpec``'s keywords (None: auto)."""
        split = None if self.split.strip().lower() == "auto" else optional_size(self.split, "split") or 0
        return {"threads": _auto_count(self.threads, "threads"), "split": split}


READ_SHAPE = ReadShapeOptions()
