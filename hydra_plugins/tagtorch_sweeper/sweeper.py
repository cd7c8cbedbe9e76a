"""A Hydra sweeper on current Optuna: RDB studies that resume, pruning, failures, time limits.

``python -m tagtorch.train -m +experiment=compare_lastfm hparams_search=lambdamart`` selects it
(``hydra/sweeper: tagtorch_optuna`` in ``conf/hparams_search/*.yaml``). It asks an Optuna study
for trials (ask-and-tell), launches one job per trial through Hydra's launcher with the trial's
parameters and its ``sweep`` node (:mod:`tagtorch.sweeps`: the job reports epochs for pruning and
keeps the trial's heartbeat), and tells the study each job's outcome:

- the job's return value (``optimized_metric``) completes the trial; a NaN, or a job that
  raised, fails it with the reason in the trial's ``failure`` attribute (time limit, out of
  memory, any exception), and the sweep goes on; :class:`optuna.TrialPruned` prunes it;
- the study lives in an RDB storage, a SQLite file in the sweep folder by default or any
  SQLAlchemy URL (``hydra.sweeper.storage``): a sweep started again into the same folder (or
  with the same storage and study name) continues to ``n_trials`` finished trials; a trial
  whose job died (no heartbeat for a minute) is failed and asked again with the same
  parameters (Optuna's ``RetryFailedTrialCallback``); several sweep processes, on one machine
  or many, can work on one study: each job is numbered by its trial (``hydra.job.num`` is the
  trial's number, unique in the study), so its folder and log are its trial's alone, and a
  SQLite study is created under a file lock beside its database (``optuna.db.lock``), so that
  sweeps started at once into a new folder do not race to create its tables; a storage that
  cannot be opened or written (a bad URL, a missing or read-only folder, a file that is not a
  database) ends the sweep with one line naming ``hydra.sweeper.storage`` and exit status 2;
- a sweep whose ``optimized_metric`` is a test metric (tag recommendation evaluated on T, a
  test metric of item recommendation or resource ranking instead of its ``val_*`` score) is
  refused before any trial, with one line naming it and exit status 2
  (:func:`tagtorch.train.check_sweep_metric`);
- after each batch of trials it writes, in the sweep folder, ``trials.csv``, the optimization
  history, the parameter importances and a parallel-coordinates plot (PNG), and ``best.yaml``:
  the best trial's value, parameters and the command that reruns it on the test folds.

Why not ``hydra-optuna-sweeper``: its last release pins ``optuna<3`` and gives the job no
handle on its trial, so a job cannot report epochs for pruning; this sweeper keeps its
configuration surface (``params`` in Hydra's sweep syntax, ``direction``, ``storage``,
``study_name``, ``n_trials``, ``n_jobs``) on Optuna's current ask-and-tell interface.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import math
import os
import shlex
import sys
import time
import warnings
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

try:
    import optuna
    import sqlalchemy
except ModuleNotFoundError as missing:  # the [sweep] extra: the sweeper says so when used
    from tagtorch.extras import MissingModule

    optuna = MissingModule("sweep", missing.name or "optuna")  # type: ignore[assignment]
    sqlalchemy = MissingModule("sweep", missing.name or "sqlalchemy")  # type: ignore[assignment]
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import (
    ChoiceSweep,
    IntervalSweep,
    Override,
    RangeSweep,
    Transformer,
)
from hydra.core.plugins import Plugins
from hydra.core.utils import JobStatus
from hydra.plugins.sweeper import Sweeper
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, OmegaConf

from tagtorch.errors import ConfigError
from tagtorch.storage import atomic_write
from tagtorch.sweeps import make_pruner
from tagtorch.train import check_sweep_metric, user_error

log = logging.getLogger(__name__)

def storage_errors() -> tuple[type[BaseException], ...]:
    """What opening or writing a storage raises when its URL, file or folder is at fault."""
    return (sqlalchemy.exc.SQLAlchemyError, optuna.exceptions.StorageInternalError, OSError,
            ImportError)


@contextlib.contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """Holds an exclusive lock on ``path`` (created if missing) for the block.

    Processes on one machine that lock the same file take turns (``fcntl.flock``; the lock is
    released when the block ends or the process dies).

    The file is never written; it keeps its name (a rename would hand the lock to a new
    file), so a link planted there is refused (``O_NOFOLLOW``) rather than followed.

    Raises:
        OSError: the lock file cannot be created (a missing or read-only folder) or is a link.
    """
    handle = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
    finally:
        os.close(handle)


def storage_lock(url: str) -> contextlib.AbstractContextManager[None]:
    """A lock for creating the storage at ``url``: a file lock beside a SQLite database.

    Other databases have no file here: nothing is locked (:meth:`TagtorchOptunaSweeper.study`
    retries a creation race instead).

    Example:
        >>> storage_lock("postgresql://host/db")  # doctest: +ELLIPSIS
        <contextlib.nullcontext object at ...>
    """
    parsed = sqlalchemy.engine.make_url(url)
    database = parsed.database
    if not parsed.drivername.startswith("sqlite") or database in (None, "", ":memory:"):
        return contextlib.nullcontext()
    return file_lock(Path(f"{database}.lock"))


def error_reason(error: BaseException) -> str:
    """The first line of what went wrong, from the database driver where there is one.

    Example:
        >>> import sqlite3
        >>> error_reason(sqlalchemy.exc.OperationalError(
        ...     "SELECT 1", {}, sqlite3.OperationalError("unable to open database file")))
        'OperationalError: unable to open database file'
    """
    while isinstance(error, optuna.exceptions.StorageInternalError | ImportError) \
            and error.__cause__ is not None:  # Optuna's wrapper: the driver's error is its cause
        error = error.__cause__
    cause = getattr(error, "orig", None) or error
    lines = str(cause).strip().splitlines() or [""]
    return f"{type(cause).__name__}: {lines[0]}"


@contextlib.contextmanager
def one_line_errors() -> Iterator[None]:
    """Ends the process on an input error as ``python -m tagtorch.train`` does.

    An error of the input (:func:`tagtorch.train.user_error`: a bad setting, an unusable
    storage or cluster address) raised in the block is one line on standard error and exit
    status 2, with no traceback; other errors go on (they are bugs to report).
    """
    try:
        yield
    except Exception as error:
        cause = user_error(error)
        if cause is None:
            raise
        print(f"error: {cause}", file=sys.stderr)
        raise SystemExit(2) from None


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """Leaves out Optuna's warnings on its heartbeat and its use with ask-and-tell.

    Optuna calls both experimental; both are what a study shared by many workers needs.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        warnings.filterwarnings("ignore", message="Heartbeat of storage is supposed to be used")
        yield
