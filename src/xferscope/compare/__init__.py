"""Comparisons that hold: paths in rotated rounds (``rounds``), the verdict rule (``verdict``: sign-test
interval, margins, A/A), and a stand-in run of a known distribution to test them on (``standin``)."""
