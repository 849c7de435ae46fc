"""Scratch files go with the process that made them, whatever ends it: killed outright while it fills a
comparison's dataset, between a sweep's points, or with nothing running at all."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
from test_engine_process import engine_children, gone, has_read, scratch_left, start_cli, wait_until


def test_guarded_paths_go_when_the_process_is_killed_and_released_ones_stay(tmp_path):
    script = textwrap.dedent(f"""
        import os, time
        from xferscope import janitor
        d = {str(tmp_path)!r}
        os.mkdir(os.path.join(d, "dir"))
        open(os.path.join(d, "dir", "inside"), "w").close()
        open(os.path.join(d, "file"), "w").close()
        open(os.path.join(d, "kept"), "w").close()
        for name in ("dir", "file", "kept"):
            janitor.guard(os.path.join(d, name))
        janitor.release(os.path.join(d, "kept"))
        print("ready", flush=True)
        time.sleep(60)
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    assert (tmp_path / "dir" / "inside").exists() and (tmp_path / "file").exists()
    proc.kill()
    proc.wait()
    wait_until(
        lambda: not (tmp_path / "dir").exists() and not (tmp_path / "file").exists(),
        timeout=20,
        what="the janitor to remove the guarded paths",
    )
    assert (tmp_path / "kept").exists()


def test_a_normal_exit_removes_nothing_it_released_and_leaves_no_janitor(tmp_path):
    """At a normal exit the janitor is told and waited for: once the process has ended, so has its janitor, and a
    path still guarded is gone (a command leaves no process of its own behind)."""
    script = textwrap.dedent(f"""
        import os
        from xferscope import janitor
        path = os.path.join({str(tmp_path)!r}, "mine")
        open(path, "w").close()
        with janitor.guarded(path):
            pass
        left = os.path.join({str(tmp_path)!r}, "left")
        open(left, "w").close()
        janitor.guard(left)
        print(janitor._child.proc.pid)
    """)
    done = subprocess.run([sys.executable, "-c", script], check=True, timeout=60, capture_output=True, text=True)
    assert gone(int(done.stdout)), "the janitor outlived the process that started it"
    assert (tmp_path / "mine").exists() and not (tmp_path / "left").exists()


def test_compare_killed_while_filling_its_dataset_leaves_nothing(direct_dir):
    tmp = direct_dir / "tmp"
    tmp.mkdir()
    proc = start_cli("compare", "--paths", "host,host", "-s", "4G", "--bs", "1M", "-T", "2", env={"TMPDIR": str(tmp)})
    wait_until(
        lambda: any(f.name.endswith(".dat") for d in tmp.iterdir() if d.is_dir() for f in d.iterdir()),
        what="the dataset being filled",
    )
    proc.kill()
    proc.communicate(timeout=30)
    wait_until(lambda: not scratch_left(tmp), timeout=30, what="the dataset to go")


def test_replay_killed_mid_sweep_leaves_nothing(direct_dir):
    tmp = direct_dir / "tmp"
    tmp.mkdir()
    profile = direct_dir / "two.toml"
    profile.write_text(
        'name = "two"\nkind = "io"\nrepetitions = 1\nduration = 30\n'
        '[base]\npath = "host"\nfile_size = "32M"\n[grid]\nblock_size = ["64K", "1M"]\n'
    )
    proc = start_cli(
        "replay", str(profile), "--results", str(direct_dir / "two.results.json"), env={"TMPDIR": str(tmp)}
    )
    engine = wait_until(lambda: engine_children(proc.pid), timeout=60, what="the first point's engine")[0]
    wait_until(
        lambda: any(f.name.endswith(".xferscope") for d in tmp.iterdir() if d.is_dir() for f in d.iterdir()),
        what="the sweep's scratch file",
    )
    before = engine.io_counters().read_bytes  # the point's timed reads under way
    wait_until(lambda: has_read(engine, before + (1 << 20)), what="the engine reading the scratch file")
    proc.kill()
    proc.communicate(timeout=30)
    wait_until(lambda: gone(engine.pid), timeout=30, what="the engine process to leave")
    wait_until(lambda: not scratch_left(tmp), timeout=30, what="the sweep's scratch to go")


def test_a_killed_process_leaves_no_cufile_log(tmp_path):
    # the log cuFile writes to in a process of ours is a file of ours: a process killed outright runs no exit
    # handler, so the janitor removes it
    script = textwrap.dedent("""
        import time
        from xferscope.engines import cufile_driver
        print(cufile_driver.log().path, flush=True)
        time.sleep(60)
    """)
    env = {k: v for k, v in os.environ.items() if k != "CUFILE_LOGFILE_PATH"}
    proc = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, env={**env, "TMPDIR": str(tmp_path)}
    )
    log = proc.stdout.readline().strip()
    assert os.path.dirname(log) == str(tmp_path) and os.path.basename(log).startswith("xferscope-cufile-")
    assert os.path.exists(log)
    proc.kill()
    proc.wait()
    wait_until(lambda: not os.path.exists(log), timeout=20, what="the janitor to remove the cuFile log")


def test_a_workload_child_that_dies_leaves_no_cufile_log(tmp_path, monkeypatch):
    import tempfile

    from xferscope.workloads.common.process_run import Died, WorkloadChild

    monkeypatch.delenv("CUFILE_LOGFILE_PATH", raising=False)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    child = WorkloadChild(os.abort, "a workload that dies at once", "cufile")  # SIGABRT as it starts
    with pytest.raises(Died):
        child.execute({"job": 1})
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith("xferscope-cufile-")]
