"""`saturate --mpi`: the knee searches across every rank of an MPI job, with the concurrency per rank.

Rank 0 plans and runs the searches; before each measurement it announces the
spec (``replay --mpi``'s steps) and every rank runs it through
``run_spec_mpi``: each rank with the point's workers and queue depth, so the
whole job keeps ranks x workers x queue depth in flight. The other ranks only
follow; they print nothing and exit with rank 0's code.
"""

from __future__ import annotations

from collections.abc import Callable

from xferscope.cluster.replay import RankScratch, Steps, lead_and_follow
from xferscope.cluster.session import AgreedInterrupt, RankFailed, run_spec_mpi
from xferscope.errors import EnvironmentProblem
from xferscope.output.saturate import print_dry_run, run_and_report
from xferscope.saturate.search import StopSearch
from xferscope.spec import RunSpec


class ClusterRunner:
    """Rank 0's measurements: each announced to every rank, then run on all of them."""

    def __init__(self, steps: Steps, scratch: RankScratch, *, gpu_given: bool):
        self.steps = steps
        self.scratch = scratch
        self.gpu_given = gpu_given

    def __call__(self, spec: RunSpec, on_sample: Callable | None = None):
        adapted = self.scratch.adapt(spec)
        if not self.steps.send(("point", spec, self.gpu_given)):
            raise StopSearch
        try:
            return run_spec_mpi(adapted, gpu_given=self.gpu_given, on_sample=on_sample)
        except AgreedInterrupt:
            raise StopSearch from None
        except RankFailed as exc:
            if exc.cannot_run_there:
                raise EnvironmentProblem(str(exc)) from None
            raise

    def cleanup(self) -> None:
        self.scratch.cleanup()


def saturate_mpi(
    make_plan: Callable[[], object],
    *,
    gpu_given: bool,
    fmt: str,
    json_path: str | None,
    csv_path: str | None,
    dry_run: bool,
) -> None:
    """``saturate --mpi`` on one rank: rank 0 plans, runs the searches and prints; the others follow."""

    def lead(plan, steps: Steps, scratch: RankScratch) -> None:
        if dry_run:
            print_dry_run(plan)
            return
        run_and_report(
            plan, ClusterRunner(steps, scratch, gpu_given=gpu_given), fmt=fmt, json_path=json_path, csv_path=csv_path
        )

    lead_and_follow(lambda ranks: make_plan(), lead)
