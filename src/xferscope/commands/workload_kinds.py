"""Every workload of `xferscope workload`, by name, with its command: the CLI registers each under its name, and a
workload profile's [workload] table replays through the same command, its fields the command's options
(``profile_options``). A new workload brings its command module and one line here."""

from __future__ import annotations

from collections.abc import Callable

from xferscope.commands.workload_checkpoint import checkpoint_command
from xferscope.commands.workload_inference import kvcache_command, load_command
from xferscope.commands.workload_train import train_command

WORKLOAD_COMMANDS: dict[str, Callable[..., None]] = {
    "train": train_command,
    "kvcache": kvcache_command,
    "load": load_command,
    "checkpoint": checkpoint_command,
}
