"""Profiles: the bundled ones round-trip, user profiles live in the XDG data directory, bad files name file and line."""

from __future__ import annotations

import json

import pytest

from xferscope.errors import FormatError, SpecError
from xferscope.profiles import Profile, list_profiles, load_profile, parse_profile, save_profile, user_dir
from xferscope.profiles.fields import IO_FIELDS
from xferscope.spec import RunSpec
from xferscope.sweep.plan import Availability, plan_points

BUNDLED = {
    "paths-1m-seq-rand": 12,  # 4 patterns x 3 paths at 1 MiB
    "gds-vs-bounce-random": 16,  # 2 patterns x 2 sizes x 2 worker counts x 2 paths
    "ssd-block-mix-qd16": 9,  # 3 mixes x 3 sizes at depth 16
    "mem-loaded-latency-w6-w9": 8,  # 2 strides x 4 traffic types
    "qd-iosize-scaling": 128,  # 2 paths x 8 sizes x 8 depths
    "read-grid-gpus-workers": 280,  # 2 paths x 5 GPU sets x 4 sizes x 7 worker counts
}


@pytest.fixture(autouse=True)
def own_data_home(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data-home"))


def _same(a: Profile, b: Profile) -> None:
    for attr in ("name", "description", "source", "kind", "repetitions", "duration", "base", "grid", "saturate"):
        assert getattr(a, attr) == getattr(b, attr), attr


@pytest.mark.parametrize("name", sorted(BUNDLED))
def test_every_bundled_profile_loads_validates_saves_and_loads_again(name, tmp_path):
    profile = load_profile(name)
    assert profile.origin == "bundled" and profile.description and profile.source
    points = profile.points()  # validates every point
    assert len(points) == BUNDLED[name] == profile.point_count
    path = save_profile(profile, str(tmp_path / f"{name}.toml"))
    again = load_profile(path)
    _same(profile, again)
    assert again.points() == points


#: saturate plans bundled, and their knee searches (paths x GPU sets x block sizes)
SATURATE_PLANS = {"saturate-host-4k-1m": 2, "saturate-gpu-paths": 12, "saturate-gds-gpu-sets": 16}
#: workload profiles bundled: one path each
WORKLOADS = {
    "train-cosmoflow-h100": 1,
    "checkpoint-llama3-8b-subset": 1,
    "kvcache-llama3.1-8b-lmcache": 1,
    "load-llama3.2-1b-cold": 1,
}


@pytest.mark.parametrize("name", ["kvcache-llama3.1-8b-lmcache", "load-llama3.2-1b-cold"])
def test_a_bundled_kvcache_or_load_profile_is_its_command_line(name):
    """Its fields are its command's options (each declared once, in its package): every one names an option."""
    from xferscope.commands.profile_options import command_line, command_of
    from xferscope.commands.workload_kinds import command_named

    profile = load_profile(name)
    workload = profile.workload["workload"]
    fields = {k: v for k, v in profile.workload.items() if k != "workload"}
    command = command_of(command_named(workload), workload)
    argv = command_line(command, fields, f"workload {workload}")
    assert "--path" in argv and "--model" in argv and len(argv) >= len(fields)


@pytest.mark.parametrize("name", sorted(SATURATE_PLANS))
def test_every_bundled_saturate_plan_loads_validates_saves_and_loads_again(name, tmp_path):
    from xferscope.saturate.plan import plan_from

    profile = load_profile(name)
    assert profile.origin == "bundled" and profile.kind == "saturate" and profile.description and profile.source
    plan = plan_from(profile)  # validates every search's largest point
    assert profile.point_count == SATURATE_PLANS[name] == len([s for s in plan.series() if s.role == "measured"])
    again = load_profile(save_profile(profile, str(tmp_path / f"{name}.toml")))
    _same(profile, again)
    assert plan_from(again).to_record() == plan.to_record()


def test_bundled_saturate_plans_ask_what_their_experiments_asked():
    host = plan_from_name("saturate-host-4k-1m")
    assert host.paths == ["host"] and host.block_sizes == [4 << 10, 1 << 20]
    assert host.grid_points("host") == 64, "workers 1..16 x qd 1, 4, 16, 64"
    gds = plan_from_name("saturate-gds-gpu-sets")
    assert gds.gpu_sets == [[0, 1], [0, 1, 2, 3], [0, 1, 6, 7], list(range(8))] and gds.max_workers == 128
    assert gds.block_sizes == [64 << 10, 256 << 10, 1 << 20, 4 << 20]
    assert [s.path for s in gds.series()][:4] == ["host"] * 4, "host first: the storage reference"


def plan_from_name(name: str):
    from xferscope.saturate.plan import plan_from

    return plan_from(load_profile(name))


def test_bundled_profiles_measure_what_their_experiments_measured():
    gdsio = load_profile("paths-1m-seq-rand")
    assert {(s.path, s.io, s.block_size, s.workers) for s in gdsio.points()} == {
        (p, io, 1 << 20, 1) for p in ("cufile", "bounce", "host") for io in ("read", "write", "randread", "randwrite")
    }
    fio = load_profile("ssd-block-mix-qd16").points()
    assert {(s.io, s.block_size, s.iodepth, s.read_pct) for s in fio} == {
        (io, bs, 16, pct)
        for io, pct in (("randwrite", 0), ("randrw", 70), ("randread", 100))
        for bs in (4096, 32768, 131072)
    }
    mem = load_profile("mem-loaded-latency-w6-w9").points()
    assert {(m.traffic, m.strides, m.mode) for m in mem} == {
        ((t,), (s,), "loaded") for t in ("W6", "W7", "W8", "W9") for s in (64, 256)
    }
    qd = load_profile("qd-iosize-scaling")
    assert qd.grid["block_size"] == [512 << i for i in range(8)] and qd.grid["iodepth"] == [1 << i for i in range(8)]
    grid = load_profile("read-grid-gpus-workers")
    assert grid.repetitions == 10 and [0, 1, 6, 7] in grid.grid["gpus"] and grid.grid["workers"][-1] == 128


def test_list_profiles_and_the_json_listing(cli):
    infos = {i.name: i for i in list_profiles()}
    every = {**BUNDLED, **SATURATE_PLANS, **WORKLOADS}
    assert set(infos) == set(every)
    assert infos["qd-iosize-scaling"].paths == ["cufile-batch", "host"]
    r = cli("profiles", "--json")
    assert r.code == 0, r.err
    listed = {d["name"]: d for d in json.loads(r.out)}
    assert set(listed) == set(every)
    for name, d in listed.items():
        assert {"name", "description", "source", "paths", "points"} <= set(d)
        assert d["points"] == every[name] and d["paths"] and d["description"]
    assert listed["mem-loaded-latency-w6-w9"]["paths"] == ["mem"]


def test_profiles_show_prints_a_profile_that_reads_back(cli):
    r = cli("profiles", "show", "ssd-block-mix-qd16")
    assert r.code == 0, r.err
    shown = parse_profile(r.out, "<stdout>", "x")
    _same(shown, load_profile("ssd-block-mix-qd16"))
    assert "9 points x 1 repetitions" in r.out
    r = cli("profiles", "show")
    assert r.code == 2 and "show needs a name" in r.err and "Traceback" not in r.err


def test_user_profiles_live_in_the_xdg_data_dir_and_shadow_bundled_ones(tmp_path):
    spec = RunSpec(
        path="host",
        io="randread",
        block_size=4096,
        workers=2,
        iodepth=8,
        file_size=64 << 20,
        duration=3.0,
        rwmix=50,
        buffered=True,
    )
    path = save_profile(Profile.from_spec(spec, "mine", "a saved run"))
    assert path == str(tmp_path / "data-home" / "xferscope" / "profiles" / "mine.toml") and user_dir() in path
    mine = load_profile("mine")
    assert mine.origin == "user" and mine.description == "a saved run"
    assert mine.points() == [spec]
    save_profile(Profile.from_spec(spec, "ssd-block-mix-qd16", "my own version"))
    assert load_profile("ssd-block-mix-qd16").description == "my own version"
    assert {i.name: i.origin for i in list_profiles()}["ssd-block-mix-qd16"] == "user"


def test_profile_fields_follow_runspec():
    assert set(IO_FIELDS) | {"duration"} == set(RunSpec.field_names())


def test_changes_fix_a_field_and_drop_its_axis():
    profile = load_profile("ssd-block-mix-qd16").with_changes(
        duration=0.5, repetitions=3, sets={"bs": "64K", "qd": "4"}
    )
    assert "block_size" not in profile.grid and profile.point_count == 3 and profile.repetitions == 3
    assert {(s.block_size, s.iodepth, s.duration) for s in profile.points()} == {(65536, 4, 0.5)}
    with pytest.raises(SpecError, match="valid fields: path, io, block_size"):
        profile.with_changes(sets={"colour": "blue"})
    with pytest.raises(SpecError, match="workers: expected a whole number"):
        profile.with_changes(sets={"workers": "many"})


def test_points_this_machine_cannot_run_are_skipped_with_the_reason():
    grid = load_profile("read-grid-gpus-workers")
    two_gpus = plan_points(grid, Availability(lambda path: None, lambda: 2))
    runnable = {tuple(p.spec.gpus) for p in two_gpus if not p.skip}
    assert runnable == {(0,), (0, 1)}
    assert all(p.skip == "needs GPU 3; this machine has 2 (0-1)" for p in two_gpus if p.spec.gpus == [0, 1, 2, 3])
    no_gpu = plan_points(
        load_profile("paths-1m-seq-rand"),
        Availability(lambda path: None if path == "host" else "no GPU (NVML sees none)", lambda: 0),
    )
    assert [p.spec.path for p in no_gpu if not p.skip] == ["host"] * 4
    assert {p.skip for p in no_gpu if p.skip} == {"cufile: no GPU (NVML sees none)", "bounce: no GPU (NVML sees none)"}


BAD = [
    ('kind = "io"\ncolour = 3\n', 2, "unknown key 'colour'; valid top-level keys: name, description"),
    ('[base]\nblocksize = "4K"\n', 2, "unknown field 'blocksize' for io profiles; valid fields: path, io, block_size"),
    ('[base]\nworkers = "four"\n', 2, "workers: expected a whole number, got str 'four'"),
    ("[base]\nworkers = true\n", 2, "workers: expected a whole number, got bool True"),
    ('\n[grid]\npath = ["host", "tape"]\n', 3, "'tape' is not one of cufile, host, bounce"),
    ("[grid]\nworkers = 4\n", 2, "a grid field takes a non-empty list"),
    ('[grid]\nio = [\n  "read",\n  "write",\n]\nblock_size = [1000]\n', 6, "not a multiple of 512"),
    ('[base]\nblock_size = "4K"\n[grid]\nfile_size = ["1K", "1M"]\n', 4, "smaller than one block"),
    ('[base]\nio = "read"\n[grid]\nio = ["write"]\n', 4, "io is in both [base] and [grid]"),
    ('kind = "mem"\n[grid]\ntraffic = ["W6", "W42"]\n', 3, "'W42' is not one of R, W2, W3, W5, W6"),
    ('kind = "mem"\n[base]\nstride = 100\n', 3, "stride: 100 is not a stride we measure"),
    ('kind = "disk"\n', 1, "kind: 'disk' is not one of io, mem"),
    ("repetitions = 0\n", 1, "repetitions must be 1 or more"),
    ('duration = "soon"\n', 1, "duration: expected seconds"),
    ('name = "a b"\n', 1, "must be letters, digits"),
    ("kind = io\n", 1, "not valid TOML"),
]


@pytest.mark.parametrize("text,line,words", BAD, ids=[b[2][:30] for b in BAD])
def test_bad_profiles_name_file_line_and_choices(text, line, words, tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(FormatError) as info:
        load_profile(str(path))
    assert info.value.path == str(path) and info.value.line == line, str(info.value)
    assert words in str(info.value)


def test_a_bad_profile_is_one_line_and_exit_2_on_the_command_line(cli, tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text('[base]\npath = "tape"\n')
    r = cli("replay", str(path))
    assert r.code == 2 and "Traceback" not in r.err
    assert (
        r.err.strip() == f"xferscope: {path}:2: [base] path: 'tape' is not one of cufile, host, bounce, "
        "bounce-async, cufile-async, cufile-batch, kvikio"
    )
    r = cli("replay", "no-such-profile")
    assert (
        r.code == 2
        and "no profile named 'no-such-profile'; available: checkpoint-llama3-8b-subset, gds-vs-bounce-random" in r.err
    )


@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_every_bundled_workload_profile_is_its_workloads_command_line(name):
    """Every workload's profile fields are its command's options and argument, declared once in the command."""
    from xferscope.commands.profile_options import command_line, command_of
    from xferscope.commands.workload_kinds import command_named

    profile = load_profile(name)
    workload = profile.workload.get("workload", "train")
    fields = {k: v for k, v in profile.workload.items() if k != "workload"}
    argv = command_line(command_of(command_named(workload), workload), fields, f"workload {workload}")
    assert "--path" in argv and len(argv) >= len(fields), argv
