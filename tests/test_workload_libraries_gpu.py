"""The libraries users load models and save checkpoints with, run as `workload load` and `workload checkpoint` paths
on a real GPU: each load lands every tensor's exact bytes in GPU memory (checked against the files); each
checkpoint library saves the ranks' states from GPU memory a process a rank and restores every byte; each says its
version, settings and the I/O it actually ran, and is ranked beside xferscope's own paths in one command. Skipped,
with the reason, where there is no GPU or the library is not installed."""

from __future__ import annotations

import json
import os

import pytest
from gpu_reasons import GPU_REASON
from test_mpi import mpirun, needs_mpi, rank_dirs

from xferscope.workloads.common.libraries import CHECKPOINT_LIBRARIES, LOAD_LIBRARIES, refusal

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(GPU_REASON is not None, reason=f"no GPU path here: {GPU_REASON}")]


def load(cli, directory, *args: str) -> dict:
    """`workload load` of the shards in ``directory`` (``_shards``'s), its JSON."""
    from test_workload_inference import _shards

    _shards(directory)
    r = cli("workload", "load", "--files", str(directory / "*.safetensors"), *args, "--format", "json")
    assert r.code == 0, r.err
    return json.loads(r.out)


def library(path: str, *extra: str):
    why = refusal({**LOAD_LIBRARIES, **CHECKPOINT_LIBRARIES}[path])
    if extra:
        return pytest.param(path, *extra, marks=pytest.mark.skipif(why is not None, reason=f"{why}"))
    return pytest.param(path, marks=pytest.mark.skipif(why is not None, reason=f"{why}"))


@pytest.mark.parametrize("path", [library(p) for p in LOAD_LIBRARIES])
def test_each_library_lands_every_tensor_exactly_in_gpu_memory(cli, direct_dir, path):
    d = load(cli, direct_dir, "--path", path, "--verify")
    assert d["status"] == "ok" and d["verified"]["differ"] == 0 and d["verified"]["pieces"] == d["data"]["tensors"]
    assert [g["gpu"] for g in d["per_gpu"]] == [0] and d["bytes_read"] == d["data"]["bytes"]
    lib = d["library"]
    assert lib["path"] == path and lib["version"] != "?" and lib["torch"] != "?" and lib["io_mode"]
    assert set(lib["setup_s"]) >= {"import", "cuda_context"}, "set-up timed, outside the load's clock"
    assert d["load_s"] > 0 and len(d["shards"]) == d["data"]["shards"] and all(s["seconds"] for s in d["shards"])


def test_libraries_rank_beside_our_paths_in_one_command(cli, direct_dir):
    libraries = [p for p, lib in LOAD_LIBRARIES.items() if refusal(lib) is None]
    if not libraries:
        pytest.skip("no load library installed here (pip install safetensors torch)")
    paths = ["host", "bounce-async", *libraries]
    d = load(cli, direct_dir, "--path", ",".join(paths), "--rounds", "2")
    assert sorted(res["spec"]["path"] for res in d["results"]) == sorted(paths * 2)
    assert {e["label"] for e in d["entries"]} >= set(paths)
    assert all(res["status"] == "ok" for res in d["results"])
    assert all((res["library"] is not None) == (res["spec"]["path"] in LOAD_LIBRARIES) for res in d["results"])


#: llama3-8b's subset (8 ranks), each file cut to 0.002: 214 MiB a checkpoint
CHECKPOINT = ("workload", "checkpoint", "llama3-8b", "--subset", "--scale", "0.002", "--format", "json")


@pytest.mark.parametrize(
    ("path", "mode"), [library("torch-save", "sync"), library("dcp", "sync"), library("dcp", "async")]
)
def test_each_checkpoint_library_saves_from_gpu_memory_a_process_a_rank_and_restores_every_byte(
    cli, direct_dir, path, mode
):
    args = ["--path", path, "--checkpoints", "2", "--verify", "--rank-shift", "1", "--dir", str(direct_dir)]
    r = cli(*CHECKPOINT, *args, *(["--async", "--every", "0.5"] if mode == "async" else []))
    assert r.code == 0, r.err
    d = json.loads(r.out)
    assert d["status"] == "ok" and d["verified"] and d["state_on_gpu"]
    assert len(d["saves"]) == len(d["restores"]) == 2 and d["spec"]["layout"] == {"torch-save": "dlio"}.get(path, "dcp")
    assert [f["restored_from"] for f in d["ranks"]] == [1, 2, 3, 4, 5, 6, 7, 0]
    lib = d["library"]
    assert lib["path"] == path and lib["version"] != "?" and set(lib["setup_s"]) >= {"import", "cuda_context"}
    if mode == "async":
        assert all(0 < s["blocked_seconds"] < s["seconds"] for s in d["saves"]), "blocked only for the staging"
    assert os.listdir(direct_dir) == [], "nothing left"


def test_checkpoint_libraries_rank_beside_our_paths_in_one_command(cli, direct_dir):
    libraries = [p for p, lib in CHECKPOINT_LIBRARIES.items() if refusal(lib) is None]
    if not libraries:
        pytest.skip("torch is not installed here (pip install torch)")
    paths = ["host", "bounce-async", *libraries]
    r = cli(*CHECKPOINT, "--path", ",".join(paths), "--rounds", "1", "--checkpoints", "1", "--dir", str(direct_dir))
    assert r.code == 0, r.err
    d = json.loads(r.out)
    assert sorted(res["spec"]["path"] for res in d["results"]) == sorted(paths)
    assert all(res["status"] == "ok" for res in d["results"])
    assert all((res["library"] is not None) == (res["spec"]["path"] in CHECKPOINT_LIBRARIES) for res in d["results"])


@needs_mpi
@pytest.mark.skipif(refusal(CHECKPOINT_LIBRARIES["torch-save"]) is not None, reason="torch is not installed here")
def test_torch_save_runs_a_rank_a_process_of_an_mpi_job(direct_dir, tmp_path):
    out = tmp_path / "job.json"
    proc = mpirun(4, "workload", "checkpoint", "custom", "--layers", "2", "--hidden", "1024", "--ffn", "2048",
                  "--vocab", "4096", "--heads", "8", "--kv-heads", "2", "--ranks", "4", "--checkpoints", "2",
                  "--path", "torch-save", "--verify", "--rank-shift", "1", "--dir", rank_dirs(direct_dir, 4),
                  "--mpi", "--json", str(out), timeout=240)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    d = json.loads(out.read_text())
    assert d["status"] == "ok" and d["verified"] and d["state_on_gpu"]
    assert [k["ranks"] for k in d["cluster"]["per_rank"]] == [[0], [1], [2], [3]]
    assert all(not os.listdir(direct_dir / str(r)) for r in range(4)), "nothing left"
