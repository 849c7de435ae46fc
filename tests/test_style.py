"""The habits the code keeps: ruff's lint rules and format, and mypy's types on the layers others lean on (all
configured in pyproject.toml; ``pip install '.[test]'`` brings the tools)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _tool(module: str, *args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"{module} is not installed (pip install '.[test]' brings it)")
    if not (ROOT / "src" / "xferscope").is_dir():
        pytest.skip(f"the sources are not at {ROOT / 'src'}")
    return subprocess.run([sys.executable, "-m", module, *args], capture_output=True, text=True, cwd=cwd, timeout=600)


def test_ruff_finds_nothing():
    proc = _tool("ruff", "check", "--no-cache", "src", "tests", "bench")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_ruff_format_would_change_nothing():
    proc = _tool("ruff", "format", "--check", "--no-cache", "src", "tests", "bench")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_mypy_finds_nothing_in_its_scope(tmp_path):
    proc = _tool("mypy", "--cache-dir", str(tmp_path / "mypy-cache"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Success" in proc.stdout


def test_ruff_catches_what_it_is_asked_to(tmp_path):
    """The configuration is read and its rules bite: an unused import and a list as a default are findings."""
    (tmp_path / "pyproject.toml").write_text((ROOT / "pyproject.toml").read_text())
    (tmp_path / "bad.py").write_text("import os\n\n\ndef add(x, into=[]):\n    into.append(x)\n    return into\n")
    proc = _tool("ruff", "check", "--no-cache", "--output-format", "concise", "bad.py", cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "F401" in proc.stdout and "B006" in proc.stdout, proc.stdout


def test_mypy_catches_a_none_where_a_number_is_due(tmp_path):
    """The scope is checked for real: a spec read as if validated, through an Optional field, is an error."""
    bad = tmp_path / "bad.py"
    bad.write_text(
        "from xferscope.memory.spec import MemSpec\n\n\n"
        "def seconds(spec: MemSpec) -> int:\n    return round(spec.point_seconds)\n"
    )
    proc = _tool("mypy", "--config-file", str(ROOT / "pyproject.toml"), "--cache-dir", str(tmp_path / "c"), str(bad))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "bad.py:5: error" in proc.stdout, proc.stdout


def test_the_io_core_stub_names_exactly_what_the_extension_exports():
    """mypy checks calls into the C core against ``_iocore.pyi``: a name added there or here shows up as missing."""
    import ast

    from xferscope import _iocore

    tree = ast.parse((Path(_iocore.__file__).parent / "_iocore.pyi").read_text())
    stubbed = {n.target.id for n in tree.body if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)}
    stubbed |= {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    exported = {name for name in dir(_iocore) if not name.startswith("_")}
    assert stubbed == exported, (sorted(stubbed - exported), sorted(exported - stubbed))


#: the most string-keyed dicts of anything the package may hold (what a record, message or call carries is typed)
MOST_UNTYPED_DICTS = 60


def test_string_keyed_dicts_of_anything_stay_few():
    if not (ROOT / "src" / "xferscope").is_dir():
        pytest.skip(f"the sources are not at {ROOT / 'src'}")
    found = [
        f"{path.relative_to(ROOT)}:{n}"
        for path in sorted((ROOT / "src").rglob("*.py"))
        for n, line in enumerate(path.read_text().splitlines(), start=1)
        if "dict[str, Any]" in line
    ]
    assert len(found) <= MOST_UNTYPED_DICTS, f"{len(found)} dict[str, Any]:\n" + "\n".join(found)


def classes_defined_twice(source: Path) -> dict[str, list[str]]:
    """Class names defined in more than one module under ``source``, with those modules."""
    import ast
    import collections

    where: dict[str, list[str]] = collections.defaultdict(list)
    for path in sorted(source.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                where[node.name].append(str(path.relative_to(source)))
    return {name: modules for name, modules in where.items() if len(set(modules)) > 1}


def test_no_class_name_is_defined_in_two_modules(tmp_path):
    """One name, one thing: a class name says which class it is wherever it is read."""
    source = ROOT / "src" / "xferscope"
    if not source.is_dir():
        pytest.skip(f"the sources are not at {source}")
    assert classes_defined_twice(source) == {}
    (tmp_path / "a.py").write_text("class Outcome:\n    pass\n")
    (tmp_path / "b.py").write_text("def f():\n    class Outcome:\n        pass\n")
    assert classes_defined_twice(tmp_path) == {"Outcome": ["a.py", "b.py"]}, "the check finds a second one"
