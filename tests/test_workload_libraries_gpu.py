"""The libraries users load models with, run as `workload load` paths on a real GPU: each one lands every tensor's
exact bytes in GPU memory (checked against the files), says its version, settings and the I/O it actually ran, and
is ranked beside xferscope's own paths in one command. Skipped, with the reason, where there is no GPU or the
library is not installed."""

from __future__ import annotations

import json

import pytest
from gpu_reasons import GPU_REASON

from xferscope.workloads.common.libraries import LOAD_LIBRARIES, refusal

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(GPU_REASON is not None, reason=f"no GPU path here: {GPU_REASON}")]


def load(cli, directory, *args: str) -> dict:
    """`workload load` of the shards in ``directory`` (``_shards``'s), its JSON."""
    from test_workload_inference import _shards

    _shards(directory)
    r = cli("workload", "load", "--files", str(directory / "*.safetensors"), *args, "--format", "json")
    assert r.code == 0, r.err
    return json.loads(r.out)


def library(path: str):
    why = refusal(LOAD_LIBRARIES[path])
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
