"""Where joblib's parallel jobs run: local processes, or a Dask or Ray cluster.

The protocol's parallel work (each fold's candidate sets, then every (fold, method) pair) is
written once with ``joblib.Parallel``; :func:`joblib_engine` chooses the engine that runs it,
by configuration (``task.backend``, ``task.address``), off by default:

- ``"processes"``: joblib's own worker processes on this machine (loky);
- ``"dask"``: the workers of a Dask cluster, ``distributed.Client(address)``; without an
  address, a local cluster of ``n_workers`` processes is started for the block and closed after;
- ``"ray"``: the workers of a Ray cluster, ``ray.init(address)`` and Ray's joblib backend;
  without an address, a local Ray instance with ``n_workers`` CPUs is started and shut down.

A job's outcome does not depend on where it runs: every job is seeded by its fold and method,
so a distributed run gives the serial run's results (tested on local clusters).

A cluster address that does not answer within ``connect_timeout`` seconds (5 by default) is a
:class:`~tagtorch.errors.ConfigError` naming the address's config key and value (one
line and exit status 2 from ``python -m tagtorch.train``), not Dask's 30-second traceback nor
Ray's minutes of retries. Accepting a connection is not answering: a Ray address
(``host:port``, ``ray://host:port``; gRPC) must answer HTTP/2's connection preface with its
SETTINGS frame (:func:`check_answers`), and a Dask client must be connected, handshake and
registration included, within the time (:func:`_within`: a listener that accepts and then
says nothing would otherwise hold the run for minutes).
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from tagtorch.errors import ConfigError
from tagtorch.extras import require_extra

log = logging.getLogger(__name__)

__all__ = ["BACKENDS", "CONNECT_TIMEOUT", "HTTP2_PREFACE", "array_bytes", "check_answers",
           "dask_client", "joblib_engine", "ray_init"]

T = TypeVar("T")

BACKENDS = ("processes", "dask", "ray")
"""The engines :func:`joblib_engine` knows."""

CONNECT_TIMEOUT = 5.0
"""Seconds a cluster's address has to answer before the run stops (``connect_timeout``)."""

HTTP2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])
"""HTTP/2's client connection preface and an empty SETTINGS frame (RFC 9113, 3.4 and 6.5):
a gRPC server (Ray's GCS, Ray Client) answers with a SETTINGS frame of its own."""

_SETTINGS_FRAME = 4
"""The type of HTTP/2's SETTINGS frame (the fourth byte of a frame header)."""


def _unreachable(key: str, address: str, what: str, timeout: float, reason: object) -> Exception:
    """The error of an address that did not answer: a ``ConfigError`` naming ``key``."""
    text = str(reason).strip()
    first = text.splitlines()[0] if text else type(reason).__name__
    return ConfigError(key, address,
                       f"the address of {what} that answers within {timeout:g} s ({first})")


def host_port(address: str) -> tuple[str, int] | None:
    """The host and port of a cluster address, or None where it names none (``auto``).

    Example:
        >>> host_port("ray://10.0.0.1:10001"), host_port("[::1]:6379"), host_port("auto")
        (('10.0.0.1', 10001), ('::1', 6379), None)
    """
    rest = address.split("://", 1)[-1].rstrip("/")
    host, _, port = rest.rpartition(":")
    if not host or not port.isdigit():
        return None
    return host.strip("[]"), int(port)


def check_answers(address: str, what: str, timeout: float = CONNECT_TIMEOUT,
                  key: str = "address") -> None:
    """Checks that a gRPC (HTTP/2) server answers at ``address`` within ``timeout`` s.

    The check connects, sends :data:`HTTP2_PREFACE` and reads the server's first frame
    header, which must be a SETTINGS frame; the whole exchange has ``timeout`` seconds.

    Args:
        address: ``host:port``, with a scheme or not (``ray://``); an address without a port
            (``auto``) is not checked.
        what: what should answer there, for the message (``"a Ray cluster"``).
        timeout: seconds for the connection and the answer together.
        key: the config key the address was given under, for the message.

    Raises:
        ConfigError: nothing answered, or not HTTP/2; names ``key``, the address and why.
    """
    target = host_port(address)
    if target is None:
        return
    deadline = time.monotonic() + timeout
    try:
        with socket.create_connection(target, timeout=timeout) as connection:
            connection.sendall(HTTP2_PREFACE)
            header = b""
            while len(header) < 9:
                connection.settimeout(max(deadline - time.monotonic(), 1e-3))
                chunk = connection.recv(9 - len(header))
                if not chunk:
                    raise ConnectionError("it closed the connection without a word")
                header += chunk
    except OSError as error:  # refused, timed out, unknown host, closed, unreachable network
        raise _unreachable(key, address, what, timeout, error) from None
    if header[3] != _SETTINGS_FRAME:
        raise _unreachable(key, address, what, timeout, "it does not speak gRPC (HTTP/2)")