def finished_states() -> tuple[Any, ...]:
    """The states of a trial that needs no more runs."""
    return (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED)


def distributions(params: Mapping[str, str]) -> tuple[dict[str, Any], dict[str, str]]:
    """The search space and the fixed overrides of ``params`` (Hydra's sweep syntax).

    Returns:
        ``({key: optuna distribution}, {key: fixed value as an override string})``.

    Example:
        >>> space, fixed = distributions({"a": "tag(log, interval(1e-3, 1))",
        ...                               "b": "range(1, 5)", "c": "choice(x, y)", "d": "3"})
        >>> sorted(space), fixed
        (['a', 'b', 'c'], {'d': '3'})
        >>> space["a"].log, space["b"].low, space["b"].high, space["c"].choices
        (True, 1, 4, ('x', 'y'))
    """
    parser = OverridesParser.create()
    overrides = parser.parse_overrides([f"{key}={value}" for key, value in params.items()])
    space: dict[str, Any] = {}
    fixed: dict[str, str] = {}
    for override in overrides:
        key = override.get_key_element()
        if not override.is_sweep_override():
            fixed[key] = override.get_value_element_as_str()
            continue
        space[key] = _distribution(override)
    return space, fixed


def _distribution(override: Override) -> Any:
    value = override.value()
    key = override.get_key_element()
    if isinstance(value, ChoiceSweep):
        choices = list(override.sweep_iterator())
        if not all(c is None or isinstance(c, bool | int | float | str) for c in choices):
            # lists and mappings (e.g. layer sizes): their override strings are the categories
            choices = list(override.sweep_iterator(transformer=Transformer.encode))
        return optuna.distributions.CategoricalDistribution(choices)
    if isinstance(value, RangeSweep):
        start, stop, step = value.start, value.stop, value.step
        if all(isinstance(v, int) for v in (start, stop, step)):
            return optuna.distributions.IntDistribution(int(start), int(stop) - 1, step=int(step))
        return optuna.distributions.CategoricalDistribution(
            list(override.sweep_iterator(transformer=Transformer.encode)))
    if isinstance(value, IntervalSweep):
        log_scale = "log" in value.tags
        if isinstance(value.start, int) and isinstance(value.end, int):
            return optuna.distributions.IntDistribution(value.start, value.end, log=log_scale)
        return optuna.distributions.FloatDistribution(float(value.start), float(value.end),
                                                      log=log_scale)
    raise ValueError(f"hydra.sweeper.params.{key}: {override.input_line!r} is not a choice, "
                     "range or interval sweep")


