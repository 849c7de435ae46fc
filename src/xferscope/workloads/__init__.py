"""Workloads: plans of requests with a consumer model (emulated accelerators), run in an engine's process.

Every workload lives here, each in a package of its own on ``common`` (the child-process run, records, libraries,
the ranking of paths side by side): ``train`` (DLIO's training input into the GPU: presets, the data set, the
accelerator loop, AU to DLIO's definition, ``--find-max``), ``inference`` (``kvcache``: LMCache's KV-cache restores;
``load``: safetensors model loads) and ``checkpoint`` (MLPerf Storage's llama3 checkpoints and PyTorch DCP's).
"""
