"""An ensemble of item rankers weighted on validation (ours), the Do-Rank variant that competes.

Do-Rank+ alone ties the two-dimensional model and loses to the tag-aware item-item baselines
(EASE^R and RP3beta on the stacked user/tag x item matrix; ``docs/dorank_results.md``). The
Do-Rank paper's CP model sees the (user, tag, item) interactions that the item-item models
cannot, and they see the item neighbourhoods a rank-256 CP smooths away, so this model (ours, not
a published method) combines them:

    ``s(q, i) = sum_m w_m z_m(q, i)``,

where ``z_m(q, .)`` is member ``m``'s score of every item for query ``q``, standardized over the
items the query's user did not tag in training (zero mean, unit variance over the items that
can be ranked: the members' scales differ by orders of magnitude, and the user's own items,
never ranked, score far above the rest in the item-item models), and the
weights ``w_m`` are chosen on the validation queries (DCG@10, the project's early-stopping
score) from ``weight_grid`` for every member (all combinations; the first of equal scores in
grid order is kept; at least one weight is positive). Before that, each member's own settings
are chosen on the same validation queries from ``member_grids`` (every point fitted; four per
member in the experiments, the budget every baseline gets). A member that the run has fitted
already, with the same settings and the same grid chosen the same way (the item task's
``tune``), is taken as it is instead (:meth:`ItemEnsemble.reuse`): the same model, fitted
once. Nothing in it reads a test query.
Per-user queries score each member's per-user form (:func:`~tagtorch.itemrec.base.user_scores`
with the ``"profile"`` aggregation, or the member's own), standardized the same way.

Tried and not kept, on MovieLens seed 0's validation users (DCG@10 of the per-user queries;
tag-aware EASE^R alone: 0.409): the prior inside the training instead of after it, Do-Rank+
trained by its smoothed DCG on ``w z_prior + s_plus`` with the standardized EASE^R scores as a
fixed term (``w`` 1 and 3, lambda 3e-3 and 1e-2): 0.403-0.411, best at epochs 0-2, so Do-Rank+'s
(user, tag) set objective does not correct the prior's per-user ranking; the ensemble here
reached 0.454 on the same users.

The members are configs (``_target_`` and settings, built with Hydra, ``_recursive_: false``
in the model's config) so that they can be rebuilt with each grid point and the task's seed;
a saved ensemble keeps each fitted member in ``member_NAME`` (its own model folder) and the
weights in the manifest; loading imports member classes from ``tagtorch.itemrec`` only.
"""

from __future__ import annotations

import functools
import itertools
import json
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar, Self, cast

import numpy as np
import torch
from torch import Tensor

from tagtorch.data.ragged import Ragged
from tagtorch.errors import UnreadableFileError
from tagtorch.itemrec.base import FactorModel, ItemRanker, dcg_at_k, user_scores
from tagtorch.itemrec.baselines import ArrayModel
from tagtorch.itemrec.data import ItemRecData, Queries, TagProfile
from tagtorch.settings import ModelTask, SignatureSettings, build_trusted, trusted_config
from tagtorch.storage import (
    class_name,
    load_arrays,
    model_folder,
    plain_json,
    read_manifest,
    save_arrays,
    saved_entries,
    trusted_class,
    write_manifest,
)

log = logging.getLogger(__name__)

__all__ = ["ItemEnsemble", "standardized"]

MEMBER_MODULES = ("tagtorch.itemrec.",)
"""Where the member classes a config or a saved ensemble may name come from."""

MEMBER_KINDS: tuple[type, ...] = (FactorModel, ArrayModel)
"""The classes a member must be (a trained factorization or an array model)."""

KNOWN_FILE = "known_items.npz"
"""The items each user tagged in training: the items a member's scores are standardized
without."""
MEMBER_PREFIX = "member_"
"""A saved ensemble keeps member ``NAME`` in the subfolder ``member_NAME``."""


