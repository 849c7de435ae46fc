"""Comparisons that hold: paths in rotated rounds (``rounds``), the verdict rule (``verdict``: sign-test
interval, margins, A/A)."""
