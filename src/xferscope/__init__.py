"""xferscope: how fast does data get from this storage (or memory) into this GPU, by which path, at what CPU cost."""

__version__ = "0.1.0"
