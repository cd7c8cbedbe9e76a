"""The job side of an Optuna sweep: the trial a run belongs to, its heartbeat and its pruning.

The sweeper (``hydra/sweeper=tagtorch_optuna``, :mod:`hydra_plugins.tagtorch_sweeper`) asks the
study for trials and launches one job per trial with the trial's parameters and a ``sweep``
node: ``{storage, study, trial, time_limit}``. :func:`trial_of` opens that trial in the job,
wherever the job runs (the study lives in an Optuna RDB storage: a SQLite file on one machine,
any SQLAlchemy URL for many); while the job runs, a heartbeat thread marks the trial alive, so
that a sweep restarted after a kill fails the trials whose jobs died
(``optuna.storages.fail_stale_trials``) and runs them again.

Pruning (Optuna's median pruner by default): every model trained by
:func:`tagtorch.lightning_fit.fit_best` (the neural rankers, Do-Rank and the other factor models)
gets a :class:`PruningCallback` that reports its monitored validation value after each epoch
(one step per epoch, counted over the whole job) and stops the job with
:class:`optuna.TrialPruned` when the pruner says so.

A job over its ``time_limit`` (seconds) is stopped by :class:`TrialTimeoutError` (a ``SIGALRM``
in the job's main thread: it lands between Python operations, so a long call into a library
ends first), and the sweeper records the trial as failed with that reason.
"""

from __future__ import annotations

import contextlib
import logging
import math
import signal
import threading
from collections.abc import Iterator, Mapping
from typing import Any

import pytorch_lightning as pl

log = logging.getLogger(__name__)

__all__ = ["PruningCallback", "TrialTimeoutError", "active_trial", "make_pruner",
           "pruning_callbacks", "trial_of"]

HEARTBEAT_SECONDS = 20.0
"""How often a running job marks its trial alive, unless ``sweep.heartbeat`` says otherwise
(the sweeper's grace period is 3 times it)."""

_ACTIVE: dict[str, Any] = {}


class TrialTimeoutError(RuntimeError):
    """A sweep job ran over its time limit."""


def make_pruner(settings: Mapping[str, Any]) -> Any:
    """The Optuna pruner of a sweep's settings, which the sweeper keeps in the study.

    Args:
        settings: ``name`` (``"median"``, the default, or ``"none"``), ``n_startup_trials``
            (finished trials before any pruning) and ``n_warmup_steps`` (epochs reported by a
            trial before it may be pruned).

    Example:
        >>> type(make_pruner({"name": "median", "n_startup_trials": 3})).__name__
        'MedianPruner'
    """
    import optuna

    name = settings.get("name", "median")
    if name == "none":
        return optuna.pruners.NopPruner()
    if name != "median":
        raise ValueError(f"hydra.sweeper.pruner must be median or none, got {name!r}")
    return optuna.pruners.MedianPruner(n_startup_trials=int(settings.get("n_startup_trials", 5)),
                                       n_warmup_steps=int(settings.get("n_warmup_steps", 2)))


def active_trial() -> Any | None:
    """The ``optuna.Trial`` this process works for, or None outside a sweep."""
    return _ACTIVE.get("trial")


@contextlib.contextmanager
def trial_of(sweep: Mapping[str, Any] | None) -> Iterator[Any | None]:
    """Opens the sweep trial a job runs (None: not in a sweep) for the ``with`` block.

    Args:
        sweep: the job's ``sweep`` node: ``storage`` (URL), ``study`` (name), ``trial`` (its
            number), ``time_limit`` (seconds, or None) and ``heartbeat`` (seconds).

    Yields:
        The ``optuna.Trial`` (reports and pruning go to it), or None.
    """
    if not sweep or sweep.get("trial") is None:
        yield None
        return
    import optuna

    every = float(sweep.get("heartbeat") or HEARTBEAT_SECONDS)
    # Optuna's hints say int; it compares them with float seconds, and tests beat every 0.5 s
    storage = optuna.storages.RDBStorage(str(sweep["storage"]), heartbeat_interval=every,  # type: ignore[arg-type]
                                         grace_period=3 * every)  # type: ignore[arg-type]
    study = optuna.load_study(study_name=str(sweep["study"]), storage=storage)
    study.pruner = make_pruner(study.user_attrs.get("pruner") or {})  # the sweeper's choice
    trial_id = storage.get_trial_id_from_study_id_trial_number(study._study_id,
                                                               int(sweep["trial"]))
    trial = optuna.trial.Trial(study, trial_id)
    stop = threading.Event()

    def beat() -> None:
        while not stop.wait(every):
            try:
                storage.record_heartbeat(trial_id)
            except Exception as error:
                log.warning("sweep heartbeat of trial %s: %s", sweep["trial"], error)

    storage.record_heartbeat(trial_id)
    thread = threading.Thread(target=beat, name="sweep-heartbeat", daemon=True)
    thread.start()
    limit = sweep.get("time_limit")
    previous = None
    if limit and threading.current_thread() is threading.main_thread():
        def over_time(signum: int, frame: Any) -> None:
            raise TrialTimeoutError(f"trial {sweep['trial']} ran over its time limit of {limit} s")

        previous = signal.signal(signal.SIGALRM, over_time)
        signal.alarm(max(1, math.ceil(float(limit))))
    _ACTIVE.update(trial=trial, steps=0)
    try:
        yield trial
    finally:
        if previous is not None:
            signal.alarm(0)
            signal.signal(signal.SIGALRM, previous)
        _ACTIVE.clear()
        stop.set()
        thread.join(timeout=5)


class PruningCallback(pl.Callback):
    """Reports ``monitor`` after each validation to the sweep trial; prunes when told to.

    Args:
        trial: the ``optuna.Trial``.
        monitor: the logged validation value (maximized, as :func:`fit_best` maximizes it).
    """

    def __init__(self, trial: Any, monitor: str) -> None:
        self.trial, self.monitor = trial, monitor

    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        """Reports the epoch's value; raises ``optuna.TrialPruned`` if the pruner says so."""
        if trainer.sanity_checking or self.monitor not in trainer.callback_metrics:
            return
        import optuna

        value = float(trainer.callback_metrics[self.monitor])
        step = _ACTIVE.get("steps", 0)
        _ACTIVE["steps"] = step + 1
        self.trial.report(value, step)
        if self.trial.should_prune():
            raise optuna.TrialPruned(f"{self.monitor} {value:.4f} at step {step}: pruned")


def pruning_callbacks(monitor: str) -> list[pl.Callback]:
    """``[PruningCallback]`` inside a sweep trial, else ``[]`` (for :func:`fit_best`)."""
    trial = active_trial()
    return [] if trial is None else [PruningCallback(trial, monitor)]
