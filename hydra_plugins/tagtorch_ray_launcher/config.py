"""The settings of the ``tagtorch_ray`` launcher, registered in Hydra's config store.

No ``from __future__ import annotations`` here (see ``tagtorch_sweeper/config.py``).
"""

from dataclasses import dataclass

from hydra.core.config_store import ConfigStore


@dataclass
class TagtorchRayLauncherConf:
    """``hydra.launcher`` with ``hydra/launcher=tagtorch_ray``.

    Each job (a sweep trial) is one Ray task asking for ``cpus_per_job`` CPUs and
    ``gpus_per_job`` GPUs: Ray runs as many at once as the cluster's resources allow, so
    ``gpus_per_job: 0.5`` puts two trials on each GPU.
    """

    _target_: str = "hydra_plugins.tagtorch_ray_launcher.launcher.TagtorchRayLauncher"
    address: str | None = None  # a Ray cluster ("auto", "ray://host:10001"); None: local
    num_cpus: int | None = None  # CPUs of a local Ray instance (None: all cores)
    num_gpus: int | None = None  # GPUs of a local Ray instance (None: all)
    cpus_per_job: float = 1.0
    gpus_per_job: float = 0.0  # e.g. 0.5: two trials share one GPU
    connect_timeout: float = 5.0  # seconds the cluster at address has to answer


ConfigStore.instance().store(group="hydra/launcher", name="tagtorch_ray",
                             node=TagtorchRayLauncherConf, provider="tagtorch")
