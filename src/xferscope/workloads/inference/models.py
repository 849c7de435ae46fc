"""Model shapes for the inference workloads: the KV cache's bytes per token (``workload kvcache``) and the
tensors of a checkpoint (``workload load``), from each model's published ``config.json`` on Hugging Face.

Bytes per token of the KV cache:
  * attention with KV heads: layers x KV heads x head dim x 2 (K and V) x dtype bytes;
  * MLA (DeepSeek-V3): layers x (kv_lora_rank + rope dim) x dtype bytes (one compressed vector per layer).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from xferscope.errors import SpecError

#: dtype -> (bytes per element, the safetensors name)
DTYPES = {
    "bf16": (2, "BF16"),
    "fp16": (2, "F16"),
    "fp32": (4, "F32"),
    "fp8": (1, "F8_E4M3"),
}
#: safetensors dtype name -> bytes per element (the names safetensors itself knows)
SAFETENSORS_DTYPES = {
    "BOOL": 1,
    "U8": 1,
    "I8": 1,
    "F8_E4M3": 1,
    "F8_E5M2": 1,
    "I16": 2,
    "U16": 2,
    "F16": 2,
    "BF16": 2,
    "I32": 4,
    "U32": 4,
    "F32": 4,
    "I64": 8,
    "U64": 8,
    "F64": 8,
}


@dataclass(frozen=True)
class ModelShape:
    name: str
    layers: int
    kv_heads: int
    head_dim: int
    dtype: str = "bf16"
    hidden: int = 0
    intermediate: int = 0
    vocab: int = 0
    heads: int = 0
    tied_embeddings: bool = False
    #: MLA's compressed KV: (kv_lora_rank, rope head dim); None for attention with KV heads
    mla: tuple[int, int] | None = None
    source: str = ""

    @property
    def dtype_bytes(self) -> int:
        return DTYPES[self.dtype][0]

    @property
    def kv_bytes_per_token(self) -> int:
        if self.mla is not None:
            return self.layers * (self.mla[0] + self.mla[1]) * self.dtype_bytes
        return self.layers * self.kv_heads * self.head_dim * 2 * self.dtype_bytes

    def kv_formula(self) -> str:
        if self.mla is not None:
            r, p = self.mla
            return (
                f"{self.layers} layers x ({r} kv_lora_rank + {p} rope dim) x {self.dtype_bytes} B ({self.dtype}) "
                f"= {self.kv_bytes_per_token:,} B per token"
            )
        return (
            f"{self.layers} layers x {self.kv_heads} KV heads x {self.head_dim} head dim x 2 (K, V) x "
            f"{self.dtype_bytes} B ({self.dtype}) = {self.kv_bytes_per_token:,} B per token"
        )

    @property
    def has_weights(self) -> bool:
        """The shapes of a dense decoder's tensors are known (not for MLA/MoE models)."""
        return self.mla is None and self.hidden > 0 and self.intermediate > 0 and self.vocab > 0 and self.heads > 0

    def tensors(self) -> list[tuple[str, tuple[int, ...]]]:
        """The checkpoint's tensors (name, shape) in the order Hugging Face's Llama checkpoints list them."""
        h, kv, hd = self.hidden, self.kv_heads * self.head_dim, self.head_dim
        out: list[tuple[str, tuple[int, ...]]] = [("model.embed_tokens.weight", (self.vocab, h))]
        for i in range(self.layers):
            p = f"model.layers.{i}."
            out += [
                (p + "input_layernorm.weight", (h,)),
                (p + "self_attn.q_proj.weight", (self.heads * hd, h)),
                (p + "self_attn.k_proj.weight", (kv, h)),
                (p + "self_attn.v_proj.weight", (kv, h)),
                (p + "self_attn.o_proj.weight", (h, self.heads * hd)),
                (p + "post_attention_layernorm.weight", (h,)),
                (p + "mlp.gate_proj.weight", (self.intermediate, h)),
                (p + "mlp.up_proj.weight", (self.intermediate, h)),
                (p + "mlp.down_proj.weight", (h, self.intermediate)),
            ]
        out.append(("model.norm.weight", (h,)))
        if not self.tied_embeddings:
            out.append(("lm_head.weight", (self.vocab, h)))
        return out


_HF = "huggingface.co/{}/blob/main/config.json"

MODELS: dict[str, ModelShape] = {
    m.name: m
    for m in (
        ModelShape(
            "llama3.1-8b",
            layers=32,
            kv_heads=8,
            head_dim=128,
            hidden=4096,
            intermediate=14336,
            vocab=128256,
            heads=32,
            source=_HF.format("meta-llama/Llama-3.1-8B"),
        ),
        ModelShape(
            "llama3.1-70b",
            layers=80,
            kv_heads=8,
            head_dim=128,
            hidden=8192,
            intermediate=28672,
            vocab=128256,
            heads=64,
            source=_HF.format("meta-llama/Llama-3.1-70B"),
        ),
        ModelShape(
            "llama3.2-1b",
            layers=16,
            kv_heads=8,
            head_dim=64,
            hidden=2048,
            intermediate=8192,
            vocab=128256,
            heads=32,
            tied_embeddings=True,
            source=_HF.format("meta-llama/Llama-3.2-1B"),
        ),
        ModelShape(
            "deepseek-v3",
            layers=61,
            kv_heads=1,
            head_dim=576,
            mla=(512, 64),
            hidden=7168,
            source=_HF.format("deepseek-ai/DeepSeek-V3"),
        ),
    )
}


def model(
    name: str,
    *,
    layers: int | None = None,
    kv_heads: int | None = None,
    head_dim: int | None = None,
    dtype: str | None = None,
    hidden: int | None = None,
    intermediate: int | None = None,
    vocab: int | None = None,
    heads: int | None = None,
) -> ModelShape:
    """A preset with the user's overrides, or ``custom`` from them alone; bad input is a SpecError."""
    given = {
        k: v
        for k, v in dict(
            layers=layers,
            kv_heads=kv_heads,
            head_dim=head_dim,
            dtype=dtype,
            hidden=hidden,
            intermediate=intermediate,
            vocab=vocab,
            heads=heads,
        ).items()
        if v is not None
    }
    if dtype is not None and dtype not in DTYPES:
        raise SpecError("dtype", f"unknown dtype {dtype!r}; choose one of {', '.join(DTYPES)}")
    for k, v in given.items():
        if isinstance(v, int) and v < 1:
            raise SpecError(k.replace("_", "-"), f"must be at least 1, got {v}")
    if name == "custom":
        missing = [f"--{k.replace('_', '-')}" for k in ("layers", "kv_heads", "head_dim") if k not in given]
        if missing:
            raise SpecError("model", f"custom needs {', '.join(missing)} (and --dtype, bf16 when left out)")
        return ModelShape("custom", **given)  # type: ignore[arg-type]
    base = MODELS.get(name)
    if base is None:
        raise SpecError("model", f"unknown model {name!r}; choose one of {', '.join(MODELS)} or custom")
    if base.mla is not None and {"kv_heads", "head_dim"} & given.keys():
        raise SpecError("model", f"{name} keeps one MLA vector per layer: --kv-heads and --head-dim do not apply")
    return dataclasses.replace(base, **given) if given else base  # type: ignore[arg-type]
