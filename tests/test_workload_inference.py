"""`workload kvcache` and `workload load` on the CPU machine: the model arithmetic, LMCache's chunk layout byte
for byte, safetensors shards that safetensors itself opens and that xferscope reads back exactly, host runs of
both with their figures, paths side by side, Ctrl-C, and bad input (one line, exit 2, nothing written)."""

from __future__ import annotations

import contextlib
import csv
import json
import os
import struct
import subprocess
import sys
import time

import pytest
from conftest import TRANSFER_PROCESS, child_has_read, children_running, interrupted_cli, sends_from_now

from xferscope.workloads.inference import kv_layout
from xferscope.workloads.inference.models import model

KV = ("--model", "custom", "--layers", "4", "--kv-heads", "8", "--head-dim", "128", "--cache-chunks", "24")


@pytest.fixture
def set_dir(direct_dir):
    d = direct_dir / "sets"
    d.mkdir()
    return d


# ------------------------------------------------------------------ the arithmetic


@pytest.mark.parametrize(
    ("name", "per_token"),
    [
        ("llama3.1-8b", 32 * 8 * 128 * 2 * 2),  # 128 KiB
        ("llama3.1-70b", 80 * 8 * 128 * 2 * 2),  # 320 KiB
        ("deepseek-v3", 61 * (512 + 64) * 2),  # MLA: about 69 KiB
    ],
)
def test_bytes_per_token_follow_the_formula(name, per_token):
    m = model(name)
    assert m.kv_bytes_per_token == per_token
    assert f"{per_token:,} B per token" in m.kv_formula()


def test_a_chunk_of_llama_8b_is_32_mib_and_tp_splits_the_kv_heads():
    shape = kv_layout.chunk_shape(model("llama3.1-8b"), 256, 1)
    assert shape.payload == 32 << 20 and shape.shape == [2, 32, 256, 1024]
    assert kv_layout.chunk_shape(model("llama3.1-8b"), 256, 8).payload == 4 << 20
    assert kv_layout.chunk_shape(model("llama3.1-70b"), 256, 1).payload == 80 << 20
    mla = kv_layout.chunk_shape(model("deepseek-v3"), 256, 4)  # MLA's vector is not split over ranks
    assert mla.shape == [1, 61, 256, 576] and mla.fmt == kv_layout.FMT_KV_MLA


