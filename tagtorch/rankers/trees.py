"""Tree-ensemble rankers: Random Forest, MART and λ-MART (Canuto et al., JIDM 2013, §4.3.2-4.3.4).

The three best learning-to-rank methods of the paper's study, with its Table III parameters as
defaults. Each wraps a library model by composition (the wrapper holds it; nothing pretends to
be a torch module) and learns from the *real* candidates of the training lists (the protocol's
V), flattened to ``[N, F]`` rows in list order, each object's list being one query group.

Which library objective implements each method:

=================  ========================================  ===================================
method             default backend                           option
=================  ========================================  ===================================
RF                 scikit-learn ``RandomForestRegressor``     LightGBM ``boosting="rf"``
(Breiman 2001)     (``max_leaf_nodes=l``, ``max_features=m``,  (bagging, ``feature_fraction_bynode
                   bootstrap, squared error)                  = m / M``, ``objective="regression"``)
MART               LightGBM ``objective="regression"``        XGBoost ``reg:squarederror``
(Friedman 2001)    (L2 boosting on the labels, ``num_leaves``)  (``max_leaves``, lossguide)
λ-MART             LightGBM ``objective="lambdarank"``        XGBoost ``rank:ndcg``
(Burges 2010)      (``lambdarank_truncation_level``)          (``topk`` pairs, truncation)
=================  ========================================  ===================================

Deviations from the paper, which used RankLib:

- **Libraries.** RankLib's trees are replaced by scikit-learn, LightGBM and XGBoost; split
  finding differs in detail (LightGBM and XGBoost bin each feature into at most 255 histogram
  bins, close to RankLib's 256 threshold candidates; scikit-learn tries every threshold). As in
  RankLib (minimum leaf support 1), leaves may hold a single candidate (``min_leaf_size=1``).
- **A fitted scikit-learn forest** is flattened into :class:`FlatForest` arrays and scored by
  its compiled walker (as scikit-learn's single-thread ``predict``: float32 features against
  double thresholds, leaf values summed in tree order, then averaged) and saved as those
  arrays, never as scikit-learn's private tree state.
- **NDCG gain.** λ-MART and NDCG early stopping use the linear gain of
  :mod:`tagtorch.metrics.functional` (LightGBM ``label_gain = 0, 1, 2, ...``, XGBoost
  ``ndcg_exp_gain=False``); for the binary labels of tag recommendation it equals the
  exponential gain ``2^rel - 1`` of RankLib and of the libraries' defaults.
- **λ-MART truncation.** Only pairs involving the top ``truncation_level`` (default 10)
  candidates contribute lambdas (LightGBM ``lambdarank_truncation_level``, XGBoost
  ``lambdarank_pair_method="topk"`` with ``lambdarank_num_pair_per_sample``); the paper
  evaluates NDCG@5 and does not state a truncation.
- **RF with LightGBM.** LightGBM bags *without* replacement, so its RF mode draws a fraction
  (``bagging_fraction``, default 0.632, the expected share of distinct rows of a bootstrap
  sample) instead of Breiman's bootstrap; it also samples at least 2 features per split.
- **Early stopping.** Off by default, since the paper fixes ``T`` and ``i``; with
  ``early_stopping_rounds`` and a ``val`` set, the boosting stops when NDCG@k on ``val``
  has not improved for that many rounds, and scoring uses the best iteration. The
  scikit-learn forest has no early stopping.

Large V sets (ours): MART and λ-MART with ``dask={...}`` train through LightGBM's Dask interface
(``DaskLGBMRegressor`` / ``DaskLGBMRanker``, data-parallel trees: each worker builds the
histograms of its rows, LightGBM sums them) on a Dask cluster (``address``) or on a local one
started for the fit (``n_workers``). The rows are cut into ``partitions`` pieces (default: one
per worker) at list boundaries, so that no query group is split. The fitted model is a plain
LightGBM booster, scored and saved as any other. LightGBM's Dask interface has no early
stopping; each worker trains with ``n_jobs`` threads. The trees are close to, not identical
with, one process's: each worker bins the features on its own rows.

Example:
    >>> import torch
    >>> from tagtorch.candidates.candidate_set import CandidateSet
    >>> lists = CandidateSet.from_flat(
    ...     objects=torch.tensor([7, 8]), rows=torch.tensor([0, 0, 0, 1, 1]),
    ...     tags=torch.arange(5), features=torch.tensor([[0.9], [0.1], [0.2], [0.8], [0.3]]),
    ...     labels=torch.tensor([1.0, 0, 0, 1, 0]), n_relevant=torch.tensor([1, 1]),
    ...     feature_names=("sum_l",))
    >>> flat = flatten_lists(lists)
    >>> flat.features.shape, flat.labels.tolist(), flat.group_sizes.tolist()
    ((5, 1), [1.0, 0.0, 0.0, 1.0, 0.0], [3, 2])
    >>> ranker = MARTRanker(n_iterations=20, min_leaf_size=1, n_jobs=1).fit(lists)
    >>> scores = ranker.score(lists)
    >>> scores.shape, bool(scores[1, 2] == float("-inf"))
    (torch.Size([2, 3]), True)
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, ClassVar, Literal, Self

import numpy as np
import torch

from tagtorch.candidates.candidate_set import CandidateSet
from tagtorch.errors import UnreadableFileError
from tagtorch.extras import require_extra
from tagtorch.progress import progress
from tagtorch.rankers.base import BaseRanker, check_feature_names
from tagtorch.rankers.tree_scoring import FlatForest
from tagtorch.storage import MANIFEST_FILE, atomic_write, load_arrays, plain_json

__all__ = [
    "Backend",
    "FlatLists",
    "LambdaMARTRanker",
    "MARTRanker",
    "RandomForestRanker",
    "breiman_max_features",
    "flatten_lists",
    "load_forest",
]

Backend = Literal["sklearn", "lightgbm", "xgboost"]
"""The libraries a tree ranker can be trained with."""

MODEL_FILES: dict[str, str] = {
    "sklearn": "forest.npz",
    "lightgbm": "model.txt",
    "xgboost": "model.json",
}
"""Name of the library's own model file in a saved folder, per backend."""
FLATTEN_BATCH = 8192
"""Lists that :func:`flatten_lists` reads at a time (their padded copy is the only extra)."""

