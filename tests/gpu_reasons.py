"""Why the GPU paths cannot run the tests here, for skips that say so: a GPU path at all, and cuFile (its library
and driver, then the udev record of the disk the tests write to, without which cuFile opens no file there)."""

from __future__ import annotations

import tempfile

import pytest
from conftest import DIRECT_IO_FALLBACKS

from xferscope.engines.registry import unavailable_reason
from xferscope.target import probe_direct_io

GPU_REASON = unavailable_reason("bounce")


def _tests_disk() -> str:
    """Where the tests' files go (``conftest.direct_dir_in``'s choice): the temporary directory, else the first
    that accepts O_DIRECT."""
    for directory in (tempfile.gettempdir(), *DIRECT_IO_FALLBACKS):
        if probe_direct_io(directory)[0]:
            return directory
    return tempfile.gettempdir()


def _cufile_reason() -> str | None:
    reason = unavailable_reason("cufile")
    if reason is not None:
        return reason
    from xferscope.engines.cufile_driver import udev_record_ok

    disk = _tests_disk()
    if not udev_record_ok(disk):
        return f"the disk of {disk} has no udev record, which cuFile needs to open files there (xferscope doctor prints it)"
    return None


CUFILE_REASON = GPU_REASON or _cufile_reason()
needs_cufile = pytest.mark.skipif(CUFILE_REASON is not None, reason=f"cuFile unavailable: {CUFILE_REASON}")
KVIKIO_REASON = CUFILE_REASON or unavailable_reason("kvikio")
needs_kvikio = pytest.mark.skipif(KVIKIO_REASON is not None, reason=f"KvikIO unavailable: {KVIKIO_REASON}")
