"""RankSVM (Joachims, KDD 2002) with a linear kernel, as in Canuto et al. (JIDM 2013).

Within each training list, every candidate ``i`` with a higher label than a candidate ``j``
(for binary labels: every relevant ``i`` and irrelevant ``j``) gives a ranking statement
``w · x_i > w · x_j``. RankSVM (Joachims 2002, optimization problem *OPT 2*) solves

``min_w ½ ||w||² + C Σ_(i,j) ξ_ij   s.t.   w · (x_i - x_j) >= 1 - ξ_ij,  ξ_ij >= 0``,

i.e. a linear SVM without intercept on the pairwise differences ``x_i - x_j``. Canuto et al.
(Section 4.3.1, Table III) use the SVM-rank tool with a linear kernel and cost ``j = 100``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, Self

import numpy as np
import torch

from tagtorch.candidates.candidate_set import CandidateSet
from tagtorch.errors import UnreadableFileError
from tagtorch.rankers.base import BaseRanker
from tagtorch.storage import load_tensors, save_tensors

log = logging.getLogger(__name__)

__all__ = ["RankSVM", "crucial_pairs"]


def crucial_pairs(
    labels: torch.Tensor,
    mask: torch.Tensor,
    max_pairs_per_list: int | None = None,
    generator: torch.Generator | None = None,
    chunk_size: int = 512,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Ordered candidate pairs of each list: ``i`` must rank above ``j``.

    A pair ``(i, j)`` of real candidates of the same list is *crucial* (Freund et al. 2003)
    when ``labels[i] > labels[j]``; with binary labels, ``i`` is relevant and ``j`` is not.
    Padding never forms pairs, whatever its label.

    Args:
        labels: ``[B, L]`` relevance grades.
        mask: ``[B, L]`` bool, True at real candidates.
        max_pairs_per_list: keep at most this many pairs per list, drawn uniformly without
            replacement (None: all pairs).
        generator: random generator of the subsampling (on the CPU).
        chunk_size: lists processed at once (bounds the ``[chunk, L, L]`` memory).

    Returns:
        ``(rows, i, j)``: three ``[P]`` long tensors (list index, position of the higher and
        of the lower candidate), sorted by list, then ``i``, then ``j``.

    Example:
        >>> labels = torch.tensor([[1.0, 0.0, 0.0], [0.0, 1.0, 9.0]])
        >>> mask = torch.tensor([[True, True, True], [True, True, False]])
        >>> crucial_pairs(labels, mask)
        (tensor([0, 0, 1]), tensor([0, 0, 1]), tensor([1, 2, 0]))
    """
    if max_pairs_per_list is not None and max_pairs_per_list < 1:
        raise ValueError(f"max_pairs_per_list must be >= 1 or None, got {max_pairs_per_list}")
    rows_parts, i_parts, j_parts = [], [], []
    for start in range(0, labels.shape[0], chunk_size):
        lab = labels[start : start + chunk_size]
        msk = mask[start : start + chunk_size]
        higher = (lab.unsqueeze(2) > lab.unsqueeze(1)) & msk.unsqueeze(2) & msk.unsqueeze(1)
        rows, i, j = higher.nonzero(as_tuple=True)
        rows_parts.append(rows + start)
        i_parts.append(i)
        j_parts.append(j)
    device = labels.device
    empty = torch.zeros(0, dtype=torch.long, device=device)
    rows = torch.cat(rows_parts) if rows_parts else empty
    i = torch.cat(i_parts) if i_parts else empty
    j = torch.cat(j_parts) if j_parts else empty
    if max_pairs_per_list is None or len(rows) == 0:
        return rows, i, j
    # Random order, then a stable sort by list: each list's pairs in random order; keep the
    # first max_pairs_per_list of each, then restore the sorted order.
    order = torch.randperm(len(rows), generator=generator).to(device)
    order = order[torch.sort(rows[order], stable=True).indices]
    counts = torch.bincount(rows, minlength=labels.shape[0])
    starts = torch.cumsum(counts, 0) - counts
    position = torch.arange(len(rows), device=device) - starts[rows[order]]
    keep = torch.sort(order[position < max_pairs_per_list]).values
    return rows[keep], i[keep], j[keep]


WEIGHTS_FILE = "weights.pt"
"""Name of the tensors (``weight``, ``mean``, ``std``) in a saved RankSVM folder."""


