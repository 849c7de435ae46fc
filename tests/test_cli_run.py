"""`xferscope run` and `compare` through the real entry point: output, files, errors, interruption."""

import csv
import errno
import json
import os
import signal
import subprocess
import sys

import pytest

from xferscope import export, records

RESULT_KEYS = {
    "path",
    "io",
    "block_size",
    "workers",
    "iodepth",
    "bytes",
    "ops",
    "seconds",
    "throughput_gib_s",
    "iops",
    "latency_us",
    "cpu",
    "environment",
}
SERIES_HEAD = [
    "time_s",
    "path",
    "io",
    "block_size",
    "workers",
    "bytes",
    "ops",
    "throughput_gib_s",
    "iops",
    "lat_mean_us",
    "lat_p99_us",
    "cpu_usr_pct",
    "cpu_sys_pct",
]


def test_help_lists_the_subcommands(cli):
    r = cli("--help")
    assert r.code == 0
    for name in ("run", "compare", "mem", "replay", "profiles", "import", "doctor", "tui"):
        assert name in r.out


def test_gdsio_letters_and_result_lines(cli, direct_dir):
    r = cli("run", "-x", "1", "-I", "2", "-i", "4K", "-w", "2", "-s", "8M", "-T", "0.5", "-D", str(direct_dir))
    assert r.code == 0, r.err
    lines = r.out.splitlines()
    assert lines[0].startswith("IoType: RANDREAD XferType: CPUONLY Threads: 2 DataSetSize: ")
    assert "IOSize: 4(KiB) Throughput: " in lines[0] and " GiB/sec, Avg_Latency: " in lines[0]
    assert " usecs ops: " in lines[0] and lines[0].endswith(" secs")
    assert "p99.9" in lines[1] and "CPU: usr" in lines[1] and "CPU-s/GiB" in lines[1]
    assert lines[2].startswith("First done:")
    assert not list(direct_dir.iterdir()), "scratch files must be gone"


