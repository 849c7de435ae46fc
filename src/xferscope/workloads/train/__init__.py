"""``workload train``: DLIO's training input into the GPU: presets, the data set, the accelerator loop, the
compute model, AU to DLIO's definition, the parent's side of a run, side by side and ``--find-max``."""
