"""Workloads: plans of requests with a consumer model (emulated accelerators), run in an engine's process.

``workload train`` (DLIO's training input, into the GPU) lives here: presets, the data set, the accelerator
loop, the figures (AU to DLIO's definition), the parent's side of a run and ``--find-max``.
"""
