"""The one writer of every output file, on real files: what a name points at is never destroyed, a full disk
or an error leaves the previous version and no temporary file, and the error is one line."""

from __future__ import annotations

import errno
import os
import stat
import subprocess
import sys

import pytest

from xferscope import safe_write
from xferscope.errors import ExitCode, NotWritten
from xferscope.safe_write import TEMP_SUFFIX, is_stdout, stream_fd, write_output


def leftovers(directory) -> list[str]:
    return sorted(n for n in os.listdir(directory) if n.endswith(TEMP_SUFFIX))


def test_new_and_regular_files_are_replaced_whole(tmp_path):
    target = tmp_path / "r.json"
    write_output(str(target), "first\n")
    assert target.read_text() == "first\n"
    inode = target.stat().st_ino
    write_output(str(target), b"second\n")
    assert target.read_text() == "second\n"
    assert target.stat().st_ino != inode  # a new file renamed over the name, not rewritten in place
    assert leftovers(tmp_path) == []


def test_a_replaced_file_keeps_its_permission_bits_and_a_new_one_follows_the_umask(tmp_path):
    target = tmp_path / "kept.csv"
    target.write_text("old")
    target.chmod(0o640)
    write_output(str(target), "new")
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    old = os.umask(0o027)
    try:
        write_output(str(tmp_path / "fresh.csv"), "x")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "fresh.csv").stat().st_mode) == 0o640


def test_a_symlink_is_followed_and_stays_a_symlink(tmp_path):
    real = tmp_path / "real.json"
    real.write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to("real.json")
    write_output(str(link), "through the link")
    assert link.is_symlink() and os.readlink(link) == "real.json"
    assert real.read_text() == "through the link"
    # a link whose target does not exist yet: the target is created, as `echo > link` does
    dangling = tmp_path / "later.json"
    dangling.symlink_to("sub-later.json")
    write_output(str(dangling), "created")
    assert dangling.is_symlink() and (tmp_path / "sub-later.json").read_text() == "created"
    assert leftovers(tmp_path) == []


def test_a_fifo_is_streamed_to_its_reader_and_stays_a_fifo(fifo_with_reader, tmp_path):
    fifo, received = fifo_with_reader
    write_output(str(fifo), '{"iops": 1}\n')
    assert received() == b'{"iops": 1}\n'
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert leftovers(tmp_path) == []


def test_dev_null_is_written_in_place_never_replaced():
    before = os.stat("/dev/null")
    write_output("/dev/null", "discarded\n")
    after = os.stat("/dev/null")
    assert stat.S_ISCHR(after.st_mode)
    assert (after.st_mode, after.st_ino, after.st_rdev) == (before.st_mode, before.st_ino, before.st_rdev)


def test_a_character_device_node_is_written_in_place_never_replaced(tmp_path):
    node = tmp_path / "null-device"
    try:
        os.mknod(node, stat.S_IFCHR | 0o666, os.makedev(1, 3))  # the same device as /dev/null
    except PermissionError:
        pytest.skip("creating a device node needs root (CAP_MKNOD)")
    before = os.stat(node)
    try:
        write_output(str(node), "into the device\n")
    except NotWritten as exc:
        if "permission denied" in str(exc):
            pytest.skip(f"{tmp_path} is mounted nodev: {exc}")
        raise
    after = os.stat(node)
    assert stat.S_ISCHR(after.st_mode)
    assert (after.st_mode, after.st_ino, after.st_rdev) == (before.st_mode, before.st_ino, before.st_rdev)
    assert leftovers(tmp_path) == []


def test_dev_full_is_one_line_naming_the_file_and_left_alone():
    before = os.stat("/dev/full")
    with pytest.raises(NotWritten) as caught:
        write_output("/dev/full", "x" * 100)
    assert str(caught.value) == "could not write /dev/full: no space left on device"
    assert caught.value.exit_code == ExitCode.NOT_WRITTEN
    after = os.stat("/dev/full")
    assert stat.S_ISCHR(after.st_mode) and after.st_rdev == before.st_rdev


