"""``hydra/launcher=tagtorch_ray``: each job of a multirun is a task on a Ray cluster.

Sweep trials (``hydra/sweeper=tagtorch_optuna`` with ``hydra.sweeper.n_jobs > 1``) then run at
once on the cluster's workers, as many as its resources allow: each job asks Ray for
``cpus_per_job`` CPUs and ``gpus_per_job`` GPUs (fractions share a GPU: Ray sets each task's
``CUDA_VISIBLE_DEVICES``). Without ``address``, a local Ray instance is started with
``num_cpus`` CPUs at the first launch and kept for the next ones (a sweep launches a batch of
jobs at a time), so that its workers, with their imports and compiled kernels, are reused;
Ray shuts it down when the sweep's process exits. An ``address`` where no cluster answers
within ``connect_timeout`` seconds ends the sweep with one line naming ``hydra.launcher.address``
and exit status 2 (:func:`tagtorch.engines.ray_init`).

A job runs as under Hydra's basic launcher: its sweep configuration is composed here, sent to
the task with Hydra's global state (``Singleton`` state), and the task calls Hydra's ``run_job``,
which writes the job's folder, logs and ``.hydra/``; its ``JobReturn`` comes back. The jobs'
outputs go to ``hydra.sweep.dir``, which must be a folder every Ray worker can reach (one
machine, or a shared file system).

Deviation: Hydra's ``hydra-ray-launcher`` is not used. Its last release requires
``cloudpickle<3``, which the Dask engine's ``distributed`` (``cloudpickle>=3``) excludes from
the same environment.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hydra.core.hydra_config import HydraConfig
from hydra.core.singleton import Singleton
from hydra.core.utils import JobReturn, configure_log, filter_overrides, run_job, setup_globals
from hydra.plugins.launcher import Launcher
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, open_dict

from hydra_plugins.tagtorch_sweeper.sweeper import one_line_errors
from tagtorch.engines import CONNECT_TIMEOUT, ray_init
from tagtorch.extras import require_extra

log = logging.getLogger(__name__)


def _run_job(hydra_context: HydraContext, sweep_config: DictConfig,
             task_function: TaskFunction, singleton_state: dict[Any, Any]) -> JobReturn:
    """One job on a Ray worker: Hydra's global state, then ``run_job`` (module docstring)."""
    setup_globals()
    Singleton.set_state(singleton_state)
    HydraConfig.instance().set_config(sweep_config)
    return run_job(hydra_context=hydra_context, task_function=task_function,
                   config=sweep_config, job_dir_key="hydra.sweep.dir",
                   job_subdir_key="hydra.sweep.subdir")


class TagtorchRayLauncher(Launcher):
    """Runs a multirun's jobs as Ray tasks (module docstring; settings in ``config.py``)."""

    def __init__(self, address: str | None = None, num_cpus: int | None = None,
                 num_gpus: int | None = None, cpus_per_job: float = 1.0,
                 gpus_per_job: float = 0.0, connect_timeout: float = CONNECT_TIMEOUT) -> None:
        if cpus_per_job <= 0 or gpus_per_job < 0 or connect_timeout <= 0:
            raise ValueError(f"hydra.launcher: cpus_per_job and connect_timeout must be > 0 and "
                             f"gpus_per_job >= 0, got {cpus_per_job}, {connect_timeout} and "
                             f"{gpus_per_job}")
        self.address, self.num_cpus, self.num_gpus = address, num_cpus, num_gpus
        self.cpus_per_job, self.gpus_per_job = cpus_per_job, gpus_per_job
        self.connect_timeout = connect_timeout
        self.config: DictConfig | None = None
        self.hydra_context: HydraContext | None = None
        self.task_function: TaskFunction | None = None

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction,
              config: DictConfig) -> None:
        """Keeps what the jobs need (Hydra calls it before ``launch``)."""
        self.config, self.hydra_context, self.task_function = config, hydra_context, task_function

    def launch(self, job_overrides: Sequence[Sequence[str]],
               initial_job_idx: int) -> Sequence[JobReturn]:
        """Runs one Ray task per job and returns their ``JobReturn`` in the jobs' order."""
        try:
            import ray
        except ModuleNotFoundError as missing:  # the [scale] extra
            require_extra("scale", missing)

        assert self.config is not None and self.hydra_context is not None
        assert self.task_function is not None
        setup_globals()
        configure_log(self.config.hydra.hydra_logging, self.config.hydra.verbose)
        sweep_dir = Path(str(self.config.hydra.sweep.dir))
        sweep_dir.mkdir(parents=True, exist_ok=True)
        if not ray.is_initialized():
            with one_line_errors():  # an address where no cluster answers
                ray_init(self.address, self.num_cpus, self.num_gpus, self.connect_timeout,
                         key="hydra.launcher.address")
        remote = ray.remote(num_cpus=self.cpus_per_job, num_gpus=self.gpus_per_job,
                            max_retries=0)(_run_job)
        log.info("Ray launcher: %d jobs on %s, %s CPU and %s GPU each, into %s",
                 len(job_overrides), self.address or "a local Ray instance",
                 self.cpus_per_job, self.gpus_per_job, sweep_dir)
        pending = []
        for idx, overrides in enumerate(job_overrides, start=initial_job_idx):
            log.info("\t#%d : %s", idx, " ".join(filter_overrides(overrides)))
            sweep_config = self.hydra_context.config_loader.load_sweep_config(
                self.config, list(overrides))
            with open_dict(sweep_config):
                sweep_config.hydra.job.id = f"ray_{idx}"
                sweep_config.hydra.job.num = idx
            pending.append(remote.remote(self.hydra_context, sweep_config,
                                         self.task_function, Singleton.get_state()))
        return [ray.get(job) for job in pending]
