"""The models a checkpoint holds, and how training splits them over ranks.

A Llama transformer (MLPerf Storage's ``configs/dlio/workload/llama3_*.yaml``, DLIO's parameter formula):

    parameters = embedding (vocab x hidden)
               + layers x (input norm h + attention h x (h + 2 x kv dim) + output h x h + norm h
                           + gated MLP 3 x h x ffn)
               + final norm h + lm head (vocab x hidden)

with kv dim = (hidden // heads) x KV heads (whole numbers, as DLIO counts: llama3-1t's 25872 does not split
evenly into its 192 heads). A checkpoint holds the weights in fp16 (2 bytes a parameter) and the
optimizer's state in fp32 (Adam: master weights, momentum and variance, 12 bytes a parameter): 14 bytes a
parameter in all. Ranks are ``tensor x pipeline x data``; MLPerf's world for each model is its ranks at the data
parallelism of its table (``ranks``).
"""

from __future__ import annotations

from dataclasses import dataclass

import msgspec

from xferscope.errors import SpecError

#: bytes a parameter: the model's weights (fp16) and the optimizer's state (fp32 weights, momentum, variance)
MODEL_BYTES, OPTIMIZER_BYTES = 2, 12
SOURCE = "MLPerf Storage v2.0, configs/dlio/workload/{}.yaml"


class Transformer(msgspec.Struct, frozen=True):
    name: str
    layers: int
    hidden: int
    ffn: int
    vocab: int
    heads: int
    kv_heads: int

    @property
    def kv_dim(self) -> int:
        return self.hidden // self.heads * self.kv_heads

    def layer_parameters(self) -> int:
        """One transformer layer's: two norms, attention (Q, K, V and the output), the gated MLP."""
        h = self.hidden
        return h + h * (h + 2 * self.kv_dim) + h * h + h + 3 * h * self.ffn

    def parameters(self) -> int:
        return 2 * self.vocab * self.hidden + self.layers * self.layer_parameters() + self.hidden


class Parallelism(msgspec.Struct, frozen=True):
    tensor: int
    pipeline: int
    data: int
    zero_stage: int

    @property
    def ranks(self) -> int:
        return self.tensor * self.pipeline * self.data

    @property
    def model_ranks(self) -> int:
        """Ranks that hold one copy of the model between them (tensor x pipeline)."""
        return self.tensor * self.pipeline

    def text(self) -> str:
        return f"TP {self.tensor} x PP {self.pipeline} x DP {self.data}, ZeRO stage {self.zero_stage}"


@dataclass(frozen=True)
class CheckpointModel:
    model: Transformer
    parallelism: Parallelism
    source: str = ""


MODELS = {
    m.model.name: m
    for m in (
        CheckpointModel(
            Transformer("llama3-8b", layers=32, hidden=4096, ffn=14336, vocab=128256, heads=32, kv_heads=8),
            Parallelism(tensor=1, pipeline=1, data=8, zero_stage=3),
            SOURCE.format("llama3_8b"),
        ),
        CheckpointModel(
            Transformer("llama3-70b", layers=80, hidden=8192, ffn=28672, vocab=128256, heads=128, kv_heads=8),
            Parallelism(tensor=8, pipeline=1, data=8, zero_stage=3),
            SOURCE.format("llama3_70b"),
        ),
        CheckpointModel(
            Transformer("llama3-405b", layers=126, hidden=16384, ffn=53248, vocab=128256, heads=128, kv_heads=8),
            Parallelism(tensor=8, pipeline=32, data=2, zero_stage=1),
            SOURCE.format("llama3_405b"),
        ),
        CheckpointModel(
            Transformer("llama3-1t", layers=128, hidden=25872, ffn=98304, vocab=128256, heads=192, kv_heads=32),
            Parallelism(tensor=8, pipeline=64, data=2, zero_stage=1),
            SOURCE.format("llama3_1t"),
        ),
    )
}

#: the fields a custom model (or an override of a preset) takes, as the command names them
FIELDS = ("layers", "hidden", "ffn", "vocab", "heads", "kv_heads", "tp", "pp", "zero_stage")


def checkpoint_model(name: str, ranks: int | None = None, **given: int | None) -> CheckpointModel:
    """A preset with the user's overrides, or ``custom`` from them alone, at ``ranks`` ranks (the data parallelism
    follows: ranks / (tensor x pipeline)); bad input is a SpecError naming the option."""
    values = {k: v for k, v in given.items() if v is not None}
    unknown = set(values) - set(FIELDS)
    if unknown:
        raise SpecError("model", f"unknown model fields: {', '.join(sorted(unknown))}")
    for k, v in values.items():
        if v < (0 if k == "zero_stage" else 1):
            raise SpecError(k.replace("_", "-"), f"must be at least {0 if k == 'zero_stage' else 1}, got {v}")
    if values.get("zero_stage", 0) > 3:
        raise SpecError("zero-stage", f"ZeRO stages are 0 to 3, got {values['zero_stage']}")
    if name == "custom":
        missing = [f"--{k.replace('_', '-')}" for k in FIELDS[:6] if k not in values]
        if missing:
            raise SpecError("model", f"custom needs {', '.join(missing)} (and --tp, --pp, --zero-stage: 1, 1, 3)")
        base = CheckpointModel(Transformer("custom", 1, 1, 1, 1, 1, 1), Parallelism(1, 1, 1, 3), "your fields")
    else:
        found = MODELS.get(name)
        if found is None:
            raise SpecError("model", f"unknown model {name!r}; choose one of {', '.join(MODELS)} or custom")
        base = found
    m, p = base.model, base.parallelism
    model = Transformer(
        m.name,
        values.get("layers", m.layers),
        values.get("hidden", m.hidden),
        values.get("ffn", m.ffn),
        values.get("vocab", m.vocab),
        values.get("heads", m.heads),
        values.get("kv_heads", m.kv_heads),
    )
    if model.kv_heads > model.heads or model.heads > model.hidden:
        raise SpecError(
            "kv-heads",
            f"{model.kv_heads} KV heads, {model.heads} heads, hidden {model.hidden}: need KV heads <= heads <= hidden",
        )
    tensor, pipeline = values.get("tp", p.tensor), values.get("pp", p.pipeline)
    world = ranks if ranks is not None else (p.ranks if name != "custom" else tensor * pipeline)
    if world < 1:
        raise SpecError("ranks", f"must be at least 1, got {world}")
    if world % (tensor * pipeline):
        raise SpecError(
            "ranks",
            f"{world} ranks do not split into whole copies of TP {tensor} x PP {pipeline} ({tensor * pipeline})",
        )
    if pipeline > model.layers:
        raise SpecError("pp", f"{pipeline} pipeline stages for {model.layers} layers")
    parallelism = Parallelism(tensor, pipeline, world // (tensor * pipeline), values.get("zero_stage", p.zero_stage))
    return CheckpointModel(model, parallelism, base.source)
