"""A profile save and a sweep's results file survive a process killed between write and rename: the previous
complete version stays readable, and the next save clears the killed process's temporary file."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from xferscope.profiles import Profile, load_profile, save_profile
from xferscope.safe_write import TEMP_SUFFIX
from xferscope.spec import RunSpec

KILLED_BEFORE_RENAME = (
    "import os, signal\n"
    "from xferscope import safe_write\n"
    "safe_write.before_rename = lambda tmp, target: os.kill(os.getpid(), signal.SIGKILL)\n"
)


def _killed(script: str, *args: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", KILLED_BEFORE_RENAME + script, *args], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == -9, proc.stderr


def _temps(directory) -> list[str]:
    return [n for n in os.listdir(directory) if n.endswith(TEMP_SUFFIX)]


def test_a_profile_save_survives_a_crash_between_write_and_rename(tmp_path):
    path = str(tmp_path / "mine.toml")
    save_profile(Profile.from_spec(RunSpec(block_size=4096), "mine", "version one"), path)
    _killed(
        "import sys\n"
        "from xferscope.profiles import Profile, save_profile\n"
        "from xferscope.spec import RunSpec\n"
        "save_profile(Profile.from_spec(RunSpec(block_size=65536), 'mine', 'version two'), sys.argv[1])\n",
        path,
    )
    kept = load_profile(path)
    assert kept.description == "version one" and kept.base["block_size"] == 4096
    assert len(_temps(tmp_path)) == 1
    save_profile(Profile.from_spec(RunSpec(block_size=65536), "mine", "version three"), path)
    assert load_profile(path).description == "version three"
    assert _temps(tmp_path) == []


ONE_POINT = """\
name = "one-point"
description = "one host point"
repetitions = 1
duration = 0.3

[base]
path = "host"
file_size = "4M"
block_size = "64K"
"""

ADD_A_REPETITION = """\
import sys
from xferscope.profiles import load_profile
from xferscope.sweep.plan import plan_points
from xferscope.sweep.record import ResultsFile

profile = load_profile(sys.argv[1])
points = plan_points(profile)
results = ResultsFile(sys.argv[2], profile, points)
record = results.record(points[0])
record.repetitions.append(dict(record.repetitions[0]))  # what a resumed sweep's next repetition adds
results.save()
"""


def test_a_sweep_record_survives_a_crash_between_write_and_rename(cli, tmp_path, direct_dir):
    profile = tmp_path / "one.toml"
    profile.write_text(ONE_POINT)
    results = tmp_path / "one.results.json"
    r = cli("replay", str(profile), "--results", str(results), "--dir", str(direct_dir))
    assert r.code == 0, r.err
    before_json, before_csv = results.read_text(), (tmp_path / "one.results.csv").read_text()
    assert json.loads(before_json)["points"][0]["repetitions_done"] == 1
    _killed(ADD_A_REPETITION, str(profile), str(results))
    assert results.read_text() == before_json  # the previous complete version, whole
    assert (tmp_path / "one.results.csv").read_text() == before_csv
    assert len(_temps(tmp_path)) == 1
    # the file still resumes: the finished point is kept, nothing runs again
    r = cli("replay", str(profile), "--results", str(results), "--dir", str(direct_dir))
    assert r.code == 0, r.err
    assert "1 point(s) finished earlier" in r.err
    assert json.loads(results.read_text())["points"][0]["repetitions_done"] == 1
    assert _temps(tmp_path) == []
