"""Native-core engines whose data ends in (or starts from) GPU memory: bounce and cufile.

Per worker, outside the timed region: the primary context of its GPU (workers
go round-robin over ``--gpu``), a stream, a device buffer, pinned host buffers
and events where the path needs them. A worker's pinned buffers are one
mapping on 2 MiB transparent huge pages, pinned with cuMemHostRegister (the
memory the host path reads into), where the kernel offers them; else, or with
``--4k-pages``, one allocation of CUDA's (cuMemHostAlloc, 4 KiB pages). The hot loop is the native core's; it calls the
CUDA driver through the addresses resolved in ``gpu_setup`` (or, in tests,
host stand-ins from ``xferscope._gpusim``: ``functions()`` is the seam).
Everything is freed in ``release_gpu()``, which ``close()`` calls after a
normal end, a failure or Ctrl-C.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence

from xferscope.engines import gpu_setup, host
from xferscope.engines.native import GpuJob, GpuWorker, NativeEngine, numa_cpus
from xferscope.errors import EnvironmentProblem
from xferscope.records import EngineEnvironment, GpuEntry

#: pinned buffers of a worker start at multiples of this within their allocation (O_DIRECT alignment)
PINNED_ALIGN = 4096
#: the environment's ``pinned_buffers``: a worker's pinned buffers, on which pages and pinned how
PINNED_HUGE, PINNED_SMALL = "2 MiB transparent huge pages, cuMemHostRegister", "cuMemHostAlloc (4 KiB pages)"


def pin_host_memory(resources, gpu: int, size: int, *, huge: bool, forced: bool = False) -> tuple[int, str, str | None]:
    """``size`` bytes of pinned host memory for ``gpu``: on 2 MiB transparent huge pages registered with CUDA
    (``huge``), else CUDA's own allocation, which also stands in where registering the huge pages is refused (a
    low ``ulimit -l``, say) unless they were ``forced`` (then the refusal is raised). The address, which memory it
    is (``PINNED_HUGE`` or ``PINNED_SMALL``), and why the huge pages were refused (None where they were not)."""
    refused = None
    if huge:
        try:
            return resources.pinned_huge_memory(gpu, size), PINNED_HUGE, None
        except EnvironmentProblem as exc:
            if forced:
                raise
            refused = str(exc)
    return resources.pinned_memory(gpu, size), PINNED_SMALL, refused


class GpuNativeEngine(NativeEngine):
    """Shared set-up of the GPU paths that run on ``_iocore``."""

    worker_gpus: list[int]

    def __init__(self, spec, target):
        super().__init__(spec, target)
        self.worker_gpus = gpu_setup.assign_gpus(spec.gpus, spec.workers)
        self.resources = gpu_setup.GpuResources()
        self.gpu_workers: list[GpuWorker] = []
        self.pinned_placement: str | None = None  # where the pinned buffers' pages were put, when it mattered
        self.pinned_kinds: list[str] = []  # per worker: PINNED_HUGE or PINNED_SMALL
        self.pinned_fallback: str | None = None  # why registering huge pages was refused (then cuMemHostAlloc)

    @classmethod
    def unavailable_reason(cls) -> str | None:
        return gpu_setup.unavailable_reason()

    # -- what a path needs per worker (overridden) -----------------------------
    def host_buffers(self) -> int:
        """Pinned host buffers per worker (0: none)."""
        return 0

    def device_blocks(self) -> int:
        """Blocks of GPU memory per worker."""
        return max(1, self.host_buffers())

    def prepare_worker(self, index: int, gpu: int, worker: GpuWorker) -> None:
        """Path-specific set-up of one worker (its cuFile handle, say)."""

    def functions(self) -> dict[str, int]:
        """Addresses of the CUDA entry points the native core calls (the test seam: stand-ins go here)."""
        return dict(gpu_setup.driver_functions())

    # -- NativeEngine hooks ------------------------------------------------------
    def prepare_gpu(self) -> GpuJob:
        spec, res = self.spec, self.resources
        bs = spec.block_size
        functions = self.functions()
        k = self.host_buffers()
        huge = bool(k) and host.host_buffers_on_huge_pages(spec)
        if huge and spec.huge_pages:
            host.require_huge_pages()
        if len(set(self.worker_gpus)) > 1:
            self.labels.append("GPUs " + ",".join(map(str, sorted(set(self.worker_gpus)))) + " round-robin")
        for i, gpu in enumerate(self.worker_gpus):
            ctx, stream, size = res.context_handle(gpu), int(res.stream(gpu)), self.device_blocks() * bs
            worker = GpuWorker(ctx, stream, res.device_memory(gpu, size))
            if spec.writes:
                res.fill_device(gpu, worker.dev, size, spec.seed)
            if k:
                stride = -(-bs // PINNED_ALIGN) * PINNED_ALIGN
                with gpu_setup.running_on(self.pinned_cpus(i, gpu)):
                    base = self.pinned_buffers(gpu, k * stride, huge)
                worker.host = [base + j * stride for j in range(k)]
                worker.events = [int(res.event(gpu)) for _ in range(k)]
            self.prepare_worker(i, gpu, worker)
            self.gpu_workers.append(worker)
        if self.pinned_placement:
            self.labels.append(f"pinned buffers on {self.pinned_placement}")
        if k:
            self.labels.append(self.pinned_label())
        return GpuJob(functions, self.gpu_workers)

    def pinned_buffers(self, gpu: int, size: int, huge: bool) -> int:
        """One worker's pinned buffers: a mapping on 2 MiB transparent huge pages pinned with cuMemHostRegister
        (``huge``), else CUDA's own pinned allocation (cuMemHostAlloc, 4 KiB pages). By default a refused
        registration (a low ``ulimit -l``, say) falls back to the latter, and the label says why."""
        base, kind, refused = pin_host_memory(
            self.resources,
            gpu,
            size,
            huge=huge and self.pinned_fallback is None,
            forced=bool(self.spec.huge_pages),  # asked for: no quiet fallback
        )
        self.pinned_kinds.append(kind)
        self.pinned_fallback = self.pinned_fallback or refused
        return base

    def pinned_label(self) -> str:
        """Which memory the workers' pinned buffers are, in the words of the labels."""
        huge = self.pinned_kinds.count(PINNED_HUGE)
        if huge == len(self.pinned_kinds):
            return "pinned buffers on 2 MiB huge pages"
        if self.pinned_fallback is not None:
            share = f"{huge} of {len(self.pinned_kinds)} workers' " if huge else ""
            return f"{share}pinned buffers from cuMemHostAlloc (4 KiB pages): {self.pinned_fallback}"
        if self.spec.huge_pages is False:
            return "pinned buffers from cuMemHostAlloc (4 KiB pages, --4k-pages)"
        return f"pinned buffers from cuMemHostAlloc (4 KiB pages): transparent huge pages {host.thp_mode() or 'absent'}"

    def pinned_cpus(self, index: int, gpu: int) -> list[int] | None:
        """CPUs to allocate worker ``index``'s pinned buffers from, so their pages sit on the right NUMA node.

        With --cpus or --numa: the worker's own CPU or node (it reads into them). Otherwise, on a machine
        of several NUMA nodes: the CPUs local to the worker's GPU (the copy engine reads them over PCIe).
        On one node there is nothing to choose: None.
        """
        if self.spec.numa_node is not None:
            self.pinned_placement = f"NUMA node {self.spec.numa_node} (--numa)"
            return numa_cpus(self.spec.numa_node)
        cpus = self.worker_cpus()
        if cpus:
            self.pinned_placement = "each worker's CPU (--cpus)"
            return [cpus[index]]
        if len(gpu_setup.numa_nodes()) < 2:
            return None
        node, local = gpu_setup.gpu_local_cpus(gpu)
        if not local:
            return None
        self.pinned_placement = "the GPU's NUMA node" + (f" ({node})" if node is not None else "")
        return local

    def release_gpu(self) -> None:
        self.gpu_workers = []
        self.resources.release()

    def environment(self) -> EngineEnvironment:
        env = super().environment()
        env.update(gpu_environment(self.worker_gpus))
        if self.host_buffers():
            env["pinned_buffers_placed_on"] = (
                self.pinned_placement or "not placed (one NUMA node, or the GPU's is unknown)"
            )
            kinds = sorted(set(self.pinned_kinds)) or [
                PINNED_HUGE if host.host_buffers_on_huge_pages(self.spec) else PINNED_SMALL
            ]
            env["pinned_buffers"] = " and ".join(kinds)
            if self.pinned_fallback:
                env["pinned_buffers_fallback"] = self.pinned_fallback
            # in the host path's words, so that comparisons name the paths whose buffers were on 4 KiB pages
            host.set_buffer_pages(env, kinds == [PINNED_HUGE], default=self.spec.huge_pages is None)
        return env


