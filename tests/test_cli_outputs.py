"""Result files through the real entry point: what a name points at is never destroyed, `-` is stdout, and a
full disk never loses a measurement (it is printed first; the file gets one line and exit code 4)."""

from __future__ import annotations

import csv
import io
import json
import os
import stat

import pytest

from xferscope.safe_write import TEMP_SUFFIX, TEST_ERROR_ENV

RUN = ("run", "--path", "host", "-s", "8M", "-T", "0.3", "--bs", "64K")
NOT_WRITTEN = 4


def _run(cli, direct_dir, *args, env=None):
    return cli(*RUN, "--dir", str(direct_dir), *args, env=env)


def _temps(directory) -> list[str]:
    return [n for n in os.listdir(directory) if n.endswith(TEMP_SUFFIX)]


def test_dev_full_is_one_line_after_the_result_and_stays_a_device(cli, direct_dir):
    before = os.stat("/dev/full")
    r = _run(cli, direct_dir, "--json", "/dev/full")
    assert r.code == NOT_WRITTEN, r.err
    assert r.out.startswith("IoType: READ XferType: CPUONLY")  # the measurement, on stdout
    assert "xferscope: could not write /dev/full: no space left on device (result shown above)" in r.err
    assert "Traceback" not in r.err and "written to /dev/full" not in r.err
    after = os.stat("/dev/full")
    assert stat.S_ISCHR(after.st_mode) and after.st_rdev == before.st_rdev


def test_dev_null_is_written_in_place(cli, direct_dir):
    before = os.stat("/dev/null")
    r = _run(cli, direct_dir, "--json", "/dev/null", "--csv", "/dev/null")
    assert r.code == 0, r.err
    after = os.stat("/dev/null")
    assert (after.st_mode, after.st_ino, after.st_rdev) == (before.st_mode, before.st_ino, before.st_rdev)


def test_a_symlink_gets_the_json_through_it(cli, direct_dir, tmp_path):
    real = tmp_path / "real.json"
    real.write_text("{}")
    link = tmp_path / "link.json"
    link.symlink_to(real)
    r = _run(cli, direct_dir, "--json", str(link))
    assert r.code == 0, r.err
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert json.loads(real.read_text())["path"] == "host"
    assert _temps(tmp_path) == []


def test_a_fifo_streams_the_json_to_its_reader(cli, direct_dir, tmp_path, fifo_with_reader):
    fifo, received = fifo_with_reader
    r = _run(cli, direct_dir, "--json", str(fifo))
    assert r.code == 0, r.err
    assert json.loads(received())["path"] == "host"
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert sorted(os.listdir(tmp_path)) == ["results.fifo"]


@pytest.mark.parametrize("name", ["-", "/dev/stdout"])
def test_stdout_carries_only_the_json_and_the_summary_goes_to_stderr(cli, direct_dir, name):
    r = _run(cli, direct_dir, "--json", name)
    assert r.code == 0, r.err
    data = json.loads(r.out)  # nothing else on stdout
    assert data["path"] == "host" and data["samples"]
    assert "IoType: READ XferType: CPUONLY" in r.err and "IoType" not in r.out
    assert not os.path.exists("-")  # the command ran in this directory


def test_dash_for_csv_too(cli, direct_dir, tmp_path):
    js = tmp_path / "r.json"
    r = _run(cli, direct_dir, "--csv", "-", "--json", str(js))
    assert r.code == 0, r.err
    rows = list(csv.DictReader(io.StringIO(r.out)))
    assert rows and rows[0]["path"] == "host"
    assert json.loads(js.read_text())["path"] == "host"
    assert f"JSON written to {js}" in r.err and "IoType" in r.err


def test_two_outputs_on_stdout_are_refused_before_measuring(cli, direct_dir):
    r = _run(cli, direct_dir, "--json", "-", "--format", "json")
    assert r.code == 2 and "--format json and --json would both write stdout" in r.err
    r = _run(cli, direct_dir, "--json", "-", "--csv", "/dev/stdout")
    assert r.code == 2 and "both write stdout" in r.err
    assert list(direct_dir.iterdir()) == []


def test_a_folder_is_refused_before_measuring(cli, direct_dir, tmp_path):
    r = _run(cli, direct_dir, "--json", str(tmp_path))
    assert r.code == 2 and f"--json: {tmp_path} is a folder; name a file" in r.err
    r = _run(cli, direct_dir, "--csv", str(tmp_path / "missing" / "r.csv"))
    assert r.code == 2 and "does not exist" in r.err


def _full_disk_checks(r, where) -> None:
    assert r.code == NOT_WRITTEN, r.err
    assert r.out.startswith("IoType: READ XferType: CPUONLY")
    for name in ("r3.json", "r3.csv"):
        assert f"xferscope: could not write {where / name}: no space left on device (result shown above)" in r.err
    assert "Traceback" not in r.err
    assert _temps(where) == []


def test_a_full_filesystem_prints_the_result_then_one_line_per_file(cli, direct_dir, full_fs):
    r = _run(cli, direct_dir, "--json", str(full_fs / "r3.json"), "--csv", str(full_fs / "r3.csv"))
    _full_disk_checks(r, full_fs)
    assert (full_fs / "r3.json").read_text() == "previous"
    assert not (full_fs / "r3.csv").exists()


def test_a_full_disk_injected_prints_the_result_then_one_line_per_file(cli, direct_dir, tmp_path):
    (tmp_path / "r3.json").write_text("previous")
    r = _run(
        cli,
        direct_dir,
        "--json",
        str(tmp_path / "r3.json"),
        "--csv",
        str(tmp_path / "r3.csv"),
        env={TEST_ERROR_ENV: "r3.*=ENOSPC"},
    )
    _full_disk_checks(r, tmp_path)
    assert (tmp_path / "r3.json").read_text() == "previous"
    assert not (tmp_path / "r3.csv").exists()


