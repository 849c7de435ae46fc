"""--source cache: the file read once into the page cache and kept there, reads buffered, so that storage drops
out and a path shows its own ceiling. Through the CLI's entry point, on the host engine."""

from __future__ import annotations

import json
import os

import pytest


def test_a_run_reads_the_file_from_memory_and_says_so(cli, tmp_path):
    out = tmp_path / "r.json"
    data = tmp_path / "data"
    data.mkdir()
    r = cli("run", "--path", "host", "-D", str(data), "-s", "32M", "-T", "0.5", "--source", "cache", "--json", str(out))
    assert r.code == 0, r.err
    result = json.loads(out.read_text())
    env = result["environment"]
    assert env["source"] == "page cache" and env["io_mode"] == "buffered"
    assert env["resident_before"] >= 0.99 and env["resident_after"] >= 0.99
    assert any(label.startswith("source: page cache, 100% of the file resident") for label in result["labels"])
    assert "source: page cache" in r.out
    assert os.listdir(data) == [], "the file it created is gone"


def test_a_comparison_keeps_the_file_in_memory_between_rounds(cli, tmp_path):
    out = tmp_path / "c.json"
    r = cli(
        "compare", "--paths", "host,host", "-s", "32M", "-T", "0.3", "--rounds", "2", "--source", "cache",
        "--dir", str(tmp_path), "--json", str(out),
    )  # fmt: skip
    assert r.code == 0, r.err
    assert "page cache kept (--source cache: the file is read from memory in every round)" in r.out
    assert "cannot drop the page cache" not in r.err
    data = json.loads(out.read_text())
    assert data["comparison"]["page_cache"].startswith("page cache kept")
    assert all(run["environment"]["source"] == "page cache" for run in data["results"])
    assert "host#1 (from cache)" in r.out


@pytest.mark.parametrize(
    "args, says",
    [
        (["--io", "write"], "--source cache reads a file held in memory; --io write writes"),
        (["--io", "randrw"], "--io randrw writes"),
        (["-s", "64T"], "does not fit in 90% of the memory available"),
        (["--path", "cufile"], "cufile reads with O_DIRECT into GPU memory; --source cache applies to host"),
        (["--source", "tape"], "unknown source 'tape'; choose one of storage, cache"),
    ],
)
def test_what_it_cannot_do_is_one_line_before_anything_runs(cli, tmp_path, args, says):
    base = ["run", "--path", "host", "-D", str(tmp_path), "-s", "32M", "-T", "0.3", "--source", "cache"]
    r = cli(*base, *args)
    assert r.code == 2, (r.code, r.err)
    assert says in r.err and len(r.err.strip().splitlines()) == 1, r.err
    assert os.listdir(tmp_path) == [], "nothing was created"
