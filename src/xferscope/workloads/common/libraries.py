"""The libraries users load models and save checkpoints with today, run as paths beside xferscope's own: which
package each path needs and the call it makes (``xferscope.packages`` refuses a path whose package is missing)."""

from __future__ import annotations

from xferscope.errors import SpecError
from xferscope.packages import TORCH, Library, installed_version, package_refusal
from xferscope.workloads.common.records import LibraryFacts

LOAD_LIBRARIES = {
    lib.path: lib
    for lib in (
        Library(
            "safetensors",
            "safetensors",
            "safetensors",
            "0.4",
            "safetensors.torch.load_file(shard, device=...) shard after shard, as transformers does",
        ),
        Library(
            "fastsafetensors",
            "fastsafetensors",
            "fastsafetensors",
            "0.5",
            "fastsafetensors SafeTensorsFileLoader(nogds=True): buffered pread into pinned bounce buffers, then "
            "copies; every shard in one copy_files_to_device",
        ),
        Library(
            "fastsafetensors-gds",
            "fastsafetensors",
            "fastsafetensors",
            "0.5",
            "fastsafetensors SafeTensorsFileLoader(nogds=False): cuFile reads into GPU memory; every shard in one "
            "copy_files_to_device",
        ),
        Library(
            "runai-streamer",
            "runai_model_streamer",
            "runai-model-streamer",
            "0.16",
            "the Run:ai streamer's SafetensorsStreamer().stream_files(shards, device=...), each tensor cloned out "
            "of its reused buffer",
        ),
    )
}


#: the checkpoint libraries: each writes its own layout (``checkpoint.plan``), one process a rank
CHECKPOINT_LIBRARIES = {
    lib.path: lib
    for lib in (
        Library(
            "torch-save",
            "torch",
            "torch",
            "2.0",
            "torch.save({name: tensor}, file) of each of the rank's files from where its state lives, then os.fsync "
            "(torch.save never syncs: added); restore torch.load(file, map_location=<the rank's device>, "
            "weights_only=True, mmap=True)",
        ),
        Library(
            "dcp",
            "torch",
            "torch",
            "2.4",
            "torch.distributed.checkpoint.save(state, storage_writer=FileSystemWriter(dir, thread_count=N, "
            "sync_files=True)) a process a rank, in one gloo process group; restore dcp.load into tensors allocated "
            "beforehand where the state lives",
        ),
    )
}
#: the training loaders: the path's batches come from the library's loader (``train.dataloader``)
TRAIN_LIBRARIES = {
    "dataloader": Library(
        "dataloader",
        "torch",
        "torch",
        "2.0",
        "torch.utils.data.DataLoader(batches, batch_size=None, num_workers=--threads, pin_memory=True, "
        "prefetch_factor, persistent_workers=True), each batch .cuda(non_blocking=True)",
    )
}
#: the layout each checkpoint library writes, whatever --layout says
LIBRARY_LAYOUTS = {"torch-save": "dlio", "dcp": "dcp"}


def refusal(lib: Library) -> str | None:
    """Why the path of ``lib`` cannot run here (torch or its package missing or too old); None where it can."""
    return package_refusal(TORCH, lib.path) or package_refusal(lib, lib.path)


def check_installed(path: str, libraries: dict[str, Library]) -> None:
    """A SpecError naming the package to install where ``path`` is a library path that cannot run here."""
    lib = libraries.get(path)
    why = refusal(lib) if lib is not None else None
    if why:
        raise SpecError("path", why)


def installed(libraries: dict[str, Library]) -> list[str]:
    """The library paths that can run here (the console offers these)."""
    return [p for p, lib in libraries.items() if refusal(lib) is None]


def facts_of(lib: Library, settings: dict[str, str], io_mode: str, setup_s: dict[str, float]) -> LibraryFacts:
    """What a library's run says of itself: its package's version, torch's, its call, settings, the I/O it actually
    ran and its set-up's seconds."""
    return LibraryFacts(
        path=lib.path,
        package=lib.package,
        version=installed_version(lib.package) or "?",
        torch=installed_version(TORCH.package) or "?",
        call=lib.call,
        settings=settings,
        io_mode=io_mode,
        setup_s={k: round(v, 4) for k, v in setup_s.items()},
    )