def test_json_and_csv_outputs(cli, direct_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("out")
    js, cs = out / "r.json", out / "r.csv"
    r = cli(
        "run",
        "--io",
        "randrw",
        "--rwmix",
        "50",
        "--bs",
        "4K",
        "--size",
        "8M",
        "--duration",
        "0.6",
        "--iodepth",
        "4",
        "--file",
        str(direct_dir / "a.dat"),
        "--json",
        str(js),
        "--csv",
        str(cs),
    )
    assert r.code == 0, r.err
    data = json.loads(js.read_text())
    assert set(data) >= RESULT_KEYS
    assert set(data["latency_us"]) == {"min", "mean", "p50", "p90", "p99", "p999", "max"}
    assert {"usr_pct", "sys_pct"} <= set(data["cpu"])
    assert {"host", "kernel", "filesystem", "io_mode"} <= set(data["environment"])
    assert data["bytes"] == data["ops"] * 4096 and data["block_size"] == 4096 and data["iodepth"] == 4
    assert data["samples"], "the JSON file carries the time series"
    rows = list(csv.reader(cs.open()))
    assert rows[0][: len(SERIES_HEAD)] == SERIES_HEAD
    assert len(rows) >= 5
    assert sum(int(row[5]) for row in rows[1:]) == data["bytes"]


def test_format_json_prints_only_json_with_the_runs_fixed_cost(cli, direct_dir):
    r = cli("run", "--bs", "64K", "--size", "4M", "-T", "0.3", "-f", str(direct_dir / "a.dat"), "--format", "json")
    assert r.code == 0, r.err
    d = json.loads(r.out)
    assert d["path"] == "host"
    # outside the timed region: the engine's process, the file created, the set-up; then the teardown
    cost = d["fixed_cost_s"]
    assert (
        cost["setup"] > 0 and cost["teardown"] > 0 and cost["total"] == pytest.approx(cost["setup"] + cost["teardown"])
    )
    # where the set-up went, step by step, each within it
    steps = {k: v for k, v in cost.items() if k.endswith("_step")}
    assert set(steps) == {"process_step", "files_step", "path_step", "telemetry_step", "start_step", "environment_step"}
    assert all(v >= 0 for v in steps.values()) and sum(steps.values()) <= cost["setup"]
    assert export.result_from_record(records.as_run(d, "<json>")).fixed_cost_s == cost


@pytest.mark.parametrize(
    "args,code,words",
    [
        (["--dir", "/nonexistent/xs"], 2, "dir: /nonexistent/xs does not exist"),
        (["--bs", "1000"], 2, "block_size: 1000 bytes is not a multiple of 512"),
        (["--bs", "4K", "--size", "2K"], 2, "smaller than one block"),
        (["--path", "nvme"], 2, "unknown transfer path 'nvme'"),
        (["-x", "9"], 2, "gdsio transfer type 9"),
        (["--io", "7"], 2, "gdsio I/O type 7"),
        (["--bs", "12Q"], 2, "not a size"),
        (["--workers", "0"], 2, "workers: must be"),
        (["--size", "100T"], 3, "not enough free space"),
        (["--format", "xml"], 2, "format"),
    ],
)
def test_bad_input_is_one_line_and_an_exit_code(cli, direct_dir, args, code, words):
    if "--dir" not in args:
        args = args + ["--file", str(direct_dir / "new.dat")]
    r = cli("run", "-T", "0.2", *args)
    assert r.code == code, (r.out, r.err)
    assert words in r.err
    assert "Traceback" not in r.err and len(r.err.strip().splitlines()) == 1


def test_gpu_path_without_gpu_says_why(cli, direct_dir):
    from xferscope.gpus import gpu_count

    if gpu_count()[0]:
        pytest.skip("this machine has a GPU")
    r = cli("run", "-x", "0", "-d", "5", "-s", "4M", "-T", "0.2", "-f", str(direct_dir / "a.dat"))
    assert r.code == 3
    assert "cufile: unavailable:" in r.err and "Traceback" not in r.err


def test_file_smaller_than_one_block(cli, direct_dir):
    small = direct_dir / "small.bin"
    small.write_bytes(b"x" * 1000)
    r = cli("run", "--bs", "4K", "-T", "0.2", "-f", str(small))
    assert r.code == 2 and "less than one block" in r.err


LEFT = "--- left:"


def in_a_ramfs(directory, *args: str, user_file: str = "") -> subprocess.CompletedProcess:
    """xferscope ARGS where ``directory`` is a ramfs, a filesystem that refuses O_DIRECT (tmpfs takes it since
    Linux 6.6), holding a user's 4 MiB ``user_file`` if named; then a line LEFT and what the directory holds. The
    mount is made in a user and mount namespace of the command's own (this user is root there), so no one else
    sees it, and it goes with the command."""
    script = (
        'd=$1; f=$2; shift 2; mount -t ramfs ramfs "$d" || exit 97; [ -z "$f" ] || head -c 4194304 /dev/zero >"$d/$f"'
        '; "$@"; rc=$?; echo "$0"; ls -A "$d"; exit $rc'
    )
    cmd = ["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", script, LEFT, str(directory), user_file]
    return subprocess.run(
        [*cmd, sys.executable, "-m", "xferscope.cli", *args], capture_output=True, text=True, timeout=120
    )


def test_o_direct_refused_suggests_buffered(tmp_path):
    mounted = subprocess.run(
        ["unshare", "--user", "--map-root-user", "--mount", "true"], capture_output=True, text=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"no user namespace to mount a ramfs in: {mounted.stderr.strip()}")
    r = in_a_ramfs(tmp_path, "run", "-T", "0.2", "-s", "4M", "-D", str(tmp_path))
    assert r.returncode == 3 and "refuses O_DIRECT" in r.stderr and "--buffered" in r.stderr, r.stderr
    assert r.stdout.split(LEFT)[1].split() == [], "the probe's file is gone"
    # as it says: --buffered reads there (a user's file: a ramfs says it has no room for a scratch file of ours)
    data = tmp_path / "data.bin"
    ok = in_a_ramfs(tmp_path, "run", "-T", "0.2", "--bs", "64K", "-f", str(data), "--buffered", user_file=data.name)
    assert ok.returncode == 0, ok.stderr
    shown, left = ok.stdout.split(LEFT)
    assert "buffered" in shown and left.split() == [data.name], ok.stdout


def test_write_test_refuses_a_foreign_file_and_leaves_it_alone(cli, direct_dir):
    foreign = direct_dir / "precious.bin"
    content = os.urandom(1 << 20)
    foreign.write_bytes(content)
    for io in ("write", "randwrite", "randrw"):
        r = cli("run", "--io", io, "--bs", "4K", "-T", "0.2", "-f", str(foreign))
        assert r.code == 2 and "not created by xferscope" in r.err and "--force" in r.err
    assert foreign.read_bytes() == content
    r = cli("run", "--io", "read", "--bs", "4K", "-T", "0.2", "-f", str(foreign))
    assert r.code == 0, r.err
    assert "/1024(KiB)" in r.out, "DataSetSize shows the file's real size (1 MiB), not --size"
    assert foreign.read_bytes() == content and foreign.exists(), "reading a user's file leaves it in place"
    r = cli("run", "--io", "write", "--bs", "4K", "-T", "0.2", "-f", str(foreign), "--force")
    assert r.code == 0, r.err
    assert foreign.exists()


def test_a_foreign_file_is_refused_before_an_engine_process_starts(direct_dir, monkeypatch):
    from xferscope.errors import SpecError
    from xferscope.run import runner
    from xferscope.spec import RunSpec

    foreign = direct_dir / "precious.bin"
    foreign.write_bytes(b"x" * 4096)
    spawned = []

    def spawn(self):
        spawned.append(self)
        raise RuntimeError("an engine process was started")

    monkeypatch.setattr(runner.EngineRun, "_spawn", spawn)
    run = runner.EngineRun(RunSpec(io="write", block_size=4096, file=str(foreign), duration=0.1))
    with pytest.raises(SpecError, match="not created by xferscope"):
        run.prepare()
    run.close()
    assert spawned == [] and foreign.read_bytes() == b"x" * 4096


def test_sigint_stops_saves_partial_results_and_removes_scratch(direct_dir, tmp_path_factory):
    js = tmp_path_factory.mktemp("out") / "partial.json"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "xferscope.cli",
            "run",
            "--bs",
            "4K",
            "--io",
            "randread",
            "-s",
            "16M",
            "-T",
            "60",
            "-D",
            str(direct_dir),
            "-w",
            "2",
            "--json",
            str(js),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    from test_engine_process import in_timed_region

    in_timed_region(direct_dir, proc, 1 << 20)  # reads under way: there is something to keep
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    assert out.startswith("IoType: RANDREAD"), out
    data = json.loads(js.read_text())
    assert data["status"] == "interrupted" and data["bytes"] > 0
    assert data["seconds"] < 30
    assert list(direct_dir.iterdir()) == []


def test_compare_prints_side_by_side(cli, direct_dir, tmp_path):
    js = tmp_path / "c.json"
    r = cli(
        "compare",
        "--paths",
        "host,1",
        "-I",
        "randread",
        "-i",
        "4K",
        "-s",
        "8M",
        "-T",
        "0.3",
        "--rounds",
        "2",
        "--json",
        str(js),
        "--no-drop-cache",
    )
    assert r.code == 0, r.err
    assert r.out.count("XferType: CPUONLY") == 4
    assert "MiB/s" in r.out and "ratio" in r.out and "1.00" in r.out
    data = json.loads(js.read_text())
    assert [x["path"] for x in data["results"]] == ["host"] * 4


def test_compare_unavailable_path_is_skipped_or_refused(cli):
    from xferscope.engines.registry import unavailable_reason

    if unavailable_reason("cufile") is None:
        pytest.skip("cufile runs here")
    r = cli("compare", "--paths", "host,cufile", "-s", "4M", "-T", "0.2")
    assert r.code == 3 and "--skip-unavailable" in r.err
    r = cli("compare", "--paths", "host,cufile", "-s", "4M", "-T", "0.2", "--skip-unavailable", "--no-drop-cache")
    assert r.code == 0 and "skipping cufile" in r.err


@pytest.mark.parametrize("tmpfile", ["unnamed", "named"])
def test_the_o_direct_probe_leaves_no_file_whatever_the_filesystem_offers(direct_dir, monkeypatch, tmpfile):
    """The O_DIRECT probe uses a file without a name where the filesystem makes one (nothing to leave behind
    when the process is killed mid-probe), a named one removed at once elsewhere; both answer alike."""
    from xferscope import target

    seen: list[int] = []
    real_open = os.open

    def tracking_open(path, flags, *args):
        if flags & os.O_TMPFILE == os.O_TMPFILE:
            seen.append(flags)
            if tmpfile == "named":
                raise OSError(errno.EOPNOTSUPP, os.strerror(errno.EOPNOTSUPP))
        return real_open(path, flags, *args)

    monkeypatch.setattr(target.os, "open", tracking_open)
    assert target.probe_direct_io(str(direct_dir)) == (True, "")
    assert seen, "the unnamed file was tried first"
    assert list(direct_dir.iterdir()) == []
    ok, why = target.probe_direct_io(str(direct_dir / "missing"))
    assert not ok and why.startswith("cannot create a file there")


EVERY_OPTION = """
import json, sys
sys.argv = ["xferscope", "workload", "--help"]  # every workload's command built
import typer.main
from xferscope import cli
cli.register([])  # every command (the workload group builds each workload: sys.argv names the group)
def walk(cmd, path):
    if not hasattr(cmd, "commands"):
        yield path, cmd
    for name, sub in getattr(cmd, "commands", {}).items():
        yield from walk(sub, [*path, name])
root = typer.main.get_command(cli.app)
print(json.dumps([[" ".join(path), p.opts, p.help or ""] for path, cmd in walk(root, [])
                  for p in cmd.params if p.param_type_name == "option" and "--help" not in p.opts]))
"""


def test_every_option_keeps_its_name_and_its_help():
    """Every command's options are spelled and explained as declared, on every Python: on 3.10 an option whose
    parameter defaults to None once lost both (`run --json` was `--json-path`, without help), its typer option
    hidden inside the Optional[...] that 3.10's get_type_hints wraps such a parameter in."""
    out = subprocess.run([sys.executable, "-c", EVERY_OPTION], capture_output=True, text=True, check=True)
    rows = json.loads(out.stdout)
    assert len({command for command, _, _ in rows}) > 10
    assert [(command, opts) for command, opts, text in rows if not text.strip()] == []
    fallback = {"--json-path", "--csv-path", "--from-file"}  # the parameters' own names, where the options were lost
    assert [(command, opts) for command, opts, _ in rows if fallback & set(opts)] == []
