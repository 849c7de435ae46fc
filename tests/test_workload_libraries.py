"""The libraries users load models with, as paths of `workload load`: a path whose package (or torch) is missing or
too old is refused in one line, exit 2, before anything is written; the console's form says the same under its
field. The loads themselves run on the GPU machine (tests/test_workload_libraries_gpu.py)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from xferscope.errors import SpecError
from xferscope.packages import TORCH, Library, package_refusal
from xferscope.workloads.common.libraries import LOAD_LIBRARIES, refusal

MISSING = {p: why for p, lib in LOAD_LIBRARIES.items() if (why := refusal(lib))}


@pytest.mark.parametrize("path", sorted(LOAD_LIBRARIES))
def test_a_library_path_without_its_package_is_one_line_and_exit_2_before_anything_is_written(cli, tmp_path, path):
    if path not in MISSING:
        pytest.skip(f"{path} and torch are installed here: nothing to refuse")
    data = tmp_path / "data"
    data.mkdir()
    r = cli("workload", "load", "--model", "llama3.2-1b", "--layers", "1", "--path", f"host,{path}", "--dir", str(data))
    assert r.code == 2, r.err
    assert r.err.strip() == f"xferscope: path: {MISSING[path]}", r.err
    assert "pip install" in r.err and "Traceback" not in r.err
    assert os.listdir(data) == [], "nothing generated"


def test_the_refusal_names_the_package_and_the_version_it_needs():
    installed = Library("x", "pytest", "pytest", "999", "")
    assert package_refusal(installed, "x") == (
        f"x needs pytest 999 or newer, here {pytest.__version__}: pip install -U pytest"
    )
    absent = Library("x", "no_such_module_here", "no-such-package", "1", "")
    assert (
        package_refusal(absent, "x") == "x needs no-such-package, which is not installed: pip install no-such-package"
    )
    assert package_refusal(Library("x", "pytest", "pytest", "7.0", ""), "x") is None
    if package_refusal(TORCH, "safetensors"):  # torch itself first: every library path runs on it
        assert refusal(LOAD_LIBRARIES["safetensors"]) == package_refusal(TORCH, "safetensors")


def test_the_console_form_refuses_a_library_path_under_its_field():
    from xferscope.workloads.inference.console import InferenceFormValues, build_spec

    path = next(iter(sorted(MISSING)), None)
    if path is None:
        pytest.skip("every library and torch are installed here: nothing to refuse")
    with pytest.raises(SpecError) as info:
        build_spec(InferenceFormValues(kind="load", path=path), has_gpu=False)
    assert info.value.field == "path" and str(info.value).endswith(MISSING[path])


def test_a_library_loads_into_one_gpu_and_shares_no_tensor_parallel_split(cli, tmp_path):
    """Where the library is installed the split is refused; where it is not, the package is named first."""
    r = cli(
        "workload", "load", "--model", "llama3.2-1b", "--path", "safetensors", "--gpu", "0,1", "--dir", str(tmp_path)
    )
    assert r.code == 2, r.err
    assert ("one GPU per process" in r.err) or ("pip install" in r.err), r.err


def test_the_dataloader_path_without_torch_is_one_line_and_exit_2_before_anything_is_written(cli, tmp_path):
    from xferscope.workloads.common.libraries import TRAIN_LIBRARIES

    why = refusal(TRAIN_LIBRARIES["dataloader"])
    if why is None:
        pytest.skip("torch is installed here: nothing to refuse")
    r = cli("workload", "train", "unet3d", "--path", "host,dataloader", "--files", "8", "--dir", str(tmp_path))
    assert r.code == 2, r.err
    assert r.err.strip() == f"xferscope: path: {why}" and "pip install torch" in r.err, r.err
    assert os.listdir(tmp_path) == [], "nothing generated"


def test_the_dataloader_s_sockets_fit_under_any_tmpdir(tmp_path):
    """A DataLoader's worker hands each batch over a socket in multiprocessing's directory: under a $TMPDIR too
    long for a socket's address the hand-over failed and the loop waited for ever. The same hand-over
    (``resource_sharer``, which torch's ``file_descriptor`` sharing uses) in a process whose $TMPDIR is long."""
    long = tmp_path / ("d" * max(1, 110 - len(str(tmp_path))))
    long.mkdir()
    script = (
        "import os\n"
        "from multiprocessing import resource_sharer\n"
        "from xferscope.workloads.train.dataloader import socket_dir_within_reach\n"
        "print(socket_dir_within_reach())\n"
        "fd = os.open(os.devnull, os.O_RDONLY)\n"
        "print(os.path.samefile(f'/proc/self/fd/{resource_sharer.DupFd(fd).detach()}', os.devnull))\n"
    )
    env = {**os.environ, "TMPDIR": str(long)}
    proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    where, handed_over = proc.stdout.split()
    assert handed_over == "True"
    assert len(where) + len("/listener-12345678") <= 107
    assert not os.path.exists(where), "multiprocessing's directory is removed when the process ends"
