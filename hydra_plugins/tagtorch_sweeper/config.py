"""The settings of the ``tagtorch_optuna`` sweeper, registered in Hydra's config store.

No ``from __future__ import annotations`` here: Hydra executes plugin modules outside
``sys.modules``, where a dataclass cannot resolve string annotations, and OmegaConf reads the
field types.
"""

from dataclasses import dataclass, field
from typing import Any

from hydra.core.config_store import ConfigStore


@dataclass
class TagtorchOptunaSweeperConf:
    """``hydra.sweeper`` with ``hydra/sweeper=tagtorch_optuna`` (``conf/hparams_search/``).

    ``params`` maps config keys to Hydra's sweep syntax: ``interval(a, b)`` (float),
    ``tag(log, interval(a, b))`` (log scale), ``range(a, b)`` / ``int(interval(a, b))``
    (integers), ``choice(x, y, ...)`` (categorical).
    """

    _target_: str = "hydra_plugins.tagtorch_sweeper.sweeper.TagtorchOptunaSweeper"
    direction: str = "maximize"
    study_name: str = "tagtorch"
    storage: str | None = None  # None: sqlite:///{hydra.sweep.dir}/optuna.db
    n_trials: int = 20  # finished trials (complete, pruned or failed) the study should reach
    n_jobs: int = 1  # trials launched together (a parallel launcher runs them at once)
    seed: int | None = 0  # of the sampler
    sampler: str = "tpe"  # tpe, random or grid
    pruner: str = "median"  # median or none
    n_startup_trials: int = 5  # the median pruner waits for this many finished trials
    n_warmup_steps: int = 2  # and for this many reported epochs within a trial
    time_limit: float | None = None  # seconds per trial (None: no limit)
    devices: list[Any] | None = None  # e.g. [0] or [0, 1]: trials are spread over them
    trials_per_device: int = 1  # concurrent trials per device
    device_key: str = "trainer.devices"  # the override each trial's device is given under
    heartbeat_seconds: float = 20.0  # a job beats this often; 3 beats missed: its trial died
    rerun_overrides: list[str] = field(default_factory=list)  # added to best.yaml's command
    params: dict[str, str] = field(default_factory=dict)


ConfigStore.instance().store(group="hydra/sweeper", name="tagtorch_optuna",
                             node=TagtorchOptunaSweeperConf, provider="tagtorch")
