"""The libraries users load models and save checkpoints with, run as `workload load` and `workload checkpoint` paths
on a real GPU: each load lands every tensor's exact bytes in GPU memory (checked against the files); each
checkpoint library saves the ranks' states from GPU memory a process a rank and restores every byte; each says its
version, settings and the I/O it actually ran, and is ranked beside xferscope's own paths in one command. Skipped,
with the reason, where there is no GPU or the library is not installed."""

from __future__ import annotations

import functools
import json
import os
import uuid

import pytest
from conftest import xferscope_cli
from gpu_reasons import GPU_REASON
from test_mpi import mpirun, needs_mpi, rank_dirs

from xferscope.workloads.common.libraries import CHECKPOINT_LIBRARIES, LOAD_LIBRARIES, TRAIN_LIBRARIES, refusal

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(GPU_REASON is not None, reason=f"no GPU path here: {GPU_REASON}")]

#: how long a library's command may run before it is taken for a hung one: torch imported in each of its processes,
#: every path run, on a machine whose every core runs the rest of the suite too (on an H200 machine of 16 CPUs, the
#: longest took 70-80 s beside the GPU tests alone and over 120 s among the whole suite's 32 workers)
LIBRARY_COMMAND_S = 600


@pytest.fixture
def cli():
    return functools.partial(xferscope_cli, timeout=LIBRARY_COMMAND_S)


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
@pytest.mark.parametrize("path", [library("torch-save"), library("dcp")])
def test_a_checkpoint_library_runs_a_rank_a_process_of_an_mpi_job(direct_dir, tmp_path, path):
    """torch-save: each rank in its own directory, reading the next rank's back; dcp: every rank in rank 0's (one
    directory a checkpoint, DCP's layout), one process group over the job."""
    out = tmp_path / "job.json"
    where = rank_dirs(direct_dir, 4) if path == "torch-save" else str(direct_dir)
    proc = mpirun(4, "workload", "checkpoint", "custom", "--layers", "2", "--hidden", "1024", "--ffn", "2048",
                  "--vocab", "4096", "--heads", "8", "--kv-heads", "2", "--ranks", "4", "--checkpoints", "2",
                  "--path", path, "--verify", "--rank-shift", "1", "--dir", where, "--mpi", "--json", str(out),
                  timeout=240)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    d = json.loads(out.read_text())
    assert d["status"] == "ok" and d["verified"] and d["state_on_gpu"] and d["library"]["path"] == path
    assert [k["ranks"] for k in d["cluster"]["per_rank"]] == [[0], [1], [2], [3]]
    assert [f["restored_from"] for f in d["ranks"]] == [1, 2, 3, 0]
    left = [p for p in direct_dir.rglob("*") if p.is_file() and p != out]  # direct_dir may be tmp_path itself
    assert left == [], f"nothing left: {left}"


@needs_mpi
@pytest.mark.parametrize("path", [library("safetensors"), library("fastsafetensors")])
def test_a_load_library_runs_on_every_rank_of_an_mpi_job(direct_dir, tmp_path, path):
    out = tmp_path / "job.json"
    proc = mpirun(2, "workload", "load", "--model", "llama3.2-1b", "--layers", "2", "--path", path, "--verify",
                  "--dir", str(direct_dir), "--mpi", "--json", str(out), timeout=240)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    d = json.loads(out.read_text())
    assert d["status"] == "ok" and d["library"]["path"] == path
    assert [k["status"] for k in d["cluster"]["per_rank"]] == ["ok", "ok"]
    assert d["verified"]["differ"] == 0 and d["verified"]["pieces"] > 0
    left = [p for p in direct_dir.rglob("*") if p.is_file() and p != out]  # direct_dir may be tmp_path itself
    assert left == [], f"the shards removed: {left}"


