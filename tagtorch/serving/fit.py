"""``task=fit``: fit a whole recommender on the data and write it as one artifact folder.

``python -m tagtorch.train task=fit data=lastfm model=lambdamart`` fits the text pipeline's
vocabulary, the candidate statistics of D and the ranker on V (:class:`TagRecommender`), and
writes ``{task.output}/{dataset}-{method}/`` (default ``checkpoints/recommenders/``). An item
model (``model=dorank``, ``pitf``, ...) is fitted on the data's p-core instead
(:class:`ItemRecommender`), a post ranker (``model=bll_c``, ``folkrank``, ``hybrid_lambdamart``,
...) on every post of the p-core (:class:`PostRecommender`: tags for a user's post of a
resource), a resource ranker (``model=bm25``, ``smatch``, ``bayeslm``, ``lda_resources``) on
the tag documents of every resource (:class:`ResourceRecommender`: resources for a tag query).
With several methods, one folder each; ``Recommender.load`` opens every kind. A tag ranker
named in ``method_candidates`` is fitted with that set of ``candidate_sets``
(``+experiment=extended_lastfm task=fit search_method=lambdarank_extended``), as the evaluation
does.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any, ClassVar, cast

from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from tagtorch.candidates.latre import LatreCandidates
from tagtorch.candidates.letor import LetorData
from tagtorch.data.folksonomy import Folksonomy
from tagtorch.data.text import TextProcessor
from tagtorch.errors import ConfigError
from tagtorch.evaluation.runs import DEFAULT_SET, GivenObjects, MetricLogger, Task, methods_of
from tagtorch.itemrec.data import AGGREGATES, QUERY_KINDS
from tagtorch.posts.base import PostRanker
from tagtorch.rankers.base import BaseRanker
from tagtorch.resources.base import ResourceRanker
from tagtorch.serving import AnyRecommender
from tagtorch.serving.items import ItemRecommender
from tagtorch.serving.posts import PostRecommender
from tagtorch.serving.resources import ResourceRecommender
from tagtorch.serving.tags import TagRecommender, display_names
from tagtorch.settings import ModelTask

log = logging.getLogger(__name__)


class FitTask(Task):
    """Fits each configured method into the recommender of its kind (module docstring).

    Args:
        output: the folder the artifacts go under (``DATASET-METHOD/`` each).
        val_fraction: tag rankers: share of the objects with at least ``min_tags`` tags put in
            V; item models: share of the core's posts held out for early stopping.
        input_fraction: share of a V object's tags given as input.
        min_tags: fewest tags of a V object.
        seed: seed of the splits (and of the item models' initialization).
        p: item models and post rankers: the p-core level.
        split: item models: the unit held out, ``"posts"`` or ``"triples"``.
        query: item models: the kind of the validation queries.
        aggregate: item models: requests without a tag, ``"profile"`` or ``"max"``.
    """

    model_tasks: ClassVar[tuple[ModelTask, ...]] = ("tagrec", "itemrec", "posts", "resources")
    """The tasks of the models this task runs, one recommender kind each (the config checks)."""

    def __init__(self, output: str | Path = "checkpoints/recommenders",
                 val_fraction: float = 0.2, input_fraction: float = 0.5, min_tags: int = 2,
                 seed: int = 0, p: int = 5, split: str = "posts", query: str = "user_tag",
                 aggregate: str = "profile") -> None:
        if not 0.0 < val_fraction < 1.0:
            raise ValueError(f"task.val_fraction must be in (0, 1), got {val_fraction}")
        if split not in ("posts", "triples") or query not in QUERY_KINDS:
            raise ValueError(f"task.split must be 'posts' or 'triples' and task.query one of "
                             f"{QUERY_KINDS}, got {split!r} and {query!r}")
        if aggregate not in AGGREGATES or p < 1:
            raise ValueError(f"task.aggregate must be one of {AGGREGATES} and task.p >= 1, got "
                             f"{aggregate!r} and {p}")
        self.output = Path(output)
        self.val_fraction, self.input_fraction = val_fraction, input_fraction
        self.min_tags, self.seed = min_tags, seed
        self.p, self.split, self.query, self.aggregate = p, split, query, aggregate

    def run(self, folksonomy: Folksonomy, cfg: DictConfig, output_dir: Path,
            loggers: Sequence[MetricLogger] = (), *, raw: Any = None,
            given: GivenObjects | None = None) -> list[Path]:
        """Fits and writes one artifact per method; returns their folders.

        The arguments are every task's (:meth:`Task.run <tagtorch.evaluation.runs.Task.run>`):
        ``raw``, the folksonomy as loaded, gives the display names (its tags as written) and
        titles (default: ``cfg.data`` loaded again).

        A LETOR dataset (``data=letor``) fits each tag ranker on its ``train`` part (``vali``
        for early stopping) and writes the ranker's own folder
        (:func:`~tagtorch.rankers.base.load_ranker` reads it).

        Raises:
            ConfigError: the data is neither a folksonomy nor a LETOR dataset, or a LETOR
                dataset is given a model that is not a tag ranker.
        """
        if isinstance(folksonomy, LetorData):
            return self._fit_letor(folksonomy, cfg, given or GivenObjects())
        if not isinstance(folksonomy, Folksonomy) or not isinstance(raw, Folksonomy | None):
            raise ConfigError("data", cfg.data.get("_target_"), "a folksonomy or a LETOR "
                              "dataset")
        given = given or GivenObjects()
        processor = instantiate(cfg.text) if cfg.get("text") is not None else None
        if processor is None:
            raise ValueError("task=fit needs the text pipeline (text=porter): new objects' "
                             "texts and tags are normalized by it")
        raw = instantiate(cfg.data) if raw is None else raw
        display = display_names(raw, processor, folksonomy)
        titles = ({str(o): str(t) for o, t in zip(raw.objects, raw.texts["title"], strict=True)}
                  if "title" in raw.texts else {})
        sets = {DEFAULT_SET: cfg.candidates, **(cfg.get("candidate_sets") or {})}
        chosen = {str(k): str(v) for k, v in (cfg.get("method_candidates") or {}).items()}
        folders = []
        for name, config in methods_of(cfg).items():
            used = chosen.get(name, DEFAULT_SET)
            if used not in sets:
                raise ValueError(f"method_candidates.{name}={used!r} is not a candidate set "
                                 f"(candidate_sets: {sorted(set(sets) - {DEFAULT_SET})})")
            info = {"method": name, "candidate_set": used,
                    "config": OmegaConf.to_container(cfg, resolve=True)}
            model = given.build(name, config)
            recommender = self._fit(folksonomy, processor, model, display, titles, info,
                                    partial(self._candidates, sets, used, given))
            folder = recommender.save(self.output / f"{folksonomy.name}-{name}")
            print(f"{name}: {folder}")
            folders.append(folder)
        return folders

    def _fit(self, folksonomy: Folksonomy, processor: TextProcessor, model: Any,
             display: list[str], titles: Mapping[str, str], info: dict[str, Any],
             candidates: Callable[[], LatreCandidates]) -> AnyRecommender:
        """The recommender of ``model``'s kind, fitted on ``folksonomy``."""
        name = info["method"]
        if isinstance(model, PostRanker):
            return PostRecommender.fit(folksonomy, processor, model, display=display, p=self.p,
                                       info=info)
        if isinstance(model, ResourceRanker):
            return ResourceRecommender.fit(folksonomy, processor, model, display=display,
                                           titles=titles, info=info)
        if isinstance(model, BaseRanker):
            tags = TagRecommender.fit(
                folksonomy, processor, candidates(), model, display=display,
                val_fraction=self.val_fraction, input_fraction=self.input_fraction,
                min_tags=self.min_tags, seed=self.seed, info=info)
            log.info("%s: fitted on %d D objects and %d V objects", name,
                     tags.info["d_objects"], tags.info["v_objects"])
            return tags
        items = ItemRecommender.fit(
            folksonomy, processor, model, display=display, titles=titles, p=self.p,
            val_fraction=self.val_fraction, split=self.split, query=self.query,
            aggregate=self.aggregate, seed=self.seed, info=info)
        log.info("%s: fitted on the %d-core (%d users, %d items, %d tags)", name, self.p,
                 items.info["users"], items.info["items"], items.info["tags"])
        return items

    def _fit_letor(self, data: LetorData, cfg: DictConfig, given: GivenObjects) -> list[Path]:
        """Each tag ranker fitted on a LETOR dataset's ``train`` part, saved as its folder."""
        folders = []
        for name, config in methods_of(cfg).items():
            ranker = given.build(name, config)
            if not isinstance(ranker, BaseRanker):
                raise ConfigError(f"model.{name}._target_", config.get("_target_"),
                                  "a tag ranker: a LETOR dataset's lists are ranked by one")
            ranker.fit(data.train, data.vali)
            folder = self.output / f"{data.name}-{name}"
            ranker.save(folder)
            print(f"{name}: {folder}")
            folders.append(folder)
        return folders

    @staticmethod
    def _candidates(sets: Mapping[str, Any], used: str, given: GivenObjects) -> LatreCandidates:
        """The unfitted candidate generator of set ``used``: the object given, else its config."""
        if used == DEFAULT_SET and given.candidates is not None:
            if not isinstance(given.candidates, LatreCandidates):
                raise TypeError(f"candidates: a tag recommender fits a LatreCandidates, got "
                                f"{type(given.candidates).__name__}")
            return given.candidates.unfitted()
        return cast(LatreCandidates, instantiate(sets[used]))
