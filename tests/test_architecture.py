"""The layers of README.md's "How it is built" hold: import-linter's contracts in pyproject.toml are kept, and they catch an
import that goes up or closes a circle."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "xferscope"


def _lint_imports(config: Path, package_parent: Path | None = None) -> subprocess.CompletedProcess:
    tool = shutil.which("lint-imports") or str(Path(sys.executable).with_name("lint-imports"))
    if not os.path.exists(tool):
        pytest.skip("lint-imports is not installed (pip install '.[test]' brings it)")
    env = dict(os.environ)
    if package_parent is not None:  # analyse this copy of the package, not the installed one
        env["PYTHONPATH"] = str(package_parent) + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run(
        [tool, "--no-cache", "--config", str(config)],
        capture_output=True,
        text=True,
        cwd=config.parent,
        env=env,
        timeout=300,
    )


def test_the_import_contracts_are_kept():
    proc = _lint_imports(ROOT / "pyproject.toml")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "0 broken" in proc.stdout


@pytest.fixture
def package_copy(tmp_path):
    """A copy of the package's sources and of pyproject.toml, to change one import in."""
    if not PACKAGE.is_dir():
        pytest.skip(f"the sources are not at {PACKAGE}")
    shutil.copytree(PACKAGE, tmp_path / "src" / "xferscope", ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def _move_back(copy: Path, module: str, new: str, old: str) -> None:
    path = copy / "src" / "xferscope" / module
    text = path.read_text()
    assert new in text, f"{module} no longer holds {new!r}: update this test"
    path.write_text(text.replace(new, old))


def test_an_engine_that_reads_the_gpu_locality_from_telemetry_again_breaks_the_layers(package_copy):
    """pci_locality lived in telemetry/gpu.py, and the engines imported it from there (a circle, since the
    telemetry measured the copy ceiling with the engines' CUDA helpers)."""
    _move_back(
        package_copy,
        "engines/gpu_setup.py",
        "from xferscope.gpus import pci_locality",
        "from xferscope.telemetry.gpu import pci_locality",
    )
    proc = _lint_imports(package_copy / "pyproject.toml", package_copy / "src")
    assert proc.returncode != 0
    assert "xferscope.engines is not allowed to import xferscope.telemetry" in proc.stdout, proc.stdout


def test_mpi_runs_that_import_the_commands_again_break_the_layers_and_close_a_circle(package_copy):
    """cluster/ took the run command's result printing from commands/run.py, while the command called
    cluster/ for --mpi."""
    _move_back(
        package_copy,
        "cluster/runs.py",
        "from xferscope.output.run import execute_and_report",
        "from xferscope.commands.run import execute_and_report",
    )
    proc = _lint_imports(package_copy / "pyproject.toml", package_copy / "src")
    assert proc.returncode != 0
    assert "xferscope.cluster is not allowed to import xferscope.commands" in proc.stdout, proc.stdout
    assert "No import circles" in proc.stdout.split("Broken contracts")[-1], proc.stdout


def _contract_layers() -> list[str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    (layers,) = [c for c in config["tool"]["importlinter"]["contracts"] if c["id"] == "layers"]
    return layers["layers"]


def _readme_layers() -> list[str]:
    """The first column of the table in README.md's "How it is built" (rows that name a layer)."""
    section = (ROOT / "README.md").read_text().split("## How it is built", 1)[1]
    table = section.split("```", 2)[1]
    names = []
    for line in table.splitlines()[2:]:  # after the fence's own line and the header row
        if line and not line[0].isspace():
            name = re.split(r"\s{2,}", line)[0].strip()
            if not name.endswith("/"):  # _native/ and bench/ stand outside the package's layers
                names.append(name)
    return names


def test_the_readme_names_the_layers_of_the_contract_in_the_same_words():
    assert _readme_layers() == _contract_layers()


def test_every_module_and_package_of_the_source_stands_in_a_layer():
    named = {part.strip() for layer in _contract_layers() for part in re.split(r"[|:]", layer)}
    here = {p.stem for p in PACKAGE.glob("*.py") if p.stem != "__init__"}
    here |= {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists()}
    assert here - named == set(), "add it to a layer in pyproject.toml and README.md"


def test_importers_that_know_each_other_break_their_independence(package_copy):
    """Each importer reads its own tool's format: one taking another's helper breaks the contract."""
    _move_back(
        package_copy,
        "importers/fio.py",
        "from xferscope.units import parse_size",
        "from xferscope.units import parse_size\nfrom xferscope.importers.gdsio import parse_line",
    )
    proc = _lint_imports(package_copy / "pyproject.toml", package_copy / "src")
    assert proc.returncode != 0
    assert "Each importer reads its own tool's format and knows no other BROKEN" in proc.stdout, proc.stdout


def test_an_mlc_backend_that_reads_through_the_importer_again_breaks_the_layers(package_copy):
    """The mlc text parser lived in importers/mlc.py, and the mlc engine imported it from there."""
    _move_back(
        package_copy,
        "memory/mlc.py",
        "from xferscope.memory.mlc_text import MlcParser",
        "from xferscope.importers.mlc import MlcParser",
    )
    proc = _lint_imports(package_copy / "pyproject.toml", package_copy / "src")
    assert proc.returncode != 0
    assert "xferscope.memory is not allowed to import xferscope.importers" in proc.stdout, proc.stdout