_PACKAGES = {"sklearn": "scikit-learn", "lightgbm": "lightgbm", "xgboost": "xgboost"}


@dataclass(frozen=True)
class FlatLists:
    """The real candidates of padded lists, flattened row by row: the libraries' input.

    Attributes:
        features: ``[N, F]`` float32 features of the ``N`` real candidates, list after list.
        labels: ``[N]`` float32 relevance labels.
        group_sizes: ``[G]`` int64 candidates per non-empty list (query group), in list order;
            sums to ``N``.
    """

    features: np.ndarray
    labels: np.ndarray
    group_sizes: np.ndarray


def flatten_lists(lists: CandidateSet, rows: np.ndarray | None = None) -> FlatLists:
    """Flattens the real (masked) candidates of ``lists``; padding never reaches a library.

    Args:
        lists: ``B`` padded lists (``features [B, L, F]``, ``labels [B, L]``, ``mask [B, L]``).
        rows: only these lists, in this order (default: all). The selected lists are read
            :data:`FLATTEN_BATCH` at a time, never copied whole with their padding.

    Returns:
        The ``N = mask.sum()`` real candidates in list order, and one group size per list
        with at least one candidate.
    """
    picked = np.arange(len(lists)) if rows is None else np.asarray(rows, dtype=np.int64)
    mask = lists.mask.detach().cpu()[torch.as_tensor(picked)]
    sizes = mask.sum(-1).numpy().astype(np.int64)
    features = np.empty((int(sizes.sum()), lists.features.shape[-1]), dtype=np.float32)
    labels = np.empty(len(features), dtype=np.float32)
    all_features, all_labels = lists.features.detach().cpu(), lists.labels.detach().cpu()
    start = 0
    for first in range(0, len(picked), FLATTEN_BATCH):
        chunk = torch.as_tensor(picked[first:first + FLATTEN_BATCH])
        real = mask[first:first + FLATTEN_BATCH]
        end = start + int(real.sum())
        features[start:end] = all_features[chunk][real].to(torch.float32)
        labels[start:end] = all_labels[chunk][real].to(torch.float32)
        start = end
    return FlatLists(features=features, labels=labels, group_sizes=sizes[sizes > 0])


def breiman_max_features(n_features: int) -> int:
    """Breiman's (2001) features per split, ``m = floor(log2(M + 1) + 0.5)``, at least 1.

    Args:
        n_features: ``M``, the number of features.

    Example:
        >>> breiman_max_features(13)  # the 13 features of Table I: Table III's m = 4
        4
    """
    return max(1, math.floor(math.log2(n_features + 1) + 0.5))


def _threads(n_jobs: int | None) -> int:
    """Threads for ``n_jobs`` (``-1`` or None: every core this process may use)."""
    if n_jobs is None or n_jobs < 0:
        try:
            return len(os.sched_getaffinity(0))
        except AttributeError:  # not on Linux
            return os.cpu_count() or 1
    return max(1, n_jobs)


def _ranking_labels(labels: np.ndarray, what: str) -> np.ndarray:
    """Integer relevance grades, as NDCG and lambdarank need."""
    grades = np.rint(labels)
    if not np.allclose(labels, grades) or (grades < 0).any():
        raise ValueError(f"{what} needs non-negative integer labels (relevance grades)")
    return grades.astype(np.int32)


def _library_version(backend: str) -> str | None:
    try:
        return version(_PACKAGES[backend])
    except PackageNotFoundError:
        return None


