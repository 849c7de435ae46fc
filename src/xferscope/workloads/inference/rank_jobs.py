"""``workload kvcache --mpi`` and ``workload load --mpi``: what each declares for its job across the ranks
(``DataSetJob``, made a ``RanksJob`` by ``data_set_job``). ``kvcache``: the job's requests spread over the ranks
(rank *i* of *N* makes requests *i*, *i + N*, ...), the restore times over every request of every rank. ``load``:
every rank loads the model, its own copy (``--share copy``) or its tensor-parallel share (``--share tp``: each
tensor's rows split over every rank's GPUs, as ``--gpu`` splits them on one host); the time to load is the slowest
rank's."""

from __future__ import annotations

from xferscope.workloads.common.across_ranks import DataSetJob, data_set_job
from xferscope.workloads.inference import kvcache_data, load_data
from xferscope.workloads.inference.kvcache import KvSession
from xferscope.workloads.inference.kvcache_cluster import cluster_result as kv_cluster
from xferscope.workloads.inference.load import LoadSession
from xferscope.workloads.inference.load_cluster import cluster_result as load_cluster

KVCACHE_JOB = data_set_job(
    DataSetJob(
        session=KvSession,
        named=lambda spec: f"model {spec.model.name}",
        given=lambda spec: spec.cache is not None,
        data="cache",
        adopt=kvcache_data.adopt,
        part=lambda request, rank, ranks: (rank, ranks),
        merge=lambda everyone, facts, request: kv_cluster(everyone, facts),
    )
)
LOAD_JOB = data_set_job(
    DataSetJob(
        session=LoadSession,
        named=lambda spec: f"model {spec.model.name}" if spec.model is not None else f"files {spec.files}",
        given=lambda spec: spec.files is not None,
        data="shards",
        adopt=load_data.adopt,
        part=lambda request, rank, ranks: (rank, ranks) if request.share == "tp" else (0, 1),
        merge=lambda everyone, facts, request: load_cluster(everyone, facts, request.share),
    )
)
