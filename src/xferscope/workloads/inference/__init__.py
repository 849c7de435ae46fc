"""The inference workloads: ``workload kvcache`` (LMCache's layout) and ``workload load`` (safetensors
shards), over one engine of reads into buffers (``transfer``); their specs, data, records and side by side."""
