"""Every workload, in the order the CLI lists them and the console shows their views: its name, and what its
package declares, each named "module:attribute" and imported when first asked for (`xferscope workload NAME` imports
NAME's command alone):

- its command's shape (``workloads.common.options.CommandShape``: its options and what it makes of them), from
  which the CLI builds `xferscope workload NAME` (``commands.workload_kinds``) and a profile's [workload] table
  replays;
- its kind (``workloads.common.kind.WorkloadKind``: its record and files, its saved runs ranked, its run on this
  host, its text), which the terminal prints and writes as every workload's (``output.workload_run``);
- what every rank of an MPI job runs (``--mpi``: ``workloads.common.across_ranks.RanksJob``), which the cluster's
  ``WorkloadRanks`` runs as every workload's;
- its console view (``workloads.common.console_view.ConsoleView``), which the console's one workload screen draws
  (two workloads may share a view: kvcache and load, the Inference view).

A new workload brings its package and one line here."""

from __future__ import annotations

import importlib
from typing import Any, NamedTuple


def imported(at: str) -> Any:
    """The attribute named by "module:attribute"."""
    module, name = at.split(":")
    return getattr(importlib.import_module(module), name)


class Workload(NamedTuple):
    name: str
    about: str  # what it is, in a few words (`xferscope workload --help`)
    command_at: str  # its ``CommandShape``
    kind_at: str  # its ``WorkloadKind``
    across_at: str  # its ``RanksJob`` (``workloads.common.across_ranks``): what every rank runs (--mpi)
    view_at: str  # its ``ConsoleView``

    @property
    def kind(self) -> Any:
        return imported(self.kind_at)


_IN = "xferscope.workloads."
WORKLOADS = (
    Workload(
        "train",
        "DLIO's training input, with accelerator utilisation",
        f"{_IN}train.options:COMMAND",
        f"{_IN}train.kind:TRAIN",
        f"{_IN}train.rank_job:TRAIN_JOB",
        f"{_IN}train.console:VIEW",
    ),
    Workload(
        "kvcache",
        "KV-cache restores",
        f"{_IN}inference.options:KVCACHE_COMMAND",
        f"{_IN}inference.kind:KVCACHE",
        f"{_IN}inference.rank_jobs:KVCACHE_JOB",
        f"{_IN}inference.console:VIEW",
    ),
    Workload(
        "load",
        "model loads from safetensors",
        f"{_IN}inference.options:LOAD_COMMAND",
        f"{_IN}inference.kind:LOAD",
        f"{_IN}inference.rank_jobs:LOAD_JOB",
        f"{_IN}inference.console:VIEW",
    ),
    Workload(
        "checkpoint",
        "MLPerf's llama3 checkpoints: --plan",
        f"{_IN}checkpoint.options:COMMAND",
        f"{_IN}checkpoint.kind:CHECKPOINT",
        f"{_IN}checkpoint.rank_job:CHECKPOINT_JOB",
        f"{_IN}checkpoint.console:VIEW",
    ),
)


#: every workload's name, as help texts list them
NAMES = ", ".join(w.name for w in WORKLOADS)


def console_views() -> list[Any]:
    """The console's workload views, each once, in the registry's order."""
    return [imported(at) for at in dict.fromkeys(w.view_at for w in WORKLOADS)]
