"""AdaRank (Xu and Li, SIGIR 2007) with single features as weak rankers, as in Canuto et al.

AdaRank plugs the evaluation measure (here NDCG@k) into boosting: it keeps a distribution
``P_t`` over the training lists, picks at each round the weak ranker with the best
``P_t``-weighted NDCG@k, and shifts weight to the lists the combined ranker orders badly.
Canuto et al. (JIDM 2013, Section 4.3.6) use each of the 13 features, alone, as a weak ranker
and ``i = 300`` rounds (``i = 100`` for YouTube; Table III).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, Self

import torch

from tagtorch.candidates.candidate_set import CandidateSet
from tagtorch.errors import UnreadableFileError
from tagtorch.metrics.functional import ndcg_at_k
from tagtorch.rankers.base import BaseRanker
from tagtorch.storage import load_tensors, save_tensors

log = logging.getLogger(__name__)

__all__ = ["AdaRank", "weak_ranker_ndcg"]

Normalization = Literal["list", "zscore", "none"]

_EPS = 1e-12  # floor of the denominator of α (a weak ranker perfect on every list)


def weak_ranker_ndcg(
    features: torch.Tensor, labels: torch.Tensor, mask: torch.Tensor, k: int
) -> torch.Tensor:
    """NDCG@k of every feature, used alone as a ranker, on every list, in one batched call.

    Ties follow the metric convention of :mod:`tagtorch.metrics.functional` (candidate order);
    the ideal ranking is the list's own labels (relevant items missing from the list are not
    counted: a perfect order of the candidates scores 1).

    Args:
        features: ``[B, L, F]`` weak-ranker scores.
        labels: ``[B, L]`` relevance grades.
        mask: ``[B, L]`` bool, True at real candidates.
        k: NDCG cut-off.

    Returns:
        ``[B, F]`` NDCG@k (NaN for a list without a relevant candidate).

    Example:
        >>> features = torch.tensor([[[3.0, 1.0], [2.0, 3.0], [1.0, 2.0]]])
        >>> ndcg = weak_ranker_ndcg(features, torch.tensor([[1.0, 0.0, 0.0]]),
        ...                         torch.ones(1, 3, dtype=torch.bool), k=3)
        >>> [round(v, 4) for v in ndcg[0].tolist()]
        [1.0, 0.5]
    """
    b, length, f = features.shape
    scores = features.permute(0, 2, 1).reshape(b * f, length)
    expand = (b, f, length)
    flat_labels = labels.unsqueeze(1).expand(expand).reshape(b * f, length)
    flat_mask = mask.unsqueeze(1).expand(expand).reshape(b * f, length)
    return ndcg_at_k(scores, flat_labels, flat_mask, k).reshape(b, f)


WEIGHTS_FILE = "weights.pt"
"""Name of the tensors (weights, z-score statistics) in a saved AdaRank folder."""


class AdaRank(BaseRanker):
    """AdaRank (Xu and Li 2007, Figure 1) with single-feature weak rankers and NDCG@k.

    The version implemented (on the training lists that hold at least one relevant and one
    irrelevant candidate; other lists get the same NDCG under every ranking and are dropped):

    1. ``P_1(q) = 1 / m`` over the ``m`` training lists.
    2. For ``t = 1..n_iterations``: choose the weak ranker ``h_t`` (a feature; with
       ``negative_features`` also a negated feature) maximizing ``Σ_q P_t(q) E(h, q)``, where
       ``E(h, q)`` is the NDCG@k of list ``q`` ranked by ``h`` (ties by candidate order; the
       first weak ranker wins ties), excluding, if ``no_repeat``, the weak ranker chosen at
       ``t - 1``;
       ``α_t = ½ ln(Σ_q P_t(q) (1 + E(h_t, q)) / Σ_q P_t(q) (1 - E(h_t, q)))`` (the
       denominator floored at 1e-12 when ``h_t`` is perfect on every list);
       ``f_t = Σ_{s <= t} α_s h_s``;
       ``P_{t+1}(q) = exp(-E(f_t, q)) / Σ_q' exp(-E(f_t, q'))`` (as in Xu and Li).
    3. The model is ``f_T``, stored as one weight per feature: ``score = x̃ · w``.

    Only the "no weak ranker twice in a row" rule is borrowed from RankLib (whose AdaRank, with
    its default ``trainWithEnqueue``, additionally rolls back the previous round and queues the
    feature for a later pass, updates ``P`` with ``exp(-α_t E(f_t, q))`` and stops when the
    training NDCG improves by less than a tolerance); here there is no rollback, no queue and
    no early stop: exactly ``n_iterations`` rounds run.

    Normalization ``x̃`` (default ``"list"``): each feature is min-max scaled to [0, 1] within
    each list (LETOR's query-level normalization, as in Xu and Li's experiments; a feature
    constant in a list gives 0), so that the combined ranker adds comparable scales and scoring
    needs no training statistics. ``"zscore"`` uses the training candidates' mean and standard
    deviation, ``"none"`` the raw values. A single weak ranker's ranking never depends on it.

    Args:
        n_iterations: the number of rounds ``i`` (Table III: 300; 100 for YouTube).
        k: NDCG cut-off of the measure ``E`` (the paper's evaluation: 5).
        normalization: ``"list"``, ``"zscore"`` or ``"none"`` (see above).
        negative_features: also offer each negated feature as a weak ranker.
        no_repeat: never choose the previous round's weak ranker (RankLib's rule).
    """

    n_iterations: int
    k: int
    negative_features: bool
    no_repeat: bool

    def __init__(
        self,
        n_iterations: int = 300,
        k: int = 5,
        normalization: Normalization = "list",
        negative_features: bool = False,
        no_repeat: bool = True,
    ) -> None:
        if n_iterations < 1:
            raise ValueError(f"n_iterations must be >= 1, got {n_iterations}")
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        if normalization not in ("list", "zscore", "none"):
            raise ValueError(f"normalization must be 'list', 'zscore' or 'none', "
                             f"got {normalization!r}")
        self.normalization: Normalization = normalization
        self.feature_names_: tuple[str, ...] | None = None
        self.mean_: torch.Tensor | None = None
        self.std_: torch.Tensor | None = None
        self.weight_: torch.Tensor | None = None
        self.history_: list[dict[str, float | int | str]] = []
        self.query_weights_: torch.Tensor | None = None

    @property
    def weak_ranker_names(self) -> tuple[str, ...]:
        """Names of the weak rankers: the features, then (``-name``) the negated ones."""
        names = tuple(self.feature_names_ or ())
        return names + tuple(f"-{n}" for n in names) if self.negative_features else names

    def _transform(
        self, features: torch.Tensor, mask: torch.Tensor, dtype: torch.dtype
    ) -> torch.Tensor:
        """``[B, L, F']`` normalized features (negated copies appended), 0 at padding."""
        x = features.to(dtype)
        real = mask.unsqueeze(-1)
        if self.normalization == "list":
            low = torch.where(real, x, torch.full_like(x, math.inf)).amin(1, keepdim=True)
            high = torch.where(real, x, torch.full_like(x, -math.inf)).amax(1, keepdim=True)
            span = high - low
            x = torch.where(span > 0, (x - low) / torch.where(span > 0, span, 1.0), 0.0)
        elif self.normalization == "zscore":
            if self.mean_ is None or self.std_ is None:
                raise RuntimeError("AdaRank is not fitted: call fit() or load()")
            x = (x - self.mean_.to(x.device, dtype)) / self.std_.to(x.device, dtype)
        x = torch.where(real, x, torch.zeros((), dtype=dtype, device=x.device))
        return torch.cat([x, -x], dim=-1) if self.negative_features else x

    def fit(self, train: CandidateSet, val: CandidateSet | None = None) -> Self:
        """Runs ``n_iterations`` AdaRank rounds on ``train`` (``val`` is not used).

        Raises:
            ValueError: when no list holds both a relevant and an irrelevant candidate.
        """
        self.feature_names_ = tuple(train.feature_names)
        dtype = torch.float64
        if self.normalization == "zscore":
            real = train.features.to(dtype)[train.mask]
            self.mean_ = real.mean(0)
            std = real.std(0, unbiased=False)
            self.std_ = torch.where(std > 0, std, torch.ones_like(std))
        relevant = (train.labels > 0) & train.mask
        keep = relevant.any(-1) & (train.mask & ~relevant).any(-1)
        if not bool(keep.any()):
            raise ValueError("AdaRank needs a list with a relevant and an irrelevant candidate")
        mask = train.mask[keep]
        labels = train.labels[keep].to(dtype)
        x = self._transform(train.features[keep], mask, dtype)  # [m, L, F']
        weak = weak_ranker_ndcg(x, labels, mask, self.k)  # [m, F'], fixed across rounds
        m, n_weak = weak.shape
        p = torch.full((m,), 1.0 / m, dtype=dtype, device=x.device)
        combined = torch.zeros(labels.shape, dtype=dtype, device=x.device)
        weight = torch.zeros(n_weak, dtype=dtype, device=x.device)
        names = self.weak_ranker_names
        self.history_ = []
        last = -1
        for _ in range(self.n_iterations):
            weighted = p @ weak  # [F'] Σ_q P_t(q) E(h, q)
            if self.no_repeat and last >= 0 and n_weak > 1:
                weighted[last] = -math.inf
            h = int(torch.argmax(weighted))  # first maximum on ties
            e = weak[:, h]
            num = float((p * (1 + e)).sum())
            den = float((p * (1 - e)).sum())
            alpha = 0.5 * math.log(num / max(den, _EPS))
            weight[h] += alpha
            combined = combined + alpha * x[..., h]
            e_combined = ndcg_at_k(combined, labels, mask, self.k)
            p = torch.softmax(-e_combined, dim=0)  # exp(-E(f_t, q)) / Σ
            self.history_.append({"weak_ranker": h, "name": names[h], "alpha": alpha,
                                  "weighted_ndcg": float(weighted[h]),
                                  "train_ndcg": float(e_combined.mean())})
            last = h
        self.weight_ = weight.cpu()
        self.query_weights_ = p.cpu()
        log.info("AdaRank: %d rounds on %d lists, NDCG@%d %.4f on them", self.n_iterations, m,
                 self.k, self.history_[-1]["train_ndcg"])
        return self

    @property
    def feature_weights(self) -> dict[str, float]:
        """The combined ranker ``Σ α h`` as one weight per weak ranker name."""
        if self.weight_ is None:
            raise RuntimeError("AdaRank is not fitted: call fit() or load()")
        return dict(zip(self.weak_ranker_names, self.weight_.tolist(), strict=True))

    def score(self, batch: CandidateSet) -> torch.Tensor:
        """``[B, L]`` ``f_T(x) = Σ_t α_t h_t(x̃)`` on the batch's device (padding is meaningless).

        Computed in float64, returned in the features' dtype.
        """
        if self.weight_ is None:
            raise RuntimeError("AdaRank is not fitted: call fit() or load()")
        self.check_features(batch)
        x = self._transform(batch.features, batch.mask, torch.float64)
        return (x @ self.weight_.to(x.device)).to(batch.features.dtype)

    def is_fitted(self) -> bool:
        """Whether the weights are fitted or loaded."""
        return self.weight_ is not None

    def _save_files(self, folder: Path) -> list[str]:
        """Writes the weights and the z-score statistics (if any) to ``weights.pt``."""
        assert self.weight_ is not None
        tensors = {"weight": self.weight_}
        if self.mean_ is not None and self.std_ is not None:
            tensors.update(mean=self.mean_, std=self.std_)
        save_tensors(tensors, folder / WEIGHTS_FILE)
        return [WEIGHTS_FILE]

    def _manifest_extras(self) -> dict[str, Any]:
        return {"history": self.history_}

    def _load_files(self, folder: Path, manifest: Mapping[str, Any]) -> None:
        """Reads ``weights.pt`` and the rounds' history.

        Raises:
            ValueError: the file is not listed or lacks the weights (naming it).
        """
        path = folder / WEIGHTS_FILE
        tensors = load_tensors(path) if WEIGHTS_FILE in manifest["files"] else {}
        if "weight" not in tensors or (self.normalization == "zscore") != ("mean" in tensors):
            raise UnreadableFileError(f"{path}: expected the weights of a {self.normalization} "
                                      "AdaRank listed in the manifest")
        self.weight_ = tensors["weight"]
        self.mean_, self.std_ = tensors.get("mean"), tensors.get("std")
        self.history_ = manifest.get("history", [])