class RankSVM(BaseRanker):
    """Linear RankSVM (Joachims 2002) on z-score normalized features.

    Training (Canuto et al. 2013, Section 4.3.1): features are z-score normalized with the
    mean and standard deviation of the real training candidates (a constant feature gets a
    deviation of 1); each crucial pair ``(i, j)`` of a list (``labels[i] > labels[j]``) gives the
    difference ``d = x_i - x_j``, optionally subsampled to ``max_pairs_per_list`` pairs per list;
    scikit-learn's ``LinearSVC(fit_intercept=False)`` learns ``w`` from ``d`` with class +1 and
    ``-d`` with class -1 (both signs, so that the classes are balanced and the problem is
    symmetric). Since every pair then appears twice, ``LinearSVC`` gets ``C = c / 2``: its
    objective is exactly Joachims' OPT 2 with ``C = c``.

    Loss: ``"hinge"`` (default) is the L1 slack ``ξ_ij`` of Joachims' OPT 2 and of the SVM-rank
    tool the paper used, so it is the faithful choice (liblinear solves it in the dual);
    ``"squared_hinge"`` (L2-SVM, solved in the primal) converges faster on large pair sets and
    usually ranks alike.

    Scoring: ``score(x) = w · (x - mean) / std`` (ranks as ``w / std · x``).

    Args:
        c: the cost ``j`` of the paper (trade-off between training error and margin; Table III:
            100). Note that the SVM-rank tool scales its own ``-c`` option differently from
            OPT 2, so values are comparable only up to a constant factor.
        loss: ``"hinge"`` or ``"squared_hinge"`` (see above).
        max_pairs_per_list: at most this many pairs per training list (None: all pairs).
        seed: seed of the pair subsampling.
        max_iter: liblinear's iteration limit.
        tol: liblinear's stopping tolerance.
    """

    loss: Literal['hinge', 'squared_hinge']
    max_pairs_per_list: int | None
    seed: int
    max_iter: int
    tol: float

    def __init__(
        self,
        c: float = 100.0,
        loss: Literal["hinge", "squared_hinge"] = "hinge",
        max_pairs_per_list: int | None = None,
        seed: int = 0,
        max_iter: int = 20_000,
        tol: float = 1e-4,
    ) -> None:
        if c <= 0:
            raise ValueError(f"c must be > 0, got {c}")
        if loss not in ("hinge", "squared_hinge"):
            raise ValueError(f"loss must be 'hinge' or 'squared_hinge', got {loss!r}")
        if max_pairs_per_list is not None and max_pairs_per_list < 1:
            raise ValueError(f"max_pairs_per_list must be >= 1 or None, got {max_pairs_per_list}")
        self.c = float(c)
        self.feature_names_: tuple[str, ...] | None = None
        self.mean_: torch.Tensor | None = None
        self.std_: torch.Tensor | None = None
        self.weight_: torch.Tensor | None = None

    def fit(self, train: CandidateSet, val: CandidateSet | None = None) -> Self:
        """Learns ``w`` from the crucial pairs of ``train`` (``val`` is not used).

        Raises:
            ValueError: when no list holds two candidates of different labels.
        """
        from sklearn.svm import LinearSVC

        x = train.features.detach().cpu().double()
        mask = train.mask.cpu()
        real = x[mask]  # [N, F]
        mean = real.mean(0) if len(real) else torch.zeros(x.shape[-1], dtype=x.dtype)
        std = real.std(0, unbiased=False) if len(real) else torch.ones_like(mean)
        std = torch.where(std > 0, std, torch.ones_like(std))
        z = (x - mean) / std
        generator = torch.Generator().manual_seed(self.seed)
        rows, i, j = crucial_pairs(train.labels.cpu(), mask, self.max_pairs_per_list, generator)
        if len(rows) == 0:
            raise ValueError("RankSVM needs a list with two candidates of different labels")
        diff = (z[rows, i] - z[rows, j]).numpy()
        pairs = len(diff)
        samples = np.concatenate([diff, -diff])
        targets = np.concatenate([np.ones(pairs), -np.ones(pairs)])
        dual: bool | str = True if self.loss == "hinge" else "auto"  # hinge: dual only
        svm = LinearSVC(C=self.c / 2, loss=self.loss, fit_intercept=False, dual=dual,
                        max_iter=self.max_iter,
                        tol=self.tol, random_state=self.seed)
        svm.fit(samples, targets)
        self.feature_names_ = tuple(train.feature_names)
        self.mean_ = mean.float()
        self.std_ = std.float()
        self.weight_ = torch.as_tensor(svm.coef_[0], dtype=torch.float32)
        log.info("RankSVM: %d pairs from %d lists, w = %s", pairs, len(train),
                 [round(float(v), 4) for v in self.weight_])
        return self

    def score(self, batch: CandidateSet) -> torch.Tensor:
        """``[B, L]`` ``w · (x - mean) / std``, on the batch's device (padding is meaningless)."""
        if self.weight_ is None or self.mean_ is None or self.std_ is None:
            raise RuntimeError("RankSVM is not fitted: call fit() or load()")
        self.check_features(batch)
        device, dtype = batch.features.device, batch.features.dtype
        z = (batch.features - self.mean_.to(device, dtype)) / self.std_.to(device, dtype)
        return z @ self.weight_.to(device, dtype)

    def is_fitted(self) -> bool:
        """Whether ``w`` is fitted or loaded."""
        return self.weight_ is not None

    def _save_files(self, folder: Path) -> list[str]:
        """Writes ``w`` and the normalization statistics to ``weights.pt``."""
        assert self.weight_ is not None and self.mean_ is not None and self.std_ is not None
        save_tensors({"weight": self.weight_, "mean": self.mean_, "std": self.std_},
                     folder / WEIGHTS_FILE)
        return [WEIGHTS_FILE]

    def _load_files(self, folder: Path, manifest: Mapping[str, Any]) -> None:
        """Reads ``weights.pt``.

        Raises:
            ValueError: the file is not listed or lacks a tensor (naming it).
        """
        path = folder / WEIGHTS_FILE
        tensors = load_tensors(path) if WEIGHTS_FILE in manifest["files"] else {}
        if set(tensors) != {"weight", "mean", "std"}:
            raise UnreadableFileError(f"{path}: expected the tensors weight, mean and std "
                                      "listed in the manifest")
        self.weight_, self.mean_, self.std_ = tensors["weight"], tensors["mean"], tensors["std"]
