"""`workload train` on a real GPU: each path lands a sample's exact bytes in GPU memory, the compute kernel (NVRTC
and its PTX text) keeps the GPU busy for the time asked, and the CLI runs through the GPU paths. Skipped, with
the reason, where there is no GPU."""

from __future__ import annotations

import json
import os

import pytest
from gpu_reasons import GPU_REASON, needs_cufile

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(GPU_REASON is not None, reason=f"no GPU path here: {GPU_REASON}")]


@pytest.mark.parametrize("path", ["bounce", "bounce-async", pytest.param("cufile", marks=needs_cufile)])
def test_each_path_lands_the_samples_bytes_in_gpu_memory(path, direct_dir):
    from xferscope.engines import gpu_setup
    from xferscope.workloads.common.fetchers import Slot, make_fetcher, slot_capacity
    from xferscope.workloads.train.train_data import generate
    from xferscope.workloads.train.train_spec import train_spec

    spec = train_spec(
        "resnet50", files=2, samples_per_file=3, sample_size=3_000_000, sample_sd=500_000, directory=str(direct_dir)
    )
    data = generate(spec)
    cu = gpu_setup.driver()
    try:
        with gpu_setup.GpuResources() as res:
            res.context(0)
            fetcher = make_fetcher(path, data, 1 << 20, 0, res)
            cap = slot_capacity([s.length for s in data.samples], 1)
            slot = Slot(cap, dev=res.device_memory(0, cap))
            for s in data.samples:
                start, length = fetcher.extent(s)
                fetcher.read(s, slot, 0)
                fetcher.batch_done()
                got = bytearray(length)
                gpu_setup.check(cu.cuMemcpyDtoH(got, slot.dev, length), "cuMemcpyDtoH")
                with open(data.files[s.file].path, "rb") as fh:
                    fh.seek(s.offset)
                    want = fh.read(s.length)
                head = s.offset - start
                assert bytes(got[head : head + s.length]) == want, s
            fetcher.close()
    finally:
        data.close()


def test_the_kernel_keeps_the_gpu_busy_for_the_time_asked():
    from xferscope.engines import gpu_setup
    from xferscope.workloads.train.compute import KERNEL_PTX, GpuCompute, compile_spin

    with gpu_setup.GpuResources() as res:
        compute = GpuCompute(0, res, {})
        ptx, how = compile_spin(gpu_setup.driver(), gpu_setup.device(0))
        assert b".entry spin" in ptx and how in compute.label, "the label says how the kernel was made"
        assert compute.run(0.05) >= 0.05
        # the PTX text the driver compiles where NVRTC is absent is a kernel too
        cu = gpu_setup.driver()
        module = gpu_setup.check(cu.cuModuleLoadData(KERNEL_PTX.encode() + b"\0"), "cuModuleLoadData")
        try:
            gpu_setup.check(cu.cuModuleGetFunction(module, b"spin"), "cuModuleGetFunction")
        finally:
            cu.cuModuleUnload(module)


@pytest.mark.parametrize(
    ("path", "compute"),
    [("bounce-async", "gpu"), ("bounce", "sleep"), ("host", "gpu"), pytest.param("cufile", "gpu", marks=needs_cufile)],
)
def test_cli_trains_through_the_gpu_paths(cli, direct_dir, tmp_path, path, compute):
    sets = direct_dir / "sets"
    sets.mkdir()
    js = tmp_path / "t.json"
    r = cli(
        "workload",
        "train",
        "cosmoflow",
        "--files",
        "32",
        "-a",
        "2",
        "--steps",
        "8",
        "--path",
        path,
        "--compute",
        compute,
        "--dir",
        str(sets),
        "--json",
        str(js),
    )
    assert r.code == 0, r.err
    data = json.loads(js.read_text())
    assert data["status"] == "ok" and [a["steps"] for a in data["accelerators"]] == [8, 8]
    assert data["au"] is not None and data["cpu_s_per_gib"] > 0
    landing = "batches land in GPU memory" if path != "host" else "batches stop in host memory"
    assert any(landing in label for label in data["labels"]), data["labels"]
    if path == "cufile":
        assert any(label.startswith("cuFile ") for label in data["labels"]), data["labels"]
    if compute == "gpu":
        assert any("computation on the GPU" in label for label in data["labels"])
    assert os.listdir(sets) == []


def test_batch_buffers_beyond_the_gpus_free_memory_are_refused_before_reading(cli, direct_dir):
    sets = direct_dir / "sets"
    sets.mkdir()
    r = cli(
        "workload",
        "train",
        "unet3d",
        "--files",
        "8",
        "--prefetch",
        "400",
        "--path",
        "bounce-async",
        "--dir",
        str(sets),
        "--steps",
        "2",
    )
    assert r.code == 2, r.err
    assert "prefetch:" in r.err and "on GPU 0 need" in r.err and len(r.err.strip().splitlines()) == 1
    assert os.listdir(sets) == [], "refused before the set was written"