def standardized(scores: Tensor, mask: Tensor | None = None) -> Tensor:
    """Each row minus its mean, divided by its standard deviation (a constant row: zeros).

    With ``mask`` (``[B, I]`` bool), the mean and deviation are those of the row's masked
    entries (the items the query ranks); every entry is shifted and scaled by them.

    Example:
        >>> standardized(torch.tensor([[1.0, 3.0], [2.0, 2.0]])).tolist()
        [[-1.0, 1.0], [0.0, 0.0]]
        >>> standardized(torch.tensor([[1.0, 3.0, 9.0]]),
        ...              torch.tensor([[True, True, False]])).tolist()
        [[-1.0, 1.0, 7.0]]
    """
    weights = (torch.ones_like(scores) if mask is None
               else mask.to(scores.dtype))
    count = weights.sum(1, keepdim=True).clamp_min(1.0)
    mean = (scores * weights).sum(1, keepdim=True) / count
    centred = scores - mean
    spread = ((centred.square() * weights).sum(1, keepdim=True) / count).sqrt()
    return torch.where(spread > 0, centred / spread.clamp_min(1e-12), torch.zeros_like(centred))


def _same_settings(a: ItemRanker, b: ItemRanker) -> bool:
    """Whether two models have the same class and settings.

    Their configs are compared as JSON, a factory (a trainer's, an optimizer's) by its class
    and keywords, other objects by their repr;
    ``checkpoint_dir`` says where a training keeps its state, not what it fits, and does not
    count (the item task gives its own fits one: the run's Do-Rank+ was refitted before).
    """
    if not isinstance(a, SignatureSettings) or not isinstance(b, SignatureSettings):
        return False
    a_config, b_config = ({k: v for k, v in model.config().items() if k != "checkpoint_dir"}
                          for model in (a, b))
    return json.dumps(a_config, sort_keys=True, default=_factory_form) == json.dumps(
        b_config, sort_keys=True, default=_factory_form)


def _factory_form(value: Any) -> Any:
    """A factory as its class and keywords (Hydra's partials and ours alike), else its repr."""
    if isinstance(value, functools.partial) and isinstance(value.func, type):
        return {"class": class_name(value.func), "args": repr(value.args), **value.keywords}
    return repr(value)


def _points(grid: Mapping[str, Sequence[Any]]) -> list[dict[str, Any]]:
    """The cartesian product of a ``{setting: values}`` grid (one empty point without one)."""
    names = list(grid)
    return [dict(zip(names, values, strict=True))
            for values in itertools.product(*(grid[name] for name in names))]