@pytest.mark.skipif(refusal(CHECKPOINT_LIBRARIES["torch-save"]) is not None, reason="torch is not installed here")
def test_ctrl_c_stops_every_rank_process_keeps_what_was_measured_and_leaves_no_file(tmp_path):
    """torch-save from host memory (the command runs as if without a GPU), its 8 rank processes Ctrl-C'd once
    they have written two checkpoints' worth."""
    import contextlib

    import psutil
    from conftest import interrupted_cli

    target = "xferscope.workloads.checkpoint.library_checkpoint:serve"
    seen: dict[int, psutil.Process] = {}

    def ranks_wrote(command) -> bool:
        for child in command.children(recursive=True):
            with contextlib.suppress(psutil.Error):
                if target in " ".join(child.cmdline()):
                    seen[child.pid] = child
        with contextlib.suppress(psutil.Error):
            return len(seen) == 8 and sum(p.io_counters().write_bytes for p in seen.values()) >= 2 * (214 << 20) // 10
        return False

    out = tmp_path / "out"
    out.mkdir()
    args = ["workload", "checkpoint", "llama3-8b", "--subset", "--scale", "0.0002", "--checkpoints", "400",
            "--path", "torch-save", "--dir", str(tmp_path), "--json", str(out / "c.json")]  # fmt: skip
    code, stdout, _err = interrupted_cli(args, tmp_path, until=ranks_wrote)
    assert code == 130 and "[interrupted]" in stdout
    d = json.loads((out / "c.json").read_text())
    assert d["status"] == "interrupted" and 1 <= len(d["saves"]) < 400 and d["library"]["path"] == "torch-save"
    assert sorted(os.listdir(tmp_path)) == ["out"]
    assert not [p.pid for p in seen.values() if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]


@pytest.mark.skipif(refusal(TRAIN_LIBRARIES["dataloader"]) is not None, reason="torch is not installed here")
@pytest.mark.parametrize("compute", ["gpu", "sleep"])
def test_a_dataloader_feeds_the_accelerators_and_leaves_no_worker(cli, direct_dir, tmp_path, compute):
    sets = direct_dir / "sets"
    sets.mkdir()
    js = tmp_path / "t.json"
    mark = f"xferscope-test-{uuid.uuid4().hex}"  # every process the command starts inherits it, whoever reaps them
    r = cli("workload", "train", "cosmoflow", "--files", "32", "-a", "2", "--steps", "8", "--path", "dataloader",
            "--compute", compute, "--dir", str(sets), "--json", str(js), env={"XFERSCOPE_TEST_MARK": mark})  # fmt: skip
    assert r.code == 0, r.err
    data = json.loads(js.read_text())
    assert data["status"] == "ok" and [a["steps"] for a in data["accelerators"]] == [8, 8]
    assert data["au"] is not None and data["environment"]["library"].startswith("torch ")
    settings = data["environment"]["loader_settings"]
    assert settings["pin_memory"] == "True" and settings["num_workers"] == str(data["spec"]["read_threads"])
    assert any("torch.utils.data.DataLoader(" in label for label in data["labels"]), data["labels"]
    assert os.listdir(sets) == []
    assert processes_marked(mark) == [], "a process the command started (a DataLoader worker, say) is left"


def processes_marked(mark: str) -> list[int]:
    """The live processes whose environment carries ``mark``."""
    import contextlib

    import psutil

    left = []
    for p in psutil.process_iter():
        with contextlib.suppress(psutil.Error):
            if p.status() != psutil.STATUS_ZOMBIE and p.environ().get("XFERSCOPE_TEST_MARK") == mark:
                left.append(p.pid)
    return left


@pytest.mark.skipif(refusal(TRAIN_LIBRARIES["dataloader"]) is not None, reason="torch is not installed here")
def test_a_dataloader_ranks_beside_our_paths_in_one_command(cli, direct_dir, tmp_path):
    sets = direct_dir / "sets"
    sets.mkdir()
    js = tmp_path / "t.json"
    paths = ["dataloader", "host", "bounce-async"]
    r = cli("workload", "train", "cosmoflow", "--files", "32", "--steps", "6", "--path", ",".join(paths),
            "--rounds", "1", "--dir", str(sets), "--json", str(js))  # fmt: skip
    assert r.code == 0, r.err
    data = json.loads(js.read_text())
    assert sorted(e["label"] for e in data["entries"]) == sorted(paths), data["entries"]