def load_forest(path: str | Path) -> FlatForest:
    """Reads a random forest saved by the sklearn backend, of this release or the one before.

    This release writes :meth:`FlatForest.save`'s arrays. The release before wrote scikit-learn's
    own tree state (``nodes.*``, ``values``, ``node_counts``); such a file is read from its
    plain node arrays, without scikit-learn, and scores as before.

    Raises:
        ValueError: an unreadable file or malformed trees (the message names the file).
    """
    try:
        arrays = load_arrays(path)  # bounded by the file's size
        legacy = "node_counts" in arrays
    except (OSError, ValueError, EOFError) as error:
        raise ValueError(f"{path}: not a readable forest file ({error})") from None
    if not legacy:
        return FlatForest.load(path)
    try:
        counts, values = arrays["node_counts"], arrays["values"].reshape(-1)
        starts = np.cumsum(counts) - counts
        names = ("left_child", "right_child", "feature", "threshold", "missing_go_to_left")
        trees = [{key: arrays[f"nodes.{name}"][a:a + n] if f"nodes.{name}" in arrays else None
                  for key, name in zip(("children_left", "children_right", "feature",
                                        "threshold", "missing_go_to_left"), names, strict=True)}
                 | {"value": values[a:a + n]} for a, n in zip(starts, counts, strict=True)]
        n_features = int(max((int(t["feature"].max()) for t in trees if t["feature"] is not None
                              and len(t["feature"])), default=0)) + 1
        return FlatForest.from_node_arrays(trees, n_features)
    except (KeyError, ValueError, TypeError, IndexError) as error:
        raise ValueError(f"{path}: not a readable forest file ({error})") from None