class ItemEnsemble(SignatureSettings):
    """Standardized member scores, weighted on validation (see the module docstring).

    Args:
        members: ``{name: config}``, each config a ``_target_`` item model and its settings.
        member_grids: ``{name: {setting: [values]}}``, each member's settings chosen on
            validation DCG@10 (a member without a grid, or with None, is fitted once).
        weight_grid: the values each member's weight is chosen from.
        seed: given to every member that takes a ``seed`` (the task sets it per seed).
    """

    task: ClassVar[ModelTask] = "itemrec"
    user_aggregate: ClassVar[str] = "profile"
    """Per-user queries score the members' per-user forms (:meth:`profile_scores`)."""
    config_settings = frozenset({"members"})

    members: dict[str, dict[str, Any]]
    member_grids: dict[str, dict[str, list[Any]]]
    weight_grid: list[float]
    seed: int

    def __init__(self, members: Mapping[str, Mapping[str, Any]],
                 member_grids: Mapping[str, Mapping[str, Sequence[Any]]] | None = None,
                 weight_grid: Sequence[float] = (0.0, 0.25, 0.5, 1.0), seed: int = 0) -> None:
        self.members = plain_json(members)
        self.member_grids = {name: plain_json(grid) for name, grid in (member_grids or {}).items()
                             if grid is not None}  # null: none (a config's way to drop one)
        self.weight_grid = [float(w) for w in weight_grid]
        if not self.members:
            raise ValueError("members: at least one item model config")
        unknown = set(self.member_grids) - set(self.members)
        if unknown:
            raise ValueError(f"member_grids: {sorted(unknown)} are not members")
        if not self.weight_grid or min(self.weight_grid) < 0 or max(self.weight_grid) <= 0:
            raise ValueError(f"weight_grid: values >= 0, one of them > 0, got {weight_grid}")
        for name, config in self.members.items():
            trusted_config(config, MEMBER_MODULES, MEMBER_KINDS, f"members.{name}")
        self.fitted_: dict[str, ItemRanker] = {}
        self.reused_: dict[str, tuple[ItemRanker, dict[str, Any]]] = {}
        self.weights_: dict[str, float] = {}
        self.choices_: dict[str, dict[str, Any]] = {}
        self.sizes: tuple[int, int] | None = None
        self.known_: Ragged | None = None

    def _build(self, name: str, point: Mapping[str, Any]) -> ItemRanker:
        config = {**self.members[name], **point}
        if "seed" in config:
            config["seed"] = self.seed
        return cast(ItemRanker, build_trusted(config, MEMBER_MODULES, MEMBER_KINDS,
                                              f"members.{name}"))

    def _member_scores(self, member: ItemRanker, users: Tensor, tags: Tensor,
                       profile: TagProfile | None) -> Tensor:
        """A member's standardized ``[B, n_items]`` scores: per (user, tag), or per user.

        Per-user scores are the member's per-user form: its own ``user_aggregate``, else the
        ``"profile"`` aggregation (never the max over all tags).
        """
        n_items, n_tags = self._check_sizes()
        if profile is None:
            scores = member.score(users, tags)
        else:
            scores = user_scores(member, users, profile, "profile", n_items, n_tags)
        return standardized(scores.detach().float().cpu(), self._ranked(users))

    def _ranked(self, users: Tensor) -> Tensor:
        """``[B, n_items]`` bool: the items each user did not tag in training (those ranked)."""
        if self.known_ is None:
            raise RuntimeError("ItemEnsemble is not fitted: call fit() or load()")
        known = self.known_.take(users.cpu().numpy())
        mask = torch.ones(len(users), self._check_sizes()[0], dtype=torch.bool)
        mask[torch.from_numpy(known.row_ids), torch.from_numpy(known.values)] = False
        return mask

    def _validation_scores(self, member: ItemRanker, queries: Queries, batch_size: int = 1024
                           ) -> tuple[Tensor, Tensor, Tensor]:
        """A member's standardized scores of the validation queries, their labels and mask."""
        scores, labels, masks = [], [], []
        for start in range(0, len(queries), batch_size):
            rows = np.arange(start, min(start + batch_size, len(queries)))
            gold, mask = queries.batch(rows, self._check_sizes()[0])
            profile = queries.profile.take(rows) if queries.profile is not None else None
            with torch.no_grad():
                batch = self._member_scores(member, torch.from_numpy(queries.users[rows]),
                                            torch.from_numpy(queries.tags[rows]), profile)
            scores.append(batch)
            labels.append(gold)
            masks.append(mask)
        return torch.cat(scores), torch.cat(labels), torch.cat(masks)

    def reuse(self, fitted: Mapping[str, tuple[ItemRanker, Mapping[str, Any], Mapping[str, Any]]]
              ) -> list[str]:
        """Takes members the run has fitted already, so that :meth:`fit` does not refit them.

        Args:
            fitted: ``{name: (model, grid, point)}``: a model fitted on the data :meth:`fit`
                will get, at ``point`` of ``grid``, chosen by validation DCG@10 (the task's
                tuning: the same validation queries and metric as the ensemble's own).

        A model is taken for member ``name`` only when ``grid`` is the member's own grid and
        the model's settings are those of the member at ``point`` (:meth:`_build`, compared
        as their configs); fit then gives what fitting the member's grid would give (up to
        equal validation scores, where either takes the first point).

        Returns:
            The members taken.
        """
        for name, (model, grid, point) in fitted.items():
            if name not in self.members or dict(grid) != self.member_grids.get(name, {}):
                continue
            if _same_settings(model, self._build(name, point)):
                self.reused_[name] = (model, dict(point))
        return list(self.reused_)

    def _member_choice(self, name: str, data: ItemRecData
                       ) -> tuple[ItemRanker, dict[str, Any], Tensor, Tensor, Tensor]:
        """A member at the best point of its grid, or the run's fit (:meth:`reuse`).

        Returns:
            The model, its point, its standardized validation scores, their labels and mask.
        """
        reused = self.reused_.get(name)
        points = [reused[1]] if reused else _points(self.member_grids.get(name, {}))
        best = None
        for point in points:
            model = reused[0] if reused else self._build(name, point).fit(data)
            scores, labels, mask = self._validation_scores(model, data.val_queries)
            value = float(dcg_at_k(scores, labels, mask, 10).mean())
            log.info("ensemble member %s %s%s: validation DCG@10 %.4f", name,
                     json.dumps(point), " (the run's fit)" if reused else "", value)
            if best is None or value > best[0]:
                best = (value, model, point, scores, labels, mask)
        assert best is not None
        return best[1:]

    def fit(self, data: ItemRecData) -> Self:
        """Fits every member (its grid chosen on validation, or reused), then the weights."""
        self.sizes = (data.n_items, data.n_tags)
        self.known_ = data.user_items
        validation: dict[str, Tensor] = {}
        labels = mask = None
        for name in self.members:
            (self.fitted_[name], self.choices_[name], validation[name], labels,
             mask) = self._member_choice(name, data)
        assert labels is not None and mask is not None
        self.weights_ = self._choose_weights(validation, labels, mask)
        log.info("ensemble weights %s", self.weights_)
        return self

    def _choose_weights(self, validation: Mapping[str, Tensor], labels: Tensor,
                        mask: Tensor) -> dict[str, float]:
        names = list(validation)
        best: tuple[float, tuple[float, ...]] | None = None
        for weights in itertools.product(self.weight_grid, repeat=len(names)):
            if sum(weights) <= 0:
                continue
            combined = sum((w * validation[n] for w, n in zip(weights, names, strict=True)
                            if w), torch.zeros_like(labels, dtype=torch.float32))
            value = float(dcg_at_k(combined, labels, mask, 10).mean())
            if best is None or value > best[0]:
                best = (value, weights)
        assert best is not None
        return dict(zip(names, best[1], strict=True))

    def _check_sizes(self) -> tuple[int, int]:
        if self.sizes is None:
            raise RuntimeError("ItemEnsemble is not fitted: call fit() or load()")
        return self.sizes

    def _check_fitted(self) -> tuple[int, int]:
        if not self.weights_:
            raise RuntimeError("ItemEnsemble is not fitted: call fit() or load()")
        return self._check_sizes()

    def _combined(self, users: Tensor, tags: Tensor, profile: TagProfile | None) -> Tensor:
        """The weighted standardized member scores."""
        n_items, _ = self._check_fitted()
        out = torch.zeros(len(users), n_items)
        for name, weight in self.weights_.items():
            if weight:
                out += weight * self._member_scores(self.fitted_[name], users, tags, profile)
        return out

    def score(self, users: Tensor, tags: Tensor) -> Tensor:
        """``[B, n_items]`` weighted standardized member scores of the ``(user, tag)`` queries."""
        return self._combined(users, tags, None)

    def profile_scores(self, users: Tensor, profile: TagProfile) -> Tensor:
        """``[B, n_items]`` per-user scores: the members' per-user forms, weighted."""
        return self._combined(users, users, profile)

    def save(self, path: str | Path) -> None:
        """Writes each member to ``member_NAME`` and the weights to the manifest."""
        self._check_fitted()
        folder = model_folder(path)
        for name, model in self.fitted_.items():
            model.save(folder / f"{MEMBER_PREFIX}{name}")
        assert self.known_ is not None
        save_arrays({"offsets": self.known_.offsets, "items": self.known_.values},
                    folder / KNOWN_FILE)
        write_manifest(folder, type(self), self.settings(),
                       [KNOWN_FILE, *(f"{MEMBER_PREFIX}{name}" for name in self.fitted_)],
                       sizes=list(self.sizes or ()), weights=self.weights_,
                       choices=self.choices_,
                       classes={n: class_name(type(m)) for n, m in self.fitted_.items()})

    @classmethod
    def load(cls, path: str | Path) -> Self:
        """Reads a folder written by :meth:`save` (member classes from ``tagtorch.itemrec``)."""
        folder = Path(path)
        manifest = read_manifest(folder, cls, saved_entries(folder))
        try:
            model = cls(**manifest["settings"])
            model.sizes = (int(manifest["sizes"][0]), int(manifest["sizes"][1]))
            model.weights_ = {str(n): float(w) for n, w in manifest["weights"].items()}
            model.choices_ = dict(manifest.get("choices", {}))
            known = load_arrays(folder / KNOWN_FILE, ["offsets", "items"])
            model.known_ = Ragged(known["offsets"].astype(np.int64),
                                  known["items"].astype(np.int64))
            for name, target in manifest["classes"].items():
                kind: Any = trusted_class(target, MEMBER_MODULES, MEMBER_KINDS,
                                          f"{folder}: member {name}")
                model.fitted_[name] = kind.load(folder / f"{MEMBER_PREFIX}{name}")
        except (KeyError, TypeError, ValueError, IndexError, AttributeError) as error:
            raise UnreadableFileError(f"{folder / 'manifest.json'}: not a saved ensemble "
                                      f"({error})") from error
        if set(model.fitted_) != set(model.weights_):
            raise UnreadableFileError(f"{folder}: the members and weights disagree")
        return model

