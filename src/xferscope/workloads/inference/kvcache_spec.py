"""KvSpec: one KV-cache restore run (``workload kvcache``), validated once, and the requests it makes.

A request has a prompt of P tokens (``--prompt-tokens``: a number, ``MIN-MAX`` drawn uniformly, or
``normal:MEAN,SD``), of which the full chunks (P // chunk tokens) are its cacheable prefix; ``--hit-ratio`` of
them, from the first on (a prefix cache hits a prefix), are found on disk and restored; the rest is prefilled.
Request n draws its prompt from the seed and n, and its chunks are consecutive in the cache starting at a place
drawn likewise. With ``--tp N`` each of the N ranks restores its own part of every chunk (its own files), by a
worker of its own: a request is restored when every rank's part has landed.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

from xferscope.errors import SpecError
from xferscope.workloads.common.run_options import RunOptions
from xferscope.workloads.inference.kv_layout import ChunkShape, chunk_shape
from xferscope.workloads.inference.models import ModelShape

KV_PATHS = ("host", "bounce", "bounce-async", "cufile")
LAYOUTS = ("block", "layer")
#: the generated cache when --cache-chunks is not given: at least this many bytes (and every request's chunks)
DEFAULT_CACHE_BYTES = 2 << 30


@dataclass(frozen=True)
class Prompt:
    """Prompt lengths in tokens: fixed (low == high), uniform in [low, high], or normal (mean, sd) clipped."""

    low: int
    high: int
    mean: float = 0.0
    sd: float = 0.0

    @property
    def text(self) -> str:
        if self.sd:
            return f"normal:{self.mean:g},{self.sd:g}"
        return str(self.low) if self.low == self.high else f"{self.low}-{self.high}"

    def draw(self, rng: random.Random) -> int:
        if self.sd:
            return min(self.high, max(self.low, round(rng.gauss(self.mean, self.sd))))
        return rng.randint(self.low, self.high)


def parse_prompt(text: str) -> Prompt:
    t = text.strip().replace("_", "")
    m = re.fullmatch(r"normal:(\d+(?:\.\d+)?),(\d+(?:\.\d+)?)", t)
    if m:
        mean, sd = float(m.group(1)), float(m.group(2))
        if mean < 1:
            raise SpecError("prompt-tokens", f"the mean must be at least 1 token, got {text!r}")
        return Prompt(1, max(1, round(mean + 4 * sd)), mean, sd)
    m = re.fullmatch(r"(\d+)(?:-(\d+))?", t)
    if not m:
        raise SpecError("prompt-tokens", f"a number (8192), a range (1024-8192) or normal:MEAN,SD; got {text!r}")
    low = int(m.group(1))
    high = int(m.group(2) or low)
    if low < 1 or high < low:
        raise SpecError("prompt-tokens", f"at least 1 token and MIN <= MAX, got {text!r}")
    return Prompt(low, high)


@dataclass(frozen=True)
class KvSpec(RunOptions):
    model: ModelShape
    prompt: Prompt
    chunk_tokens: int = 256
    tp: int = 1
    layout: str = "block"
    concurrency: int = 1
    hit_ratio: float = 1.0
    requests: int | None = None
    duration: float | None = None
    cache: str | None = None  # an existing cache, read as it is
    cache_chunks: int | None = None
    block_size: int | None = None  # bounce staging per read; None: the largest read
    prefill_rate: float | None = None  # tokens/s the user measured for recomputing
    buffered: bool = False
    #: under MPI: this rank's part of the requests (its number, and the job's ranks): it makes requests
    #: i, i + N, i + 2N, ... of the job's (``--requests`` is the job's)
    part: tuple[int, int] = (0, 1)

    @property
    def shape(self) -> ChunkShape:
        return chunk_shape(self.model, self.chunk_tokens, self.tp)

    @property
    def lands_in_gpu(self) -> bool:
        return self.path != "host"

    @property
    def workers(self) -> int:
        return self.concurrency * self.tp

    def rank_gpu(self, rank: int) -> int:
        return self.gpus[rank % len(self.gpus)]

    @property
    def max_hits(self) -> int:
        """Chunks restored by the longest request."""
        return round(self.hit_ratio * (self.prompt.high // self.chunk_tokens))

    def validate(self) -> KvSpec:
        if self.chunk_tokens < 1:
            raise SpecError("chunk-tokens", f"must be at least 1 token, got {self.chunk_tokens}")
        if self.tp < 1:
            raise SpecError("tp", f"must be at least 1, got {self.tp}")
        chunk_shape(self.model, self.chunk_tokens, self.tp)  # --tp that does not divide the KV heads
        if self.layout not in LAYOUTS:
            raise SpecError(
                "layout", f"block (one read per chunk) or layer (one per layer of a chunk), got {self.layout!r}"
            )
        if self.path not in KV_PATHS:
            raise SpecError("path", f"unknown path {self.path!r} for kvcache; choose one of {', '.join(KV_PATHS)}")
        if self.concurrency < 1:
            raise SpecError("concurrency", f"must be at least 1, got {self.concurrency}")
        if not 0 <= self.hit_ratio <= 1:
            raise SpecError("hit-ratio", f"a share between 0 and 1, got {self.hit_ratio:g}")
        if self.requests is not None and self.requests < 1:
            raise SpecError("requests", f"must be at least 1, got {self.requests}")
        if self.duration is not None and self.duration <= 0:
            raise SpecError("duration", f"must be positive, got {self.duration:g}")
        if self.prefill_rate is not None and self.prefill_rate <= 0:
            raise SpecError("prefill-rate", f"tokens per second, more than 0; got {self.prefill_rate:g}")
        if self.cache_chunks is not None and self.cache_chunks < 1:
            raise SpecError("cache-chunks", f"must be at least 1, got {self.cache_chunks}")
        if self.block_size is not None and (self.block_size < 4096 or self.block_size % 4096):
            raise SpecError("bs", f"a multiple of 4 KiB, got {self.block_size} bytes")
        if self.cache is not None and self.directory is not None:
            raise SpecError(
                "cache", "--cache reads an existing cache as it is; --dir is where one is generated: give one"
            )
        if self.max_hits < 1:
            raise SpecError(
                "prompt-tokens",
                f"no request restores a chunk: prompts of at most {self.prompt.high} tokens hold "
                f"{self.prompt.high // self.chunk_tokens} full chunks of {self.chunk_tokens} at hit ratio {self.hit_ratio:g}",
            )
        if not self.gpus:
            raise SpecError("gpu", "no GPU given")
        if self.requests is None and self.duration is None:
            raise SpecError("requests", "give --requests N or --duration S")
        return self


@dataclass(frozen=True)
class Request:
    number: int
    prompt_tokens: int
    chunks: int  # full chunks of the prompt
    hits: int  # of them found on disk (a prefix)
    first: int  # the cache position of its first chunk


def request(spec: KvSpec, n: int, cache_chunks: int) -> Request:
    rng = random.Random(spec.seed * 1_000_003 + n)
    p = spec.prompt.draw(rng)
    chunks = p // spec.chunk_tokens
    hits = round(spec.hit_ratio * chunks)
    return Request(n, p, chunks, hits, rng.randrange(cache_chunks))