def override_value(value: Any) -> str:
    """A sampled value as a Hydra override value.

    Example:
        >>> override_value(0.1), override_value(3), override_value("adam")
        ('0.1', '3', 'adam')
    """
    if isinstance(value, float):
        return repr(value)
    return str(value)


def number_runs(numbers: Sequence[int]) -> list[tuple[int, int]]:
    """``(start, stop)`` slices of ``numbers`` that count up by one (one launch each).

    A batch's trials are numbered one after another unless another sweep asked trials of the
    same study in between.

    Example:
        >>> number_runs([4, 5, 6]), number_runs([4, 6, 7]), number_runs([])
        ([(0, 3)], [(0, 1), (1, 3)], [])
    """
    runs: list[tuple[int, int]] = []
    start = 0
    for i in range(1, len(numbers) + 1):
        if i == len(numbers) or numbers[i] != numbers[i - 1] + 1:
            runs.append((start, i))
            start = i
    return runs


class TagtorchOptunaSweeper(Sweeper):
    """Hydra's ``Sweeper`` for ``hydra/sweeper=tagtorch_optuna`` (module docstring).

    Args: the fields of :class:`hydra_plugins.tagtorch_sweeper.config.TagtorchOptunaSweeperConf`.
    """

    def __init__(self, direction: str = "maximize", study_name: str = "tagtorch",
                 storage: str | None = None, n_trials: int = 20, n_jobs: int = 1,
                 seed: int | None = 0, sampler: str = "tpe", pruner: str = "median",
                 n_startup_trials: int = 5, n_warmup_steps: int = 2,
                 time_limit: float | None = None, devices: Sequence[Any] | None = None,
                 trials_per_device: int = 1, device_key: str = "trainer.devices",
                 heartbeat_seconds: float = 20.0, rerun_overrides: Sequence[str] = (),
                 params: Mapping[str, str] | None = None) -> None:
        if direction not in ("maximize", "minimize"):
            raise ValueError(f"hydra.sweeper.direction must be maximize or minimize, got "
                             f"{direction!r}")
        if n_trials < 1 or n_jobs < 1 or trials_per_device < 1:
            raise ValueError("hydra.sweeper.n_trials, n_jobs and trials_per_device must be >= 1")
        self.direction, self.study_name, self.storage_url = direction, study_name, storage
        self.n_trials, self.n_jobs, self.seed = n_trials, n_jobs, seed
        self.sampler_name, self.pruner_name = sampler, pruner
        self.n_startup_trials, self.n_warmup_steps = n_startup_trials, n_warmup_steps
        self.time_limit, self.heartbeat_seconds = time_limit, heartbeat_seconds
        self.devices = list(devices) if devices else []
        self.trials_per_device, self.device_key = trials_per_device, device_key
        self.params = dict(params or {})
        self.rerun_overrides = list(rerun_overrides)
        self.config: DictConfig | None = None
        self.launcher: Any = None
        self.hydra_context: HydraContext | None = None

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction,
              config: DictConfig) -> None:
        """Keeps the configuration and builds the launcher (Hydra calls it before ``sweep``)."""
        self.config = config
        self.hydra_context = hydra_context
        self.launcher = Plugins.instance().instantiate_launcher(
            hydra_context=hydra_context, task_function=task_function, config=config)
        self.sweep_dir = Path(str(config.hydra.sweep.dir))

    # ------------------------------------------------------------------------------ study
    def _sampler(self, space: Mapping[str, Any], offset: int) -> optuna.samplers.BaseSampler:
        """The sampler; its seed moves on by ``offset`` (the trials a resumed study holds)."""
        seed = None if self.seed is None else self.seed + offset
        if self.sampler_name == "tpe":
            return optuna.samplers.TPESampler(seed=seed)
        if self.sampler_name == "random":
            return optuna.samplers.RandomSampler(seed=seed)
        if self.sampler_name == "grid":
            grid = {}
            for key, dist in space.items():
                if isinstance(dist, optuna.distributions.CategoricalDistribution):
                    grid[key] = list(dist.choices)
                elif isinstance(dist, optuna.distributions.IntDistribution):
                    grid[key] = list(range(dist.low, dist.high + 1, dist.step))
                else:
                    raise ValueError(f"hydra.sweeper.params.{key}: a grid needs choice or "
                                     "range sweeps, not an interval")
            return optuna.samplers.GridSampler(grid, seed=seed)
        raise ValueError(f"hydra.sweeper.sampler must be tpe, random or grid, got "
                         f"{self.sampler_name!r}")

    def _pruner_settings(self) -> dict[str, Any]:
        """The pruner's settings, kept in the study for the jobs (:func:`make_pruner`)."""
        return {"name": self.pruner_name, "n_startup_trials": self.n_startup_trials,
                "n_warmup_steps": self.n_warmup_steps}

    def study(self, space: Mapping[str, Any]) -> optuna.Study:
        """The study (created, or loaded to resume), in its RDB storage.

        Raises:
            ConfigError: naming ``hydra.sweeper.storage``, when the storage cannot be opened
                or written (module docstring).
        """
        self.sweep_dir.mkdir(parents=True, exist_ok=True)
        url = self.storage_url or f"sqlite:///{(self.sweep_dir / 'optuna.db').resolve()}"
        self.storage_url = url
        try:
            with storage_lock(url):
                study = self._open_study(url)
        except storage_errors() as error:
            raise ConfigError("hydra.sweeper.storage", url,
                              "an Optuna storage this sweep can open and write: a SQLite file "
                              "in a writable folder or a reachable database URL "
                              f"({error_reason(error)})") from None
        # a resumed sweep must not draw its first points again
        study.sampler = self._sampler(space, len(study.trials))
        return study

    def _open_study(self, url: str, attempts: int = 3) -> optuna.Study:
        """Creates or loads the study; retries a race with another sweep creating it."""
        pruner = self._pruner_settings()
        for attempt in range(attempts):
            try:
                storage = optuna.storages.RDBStorage(
                    url, heartbeat_interval=self.heartbeat_seconds,
                    grace_period=3 * self.heartbeat_seconds,
                    heartbeat_stale_trial_callback=optuna.storages
                    .RetryHeartbeatStaleTrialCallback(max_retry=2))
                study = optuna.create_study(study_name=self.study_name, storage=storage,
                                            pruner=make_pruner(pruner),
                                            direction=self.direction, load_if_exists=True)
                study.set_user_attr("pruner", pruner)  # the jobs prune as the sweep says
                return study
            except sqlalchemy.exc.IntegrityError:  # another sweep created the same rows
                if attempt == attempts - 1:
                    raise
                time.sleep(0.5 * (attempt + 1))
        raise AssertionError("unreachable")

    # ------------------------------------------------------------------------------ sweep
    def sweep(self, arguments: list[str]) -> None:
        """Runs trials until the study has ``n_trials`` finished ones (module docstring)."""
        assert self.config is not None and self.launcher is not None
        params = dict(self.params)
        for argument in arguments:  # the command line's sweeps and fixed values win
            key, _, value = argument.partition("=")
            params[key] = value
        space, fixed = distributions(params)
        with one_line_errors(), _quiet():
            self.check_objective(fixed)
            self._sweep(space, fixed)

    def check_objective(self, fixed: Mapping[str, str]) -> None:
        """Refuses a test metric as the objective, before the study or any trial exists.

        The trials' configuration (the command line's and ``params``' fixed values) is
        composed as the launcher composes a job's, and its ``optimized_metric`` checked
        (:func:`tagtorch.train.check_sweep_metric`).

        Raises:
            ConfigError: naming ``optimized_metric``, when it is a test metric.
        """
        assert self.config is not None and self.hydra_context is not None
        job = self.hydra_context.config_loader.load_sweep_config(
            self.config, [f"{key}={value}" for key, value in fixed.items()])
        check_sweep_metric(job)

    def _sweep(self, space: Mapping[str, Any], fixed: Mapping[str, str]) -> None:
        study = self.study(space)
        log.info("study %s in %s: %d trials so far, %d to reach", study.study_name,
                 self.storage_url, len(study.trials), self.n_trials)
        slots = len(self.devices) * self.trials_per_device if self.devices else self.n_jobs
        launched = False
        while True:
            optuna.storages.fail_stale_trials(study)
            trials = study.get_trials(deepcopy=False)
            done = sum(t.state in finished_states() or (t.state == optuna.trial.TrialState.FAIL
                                               and "failure" in t.user_attrs) for t in trials)
            running = sum(t.state == optuna.trial.TrialState.RUNNING for t in trials)
            todo = min(slots, self.n_trials - done - running)
            if isinstance(study.sampler, optuna.samplers.GridSampler) and \
                    study.sampler.is_exhausted(study):
                todo = 0
                running = 0  # every grid point is asked: nothing to wait for

            if todo <= 0:
                if done < self.n_trials and running:  # another worker's, or a dead job's
                    time.sleep(self.heartbeat_seconds)
                    continue
                break
            try:
                batch = [study.ask(space) for _ in range(todo)]
            except ValueError as error:  # a resumed study with another search space
                raise ValueError(f"study {study.study_name!r} in {self.storage_url} was started "
                                 f"with another search space ({error}); give the new space "
                                 "its own hydra.sweeper.study_name or sweep folder") from None
            for trial in batch:
                study._storage.record_heartbeat(trial._trial_id)  # a job that never starts
            self._run_batch(study, batch, fixed)
            self._write_outputs(study)  # after every batch: a killed sweep keeps them
            launched = True
        if not launched:  # resumed with nothing left to run: the outputs of the study so far
            self._write_outputs(study)

    def _run_batch(self, study: optuna.Study, batch: list[optuna.Trial],
                   fixed: Mapping[str, str]) -> None:
        overrides = []
        for slot, trial in enumerate(batch):
            values = [f"{key}={override_value(value)}" for key, value in trial.params.items()]
            sweep = [f"sweep.storage={self.storage_url}", f"sweep.study={study.study_name}",
                     f"sweep.trial={trial.number}", f"sweep.heartbeat={self.heartbeat_seconds}"]
            if self.time_limit:
                sweep.append(f"sweep.time_limit={self.time_limit}")
            if self.devices:
                device = self.devices[(slot // self.trials_per_device) % len(self.devices)]
                sweep.append(f"{self.device_key}=[{device}]")
            overrides.append([*(f"{k}={v}" for k, v in fixed.items()), *values, *sweep])
        returns = []
        for start, stop in number_runs([trial.number for trial in batch]):
            # each job is numbered by its trial: its folder is the trial's alone, whatever
            # the other sweeps on the study launch (their trials have other numbers)
            returns += self.launcher.launch(overrides[start:stop],
                                            initial_job_idx=batch[start].number)
        for trial, outcome in zip(batch, returns, strict=True):
            self._tell(study, trial, outcome)

    def _tell(self, study: optuna.Study, trial: optuna.Trial, outcome: Any) -> None:
        """Completes, prunes or fails one trial from its job's outcome."""
        if outcome.status == JobStatus.COMPLETED:
            value = outcome.return_value
            try:
                number = float(value)
            except (TypeError, ValueError):
                number = math.nan
            if math.isfinite(number):
                _tell(study, trial, number)
                log.info("trial %d: %s", trial.number, number)
                return
            reason = f"the job returned {value!r}, not a finite optimized_metric"
        else:
            error = outcome._return_value
            if isinstance(error, optuna.TrialPruned):
                _tell(study, trial, state=optuna.trial.TrialState.PRUNED)
                log.info("trial %d: pruned (%s)", trial.number, error)
                return
            reason = f"{type(error).__name__}: {error}"
        trial.set_user_attr("failure", reason[:2000])
        _tell(study, trial, state=optuna.trial.TrialState.FAIL)
        log.warning("trial %d failed: %s", trial.number, reason[:500])

    # ---------------------------------------------------------------------------- outputs
    def _write_outputs(self, study: optuna.Study) -> None:
        """``trials.csv``, the plots and ``best.yaml`` in the sweep folder (module docstring).

        Each file is replaced whole (never seen half-written), by one sweep at a time when
        several share the folder (a lock file, ``.outputs.lock``).
        """
        with file_lock(self.sweep_dir / ".outputs.lock"):
            self._write_outputs_locked(study)

    def _write_outputs_locked(self, study: optuna.Study) -> None:
        """:meth:`_write_outputs`, under its lock."""
        frame = study.trials_dataframe()
        if frame.empty:
            return
        with atomic_write(self.sweep_dir / "trials.csv") as partial:
            frame.to_csv(partial, index=False)
        complete = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
        if not complete:
            return
        best = study.best_trial
        # the sweep's command, as one run (hparams_search kept for its method and settings,
        # every method of an experiment back), with the best parameters
        rerun = ["python -m tagtorch.train", *sys.argv[1:]]
        rerun = [a for a in rerun if a not in ("-m", "--multirun")
                 and not a.startswith("hydra.") and a.partition("=")[0] not in best.params]
        rerun += [f"{k}={override_value(v)}" for k, v in best.params.items()]
        rerun += ["hydra.mode=RUN", "search_method=null"]
        rerun += self.rerun_overrides
        best_yaml = OmegaConf.create({
            "value": best.value, "number": best.number, "params": best.params,
            "rerun_on_test": " ".join(shlex.quote(a) if i else a for i, a in enumerate(rerun)),
            "trials": {"complete": len(complete),
                       "pruned": sum(t.state == optuna.trial.TrialState.PRUNED
                                     for t in study.trials),
                       "failed": sum(t.state == optuna.trial.TrialState.FAIL
                                     for t in study.trials)}})
        with atomic_write(self.sweep_dir / "best.yaml") as partial:
            OmegaConf.save(best_yaml, partial)
        _plots(study, self.sweep_dir)


def _tell(study: optuna.Study, trial: optuna.Trial, value: float | None = None,
          state: optuna.trial.TrialState | None = None) -> None:
    """``study.tell``; a grid sampler's ``study.stop()`` on its last point is not an error."""
    try:
        study.tell(trial, value, state=state)
    except RuntimeError as error:  # raised after the trial was told
        if "Study.stop" not in str(error):
            raise


def _plots(study: optuna.Study, folder: Path) -> None:
    """The optimization history, parameter importances and parallel coordinates as PNGs."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from optuna.visualization import matplotlib as plots

    figures = {"optimization_history.png": plots.plot_optimization_history,
               "param_importances.png": plots.plot_param_importances,
               "parallel_coordinate.png": plots.plot_parallel_coordinate}
    complete = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    for name, plot in figures.items():
        if name != "optimization_history.png" and (len(complete) < 2 or not complete[0].params):
            continue  # importances and coordinates need several trials with parameters
        try:
            with warnings.catch_warnings():  # singular axes of a parameter with one value
                warnings.simplefilter("ignore", UserWarning)
                axes = plot(study)
        except (ValueError, RuntimeError) as error:  # e.g. one distinct value everywhere
            log.info("%s not drawn: %s", name, error)
            continue
        figure = (axes.flat[0] if hasattr(axes, "flat") else axes).get_figure()
        figure.set_size_inches(9, 5.5)
        figure.tight_layout()
        with atomic_write(folder / name) as partial:
            figure.savefig(partial, dpi=110, format="png")
        plt.close(figure)