def test_generated_chunk_files_are_byte_exact_in_lmcache_layout(set_dir):
    from xferscope.workloads.inference.kvcache_data import generate
    from xferscope.workloads.inference.kvcache_spec import KvSpec, parse_prompt

    spec = KvSpec(
        model=model("custom", layers=2, kv_heads=4, head_dim=64),
        prompt=parse_prompt("512"),
        tp=2,
        requests=1,
        directory=str(set_dir),
        cache_chunks=3,
    ).validate()
    cache = generate(spec)
    try:
        assert len(cache.files) == 6
        payload = 2 * 2 * 256 * (4 // 2 * 64) * 2
        for f in cache.files:
            with open(f.path, "rb") as fh:
                raw = fh.read()
            assert len(raw) == 4096 + payload == f.size
            assert struct.unpack("<Q", raw[:8])[0] == 4088  # LMCache's pack_metadata: 4 KiB with its length
            head = raw[8:4096]
            text = head.rstrip(b" ")
            assert head[len(text) :] == b" " * (4088 - len(text))
            meta = json.loads(text)["kvcache"]
            assert meta == {
                "dtype": "BF16",
                "shape": [2, 2, 256, 128],
                "data_offsets": [0, payload],
                "fmt": 1,
                "__metadata__": {"lmcache_version": "1"},
            }
            with open(f.path + ".metadata", "rb") as fh:
                assert fh.read() == raw[:4096]
            name = os.path.basename(f.path)
            h = str(int(name.split("@")[4].split(".")[0], 16))
            assert f.path.endswith(os.path.join(h[:2], h[2:4], name)) and name.endswith(".kvcache.safetensors")
        from safetensors import safe_open  # the chunk file is also a safetensors file

        with safe_open(cache.files[0].path, framework="np") as fh:
            assert fh.get_slice("kvcache").get_shape() == [2, 2, 256, 128]
    finally:
        cache.close()
    assert os.listdir(set_dir) == []


def test_layer_layout_reads_each_k_and_v_plane_layer_by_layer():
    from xferscope.workloads.inference.kvcache_data import KvCache
    from xferscope.workloads.inference.kvcache_spec import Request

    shape = kv_layout.chunk_shape(model("custom", layers=3, kv_heads=2, head_dim=64), 16, 1)
    cache = KvCache("", [], True, shape, 10, 1, True)
    pieces = cache.pieces(Request(0, 64, 4, 2, 5), 0, "layer")
    plane = 16 * 128 * 2
    assert [p.length for p in pieces] == [plane] * (3 * 2 * 2)
    # layer 0 of chunk 5 (K then V), layer 0 of chunk 6, then layer 1 …
    assert [(p.file, p.offset) for p in pieces[:4]] == [
        (5, 4096),
        (5, 4096 + 3 * plane),
        (6, 4096),
        (6, 4096 + 3 * plane),
    ]
    assert pieces[4].offset == 4096 + plane
    block = cache.pieces(Request(0, 64, 4, 2, 9), 0, "block")
    assert [(p.file, p.length) for p in block] == [(9, shape.payload), (0, shape.payload)]  # wraps around


def test_prompt_lengths_and_hits(set_dir):
    from xferscope.workloads.inference.kvcache_spec import KvSpec, parse_prompt, request

    assert parse_prompt("8192").text == "8192" and parse_prompt("1024-8192").high == 8192
    spec = KvSpec(model=model("llama3.1-8b"), prompt=parse_prompt("1000-3000"), hit_ratio=0.5, requests=1).validate()
    for n in range(50):
        r = request(spec, n, 100)
        assert 1000 <= r.prompt_tokens <= 3000 and r.chunks == r.prompt_tokens // 256 and r.hits == round(r.chunks / 2)
        assert r == request(spec, n, 100)  # the same request every time


def test_the_break_even_follows_the_restore_times():
    from xferscope.workloads.inference.kvcache_record import KvRequest, break_even
    from xferscope.workloads.inference.kvcache_spec import KvSpec, parse_prompt

    spec = KvSpec(
        model=model("llama3.1-8b"), prompt=parse_prompt("256-4096"), layout="layer", requests=1, prefill_rate=10_000
    )
    # restore = 20 ms + 20 us a token; recompute = 100 us a token: equal at 20 ms / 80 us = 250 tokens
    log = [
        KvRequest(number=i, hits=k, tokens=256 * k, seconds=0.02 + 20e-6 * 256 * k) for i, k in enumerate((1, 4, 9, 16))
    ]
    b = break_even(spec, [], log, 256)
    assert b is not None and b.tokens == 250 and abs(b.fixed_s - 0.02) < 1e-9
    slow = [KvRequest(number=i, hits=k, tokens=256 * k, seconds=200e-6 * 256 * k) for i, k in enumerate((1, 4))]
    assert break_even(spec, [], slow, 256).tokens is None  # restoring never beats 100 us a token


# ------------------------------------------------------------------ safetensors


def _shards(dir_, n=2):
    import numpy as np
    from safetensors.numpy import save_file

    rng = np.random.default_rng(7)
    want = {}
    for i in range(n):
        tensors = {
            f"layer{i}.w": rng.standard_normal((300, 257)).astype(np.float32),
            f"layer{i}.b": rng.standard_normal((257,)).astype(np.float16),
            f"layer{i}.q": rng.integers(0, 100, (33, 1000), dtype=np.int64),
        }
        save_file(tensors, str(dir_ / f"model-{i}.safetensors"))
        want.update(tensors)
    return want


def test_xferscope_writes_shards_safetensors_opens(tmp_path):
    import numpy as np
    from safetensors.numpy import load_file

    from xferscope.workloads.inference import safetensors_format as st

    path = tmp_path / "m.safetensors"
    tensors = [("a", "F16", (3, 5)), ("b", "F32", (7,)), ("c", "I64", (2, 2, 2))]
    head = st.header_bytes(tensors, {"format": "pt"})
    data = bytes(range(256)) * 2
    body = data[: 3 * 5 * 2 + 7 * 4 + 8 * 8]
    path.write_bytes(head + body)
    loaded = load_file(str(path))
    assert loaded["b"].dtype == np.float32 and loaded["c"].shape == (2, 2, 2) and loaded["a"].shape == (3, 5)
    assert loaded["a"].tobytes() == body[:30] and loaded["c"].tobytes() == body[58:]
    parsed = st.parse(str(path))
    assert [t.name for t in parsed.tensors] == ["a", "b", "c"] and parsed.data_start == len(head)
    assert len(head) % 8 == 0


def test_load_reads_every_tensor_of_real_shards_back_exactly(cli, tmp_path, no_gpu):
    _shards(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    r = cli(
        "workload",
        "load",
        "--files",
        str(tmp_path / "model-*.safetensors"),
        "--verify",
        "--split",
        "64K",
        "-t",
        "3",
        "--json",
        str(out / "l.json"),
    )
    assert r.code == 0, r.err
    data = json.loads((out / "l.json").read_text())
    assert data["kind"] == "workload-load" and data["status"] == "ok" and data["schema_version"] == 1
    assert data["verified"]["differ"] == 0 and data["verified"]["pieces"] == data["pieces"] > 6
    assert data["data"]["tensors"] == 6 and data["load_s"] > 0 and data["first_byte_s"] <= data["load_s"]
    assert data["slowest_shard"] in ("model-0.safetensors", "model-1.safetensors")
    assert data["cpu_s_per_gib"] > 0 and data["gb_per_s"] > 0
    assert "verified:" in r.out and "loaded in" in r.out
    assert sorted(os.listdir(tmp_path)) == ["model-0.safetensors", "model-1.safetensors", "out"]  # nothing written
    from xferscope.workloads.common.records import encode
    from xferscope.workloads.inference.load_record import decode as decode_load

    loaded = decode_load((out / "l.json").read_bytes())  # the record round-trips: file, record, file, record
    assert decode_load(encode(loaded)) == loaded and json.loads(encode(loaded)) == data


def test_the_loader_places_each_tensor_where_its_bytes_are_checked(set_dir, no_gpu):
    """The API's verify against the files, on shards generated from a model's shapes, split over two GPUs'
    buffers (host memory here), cold then warm."""
    import dataclasses

    from xferscope.workloads.inference.load import LoadSession
    from xferscope.workloads.inference.load_spec import LoadSpec

    spec = LoadSpec(
        model=model("llama3.2-1b", layers=2, vocab=2048),
        shard_size=8 << 20,
        directory=str(set_dir),
        verify=True,
        split=1 << 20,
        threads=3,
        gpus=(0, 1),
    ).validate()
    s = LoadSession(spec)
    try:
        shards = s.prepare()
        assert len(shards.files) > 2 and os.path.exists(os.path.join(shards.root, "model.safetensors.index.json"))
        cold = s.run()
        warm = s.run(dataclasses.replace(s.spec, cache="warm"))
    finally:
        s.close()
    for r in (cold, warm):
        assert r.status == "ok" and r.verified.differ == 0 and r.verified.pieces == r.pieces
        assert len(r.per_gpu) == 1 and r.per_gpu[0].gpu is None  # no GPU: host memory
    assert cold.resident_before == 0.0
    assert warm.resident_before > 0.9
    assert os.listdir(set_dir) == []


# ------------------------------------------------------------------ the CLI


def test_kvcache_host_run_reports_the_figures(cli, set_dir, tmp_path, no_gpu):
    js = tmp_path / "k.json"
    r = cli(
        "workload",
        "kvcache",
        *KV,
        "--prompt-tokens",
        "1024-3072",
        "-c",
        "2",
        "-n",
        "12",
        "--dir",
        str(set_dir),
        "--prefill-rate",
        "5000",
        "--json",
        str(js),
        "--csv",
        str(tmp_path / "k.csv"),
    )
    assert r.code == 0, r.err
    d = json.loads(js.read_text())
    assert d["kind"] == "workload-kvcache" and d["status"] == "ok" and d["requests"] == 12
    assert 0 < d["restore_p50_s"] <= d["restore_p99_s"]
    assert d["bytes_per_token"] == 4 * 8 * 128 * 2 * 2 and d["tokens_per_s"] > 0 and d["chunks_per_s"] > 0
    assert d["per_gpu"][0]["gpu"] is None and d["per_gpu"][0]["gb_per_s"] > 0 and d["cpu_s_per_gib"] > 0
    assert d["break_even"]["prefill_rate"] == 5000
    assert "break-even at 5000 tokens/s" in r.out and "restore p50" in r.out
    assert len(d["request_log"]) == 12 and all(q["seconds"] > 0 for q in d["request_log"])
    rows = list(csv.reader((tmp_path / "k.csv").open()))
    assert rows[0][:3] == ["path", "gpu", "requests"] and rows[1][:3] == ["host", "all", "12"]
    assert rows[2][:2] == ["host", "host"] and float(rows[2][5]) == pytest.approx(d["per_gpu"][0]["gb_per_s"])
    assert os.listdir(set_dir) == []
    from xferscope.workloads.inference.kvcache_record import decode

    restored = decode(js.read_bytes())
    assert restored.requests == 12
    from xferscope.workloads.common.records import encode

    assert decode(encode(restored)) == restored and json.loads(encode(restored)) == d  # file, record, file, record


def test_paths_side_by_side_each_get_their_break_even(cli, set_dir, tmp_path, no_gpu):
    import dataclasses

    import msgspec

    from xferscope.workloads.inference.kvcache import KvComparison
    from xferscope.workloads.inference.text import kv_comparison_lines

    js = tmp_path / "k.json"
    args = ("workload", "kvcache", *KV, "--prompt-tokens", "1024-3072", "-n", "4", "--path", "host,host")
    r = cli(*args, "--rounds", "2", "--dir", str(set_dir), "--prefill-rate", "5000", "--json", str(js))
    assert r.code == 0, r.err
    d = json.loads(js.read_text())
    assert len(d["results"]) == 4 and all(x["break_even"]["prefill_rate"] == 5000 for x in d["results"])
    # a path's break-even comes from every run of it (an A/A is one path)
    lines = [line.strip() for line in r.out.splitlines() if "break-even at 5000 tokens/s" in line]
    assert len(lines) == 1 and lines[0].startswith("host: ") and "the median of the fits of 4 runs" in lines[0]
    # two paths: a line each, from its own runs
    c = msgspec.json.decode(js.read_bytes(), type=KvComparison)
    other = [msgspec.structs.replace(x, spec=dataclasses.replace(x.spec, path="bounce")) for x in c.results[1::2]]
    mixed = msgspec.structs.replace(c, results=[c.results[0], other[0], c.results[2], other[1]])
    said = [line.strip() for line in kv_comparison_lines(mixed) if isinstance(line, str) and "break-even" in line]
    assert [line.split(":")[0] for line in said] == ["host", "bounce"]
    assert all("the median of the fits of 2 runs" in line for line in said)


def test_without_a_prefill_rate_there_is_no_break_even_line(cli, set_dir, no_gpu):
    r = cli(
        "workload",
        "kvcache",
        *KV,
        "--layout",
        "layer",
        "--prompt-tokens",
        "1024",
        "-n",
        "4",
        "--dir",
        str(set_dir),
        "--format",
        "json",
    )
    assert r.code == 0, r.err
    d = json.loads(r.out)
    assert d["break_even"] is None and d["spec"]["layout"] == "layer" and d["requests"] == 4


def test_kvcache_reads_an_existing_cache_without_writing_it(cli, set_dir, tmp_path, no_gpu):
    r = cli(
        "workload",
        "kvcache",
        *KV,
        "--prompt-tokens",
        "1024",
        "-n",
        "2",
        "--dir",
        str(set_dir),
        "--keep",
        "--format",
        "json",
    )
    assert r.code == 0, r.err
    (made,) = os.listdir(set_dir)
    before = {p: os.stat(os.path.join(dp, p)).st_mtime_ns for dp, _, fs in os.walk(set_dir / made) for p in fs}
    r = cli(
        "workload", "kvcache", "--cache", str(set_dir / made), "--prompt-tokens", "1024", "-n", "3", "--format", "json"
    )
    assert r.code == 0, r.err
    d = json.loads(r.out)
    assert d["requests"] == 3 and d["cache"]["generated"] is False and d["cache"]["chunk_files"] == 24
    assert d["bytes_per_token"] == 4 * 8 * 128 * 2 * 2 and "from the cache's chunk headers" in d["formula"]
    after = {p: os.stat(os.path.join(dp, p)).st_mtime_ns for dp, _, fs in os.walk(set_dir / made) for p in fs}
    assert before == after


def test_paths_side_by_side_with_an_a_a_pair(cli, set_dir, no_gpu):
    r = cli(
        "workload",
        "kvcache",
        *KV,
        "--prompt-tokens",
        "1024",
        "-n",
        "3",
        "--dir",
        str(set_dir),
        "--path",
        "host,host",
        "--rounds",
        "2",
        "--format",
        "json",
    )
    assert r.code == 0, r.err
    d = json.loads(r.out)
    assert [e["label"] for e in d["entries"]] in (["host#1", "host#2"], ["host#2", "host#1"])
    assert all(e["runs"] == 2 for e in d["entries"]) and len(d["results"]) == 4


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("workload", "kvcache", "--tp", "3"), "does not divide the 8 KV heads"),
        (("workload", "kvcache", "--chunk-tokens", "0"), "chunk-tokens"),
        (("workload", "kvcache", "--model", "gpt-9"), "unknown model"),
        (("workload", "kvcache", "--prompt-tokens", "lots"), "prompt-tokens"),
        (("workload", "kvcache", "--hit-ratio", "1.5"), "hit-ratio"),
        (("workload", "kvcache", "--duration", "soon"), "duration: not a duration: 'soon'"),
        (("workload", "kvcache", "--model", "custom", "--layers", "2"), "custom needs"),
        (("workload", "load", "--files", "/nonexistent/*.safetensors"), "matches no file"),
        (("workload", "load"), "give --files"),
        (("workload", "load", "--model", "deepseek-v3"), "not modelled"),
        (("workload", "load", "--model", "llama3.2-1b", "--cache", "tepid"), "cold"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(cli, args, says, no_gpu):
    r = cli(*args)
    assert r.code == 2 and says in r.err, r.err
    assert len(r.err.strip().splitlines()) == 1 and "Traceback" not in r.err


@pytest.mark.parametrize(
    ("damage", "says"),
    [
        (lambda raw: raw[:5], "bytes 0-7"),
        (lambda raw: struct.pack("<Q", 10**12) + raw[8:], "bytes 0-7 give a header"),
        (lambda raw: raw[:8] + b"x" + raw[9:], "not JSON at byte 8"),
        (lambda raw: raw.replace(b'"F32"', b'"F33"', 1), "field dtype"),
        (lambda raw: raw.replace(b'"shape":[300,257]', b'"shape":[300,258]', 1), "field data_offsets spans"),
    ],
)
def test_a_damaged_shard_is_one_line_naming_the_byte_or_field(cli, tmp_path, damage, says, no_gpu):
    _shards(tmp_path, 1)
    path = tmp_path / "model-0.safetensors"
    path.write_bytes(damage(path.read_bytes()))
    r = cli("workload", "load", "--files", str(path))
    assert r.code == 2 and says in r.err, r.err
    assert len(r.err.strip().splitlines()) == 1


def test_a_cache_too_big_for_the_disk_is_refused_before_writing(cli, set_dir, no_gpu):
    r = cli("workload", "kvcache", "--model", "llama3.1-70b", "--cache-chunks", "10000000", "--dir", str(set_dir))
    assert r.code == 2 and "does not fit" in r.err
    assert os.listdir(set_dir) == []


def test_ctrl_c_keeps_the_figures_and_removes_the_cache(set_dir, tmp_path, no_gpu):
    js = tmp_path / "k.json"
    args = ("workload", "kvcache", *KV, "--prompt-tokens", "1024", "-T", "60", "--dir", str(set_dir), "--json", str(js))
    code, _out, err = interrupted_cli(args, set_dir, until=child_has_read(TRANSFER_PROCESS, 32 << 20))
    assert code == 130, err
    assert "Traceback" not in err
    d = json.loads(js.read_text())
    assert d["status"] == "interrupted" and d["requests"] > 0 and d["restore_p50_s"] > 0
    assert os.listdir(set_dir) == []


def test_saved_runs_compare_and_two_kinds_do_not_mix(cli, set_dir, tmp_path, no_gpu):
    import shutil

    a, b, loaded = tmp_path / "a.json", tmp_path / "b.json", tmp_path / "l.json"
    r = cli("workload", "kvcache", *KV, "--prompt-tokens", "1024", "-n", "2", "--dir", str(set_dir), "--json", str(a))
    assert r.code == 0, r.err
    shutil.copy(a, b)
    r = cli("workload", "compare", str(a), str(b), "--format", "json")
    assert r.code == 0, r.err
    d = json.loads(r.out)
    assert d["kind"] == "workload-kvcache-compare" and sorted(e["label"] for e in d["entries"]) == ["a.json", "b.json"]
    assert d["entries"][0]["level_with"] == [d["entries"][1]["label"]]  # the same run twice is level
    shards = tmp_path / "shards"
    shards.mkdir()
    _shards(shards, 1)
    assert cli("workload", "load", "--files", str(shards), "--json", str(loaded)).code == 0
    r = cli("compare", "--workload", f"{loaded},{loaded}")
    assert r.code == 0 and "saved model loads" in r.out, r.err
    r = cli("compare", "--workload", f"{a},{loaded}")
    assert r.code == 2 and "saved runs of one workload compare" in r.err
    assert len(r.err.strip().splitlines()) == 1


def test_ctrl_c_during_a_load_keeps_the_figures_and_removes_the_shards(set_dir, tmp_path, no_gpu):
    js = tmp_path / "l.json"
    args = (
        "workload",
        "load",
        "--model",
        "llama3.2-1b",
        "--layers",
        "1",
        "--dtype",
        "fp8",
        "--shard-size",
        "64M",
        "--path",
        "host,host",
        "--rounds",
        "100",
        "--dir",
        str(set_dir),
        "--json",
        str(js),
    )
    # the first load done, the second under way (each load runs in a process of its own)
    code, _out, err = interrupted_cli(args, set_dir, until=children_running(TRANSFER_PROCESS, 2))
    assert code == 130, err
    assert "Traceback" not in err
    d = json.loads(js.read_text())
    assert d["status"] == "interrupted" and d["results"]
    # the loads that finished keep their figures; the one Ctrl-C landed in (under load, maybe the first) says so
    assert all(r["load_s"] > 0 for r in d["results"] if r["status"] == "ok")
    assert d["results"][-1]["status"] in ("ok", "interrupted")
    assert os.listdir(set_dir) == []


def test_a_killed_transfer_process_fails_the_run_and_leaves_nothing(set_dir, tmp_path, no_gpu):
    """SIGKILL into the process that restores the requests: exit 1 with one line naming it, the JSON failed with the
    requests restored until then, the cache removed, no process of ours left."""
    import psutil

    js = tmp_path / "k.json"
    args = ("workload", "kvcache", *KV, "--prompt-tokens", "1024", "-T", "60", "--interval", "0.2")
    proc = subprocess.Popen(
        [sys.executable, "-m", "xferscope.cli", *args, "--dir", str(set_dir), "--json", str(js)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "XFERSCOPE_NO_GPU": "1"},
    )
    me = psutil.Process(proc.pid)
    deadline = time.monotonic() + 120
    while not child_has_read(TRANSFER_PROCESS, 32 << 20)(me):  # requests restored: there are figures to keep
        assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    ours = me.children(recursive=True)
    [worker] = [c for c in ours if TRANSFER_PROCESS in " ".join(c.cmdline())]
    sent = sends_from_now(worker)
    while not sent():  # a tick since: the requests restored are sent
        assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    worker.kill()
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 1, err
    assert "Traceback" not in err and "SIGKILL" in err
    d = json.loads(js.read_text())
    assert d["status"] == "failed" and d["requests"] > 0, "the requests restored before it died are kept"
    assert os.listdir(set_dir) == []

    def left() -> list:
        out = []
        for c in ours:
            with contextlib.suppress(psutil.Error):
                if c.is_running() and c.status() != psutil.STATUS_ZOMBIE:
                    out.append(" ".join(c.cmdline()[2:4]))
        return out

    deadline = time.monotonic() + 30  # the janitor ends once it has seen its parent go
    while left() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not left(), "no process of ours left"


# ------------------------------------------------------------------ profiles: the command's own options

KV_PROFILE = """name = "kv-small"
description = "a small KV-cache restore"
source = "a test"
kind = "workload"

[workload]
workload = "kvcache"
model = "llama3.2-1b"
prompt-tokens = 1024
concurrency = 2
requests = 4
cache_chunks = 8
path = "host,host"
"""

LOAD_PROFILE = """name = "load-small"
description = "a small model load"
source = "a test"
kind = "workload"

[workload]
workload = "load"
model = "llama3.2-1b"
layers = 1
shard-size = "128M"
verify = true
threads = 2
split = "4M"
path = "host"
"""


def replayed(cli, text: str, profile, directory, *args: str):
    """`xferscope replay` of ``text`` written to ``profile``, its data in ``directory``: the command's result and
    the record it kept (``--results``, beside the profile)."""
    profile.write_text(text)
    kept = profile.with_suffix(".json")
    r = cli("replay", str(profile), "--dir", str(directory), "--results", str(kept), *args)
    return r, json.loads(kept.read_text()) if kept.exists() else None


def test_a_kvcache_profile_replays_as_its_command_runs(cli, set_dir, tmp_path, no_gpu):
    """A kvcache profile's fields are `workload kvcache`'s own options (dashes or underscores): replay runs the
    command with them, the replay's --dir and --results win, and the record says what ran."""
    profile = tmp_path / "kv-small.toml"
    r, data = replayed(cli, KV_PROFILE, profile, set_dir)
    assert r.code == 0, r.err
    assert data["kind"] == "workload-kvcache-compare" and data["rounds"] == 3  # two paths: ranked in rounds
    results = data["results"]
    assert [res["spec"]["path"] for res in results] == ["host"] * 6
    assert all(res["spec"]["concurrency"] == 2 and res["spec"]["cache_chunks"] == 8 for res in results)
    assert os.listdir(set_dir) == []
    assert (
        cli("profiles", "show", str(profile))
        .out.rstrip()
        .endswith(f"a kvcache workload: run it with `xferscope replay {profile}`")
    )


def test_a_load_profile_replays_and_checks_every_tensor(cli, set_dir, tmp_path, no_gpu):
    r, data = replayed(cli, LOAD_PROFILE, tmp_path / "load-small.toml", set_dir, "--format", "json")
    assert r.code == 0, r.err
    assert data["kind"] == "workload-load" and data["status"] == "ok" and data["verified"]["differ"] == 0
    assert data["spec"]["threads"] == 2 and data["spec"]["split"] == 4 << 20 and data["spec"]["model"]["layers"] == 1
    assert json.loads(r.out)["kind"] == "workload-load"
    assert os.listdir(set_dir) == []


@pytest.mark.parametrize(
    ("profile", "extra", "says"),
    [
        (KV_PROFILE + "no-such = 1\n", [], "xferscope: no_such: workload kvcache has no option --no-such"),
        (KV_PROFILE + "buffered = 3\n", [], "xferscope: buffered: true or false, got 3"),
        (KV_PROFILE.replace("concurrency = 2", 'concurrency = "two"'), [], "xferscope: workload: workload kvcache: "),
        (LOAD_PROFILE, ["--duration", "5"], "xferscope: duration: workload load has no option --duration"),
        (LOAD_PROFILE.replace('"host"', '"tape"'), [], "xferscope: path: "),
    ],
    ids=["unknown field", "flag", "not a number", "duration", "path"],
)
def test_a_bad_workload_profile_is_one_line_and_exit_2(cli, set_dir, tmp_path, profile, extra, says, no_gpu):
    path = tmp_path / "bad.toml"
    path.write_text(profile)
    r = cli("replay", str(path), "--dir", str(set_dir), *extra)
    lines = [ln for ln in r.err.splitlines() if ln.strip()]
    assert r.code == 2 and len(lines) == 1 and lines[0].startswith(says), r.err
    assert os.listdir(set_dir) == [], "nothing generated"
