"""``xferscope doctor``: what ``gdscheck -p`` tells, and what it does not.

Each check gives ok, warn or fail, one line of detail and, where something is
wrong, the fix. Nothing is changed on the machine: fixes (the udev record
inside a VM, say) are printed, never applied. Works on a machine without any
GPU and says so.
"""

from xferscope.doctor.run import format_report, run_checks

__all__ = ["format_report", "run_checks"]