class _TreeRanker(BaseRanker):
    """Shared fit/score and model files of the library-backed tree rankers.

    Subclasses provide the library parameters; settings, the feature check and the save/load
    layout come from :class:`~tagtorch.rankers.base.BaseRanker`.
    """

    backends: ClassVar[tuple[str, ...]] = ()
    method: ClassVar[str] = ""
    listwise: ClassVar[bool] = False  # trains on query groups with integer grades

    backend: str
    k: int
    early_stopping_rounds: int | None
    n_jobs: int
    seed: int
    params: dict[str, Any]
    max_train_lists: int | None = None
    """The most lists a fit learns from (a seeded sample; MART and λ-MART, ours): None, all."""

    def _init_common(self, backend: str, k: int, early_stopping_rounds: int | None,
                     n_jobs: int, seed: int, params: Mapping[str, Any] | None,
                     dask: Mapping[str, Any] | None = None) -> None:
        if backend not in self.backends:
            raise ValueError(f"{type(self).__name__}: backend must be one of {self.backends}, "
                             f"got {backend!r}")
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        if early_stopping_rounds is not None and early_stopping_rounds < 1:
            raise ValueError(f"early_stopping_rounds must be >= 1 or None, "
                             f"got {early_stopping_rounds}")
        self.params = plain_json(params) if params else {}
        if dask is not None:
            unknown = set(dask) - {"address", "n_workers", "partitions"}
            if unknown:
                raise ValueError(f"dask settings are address, n_workers and partitions, got "
                                 f"{sorted(unknown)}")
            if backend != "lightgbm" or early_stopping_rounds is not None:
                raise ValueError("dask training needs backend='lightgbm' and "
                                 "early_stopping_rounds=None (LightGBM's Dask interface has "
                                 "no early stopping)")
            self.dask = plain_json(dask)
        self.model_: Any = None
        self.feature_names_: tuple[str, ...] | None = None
        self.best_iteration_: int | None = None

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.settings().items())
        return f"{type(self).__name__}({args})"

    # -- fit --------------------------------------------------------------------------------

    def fit(self, train: CandidateSet, val: CandidateSet | None = None) -> Self:
        """Trains on the real candidates of ``train``, one query group per list.

        Args:
            train: labelled candidate lists (the protocol's V), ``[B, L, F]``.
            val: lists for early stopping on NDCG@k; used only when ``early_stopping_rounds``
                is set (otherwise ignored).

        Returns:
            The fitted ranker.

        Raises:
            ValueError: no real candidate in ``train``, or ``val`` with other features.
        """
        data = flatten_lists(train, self._sampled(len(train)))
        if len(data.labels) == 0:
            raise ValueError("no real candidate to train on (every list is empty)")
        valid = None
        if val is not None and self.early_stopping_rounds is not None:
            check_feature_names(tuple(train.feature_names), val)
            valid = flatten_lists(val)
            if len(valid.labels) == 0:
                valid = None
        self.feature_names_ = tuple(train.feature_names)
        self.best_iteration_ = None
        fit = {"sklearn": self._fit_sklearn, "lightgbm": self._fit_lightgbm,
               "xgboost": self._fit_xgboost}[self.backend]
        self.model_ = fit(data, valid)
        return self

    def _sampled(self, n_lists: int) -> np.ndarray | None:
        """The lists to learn from: all (None), or a seeded sample of ``max_train_lists``.

        The sample is drawn from the ``n_lists`` with the seed and kept in list order.
        """
        if self.max_train_lists is None or n_lists <= self.max_train_lists:
            return None
        return np.sort(np.random.default_rng(self.seed).choice(n_lists, self.max_train_lists,
                                                               replace=False))

    def _fit_sklearn(self, data: FlatLists, valid: FlatLists | None) -> Any:
        raise NotImplementedError(f"{type(self).__name__} has no scikit-learn backend")

    def _n_rounds(self) -> int:
        raise NotImplementedError

    def _lightgbm_params(self, n_features: int) -> dict[str, Any]:
        raise NotImplementedError

    def _xgboost_params(self) -> dict[str, Any]:
        raise NotImplementedError

    def _fit_lightgbm(self, data: FlatLists, valid: FlatLists | None) -> Any:
        import lightgbm as lgb

        params: dict[str, Any] = {
            "seed": self.seed, "num_threads": _threads(self.n_jobs), "deterministic": True,
            "force_col_wise": True, "verbosity": -1, "metric": "None",
        }
        params.update(self._lightgbm_params(data.features.shape[1]))
        labels: np.ndarray = data.labels
        valid_labels = None
        top = 0
        if self.listwise:
            labels = _ranking_labels(data.labels, self.method)
            top = int(labels.max())
        if valid is not None:
            valid_labels = _ranking_labels(valid.labels, "NDCG early stopping")
            top = max(top, int(valid_labels.max()))
            params.update(metric="ndcg", eval_at=[self.k])
        if self.listwise or valid is not None:
            params["label_gain"] = list(range(top + 1))  # linear gain, as tagtorch's NDCG
        params.update(self.params)
        if getattr(self, "dask", None) is not None:
            return self._fit_lightgbm_dask(params, data, labels)
        train_set = lgb.Dataset(data.features, label=labels, group=data.group_sizes,
                                params=params)
        valid_sets: list[Any] = []
        callbacks: list[Callable[..., Any]] = []
        if valid is not None and self.early_stopping_rounds is not None:
            valid_sets = [lgb.Dataset(valid.features, label=valid_labels,
                                      group=valid.group_sizes, reference=train_set)]
            callbacks = [lgb.early_stopping(self.early_stopping_rounds, first_metric_only=True,
                                            verbose=False)]
        with progress(None, self.method, unit="round", total=self._n_rounds()) as bar:
            booster = lgb.train(params, train_set, num_boost_round=self._n_rounds(),
                                valid_sets=valid_sets,
                                callbacks=[*callbacks, lambda _: bar.update(1)])
        if valid is not None and booster.best_iteration > 0:
            self.best_iteration_ = int(booster.best_iteration)
        return booster

    def _fit_lightgbm_dask(self, params: dict[str, Any], data: FlatLists,
                           labels: np.ndarray) -> Any:
        """LightGBM's Dask interface on the rows of ``data`` (module docstring): the booster."""
        try:
            import dask.array as da
        except ModuleNotFoundError as missing:  # the [scale] extra
            require_extra("scale", missing)
        import lightgbm as lgb

        from tagtorch.engines import dask_client

        settings = dict(self.dask)
        with dask_client(settings.get("address"), settings.get("n_workers")) as client:
            parts = settings.get("partitions") or len(client.scheduler_info()["workers"])
            groups = np.array_split(np.arange(len(data.group_sizes)), max(int(parts), 1))
            ends = np.concatenate([[0], np.cumsum(data.group_sizes)])

            def pieces(array: np.ndarray, cuts: list[tuple[int, int]]) -> Any:
                sizes = tuple(b - a for a, b in cuts)
                return da.from_array(array, chunks=(sizes, *array.shape[1:]))

            rows = [(int(ends[g[0]]), int(ends[g[-1] + 1])) for g in groups if len(g)]
            lists = [(int(g[0]), int(g[-1] + 1)) for g in groups if len(g)]
            model_class = lgb.DaskLGBMRanker if self.listwise else lgb.DaskLGBMRegressor
            model = model_class(client=client, n_estimators=self._n_rounds(), **params)
            extra = {"group": pieces(data.group_sizes, lists)} if self.listwise else {}
            model.fit(pieces(data.features, rows), pieces(labels, rows), **extra)
            return model.to_local().booster_

    def _fit_xgboost(self, data: FlatLists, valid: FlatLists | None) -> Any:
        import xgboost as xgb

        threads = _threads(self.n_jobs)
        params: dict[str, Any] = {
            "seed": self.seed, "nthread": threads, "verbosity": 0, "tree_method": "hist",
            "grow_policy": "lossguide", "max_depth": 0,
        }
        params.update(self._xgboost_params())
        labels: np.ndarray = data.labels
        if self.listwise:
            labels = _ranking_labels(data.labels, self.method).astype(np.float32)
        if valid is not None:
            params["eval_metric"] = f"ndcg@{self.k}"
        params.update(self.params)
        train_matrix = xgb.DMatrix(data.features, label=labels, nthread=threads)
        train_matrix.set_group(data.group_sizes)
        evals = []
        if valid is not None:
            valid_labels = _ranking_labels(valid.labels, "NDCG early stopping")
            valid_matrix = xgb.DMatrix(valid.features, label=valid_labels.astype(np.float32),
                                       nthread=threads)
            valid_matrix.set_group(valid.group_sizes)
            evals = [(valid_matrix, "val")]
        class Rounds(xgb.callback.TrainingCallback):  # the progress bar, a round each
            def after_iteration(self, model: Any, epoch: int, evals_log: Any) -> bool:
                bar.update(1)
                return False  # never stops training

        with progress(None, self.method, unit="round", total=self._n_rounds()) as bar:
            booster = xgb.train(params, train_matrix, num_boost_round=self._n_rounds(),
                                evals=evals, early_stopping_rounds=self.early_stopping_rounds
                                if valid is not None else None, verbose_eval=False,
                                callbacks=[Rounds()])
        if valid is not None:
            self.best_iteration_ = int(booster.best_iteration) + 1  # trees kept, like LightGBM
        return booster

    # -- score ------------------------------------------------------------------------------

    def score(self, batch: CandidateSet) -> torch.Tensor:
        """Predicts the real candidates' scores.

        Args:
            batch: ``B`` padded lists with the training features, ``features [B, L, F]``.

        Returns:
            ``[B, L]`` float32 scores on the batch's device, higher is better; ``-inf`` at
            padding.
        """
        if self.model_ is None or self.feature_names_ is None:
            raise RuntimeError(f"{type(self).__name__} is not fitted: call fit() or load()")
        self.check_features(batch)
        mask = batch.mask
        scores = torch.full(mask.shape, float("-inf"), dtype=torch.float32,
                            device=batch.features.device)
        features = batch.features.detach()[mask].cpu().to(torch.float32).numpy()
        if len(features) == 0:
            return scores
        predicted = np.asarray(self._predict(features), dtype=np.float32)
        scores[mask] = torch.from_numpy(predicted).to(scores.device)
        return scores

    def _predict(self, features: np.ndarray) -> np.ndarray:
        """``[N]`` scores of ``[N, F]`` candidates."""
        # small batches (one object's list, as an online recommender sends) are predicted in
        # the calling thread: a thread pool per call costs ~70 ms (scikit-learn), and OpenMP
        # threads that spin after each call take the cores concurrent requests need (LightGBM,
        # whose trees are walked by the compiled FlatForest instead: the same scores, faster)
        small = len(features) < 10_000
        if self.backend == "sklearn":  # a FlatForest (scikit-learn's trees, flattened)
            return self.model_.predict(features)
        if self.backend == "lightgbm":
            flat = self._flat_forest() if small else None
            if flat is not None:
                return flat.predict(features)
            return self.model_.predict(features, num_iteration=self.best_iteration_ or 0,
                                       num_threads=_threads(self.n_jobs))
        import xgboost as xgb

        matrix = xgb.DMatrix(features, nthread=_threads(self.n_jobs))
        end = self.best_iteration_ or 0
        return self.model_.predict(matrix, iteration_range=(0, end))

    def _flat_forest(self) -> FlatForest | None:
        """The LightGBM booster's trees flattened for small batches (None: not flattenable)."""
        cached = self.__dict__.get("_flat")
        if cached is None or cached[0] is not self.model_:
            try:
                flat = FlatForest.from_booster(self.model_, self.best_iteration_ or 0)
            except ValueError:  # categorical splits, linear trees: LightGBM's own predict
                flat = None
            cached = self._flat = (self.model_, flat)
        return cached[1]

    def feature_importance(self) -> dict[str, float]:
        """Importance of each feature: impurity decrease (scikit-learn) or total split gain.

        Returns:
            Feature name -> importance (0 for features never used).
        """
        if self.model_ is None or self.feature_names_ is None:
            raise RuntimeError(f"{type(self).__name__} is not fitted: call fit() or load()")
        names = self.feature_names_
        if self.backend == "sklearn":
            values = self.model_.importances
            if values is None:  # a forest saved by the release before, without them
                raise RuntimeError("this forest was saved without its feature importances")
        elif self.backend == "lightgbm":
            values = self.model_.feature_importance(
                importance_type="gain", iteration=self.best_iteration_ or None)
        else:
            gains = self.model_.get_score(importance_type="total_gain")
            values = [gains.get(f"f{i}", 0.0) for i in range(len(names))]
        return {name: float(v) for name, v in zip(names, values, strict=True)}

    # -- model files ------------------------------------------------------------------------

    def is_fitted(self) -> bool:
        """Whether a library model is fitted or loaded."""
        return self.model_ is not None

    def _save_files(self, folder: Path) -> list[str]:
        """Writes the library's model file.

        ``forest.npz`` (scikit-learn's trees as :class:`FlatForest` arrays), ``model.txt``
        (LightGBM's text format) or ``model.json`` (XGBoost's JSON format).
        """
        model_file = folder / MODEL_FILES[self.backend]
        if self.backend == "sklearn":
            self.model_.save(model_file)
            return [model_file.name]
        with atomic_write(model_file) as partial:  # never through a link at the name
            if self.backend == "lightgbm":
                self.model_.save_model(str(partial), num_iteration=-1)
            else:  # XGBoost picks the format from the name: asked for JSON explicitly
                partial.write_bytes(bytes(self.model_.save_raw(raw_format="json")))
        return [model_file.name]

    def _manifest_extras(self) -> dict[str, Any]:
        return {"best_iteration": self.best_iteration_,
                "library_version": _library_version(self.backend)}

    def _load_files(self, folder: Path, manifest: Mapping[str, Any]) -> None:
        """Reads the library's model file (already checked against the manifest's digest).

        Raises:
            ValueError: the manifest does not list the model file, or the library cannot
                read it (the message names the file).
        """
        model_file = folder / MODEL_FILES[self.backend]
        if model_file.name not in manifest["files"] or self.feature_names_ is None:
            raise UnreadableFileError(f"{folder / MANIFEST_FILE}: does not list "
                                      f"{model_file.name} or lacks the feature names")
        if self.backend == "sklearn":
            self.model_ = load_forest(model_file)
            if self.model_.n_features > len(self.feature_names_):
                raise ValueError(f"{model_file}: splits on feature {self.model_.n_features - 1}"
                                 f" of {len(self.feature_names_)}")
        else:
            try:
                self.model_ = _load_booster(self.backend, model_file, self.n_jobs)
            except Exception as error:  # the library's own parse errors
                raise ValueError(f"{model_file}: not a readable {self.backend} model "
                                 f"({type(error).__name__}: {error})") from None
        self.best_iteration_ = manifest["best_iteration"]

    def _forest(self, n_features: int) -> Any:
        raise NotImplementedError(f"{type(self).__name__} has no scikit-learn backend")