def gpu_environment(worker_gpus: Sequence[int | None]) -> EngineEnvironment:
    """GPUs, CUDA and cuda-python versions, and the measured link ceilings where known."""
    gpus = sorted({g for g in worker_gpus if g is not None})
    entries: list[GpuEntry] = []
    env: EngineEnvironment = {
        "cuda_driver": gpu_setup.cuda_driver_version(),
        "cuda_python": gpu_setup.cuda_python_version(),
        "gpus": entries,
    }
    ceilings = {}
    with contextlib.suppress(Exception):
        from xferscope.gpus import cached_link_ceiling

        ceilings = {g: cached_link_ceiling(g) for g in gpus}
    for g in gpus:
        entry: GpuEntry = {"index": g}
        with contextlib.suppress(Exception):
            entry["name"] = gpu_setup.device_name(g)
        ceiling = ceilings.get(g)
        if ceiling and "link_ceiling_h2d_gb_s" in ceiling:
            entry["link_ceiling_h2d_gb_s"] = ceiling["link_ceiling_h2d_gb_s"]
        if ceiling and "link_ceiling_d2h_gb_s" in ceiling:
            entry["link_ceiling_d2h_gb_s"] = ceiling["link_ceiling_d2h_gb_s"]
        entries.append(entry)
    return env
