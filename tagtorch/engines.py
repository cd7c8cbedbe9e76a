"""Where joblib's parallel jobs run: local processes, or a Dask or Ray cluster.

The protocol's parallel work (each fold's candidate sets, then every (fold, method) pair) is
written once with ``joblib.Parallel``; :func:`joblib_engine` chooses the engine that runs it,
by configuration (``task.protocol.backend``, ``task.protocol.address``), off by default:

- ``"processes"``: joblib's own worker processes on this machine (loky);
- ``"dask"``: the workers of a Dask cluster, ``distributed.Client(address)``; without an
  address, a local cluster of ``n_workers`` processes is started for the block and closed after;
- ``"ray"``: the workers of a Ray cluster, ``ray.init(address)`` and Ray's joblib backend;
  without an address, a local Ray instance with ``n_workers`` CPUs is started and shut down.

A job's outcome does not depend on where it runs: every job is seeded by its fold and method,
so a distributed run gives the serial run's results (tested on local clusters).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator

log = logging.getLogger(__name__)

__all__ = ["BACKENDS", "joblib_engine"]

BACKENDS = ("processes", "dask", "ray")
"""The engines :func:`joblib_engine` knows."""


@contextlib.contextmanager
def joblib_engine(backend: str = "processes", address: str | None = None,
                  n_workers: int | None = None) -> Iterator[None]:
    """Runs the ``joblib.Parallel`` calls of the block on ``backend``.

    Args:
        backend: ``"processes"``, ``"dask"`` or ``"ray"`` (module docstring).
        address: the cluster to join (a Dask scheduler ``tcp://host:8786``, a Ray address
            ``ray://host:10001`` or ``auto``); None: a local cluster for the block.
        n_workers: workers of a local cluster (None: one per core).

    Raises:
        ValueError: another backend.
        ImportError: the engine's package is not installed (``pip install "dask[distributed]"``
            or ``pip install "ray[default]"``).
    """
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    if backend == "processes":
        yield
        return
    from joblib import parallel_config

    if backend == "dask":
        from distributed import Client, LocalCluster

        cluster = None
        if address is None:
            cluster = LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True,
                                   dashboard_address=None)
        client = Client(address or cluster)
        log.info("joblib jobs on the Dask cluster %s", client.scheduler.address)
        try:
            with parallel_config(backend="dask"):
                yield
        finally:
            client.close()
            if cluster is not None:
                cluster.close()
        return
    import ray
    from ray.util.joblib import register_ray

    started = not ray.is_initialized()
    if started:
        ray.init(address=address, num_cpus=n_workers if address is None else None,
                 include_dashboard=False, log_to_driver=False)
    register_ray()
    log.info("joblib jobs on the Ray cluster %s", address or "started locally")
    try:
        with parallel_config(backend="ray"):
            yield
    finally:
        if started:
            ray.shutdown()
