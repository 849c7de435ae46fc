"""Types of the C extension xferscope._memcore (src/xferscope/_native): not written out yet, every name is Any."""

from typing import Any

def __getattr__(name: str) -> Any: ...
