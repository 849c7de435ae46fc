"""`workload checkpoint`: a training job's checkpoints (MLPerf Storage's llama3 checkpointing, DLIO's layout or
PyTorch Distributed Checkpoint's), sized from the model and its parallelism, rank by rank."""
