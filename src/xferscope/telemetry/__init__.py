"""Telemetry sampled beside the engines: CPU (psutil) and GPU (NVML). Never fails a run."""
