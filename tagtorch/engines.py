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
from typing import Any

log = logging.getLogger(__name__)

__all__ = ["BACKENDS", "array_bytes", "dask_client", "joblib_engine"]

BACKENDS = ("processes", "dask", "ray")
"""The engines :func:`joblib_engine` knows."""


def array_bytes(obj: Any, _seen: set[int] | None = None) -> int:
    """Bytes of the arrays and tensors reachable from ``obj`` (attributes, containers).

    What a fitted model's ``__sizeof__`` reports, so that joblib's Dask backend, which
    scatters an argument to the workers once when ``sizeof`` says it is large (and otherwise
    sends it inside every task), ships a fitted candidate generator once.

    Example:
        >>> import numpy as np
        >>> array_bytes({"a": np.zeros(10), "b": [np.zeros(5, dtype=np.int32)]})
        100
    """
    import numpy as np
    import torch

    seen = set() if _seen is None else _seen
    if id(obj) in seen:
        return 0
    seen.add(id(obj))
    if isinstance(obj, torch.Tensor):
        return obj.untyped_storage().nbytes()
    if isinstance(obj, np.ndarray):
        return obj.nbytes
    if isinstance(obj, dict):
        return sum(array_bytes(value, seen) for value in obj.values())
    if isinstance(obj, (list, tuple, set, frozenset)):
        return sum(array_bytes(value, seen) for value in obj)
    if hasattr(obj, "__dict__") and not isinstance(obj, type):
        return array_bytes(vars(obj), seen)
    return 0


@contextlib.contextmanager
def dask_client(address: str | None = None, n_workers: int | None = None) -> Iterator[Any]:
    """A ``distributed.Client`` of the Dask cluster at ``address`` for the block.

    Without an address, a local cluster of ``n_workers`` worker processes (one thread each;
    None: one per core) is started for the block and closed after it.

    Raises:
        ImportError: ``dask[distributed]`` is not installed.
    """
    from distributed import Client, LocalCluster

    cluster = None
    if address is None:
        cluster = LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True,
                               dashboard_address=None)
    client = Client(address or cluster)
    try:
        yield client
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


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
        with dask_client(address, n_workers) as client, parallel_config(backend="dask"):
            log.info("joblib jobs on the Dask cluster %s", client.scheduler.address)
            yield
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