def _load_booster(backend: str, model_file: Path, n_jobs: int) -> Any:
    """A LightGBM (text) or XGBoost (JSON) booster read from its native model file."""
    if backend == "lightgbm":
        import lightgbm as lgb

        return lgb.Booster(model_file=str(model_file))
    import xgboost as xgb

    booster = xgb.Booster()
    booster.load_model(str(model_file))
    booster.set_param({"nthread": _threads(n_jobs)})
    return booster


class RandomForestRanker(_TreeRanker):
    """Random Forest (Breiman, Machine Learning 2001) as a pointwise ranker (§4.3.2).

    ``T`` regression trees, each grown on a bootstrap sample of the candidates to at most ``l``
    leaves, choosing each split among ``m`` random features; the score is the trees' mean
    prediction of the relevance label. Table III: ``T = 300``, ``m = 4`` (Breiman's default
    for the 13 features), ``l = 1000`` for Bibsonomy and LastFM, 300 for MovieLens, YahooVideo
    and YouTube.

    Args:
        n_trees: ``T``, the number of trees.
        n_leaves: ``l``, the maximum leaves per tree (``max_leaf_nodes`` / ``num_leaves``).
        max_features: ``m``: features tried per split, a count (int) or a fraction of the
            features (float); None: Breiman's ``floor(log2(M + 1) + 0.5)``.
        min_leaf_size: fewest candidates in a leaf.
        bagging_fraction: the rows each tree sees, LightGBM backend only (it samples without
            replacement; 0.632 is the expected distinct share of a bootstrap sample).
            scikit-learn draws Breiman's bootstrap (``N`` rows with replacement).
        backend: ``"sklearn"`` (``RandomForestRegressor``) or ``"lightgbm"``
            (``boosting="rf"``).
        k: the NDCG cut-off of early stopping (LightGBM backend).
        early_stopping_rounds: stop adding trees when NDCG@k on ``val`` has not improved for
            this many (LightGBM backend only); None: grow all ``T`` trees, as the paper.
        n_jobs: threads (``-1``: all cores).
        seed: seed of the bootstrap and feature sampling.
        params: extra arguments of ``RandomForestRegressor`` or LightGBM parameters, applied
            last.
    """

    n_trees: int
    n_leaves: int
    max_features: int | float | None
    min_leaf_size: int
    bagging_fraction: float

    backends = ("sklearn", "lightgbm")
    method = "RF"

    def __init__(
        self,
        n_trees: int = 300,
        n_leaves: int = 1000,
        max_features: int | float | None = None,
        min_leaf_size: int = 1,
        bagging_fraction: float = 0.632,
        backend: str = "sklearn",
        k: int = 5,
        early_stopping_rounds: int | None = None,
        n_jobs: int = -1,
        seed: int = 0,
        params: Mapping[str, Any] | None = None,
    ) -> None:
        if backend == "sklearn" and early_stopping_rounds is not None:
            raise ValueError("the scikit-learn forest has no early stopping: use "
                             "backend='lightgbm' or early_stopping_rounds=None")
        if n_trees < 1 or n_leaves < 2:
            raise ValueError(f"need n_trees >= 1 and n_leaves >= 2, got {n_trees}, {n_leaves}")
        if not 0.0 < bagging_fraction < 1.0:
            raise ValueError(f"bagging_fraction must be in (0, 1), got {bagging_fraction}")
        self._init_common(backend, k, early_stopping_rounds, n_jobs, seed, params)

    def features_per_split(self, n_features: int) -> int:
        """``m`` for ``M = n_features`` features.

        Example:
            >>> RandomForestRanker().features_per_split(13), RandomForestRanker(
            ...     max_features=0.5).features_per_split(13)
            (4, 6)
        """
        if self.max_features is None:
            m = breiman_max_features(n_features)
        elif isinstance(self.max_features, float):
            m = int(self.max_features * n_features)
        else:
            m = int(self.max_features)
        return min(max(1, m), n_features)

    def _n_rounds(self) -> int:
        return self.n_trees

    def _forest(self, n_features: int) -> Any:
        """The unfitted scikit-learn forest for ``n_features`` features."""
        from sklearn.ensemble import RandomForestRegressor

        return RandomForestRegressor(
            n_estimators=self.n_trees, max_leaf_nodes=self.n_leaves,
            max_features=self.features_per_split(n_features),
            min_samples_leaf=self.min_leaf_size, bootstrap=True, n_jobs=self.n_jobs,
            random_state=self.seed, **self.params)

    def _fit_sklearn(self, data: FlatLists, valid: FlatLists | None) -> Any:
        """Grows the forest in 20 steps (``warm_start``), for the progress bar.

        scikit-learn draws each added tree's seed as a one-step fit would: the same trees.
        """
        forest = self._forest(data.features.shape[1])
        step = max(1, -(-self.n_trees // 20))
        with progress(None, self.method, unit="tree", total=self.n_trees) as bar:
            for grown in range(step, self.n_trees + step, step):
                forest.set_params(n_estimators=min(grown, self.n_trees), warm_start=True)
                forest.fit(data.features, data.labels)
                bar.update(len(forest.estimators_) - bar.n)
        forest.set_params(warm_start=False)
        return FlatForest.from_sklearn(forest)  # scored and saved without scikit-learn

    def _lightgbm_params(self, n_features: int) -> dict[str, Any]:
        return {
            "objective": "regression", "boosting": "rf", "num_leaves": self.n_leaves,
            "bagging_fraction": self.bagging_fraction, "bagging_freq": 1,
            "feature_fraction_bynode": self.features_per_split(n_features) / n_features,
            "min_data_in_leaf": self.min_leaf_size, "min_sum_hessian_in_leaf": 0.0,
        }


class MARTRanker(_TreeRanker):
    """MART, gradient-boosted regression trees (Friedman, Annals of Statistics 2001), §4.3.3.

    A pointwise ranker: ``i`` trees of ``l`` leaves, each fitted to the residuals of the
    squared error on the relevance labels, added with learning rate ``lr``. Table III:
    ``l = 5``, ``lr = 0.1``, ``i = 1500`` for every dataset.

    Args:
        n_leaves: ``l``, leaves per tree.
        learning_rate: ``lr``, the shrinkage.
        n_iterations: ``i``, boosting iterations (trees).
        min_leaf_size: fewest candidates in a leaf (LightGBM ``min_data_in_leaf``; XGBoost's
            ``min_child_weight`` keeps its default 1, one candidate under squared error).
        backend: ``"lightgbm"`` (``objective="regression"``) or ``"xgboost"``
            (``reg:squarederror``).
        k: the NDCG cut-off of early stopping.
        early_stopping_rounds: stop when NDCG@k on ``val`` has not improved for this many
            iterations; None: all ``i`` iterations, as the paper.
        n_jobs: threads (``-1``: all cores).
        seed: the library's seed.
        params: extra LightGBM or XGBoost parameters, applied last.
        dask: train on a Dask cluster through LightGBM's Dask interface (ours; module
            docstring): ``address`` (None: a local cluster of ``n_workers`` processes for the
            fit) and ``partitions``. None: in this process.
        max_train_lists: learn from a sample of at most this many lists, drawn with ``seed``
            (ours, for scale: a fit's time grows with its candidates); None: all, as the paper.
    """

    n_leaves: int
    learning_rate: float
    n_iterations: int
    min_leaf_size: int
    dask: Mapping[str, Any] | None

    backends = ("lightgbm", "xgboost")
    method = "MART"
    lightgbm_objective: ClassVar[str] = "regression"
    xgboost_objective: ClassVar[str] = "reg:squarederror"

    def __init__(
        self,
        n_leaves: int = 5,
        learning_rate: float = 0.1,
        n_iterations: int = 1500,
        min_leaf_size: int = 1,
        backend: str = "lightgbm",
        k: int = 5,
        early_stopping_rounds: int | None = None,
        n_jobs: int = -1,
        seed: int = 0,
        params: Mapping[str, Any] | None = None,
        dask: Mapping[str, Any] | None = None,
        max_train_lists: int | None = None,
    ) -> None:
        if n_leaves < 2 or n_iterations < 1 or learning_rate <= 0:
            raise ValueError(f"need n_leaves >= 2, n_iterations >= 1 and learning_rate > 0, "
                             f"got {n_leaves}, {n_iterations}, {learning_rate}")
        if max_train_lists is not None and max_train_lists < 1:
            raise ValueError(f"max_train_lists must be >= 1 or None, got {max_train_lists}")
        self._init_common(backend, k, early_stopping_rounds, n_jobs, seed, params, dask)

    def _n_rounds(self) -> int:
        return self.n_iterations

    def _lightgbm_params(self, n_features: int) -> dict[str, Any]:
        return {"objective": self.lightgbm_objective, "num_leaves": self.n_leaves,
                "learning_rate": self.learning_rate, "min_data_in_leaf": self.min_leaf_size}

    def _xgboost_params(self) -> dict[str, Any]:
        return {"objective": self.xgboost_objective, "max_leaves": self.n_leaves,
                "eta": self.learning_rate}


class LambdaMARTRanker(MARTRanker):
    """λ-MART (Burges, MSR-TR-2010-82; Wu et al., Information Retrieval 2010), §4.3.4.

    Boosted regression trees as MART, fitted to λ-gradients: for each pair of candidates of
    one object with different labels, the RankNet gradient scaled by the change of NDCG that
    swapping the two would cause. Each object's candidate list is one query group. Table III:
    ``l = 5``, ``lr = 0.1``, ``i = 1500``.

    Args:
        n_leaves: ``l``, leaves per tree.
        learning_rate: ``lr``, the shrinkage.
        n_iterations: ``i``, boosting iterations (trees).
        truncation_level: only pairs with a candidate ranked in the top ``truncation_level``
            get λs (LightGBM ``lambdarank_truncation_level``, XGBoost
            ``lambdarank_num_pair_per_sample`` with ``topk`` pairs); near the evaluated ``k``.
        min_leaf_size: fewest candidates in a leaf (LightGBM ``min_data_in_leaf``).
        backend: ``"lightgbm"`` (``objective="lambdarank"``) or ``"xgboost"`` (``rank:ndcg``).
        k: the NDCG cut-off of early stopping and of LightGBM's ``eval_at``.
        early_stopping_rounds: stop when NDCG@k on ``val`` has not improved for this many
            iterations; None: all ``i`` iterations, as the paper.
        n_jobs: threads (``-1``: all cores).
        seed: the library's seed.
        params: extra LightGBM or XGBoost parameters, applied last.
        dask: train through LightGBM's Dask interface (``DaskLGBMRanker``, ours; module
            docstring): ``address`` (None: a local cluster of ``n_workers`` processes for the
            fit) and ``partitions``. None: in this process.
        max_train_lists: learn from a sample of at most this many lists, drawn with ``seed``
            (ours, for scale); None: all, as the paper.
    """

    truncation_level: int

    method = "λ-MART"
    listwise = True
    lightgbm_objective = "lambdarank"
    xgboost_objective = "rank:ndcg"

    def __init__(
        self,
        n_leaves: int = 5,
        learning_rate: float = 0.1,
        n_iterations: int = 1500,
        truncation_level: int = 10,
        min_leaf_size: int = 1,
        backend: str = "lightgbm",
        k: int = 5,
        early_stopping_rounds: int | None = None,
        n_jobs: int = -1,
        seed: int = 0,
        params: Mapping[str, Any] | None = None,
        dask: Mapping[str, Any] | None = None,
        max_train_lists: int | None = None,
    ) -> None:
        if truncation_level < 1:
            raise ValueError(f"truncation_level must be >= 1, got {truncation_level}")
        super().__init__(n_leaves=n_leaves, learning_rate=learning_rate,
                         n_iterations=n_iterations, min_leaf_size=min_leaf_size,
                         backend=backend, k=k, early_stopping_rounds=early_stopping_rounds,
                         n_jobs=n_jobs, seed=seed, params=params, dask=dask,
                         max_train_lists=max_train_lists)

    def _lightgbm_params(self, n_features: int) -> dict[str, Any]:
        return {**super()._lightgbm_params(n_features),
                "lambdarank_truncation_level": self.truncation_level, "eval_at": [self.k]}

    def _xgboost_params(self) -> dict[str, Any]:
        return {**super()._xgboost_params(), "lambdarank_pair_method": "topk",
                "lambdarank_num_pair_per_sample": self.truncation_level,
                "ndcg_exp_gain": False}