def test_stdout_names():
    assert stream_fd("-") == 1 and is_stdout("-")
    assert is_stdout("/dev/stdout") and is_stdout("/dev/fd/1")
    assert stream_fd("/dev/stderr") == 2
    assert not is_stdout("out.json") and not is_stdout(None) and not is_stdout("./-x")


def test_dash_writes_stdout_and_creates_no_file(tmp_path, capfd, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write_output("-", "on stdout\n")
    write_output("/dev/stdout", "also on stdout\n")
    write_output("/dev/stderr", "on stderr\n")
    out, err = capfd.readouterr()
    assert out == "on stdout\nalso on stdout\n"
    assert err == "on stderr\n"
    assert os.listdir(tmp_path) == []
    assert os.path.islink("/dev/stdout") or not os.path.isfile("/dev/stdout")


def test_a_directory_is_refused(tmp_path):
    with pytest.raises(NotWritten, match=r"could not write .*: is a directory"):
        write_output(str(tmp_path), "x")


def test_a_missing_directory_is_one_line(tmp_path):
    with pytest.raises(NotWritten, match="no such file or directory"):
        write_output(str(tmp_path / "nowhere" / "r.json"), "x")


def test_injected_enospc_keeps_the_previous_version_and_no_temporary_file(tmp_path, monkeypatch):
    target = tmp_path / "r3.json"
    target.write_text("previous complete version")
    monkeypatch.setenv(safe_write.TEST_ERROR_ENV, "*.csv=EIO,r3.json=ENOSPC")
    with pytest.raises(NotWritten) as caught:
        write_output(str(target), "new version")
    assert str(caught.value) == f"could not write {target}: no space left on device"
    assert target.read_text() == "previous complete version"
    assert leftovers(tmp_path) == []
    write_output(str(tmp_path / "other.json"), "not matched")  # other names are written as usual


def test_a_full_filesystem_keeps_the_previous_version_and_no_temporary_file(full_fs):
    target = full_fs / "r3.json"
    assert target.read_text() == "previous"
    with pytest.raises(NotWritten) as caught:
        write_output(str(target), "y" * 200_000)
    assert str(caught.value) == f"could not write {target}: no space left on device"
    assert target.read_text() == "previous"
    assert leftovers(full_fs) == []


def test_a_crash_between_write_and_rename_leaves_the_previous_version(tmp_path):
    target = tmp_path / "r.json"
    target.write_text("complete version 1")
    crash = (
        "import os, signal, sys; from xferscope import safe_write; "
        "safe_write.before_rename = lambda tmp, target: os.kill(os.getpid(), signal.SIGKILL); "
        "safe_write.write_output(sys.argv[1], 'version 2')"
    )
    proc = subprocess.run([sys.executable, "-c", crash, str(target)])
    assert proc.returncode == -9
    assert target.read_text() == "complete version 1"
    assert len(leftovers(tmp_path)) == 1  # a killed process cannot clean up ...
    write_output(str(target), "version 3")
    assert target.read_text() == "version 3"
    assert leftovers(tmp_path) == []  # ... the next write of that name does


def test_an_interrupted_write_removes_its_temporary_file(tmp_path, monkeypatch):
    def interrupt(tmp, target):
        raise KeyboardInterrupt

    monkeypatch.setattr(safe_write, "before_rename", interrupt)
    with pytest.raises(KeyboardInterrupt):
        write_output(str(tmp_path / "r.json"), "x")
    assert os.listdir(tmp_path) == []


def test_reason_reads_as_words():
    assert safe_write.reason_of(OSError(errno.ENOSPC, "No space left on device")) == "no space left on device"
    assert safe_write.reason_of(OSError(errno.EIO, "I/O error")) == "I/O error"
