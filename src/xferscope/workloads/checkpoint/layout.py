"""Which files each rank writes for one checkpoint, and how many bytes each holds.

``dlio``, as DLIO's checkpointing (``dlio_benchmark/checkpointing/base_checkpointing.py``) writes them with
``torch.save``, one checkpoint a directory (``global_epoch1_step{k}``):

* rank ``r`` is tensor rank ``r % TP``, pipeline rank ``(r // TP) % PP``, data rank ``r // (TP x PP)``, model
  rank ``r % (TP x PP)``; pipeline stage ``p`` holds its share of the layers, the first also the embedding, the
  last the lm head and the final norm;
* the weights (fp16): with ZeRO stage 3 (or none) every rank writes its layers' share, cut by TP and by DP, to
  ``zero_pp_rank_{dp}_mp_rank_{mp}_model_states.pt``; with stage 1 or 2 the ranks of data rank 0 alone write
  their layers, one file a layer (``layer_{i}-model_{mp}_model_states.pt``) where PP > 1, else one file
  (``model_{mp}_model_states.pt``). Norms are not cut by TP: each tensor rank holds them whole;
* the optimizer's state (fp32): every rank writes ``zero_pp_rank_{dp}_mp_rank_{mp}_optim_states.pt``: three
  groups, each its share of the parameters (parameters / ranks, ZeRO; / model ranks without) and 5 x hidden.

So DLIO's files hold a little more than 14 bytes a parameter: the norms each tensor rank keeps whole and the
groups' 5 x hidden (for llama3-405b, 0.5 GiB over 5291.7).

``dcp``, as PyTorch Distributed Checkpoint (``FileSystemWriter``) writes: each rank its share of the state, 14
bytes a parameter split evenly over the ranks (DCP saves a replicated tensor once), in one file a writer thread
(``__{rank}_{k}.distcp``); the coordinator (rank 0) then writes ``.metadata`` (an index of the files, here our own
JSON: DCP's is a pickle of its tensors' places), first as ``.metadata.tmp``, renamed when whole.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from xferscope.workloads.checkpoint.model import MODEL_BYTES, OPTIMIZER_BYTES, CheckpointModel

LAYOUTS = ("dlio", "dcp")
FP16, FP32 = 2, 4
#: the O_DIRECT block: where each file restored starts in its buffer
ALIGN = 4096


@dataclass(frozen=True)
class RankFile:
    name: str  # within the checkpoint's directory
    size: int
    holds: str  # "model", "optimizer", "state" (both, DCP) or "metadata"


@dataclass(frozen=True)
class Rank:
    rank: int
    tensor: int
    pipeline: int
    data: int
    files: tuple[RankFile, ...]

    @property
    def size(self) -> int:
        return sum(f.size for f in self.files)


def coordinates(rank: int, cm: CheckpointModel) -> tuple[int, int, int, int]:
    """(tensor, pipeline, data, model) rank of ``rank``, as DLIO numbers them."""
    p = cm.parallelism
    return rank % p.tensor, (rank // p.tensor) % p.pipeline, rank // p.model_ranks, rank % p.model_ranks


def layer_span(stage: int, cm: CheckpointModel) -> range:
    """The layers pipeline stage ``stage`` holds: 1..L are the transformer's; 0 is the embedding, L + 1 the lm head
    and L + 2 the final norm (the first stage has the embedding, the last the other two)."""
    layers, stages = cm.model.layers, cm.parallelism.pipeline
    each, extra = divmod(layers, stages)
    start = stage * each + min(stage, extra) + 1
    end = start + each - (0 if stage < extra else 1)
    if stage == stages - 1:
        end = layers + 2
    if stage == 0:
        start = 0
    return range(start, end + 1)


def layer_bytes(layer: int, cm: CheckpointModel) -> int:
    """The fp16 bytes of ``layer`` on one rank (cut by TP, and by DP under ZeRO stage 3), as DLIO counts them."""
    m, p = cm.model, cm.parallelism
    h, tp = m.hidden, p.tensor
    shard = p.data if p.zero_stage >= 3 else 1
    if layer in (0, m.layers + 1):
        parts = [h * m.vocab // tp // shard]
    elif layer == m.layers + 2:
        parts = [h // shard]
    else:
        parts = [
            h // shard,
            h * (h + 2 * m.kv_dim) // tp // shard,
            h * h // tp // shard,
            h // shard,
            h * 2 * m.ffn // tp // shard,
            h * m.ffn // tp // shard,
        ]
    return FP16 * sum(parts)


def _dlio_files(rank: int, cm: CheckpointModel) -> tuple[RankFile, ...]:
    p = cm.parallelism
    _, stage, dp, mp = coordinates(rank, cm)
    span = layer_span(stage, cm)
    files: list[RankFile] = []
    if p.zero_stage in (1, 2):
        if dp == 0 and p.pipeline > 1:
            files += [RankFile(f"layer_{i}-model_{mp}_model_states.pt", layer_bytes(i, cm), "model") for i in span]
        elif dp == 0:
            files.append(RankFile(f"model_{mp}_model_states.pt", sum(layer_bytes(i, cm) for i in span), "model"))
    else:
        model = sum(layer_bytes(i, cm) for i in span)
        files.append(RankFile(f"zero_pp_rank_{dp}_mp_rank_{mp}_model_states.pt", model, "model"))
    share = cm.model.parameters() // (p.ranks if p.zero_stage > 0 else p.model_ranks)
    optimizer = FP32 * 3 * (share + 5 * cm.model.hidden)
    files.append(RankFile(f"zero_pp_rank_{dp}_mp_rank_{mp}_optim_states.pt", optimizer, "optimizer"))
    return tuple(files)


def _dcp_files(rank: int, cm: CheckpointModel, threads: int) -> tuple[RankFile, ...]:
    total = (MODEL_BYTES + OPTIMIZER_BYTES) * cm.model.parameters()
    ranks = cm.parallelism.ranks
    mine = total // ranks + (1 if rank < total % ranks else 0)
    return tuple(
        RankFile(f"__{rank}_{k}.distcp", mine // threads + (1 if k < mine % threads else 0), "state")
        for k in range(threads)
    )


def rank_files(rank: int, cm: CheckpointModel, layout: str, threads: int = 1) -> Rank:
    """Rank ``rank``'s files of one checkpoint in ``layout`` (the coordinator's DCP ``.metadata`` aside)."""
    tp, pp, dp, _ = coordinates(rank, cm)
    files = _dlio_files(rank, cm) if layout == "dlio" else _dcp_files(rank, cm, threads)
    return Rank(rank, tp, pp, dp, files)


def aligned(size: int) -> int:
    """``size`` up to a whole number of 4 KiB blocks."""
    return -(-size // ALIGN) * ALIGN


def restore_capacity(ranks: list[Rank]) -> int:
    """Bytes a rank's restore buffer needs for any rank's files, each read to a 4 KiB boundary of its own."""
    return max(ALIGN, max(sum(aligned(f.size) for f in r.files) for r in ranks))


def scaled(rank: Rank, scale: float) -> Rank:
    """``rank`` with each file cut to ``scale`` of its bytes (a file keeps at least one byte)."""
    if scale == 1:
        return rank
    files = tuple(RankFile(f.name, max(1, int(f.size * scale)), f.holds) for f in rank.files)
    return Rank(rank.rank, rank.tensor, rank.pipeline, rank.data, files)


def dcp_metadata(ranks: list[Rank]) -> bytes:
    """The coordinator's ``.metadata``: which rank wrote which file, and its bytes."""
    index = {f.name: {"rank": r.rank, "bytes": f.size} for r in ranks for f in r.files}
    return json.dumps({"format": "xferscope checkpoint index 1", "files": index}, sort_keys=True).encode()
