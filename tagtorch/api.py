"""The Python surface: a dataset, an evaluation of any task, a fitted recommender, in a few lines.

::

    import tagtorch as tt

    folk = tt.load("lastfm")                          # a dataset name or a table's path
    res = tt.evaluate("tagrec", folk, models=["latre_wts", "lambdamart"], folds=[0])
    print(res.report)                                 # mean ± 95% CI, paired tests
    res.results, res.per_object                       # results.csv, per_object.csv.gz
    rec = tt.fit(folk, "lambdamart")                  # a TagRecommender (Item-, Post-, Resource-)
    rec.recommend_tags(["grunge", "90s"], title="Nevermind", k=5)

These functions compose the same configuration ``python -m tagtorch.train`` composes (the
``tagtorch/conf/`` tree: one source of truth for every default), with the logger off, and run it
through the same :func:`tagtorch.train.run_task`: for identical settings the API and the command
line give identical results. A model is given by its config name
(``tagtorch/conf/model/NAME.yaml``), by a config mapping (with ``_target_``), or as an unfitted
model object, which is handed to the task as it is
(:class:`~tagtorch.evaluation.runs.GivenObjects`: each fit builds a fresh copy from its constructor
arguments as given, a factory included; its settings are only recorded in the run's
``config.yaml``); ``candidates=`` takes a tag recommender's candidate generator the same three
ways. Keyword settings go to the task (``folds=[0]`` is ``task.folds=[0]`` for tag recommendation,
``seeds=[0]`` ``task.seeds=[0]`` for the seeded tasks); ``overrides`` takes any command-line
override as is.

Layer: above ``train`` and ``serving`` (nothing in the package imports it).
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf, open_dict

from tagtorch.candidates.letor import LetorData, load_letor
from tagtorch.data.folksonomy import Folksonomy
from tagtorch.evaluation.runs import EvaluationResult, GivenObjects
from tagtorch.rankers.base import BaseRanker, load_ranker
from tagtorch.serving import AnyRecommender, Recommender
from tagtorch.settings import MODEL_TASKS, SignatureSettings

__all__ = ["CONF_DIR", "CandidatesSpec", "ModelSpec", "compose", "datasets", "evaluate", "fit",
           "load"]

CONF_DIR = Path(__file__).resolve().parent / "conf"
"""The configuration tree ``python -m tagtorch.train`` reads."""

ModelSpec = str | Mapping[str, Any] | SignatureSettings
"""A model: its config name, a config mapping with ``_target_``, or an unfitted model object."""

TASKS = (*MODEL_TASKS, "letor")
"""The tasks :func:`evaluate` runs: the four model kinds' and LETOR (tag rankers on a LETOR
dataset)."""

CandidatesSpec = str | Mapping[str, Any] | SignatureSettings
"""A candidate generator: a shipped set's name (``tagtorch/conf/candidates/NAME.yaml``: ``latre``,
``extended``, ...), a config mapping with ``_target_``, or an unfitted ``LatreCandidates``."""


def compose(overrides: Sequence[str] = (), output_dir: str | Path | None = None) -> DictConfig:
    """The configuration of ``python -m tagtorch.train logger=none OVERRIDES``.

    Args:
        overrides: command-line overrides (``task=itemrec``, ``+experiment=...``, ...).
        output_dir: the run folder (default: a new temporary folder, kept).

    Raises:
        ValueError: an override Hydra cannot compose (its message).
    """
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.hydra_config import HydraConfig
    from hydra.errors import HydraException

    folder = Path(output_dir) if output_dir is not None else Path(
        tempfile.mkdtemp(prefix="tagtorch_"))
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(version_base="1.3", config_dir=str(CONF_DIR)):
            cfg = hydra_compose("train", overrides=["logger=none", *overrides],
                                return_hydra_config=True)
    except HydraException as error:
        raise ValueError(f"cannot compose {list(overrides)}: {error}") from None
    HydraConfig().set_config(cfg)  # ${hydra:...} interpolations resolve as in a run
    with open_dict(cfg):
        cfg.paths.output_dir = str(folder)
        cfg.paths.checkpoint_dir = str(folder / "checkpoints")
        del cfg.hydra  # as in a run, whose job config holds no `hydra` node
    return cfg


def datasets() -> list[str]:
    """The dataset names :func:`load` knows (``tagtorch/conf/data/*.yaml``)."""
    return sorted(path.stem for path in (CONF_DIR / "data").glob("*.yaml"))


def load(source: str | Path, **options: Any) -> Folksonomy | LetorData:
    """A folksonomy, as loaded (text not normalized yet: each task applies its ``text``).

    Args:
        source: a dataset name (:func:`datasets`: ``synthetic``, ``lastfm``, ``movielens``,
            ``delicious``, ...; HetRec files are downloaded, checksummed, when missing), the
            path of a file in TagRec's format (``data=tagrec``, recognised by its first line)
            or of a CSV, TSV or Parquet table of assignments (``data=tabular``), or a LETOR
            dataset folder (MSLR's ``train.txt``, ``vali.txt``, ``test.txt``; a
            :class:`~tagtorch.candidates.letor.LetorData` for ``evaluate("letor", ...)``).
        **options: the loader's settings (``tagtorch/conf/data/NAME.yaml``), e.g. ``n_objects=500``
            for ``synthetic``, ``columns={"object": "item_id"}`` for a table,
            ``max_list_length=100`` for a LETOR folder.

    Raises:
        ValueError: an unknown name that is not an existing file or LETOR folder.
    """
    name = str(source)
    if Path(source).is_dir() and name not in datasets():
        return load_letor(source, **options)
    if name in datasets():
        overrides = [f"data={name}"]
    elif Path(source).is_file():
        from tagtorch.data.loaders.tagrec import is_tagrec_file

        kind = "tagrec" if is_tagrec_file(source) else "tabular"
        overrides = [f"data={kind}", f"data.path={json.dumps(str(Path(source).resolve()))}"]
    else:
        raise ValueError(f"{name!r} is neither a dataset ({', '.join(datasets())}), a file nor "
                         "a LETOR folder")
    cfg = compose(overrides)
    with open_dict(cfg):
        cfg.data = OmegaConf.merge(cfg.data, options)
    from hydra.errors import InstantiationException
    from hydra.utils import instantiate

    try:
        loaded = instantiate(cfg.data)
    except InstantiationException as error:  # the loader's own error (DataFormatError, ...)
        if error.__cause__ is None:
            raise
        raise error.__cause__ from None
    if not isinstance(loaded, Folksonomy | LetorData):
        raise TypeError(f"{overrides[0]} built a {type(loaded).__name__}, not a dataset")
    return loaded


def evaluate(task: str, data: Folksonomy | LetorData | str | Path,
             models: Sequence[str] | Mapping[str, ModelSpec] | None = None, *,
             candidates: CandidatesSpec | None = None, experiment: str | None = None,
             output_dir: str | Path | None = None, overrides: Sequence[str] = (),
             **settings: Any) -> EvaluationResult:
    """Evaluates models on a task and returns the run's tables and report.

    Args:
        task: ``"tagrec"`` (tag recommendation, D/V/T folds), ``"itemrec"`` (tag-based item
            recommendation, seeds), ``"resources"`` (resource ranking, seeds), ``"posts"``
            (personalized tag recommendation, TagRec's protocol) or ``"letor"`` (tag rankers on
            a LETOR dataset's fixed parts).
        data: a folksonomy (or, for ``"letor"``, a LETOR dataset) from :func:`load`, or what
            :func:`load` takes.
        models: config names (``["latre_wts", "lambdamart"]``) or method name -> model (a
            config name, a config mapping or an unfitted model object); the first is the
            baseline of the paired tests. Default: the experiment's, else the task's default.
        candidates: tag recommendation's candidate generator (:data:`CandidatesSpec`; the
            same forms as a model). Default: the experiment's, else ``latre``.
        experiment: a shipped experiment (``tagtorch/conf/experiment/NAME.yaml``) to start from.
        output_dir: the run folder (default: a new temporary folder, kept; see ``.folder``).
        overrides: further command-line overrides, as ``python -m tagtorch.train`` takes them.
        **settings: the task's settings by name (``folds``, ``seeds``, ``ks``, ...).

    Returns:
        The results, per-object values and report of the run folder it wrote.

    Raises:
        ValueError: an unknown task, setting or model, or a configuration the checks refuse.
    """
    if task not in TASKS:
        raise ValueError(f"task must be one of {TASKS}, got {task!r}")
    spec = _model_spec(models)
    names = [value for value in (spec or {}).values() if isinstance(value, str)]
    cfg = compose([f"task={task}", *(["data=letor", "data.path=."] if task == "letor" else []),
                   *([f"+experiment={experiment}"] if experiment else []),
                   *([f"model=[{','.join(dict.fromkeys(names))}]"] if spec else []),
                   *_candidate_overrides(candidates), *overrides], output_dir)
    with open_dict(cfg):
        _set_candidates(cfg, candidates)
        if spec is not None:
            cfg.model = {key: _model_config(cfg, key, value) for key, value in spec.items()}
        _set_task_settings(cfg, task, settings)
    return _run(cfg, data, _given(spec or {}, candidates))


def fit(data: Folksonomy | LetorData | str | Path, model: ModelSpec, *,
        candidates: CandidatesSpec | None = None, experiment: str | None = None,
        output_dir: str | Path | None = None, overrides: Sequence[str] = (),
        **settings: Any) -> AnyRecommender | BaseRanker:
    """Fits a recommender on all of ``data`` (``task=fit``) and returns it, ready to serve.

    A tag ranker becomes a :class:`~tagtorch.serving.TagRecommender`, an item model an
    :class:`~tagtorch.serving.ItemRecommender`, a post ranker (``bll_c``, ``folkrank``,
    ``hybrid_lambdamart``, ...) a :class:`~tagtorch.serving.PostRecommender`, a resource ranker
    (``bm25``, ``smatch``, ``bayeslm``, ``lda_resources``) a
    :class:`~tagtorch.serving.ResourceRecommender`; each is saved
    under ``output_dir`` (default: a new temporary folder), the folder
    ``python -m tagtorch.serve`` and :meth:`Recommender.load
    <tagtorch.serving.Recommender.load>` take. On a LETOR dataset (:func:`load` of a LETOR
    folder) a tag ranker is fitted on its ``train`` part (``vali`` for early stopping) and
    returned; its folder is read back by :func:`tagtorch.rankers.base.load_ranker`.

    Args:
        data: a folksonomy or a LETOR dataset from :func:`load`, or what :func:`load` takes.
        model: a config name, a config mapping or an unfitted model object.
        candidates: a tag ranker's candidate generator (as in :func:`evaluate`).
        experiment: a shipped experiment to start from (its candidates, text, settings).
        output_dir: where the artifact folder is written.
        overrides: further command-line overrides.
        **settings: ``task=fit`` settings (``val_fraction``, ``seed``, ``p``, ...).
    """
    name = model if isinstance(model, str) else "model"
    raw = data if isinstance(data, Folksonomy | LetorData) else load(data)
    letor = ["data=letor", "data.path=."] if isinstance(raw, LetorData) else []
    cfg = compose(["task=fit", *letor, *([f"+experiment={experiment}"] if experiment else []),
                   *([f"model={model}"] if isinstance(model, str) else []),
                   *_candidate_overrides(candidates), *overrides], output_dir)
    with open_dict(cfg):
        _set_candidates(cfg, candidates)
        cfg.model = {name: _model_config(cfg, name, model)}
        cfg.task.output = cfg.paths.output_dir
        _set_task_settings(cfg, "fit", settings)
    (folder,) = _run(cfg, raw, _given({name: model}, candidates))
    return load_ranker(folder) if isinstance(raw, LetorData) else Recommender.load(folder)


def _run(cfg: DictConfig, data: Folksonomy | LetorData | str | Path,
         given: GivenObjects) -> Any:
    from tagtorch.train import run_task

    raw = data if isinstance(data, Folksonomy | LetorData) else load(data)
    return run_task(cfg, raw=raw, given=given)


def _given(models: Mapping[str, ModelSpec], candidates: CandidatesSpec | None) -> GivenObjects:
    """The objects among the models and candidates given, handed to the task as they are."""
    return GivenObjects(
        models={key: value for key, value in models.items()
                if isinstance(value, SignatureSettings)},
        candidates=candidates if isinstance(candidates, SignatureSettings) else None,
        caller_data=True)


def _model_spec(models: Sequence[str] | Mapping[str, ModelSpec] | None
                ) -> dict[str, ModelSpec] | None:
    if models is None:
        return None
    if isinstance(models, str):
        return {models: models}
    if isinstance(models, Mapping):
        return {str(key): value for key, value in models.items()}
    return {str(name): str(name) for name in models}


def _model_config(cfg: DictConfig, key: str, model: ModelSpec) -> Any:
    """The config node of one model: composed by name, given, or from an object's settings."""
    return cfg.model[model] if isinstance(model, str) else _given_config(f"model {key!r}", model)


def _given_config(what: str, given: Mapping[str, Any] | SignatureSettings) -> dict[str, Any]:
    """A config mapping as given, or the record of an unfitted object's settings.

    The record is the object's ``config()`` with each value that is not plain JSON (a factory,
    say) written as its ``repr``: the run's ``config.yaml`` shows it, and the object itself is
    what the task builds from (:class:`~tagtorch.evaluation.runs.GivenObjects`).
    """
    if isinstance(given, Mapping):
        if "_target_" not in given:
            raise ValueError(f"{what}: a config mapping needs a _target_")
        return dict(given)
    if not isinstance(given, SignatureSettings):
        raise TypeError(f"{what}: expected a config name, a config mapping or an unfitted "
                        f"tagtorch object, got {type(given).__name__}")
    recorded: dict[str, Any] = json.loads(json.dumps(given.config(), default=repr))
    return recorded


def _candidate_overrides(candidates: CandidatesSpec | None) -> list[str]:
    """The override that selects a shipped candidate set by name (``tagtorch/conf/candidates``)."""
    return [f"candidates={candidates}"] if isinstance(candidates, str) else []


def _set_candidates(cfg: DictConfig, candidates: CandidatesSpec | None) -> None:
    """Puts a given candidate generator (mapping or unfitted object) in ``cfg.candidates``."""
    if candidates is not None and not isinstance(candidates, str):
        cfg.candidates = _given_config("candidates", candidates)


def _set_task_settings(cfg: DictConfig, task: str, settings: Mapping[str, Any]) -> None:
    """Sets ``task.KEY`` of every setting given by keyword; refuses unknown keys."""
    for key, value in settings.items():
        if key not in cfg.task:
            known = sorted(str(k) for k in cfg.task if k != "_target_")
            raise ValueError(f"{key!r} is not a setting of task={task}: one of {known}")
        cfg.task[key] = value
