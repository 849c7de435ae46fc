"""What the workloads share: the generated data set and its files, the fetchers (one per path), the engine
process's host and driver, the side-by-side rounds, the records' common parts, the GPU memory checks."""
