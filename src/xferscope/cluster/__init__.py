"""One benchmark across the hosts of an MPI job (``xferscope run --mpi``, ``compare --mpi``, ``replay --mpi``,
``saturate --mpi`` and every workload's ``--mpi``: train, kvcache, load, checkpoint).

Started by ``mpirun -np N [-H hosts] xferscope run ... --mpi`` or by Slurm's
``srun``: every rank runs the engine on its own host against its own target
(``--dir``/``--file`` may hold ``{rank}`` and ``{host}``) or a shared one, the
ranks start the timed region together, and rank 0 aggregates live and reports.

* ``world``     mpi4py (optional extra ``xferscope[mpi]``), agreement with a time limit
* ``layout``    hosts, local ranks, each rank's GPUs, CPUs and target
* ``records``   the small per-interval record a rank sends to rank 0
* ``exchange``  the timed region: non-blocking sends, rank 0's live aggregation
* ``aggregate`` rank 0's sums per rank, per host and in all; live samples
* ``merge``     the final RunResult: aggregate, per host (``result.hosts``), first/last done
* ``session``   ``run_spec_mpi``: the steps on every rank
* ``runs``, ``replay``, ``saturate``, ``report``  compare, a profile's replay and the knee searches across ranks,
  and what rank 0 prints of them
* ``workload_ranks``  every workload's job, as its package declares it: each rank's share, begun together, and
  rank 0's record of the job
"""

from __future__ import annotations

from xferscope.cluster.session import FollowerExit, run_spec_mpi

__all__ = ["FollowerExit", "run_spec_mpi"]