def test_one_file_failing_does_not_stop_the_other(cli, direct_dir, tmp_path):
    r = _run(cli, direct_dir, "--json", "/dev/full", "--csv", str(tmp_path / "ok.csv"))
    assert r.code == NOT_WRITTEN
    assert "could not write /dev/full" in r.err and f"CSV written to {tmp_path / 'ok.csv'}" in r.err
    assert list(csv.DictReader((tmp_path / "ok.csv").read_text().splitlines()))


COMPARE = ("compare", "--paths", "host,host", "--rounds", "1", "-s", "8M", "-T", "0.3")


def test_compare_prints_its_table_before_a_file_fails(cli, direct_dir):
    r = cli(*COMPARE, "--dir", str(direct_dir), "--json", "/dev/full")
    assert r.code == NOT_WRITTEN, r.err
    assert "ratio: paired per round against host#1" in r.out
    assert "could not write /dev/full: no space left on device (result shown above)" in r.err


def test_compare_json_on_stdout(cli, direct_dir):
    r = cli(*COMPARE, "--dir", str(direct_dir), "--json", "-")
    assert r.code == 0, r.err
    assert [x["path"] for x in json.loads(r.out)["results"]] == ["host", "host"]
    assert "ratio: paired per round against host#1" in r.err


MEM = ("mem", "--mode", "idle", "--buffer", "32M", "--point-seconds", "0.2")


def test_mem_prints_its_table_before_a_file_fails(cli):
    r = cli(*MEM, "--csv", "/dev/full")
    assert r.code == NOT_WRITTEN, r.err
    assert "Latency" in r.out or "latency" in r.out
    assert "could not write /dev/full: no space left on device (result shown above)" in r.err


def test_mem_csv_on_stdout(cli):
    r = cli(*MEM, "--csv", "-")
    assert r.code == 0, r.err
    rows = list(csv.DictReader(io.StringIO(r.out)))
    assert rows and rows[0]["traffic"] == "idle"


def test_import_json_on_stdout(cli):
    from pathlib import Path

    fio = next((Path(__file__).parent / "data").glob("fio*.json"))
    r = cli("import", "fio", str(fio), "--json", "-")
    assert r.code == 0, r.err
    assert json.loads(r.out)


ONE_POINT = """\
name = "two-points"
description = "two host points"
repetitions = 1
duration = 0.3

[base]
path = "host"
file_size = "4M"

[grid]
block_size = ["4K", "64K"]
"""


def test_replay_keeps_its_record_and_prints_the_summary_when_the_results_cannot_be_written(cli, direct_dir, tmp_path):
    profile = tmp_path / "two.toml"
    profile.write_text(ONE_POINT)
    results = tmp_path / "two.results.json"
    r = cli("replay", str(profile), "--results", str(results), "--dir", str(direct_dir))
    assert r.code == 0, r.err
    before = results.read_text()
    # one more repetition per point, onto a full disk: the first save fails, the sweep stops there
    r = cli(
        "replay",
        str(profile),
        "--results",
        str(results),
        "--dir",
        str(direct_dir),
        "--reps",
        "2",
        env={TEST_ERROR_ENV: "two.results.json=ENOSPC"},
    )
    assert r.code == NOT_WRITTEN, r.err
    assert "host read 4K w1" in r.out  # the summary, with what was measured
    assert (
        f"xferscope: could not write {results}: no space left on device (results shown above); the sweep "
        f"stopped there. {results} holds the 2 repetition(s) saved before it"
    ) in " ".join(r.err.split())
    assert results.read_text() == before and _temps(tmp_path) == []
    r = cli("replay", str(profile), "--results", str(results), "--dir", str(direct_dir), "--reps", "2")
    assert r.code == 0, r.err
    assert all(p["repetitions_done"] == 2 for p in json.loads(results.read_text())["points"])


def test_replay_refuses_a_stream_as_its_results_file(cli, tmp_path):
    profile = tmp_path / "two.toml"
    profile.write_text(ONE_POINT)
    r = cli("replay", str(profile), "--results", "-")
    assert r.code == 2 and "is not a regular file" in r.err


def test_replay_plot_that_cannot_be_written(cli, direct_dir, tmp_path):
    profile = tmp_path / "two.toml"
    profile.write_text(ONE_POINT)
    plot = tmp_path / "two.svg"
    r = cli(
        "replay",
        str(profile),
        "--results",
        str(tmp_path / "two.results.json"),
        "--dir",
        str(direct_dir),
        "--plot",
        str(plot),
        env={TEST_ERROR_ENV: "two.svg=EACCES"},
    )
    assert r.code == NOT_WRITTEN, r.err
    assert "host read 64K w1" in r.out
    assert f"could not write {plot}: permission denied (results shown above)" in r.err
    assert f"results written to {tmp_path / 'two.results.json'}" in r.err and not plot.exists()


def test_saturate_prints_its_verdicts_before_a_file_fails_and_json_goes_to_stdout(cli, direct_dir, tmp_path):
    from test_saturate_cli import SMALL

    saved = tmp_path / "sat.json"
    r = cli("saturate", *SMALL, "--dir", str(direct_dir), "--json", str(saved), "--csv", "/dev/full")
    assert r.code == NOT_WRITTEN, r.err
    assert "Verdicts:" in r.out and "host 64K: " in r.out
    assert "could not write /dev/full: no space left on device (result shown above)" in r.err
    assert f"JSON written to {saved}" in r.err and json.loads(saved.read_text())["series"]
    again = cli("saturate", "--from", str(saved), "--json", "-")
    assert again.code == 0, again.err
    assert json.loads(again.out)["series"] and "Verdicts:" in again.err
