"""The README opens with the two commands, and CI runs the second one as it is written."""

import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parent.parent


def readme_commands():
    text = (ROOT / "README.md").read_text()
    return re.findall(r"```sh\n(.+?)\n```", text)[:2]


def test_readme_opens_with_two_commands():
    text = (ROOT / "README.md").read_text()
    start, test = readme_commands()
    assert text.index(start) < 200, "the commands come first"
    assert start.endswith("&& xferscope")
    assert "pytest" in test and "[test]" in test


def test_ci_runs_the_readme_test_command_verbatim():
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert readme_commands()[1] in ci
