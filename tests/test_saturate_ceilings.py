"""Each ceiling rule of the bottleneck verdict on crafted measurements."""

from __future__ import annotations

import pytest

from xferscope.saturate.ceilings import Evidence, bottleneck, verdict_line


def ev(**kw) -> Evidence:
    base = dict(
        path="bounce-async",
        block_size=1 << 20,
        knee="4 workers",
        plateau_gib_s=2.9,
        storage_gib_s=3.0,
        pcie_ceiling_gb_s=55.0,
        pcie_mb_s=3300.0,
        engine_cpu_pct=18.0 * 16,
        cpus_allowed=16,
        busiest_thread_pct=40.0,
        system_busy_pct=20.0,
    )
    return Evidence(**{**base, **kw})


def test_storage_binds_with_the_issue_s_line():
    e = ev()
    found = bottleneck(e)
    assert found.kind == "storage"
    line = verdict_line(e, found)
    assert line == (
        "1M: bounce-async plateau 2.90 GiB/s at 4 workers = 97% of storage (host 3.00 GiB/s); "
        "PCIe 6% of 55 GB/s; CPU 18% of 16 CPUs → storage-bound"
    )


def test_pcie_binds_at_its_share_of_the_copy_ceiling():
    found = bottleneck(ev(plateau_gib_s=22.0, storage_gib_s=40.0, pcie_mb_s=50_000.0))
    assert found.kind == "PCIe" and "PCIe 91% of 55 GB/s" in [c.text for c in found.checks]
    assert any("--gpu" in a for a in found.advice)
    no_nvml = bottleneck(ev(plateau_gib_s=48.0, storage_gib_s=60.0, pcie_mb_s=None))
    assert no_nvml.kind == "PCIe" and "payload" in no_nvml.checks[1].text
    missing = bottleneck(ev(pcie_ceiling_gb_s=None))
    assert next(c for c in missing.checks if c.ceiling == "PCIe").binds is None


@pytest.mark.parametrize(
    "kw, detail",
    [
        (dict(engine_cpu_pct=190.0, cpus_allowed=2, busiest_thread_pct=95.0), "one thread at 95%"),
        (dict(engine_cpu_pct=190.0, cpus_allowed=2, busiest_thread_pct=60.0), "its CPUs are full"),
        (dict(busiest_thread_pct=100.0), "one thread at 100%"),
        (dict(system_busy_pct=97.0), "the machine is busy"),
    ],
)
def test_cpu_binds_on_its_cpus_one_thread_or_a_busy_machine(kw, detail):
    found = bottleneck(ev(plateau_gib_s=1.0, **kw))
    assert found.kind == "CPU" and found.detail == detail
    assert found.advice


def test_memory_copies_through_the_page_cache_or_compat_buffers():
    cached = bottleneck(ev(path="cufile-batch", plateau_gib_s=6.0, page_cache=True))
    assert cached.kind == "memory copies" and "page cache" in cached.detail
    assert any("O_DIRECT" in a for a in cached.advice)
    compat = bottleneck(ev(path="cufile", plateau_gib_s=1.5, compat=True))
    assert compat.kind == "memory copies" and "compat" in compat.detail
    assert any("nvidia-fs" in a for a in compat.advice)


def test_the_path_s_own_overhead_when_nothing_else_binds():
    found = bottleneck(ev(path="bounce", plateau_gib_s=1.5))
    assert found.kind == "path overhead" and found.word == "path overhead (50% of storage)"


def test_no_storage_ceiling_means_no_storage_verdict():
    found = bottleneck(ev(storage_gib_s=None, storage_note="--storage none"))
    assert found.kind == "undetermined"
    assert "storage not measured (--storage none)" in verdict_line(
        ev(storage_gib_s=None, storage_note="--storage none"), found
    )


def test_host_is_the_storage_reference_unless_its_cpu_binds():
    host = dict(path="host", pcie_ceiling_gb_s=None, pcie_mb_s=None)
    assert bottleneck(ev(**host)).kind == "storage"
    assert "PCIe" not in verdict_line(ev(**host), bottleneck(ev(**host)))
    assert bottleneck(ev(**host, busiest_thread_pct=99.8)).kind == "CPU"


def test_little_s_law_mismatch_is_named():
    found = bottleneck(ev(little_ratio=0.5, little_in_flight=8.0, concurrency=16))
    little = next(c for c in found.checks if c.ceiling == "Little")
    assert little.binds and "outside the device" in little.text
    assert any("queuing outside the device" in a for a in found.advice)
    fine = bottleneck(ev(little_ratio=0.97, little_in_flight=15.5, concurrency=16))
    assert not next(c for c in fine.checks if c.ceiling == "Little").binds


def test_an_unsaturated_search_says_to_raise_the_limit():
    found = bottleneck(ev(unsaturated="workers", limit="16 workers"))
    assert any("--max-workers" in a for a in found.advice)


def test_cufile_in_compat_mode_at_large_blocks_is_advised_to_split():
    big = dict(path="cufile", block_size=16 << 20, plateau_gib_s=1.5, compat=True)
    advice = bottleneck(ev(**big)).advice
    assert any("--split 4M" in a for a in advice), advice
    assert not any("--split" in a for a in bottleneck(ev(**big, split=4 << 20)).advice), "split already"
    assert not any("--split" in a for a in bottleneck(ev(**{**big, "compat": False})).advice), "GDS"
