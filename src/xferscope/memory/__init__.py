"""Memory sweeps (``xferscope mem``): latency against bandwidth, cache-level curves, the NUMA matrix and peak
bandwidth, measured by the native core or by Intel MLC; their spec, plan, machine facts, results, the process a
sweep runs in, and their text in MLC's shape."""