def _within(seconds: float, call: Callable[[], T]) -> T:
    """``call()``'s result, or TimeoutError when it has not returned after ``seconds``.

    The call runs in a daemon thread, which is left behind on a timeout (a client stuck on
    a silent socket cannot be interrupted; a daemon thread does not hold the process).

    Raises:
        TimeoutError: the call did not return in time; what the call raised, as it raised it.
    """
    outcome: list[Any] = []

    def run() -> None:
        try:
            outcome.append((True, call()))
        except BaseException as error:  # handed to the caller's thread
            outcome.append((False, error))

    worker = threading.Thread(target=run, daemon=True, name="tagtorch-connect")
    worker.start()
    worker.join(seconds)
    if not outcome:
        raise TimeoutError(f"no answer within {seconds:g} s")
    done, value = outcome[0]
    if not done:
        raise value
    return value


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
def dask_client(address: str | None = None, n_workers: int | None = None,
                connect_timeout: float = CONNECT_TIMEOUT,
                key: str = "address") -> Iterator[Any]:
    """A ``distributed.Client`` of the Dask cluster at ``address`` for the block.

    Without an address, a local cluster of ``n_workers`` worker processes (one thread each;
    None: one per core) is started for the block and closed after it.

    Args:
        address: the scheduler (``tcp://host:8786``); None: a local cluster.
        n_workers: workers of a local cluster.
        connect_timeout: seconds the scheduler has to answer.
        key: the config key ``address`` was given under, named in the error.

    Raises:
        ImportError: ``dask[distributed]`` is not installed.
        ConfigError: the scheduler did not answer within ``connect_timeout`` seconds.
    """
    try:
        from distributed import Client, LocalCluster
    except ModuleNotFoundError as missing:  # the [scale] extra
        require_extra("scale", missing)

    cluster = None
    if address is None:
        cluster = LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True,
                               dashboard_address=None)
        client = Client(cluster)
    else:
        try:  # a second's grace for the client to report its own timeout
            client = _within(connect_timeout + 1.0,
                             lambda: Client(address, timeout=connect_timeout))
        except OSError as error:  # distributed's "Timed out trying to connect to ...", ours
            raise _unreachable(key, address, "a Dask scheduler", connect_timeout,
                               error) from None
    try:
        yield client
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


def ray_init(address: str | None = None, num_cpus: int | None = None,
             num_gpus: int | None = None, connect_timeout: float = CONNECT_TIMEOUT,
             key: str = "address") -> None:
    """Joins the Ray cluster at ``address``, or starts a local instance (``address`` None).

    Args:
        address: ``host:port``, ``ray://host:port`` or ``auto``; None: a local instance.
        num_cpus: CPUs of a local instance (None: all cores; unused with an address).
        num_gpus: GPUs of a local instance (None: all; unused with an address).
        connect_timeout: seconds the cluster has to answer.
        key: the config key ``address`` was given under, named in the error.

    Raises:
        ConfigError: the cluster did not answer (:func:`check_answers`), or ``auto`` found
            none.
    """
    try:
        import ray
    except ModuleNotFoundError as missing:  # the [scale] extra
        require_extra("scale", missing)

    if address is not None:
        check_answers(address, "a Ray cluster", connect_timeout, key)
    local = address is None
    try:
        ray.init(address=address, num_cpus=num_cpus if local else None,
                 num_gpus=num_gpus if local else None, include_dashboard=False,
                 log_to_driver=False)
    except ConnectionError as error:  # "auto" with no running cluster
        raise _unreachable(key, str(address), "a Ray cluster", connect_timeout, error) from None


@contextlib.contextmanager
def joblib_engine(backend: str = "processes", address: str | None = None,
                  n_workers: int | None = None, connect_timeout: float = CONNECT_TIMEOUT,
                  key: str = "task.address") -> Iterator[None]:
    """Runs the ``joblib.Parallel`` calls of the block on ``backend``.

    Args:
        backend: ``"processes"``, ``"dask"`` or ``"ray"`` (module docstring).
        address: the cluster to join (a Dask scheduler ``tcp://host:8786``, a Ray address
            ``ray://host:10001`` or ``auto``); None: a local cluster for the block.
        n_workers: workers of a local cluster (None: one per core).
        connect_timeout: seconds the cluster at ``address`` has to answer.
        key: the config key ``address`` was given under, named in the error.

    Raises:
        ValueError: another backend.
        ConfigError: the cluster at ``address`` did not answer within ``connect_timeout``.
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
        with dask_client(address, n_workers, connect_timeout, key) as client, \
                parallel_config(backend="dask"):
            log.info("joblib jobs on the Dask cluster %s", client.scheduler.address)
            yield
        return
    try:
        import ray
        from ray.util.joblib import register_ray
    except ModuleNotFoundError as missing:  # the [scale] extra
        require_extra("scale", missing)

    started = not ray.is_initialized()
    if started:
        ray_init(address, n_workers, connect_timeout=connect_timeout, key=key)
    register_ray()
    log.info("joblib jobs on the Ray cluster %s", address or "started locally")
    try:
        with parallel_config(backend="ray"):
            yield
    finally:
        if started:
            ray.shutdown()
