"""Saturation: how much concurrency a path needs at each block size to reach its plateau, and which ceiling
binds that plateau (storage, PCIe, CPU, memory copies, or the path's own overhead).

    search.py     the adaptive knee search (pure: it calls ``measure`` and the comparison rule)
    ceilings.py   the bottleneck rules on measured evidence (pure)
    plan.py       what a saturation measures and the full grid it is counted against
    figures.py    knee, plateau, latency, Little's law, CPU and PCIe figures from the runs
    execute.py    runs the searches (host first, the storage reference)
    record.py     JSON and CSV, and read back; report.py the text output
"""
