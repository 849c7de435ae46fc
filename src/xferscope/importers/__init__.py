"""Results of other tools as xferscope RunResults, with ``source`` set to the tool's name.

Each importer reads one file and returns a list of RunResults that the same
exporters, comparisons and ``replay --against`` take as native runs. A malformed
file is a FormatError naming the file and line. MLC output (memory sweeps) becomes a
``MemSweep`` instead: ``xferscope.importers.mlc``.
"""

from __future__ import annotations

from collections.abc import Callable

from xferscope.engines.base import RunResult


def _gdsio(path: str) -> list[RunResult]:
    from xferscope.importers.gdsio import import_gdsio

    return import_gdsio(path)


def _fio(path: str) -> list[RunResult]:
    from xferscope.importers.fio import import_fio

    return import_fio(path)


def _elbencho(path: str) -> list[RunResult]:
    from xferscope.importers.elbencho import import_elbencho

    return import_elbencho(path)


IMPORTERS: dict[str, Callable[[str], list[RunResult]]] = {"gdsio": _gdsio, "fio": _fio, "elbencho": _elbencho}


def import_file(tool: str, path: str) -> list[RunResult]:
    """RunResults from ``path``, written by ``tool`` (gdsio, fio or elbencho)."""
    return IMPORTERS[tool](path)
