"""Training workloads as DLIO configures them (argonne-lcf/dlio_benchmark, ``configs/workload/*.yaml``).

Each figure is the config file's, cited with the commit read. ``computation_time`` is the time one batch
takes on the accelerator named; DLIO emulates it with a sleep, xferscope with a kernel on the GPU (or the same
sleep). A figure a config does not give is not invented: that preset has no such accelerator type.
"""

from __future__ import annotations

from dataclasses import dataclass

from xferscope.errors import SpecError

DLIO = "argonne-lcf/dlio_benchmark"
MLPERF = "mlcommons/storage"


@dataclass(frozen=True)
class TrainPreset:
    name: str
    sample_size: int  # bytes: DLIO's record_length
    sample_sd: int  # bytes: record_length_stdev
    samples_per_file: int
    files: int  # num_files_train
    batch: int
    read_threads: int
    computation_time: dict[str, float]  # accelerator type -> seconds per batch
    au_threshold: float
    source: dict[str, str]  # accelerator type -> the config file and commit it comes from
    file_format: str  # DLIO's format (the files xferscope writes hold the same bytes, not the format)


PRESETS: dict[str, TrainPreset] = {
    "unet3d": TrainPreset(
        name="unet3d",
        sample_size=146_600_628,
        sample_sd=68_341_808,
        samples_per_file=1,
        files=168,
        batch=7,
        read_threads=4,
        computation_time={"h100": 0.323, "a100": 0.636, "b200": 0.162},
        au_threshold=0.90,
        source={
            "h100": f"{DLIO} configs/workload/unet3d_h100.yaml @898fd46",
            "a100": f"{DLIO} configs/workload/unet3d_a100.yaml @898fd46",
            "b200": f"{MLPERF} configs/dlio/workload/unet3d_b200.yaml @0d75b41 (the H100's 0.323 s halved)",
        },
        file_format="npz",
    ),
    "cosmoflow": TrainPreset(
        name="cosmoflow",
        sample_size=2_828_486,
        sample_sd=71_311,
        samples_per_file=1,
        files=524_288,
        batch=1,
        read_threads=4,
        computation_time={"h100": 0.0035, "a100": 0.00551},
        # the configs give no metric.au; MLPerf Storage's rules set 0.70 for cosmoflow
        au_threshold=0.70,
        source={
            "h100": f"{DLIO} configs/workload/cosmoflow_h100.yaml @158ac4a (AU threshold: MLPerf Storage's rules)",
            "a100": f"{DLIO} configs/workload/cosmoflow_a100.yaml @158ac4a (AU threshold: MLPerf Storage's rules)",
        },
        file_format="tfrecord",
    ),
    "resnet50": TrainPreset(
        name="resnet50",
        sample_size=114_660,
        sample_sd=136_076,
        samples_per_file=1251,
        files=1_281_167,
        batch=64,
        read_threads=8,
        computation_time={"h100": 0.103},
        au_threshold=0.90,
        source={
            "h100": f"{DLIO} configs/workload/resnet50_h100.yaml @499a4dc (AU threshold: MLPerf Storage's rules, as resnet50_a100.yaml)"
        },
        file_format="tfrecord",
    ),
}


def preset(name: str) -> TrainPreset:
    try:
        return PRESETS[name]
    except KeyError:
        raise SpecError("preset", f"no preset {name!r}; choose one of {', '.join(PRESETS)}") from None


def computation_time(p: TrainPreset, accelerator_type: str) -> float:
    try:
        return p.computation_time[accelerator_type]
    except KeyError:
        known = ", ".join(p.computation_time)
        raise SpecError(
            "accelerator-type",
            f"{p.name} has no computation_time for {accelerator_type!r} in DLIO's configs ({known} only); "
            "give --computation-time",
        ) from None
