"""The metrics of personalized tag recommendation: TagRec's definitions and the IR ones.

TagRec (github.com/learning-layers/TagRec, ``common/PredictionData.java`` and
``processing/MetricsCalculator.java``) scores each test post's list cut at ``k`` against the
post's tags (the gold ``G``), with ``found`` the gold tags in the cut list and ``n`` its length
(at most ``k``; a method may recommend fewer):

- ``recall@k`` = found / |G|;
- ``precision@k`` = found / n — TagRec's published code divides by the list's length, not by
  ``k`` (the padding to ``k`` is commented out there); ``precision_divisor="k"`` gives
  found / k instead;
- ``mrr@k`` = Σ over the found gold tags of 1 / rank, divided by |G|;
- ``map@k`` = Σ_i P@i · rel(i) over the list's positions, divided by |G| (P@i = hits in the
  first ``i`` / ``i``);
- every value is 0 for a post with an empty list; the means are over *all* test posts, and
  ``f1@k`` = 2 R P / (R + P) of the means R and P (``writeAverageMetrics``).

Beside them the IR versions, averaged over all test posts too: ``ndcg@k`` (binary gains,
log2 discounts, the ideal DCG of ``min(|G|, k)`` hits) and ``rr@k``, the reciprocal rank of the
first hit in the top ``k`` (0 without one).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from tagtorch.data.ragged import Ragged

__all__ = ["TAGREC_METRICS", "mean_metrics", "post_metrics"]

TAGREC_METRICS = ("recall", "precision", "f1", "mrr", "map")
"""TagRec's metric names (``f1`` is computed from the means)."""


def post_metrics(recommended: np.ndarray, gold: Ragged, ks: Sequence[int],
                 precision_divisor: str = "list") -> dict[str, np.ndarray]:
    """Per test post: ``recall@k``, ``precision@k``, ``mrr@k``, ``map@k``, ``ndcg@k``, ``rr@k``.

    Args:
        recommended: ``[Q, K]`` tag codes in rank order, ``-1`` after a shorter list.
        gold: ragged ``[Q]`` each post's tags (distinct).
        ks: the cut-offs (each ``1 <= k <= K``).
        precision_divisor: ``"list"`` (TagRec: the cut list's length) or ``"k"``.

    Returns:
        Metric name -> ``[Q]`` float64 values.

    Example:
        >>> rec = np.array([[4, 1, 7], [2, -1, -1]])
        >>> gold = Ragged.from_lists([[1, 7, 9], [2]])
        >>> m = post_metrics(rec, gold, [3])
        >>> [round(float(v), 4) for v in (m["recall@3"][0], m["precision@3"][0],
        ...  m["mrr@3"][0], m["map@3"][0])], float(m["precision@3"][1])
        ([0.6667, 0.6667, 0.2778, 0.3889], 1.0)
    """
    if precision_divisor not in ("list", "k"):
        raise ValueError(f"precision_divisor must be 'list' or 'k', got {precision_divisor!r}")
    rec = np.asarray(recommended, dtype=np.int64)
    n_posts, width = rec.shape
    if len(gold) != n_posts or any(not 1 <= k <= width for k in ks):
        raise ValueError(f"{n_posts} lists of {width}: need as many gold rows and "
                         f"1 <= k <= {width}, got {len(gold)} rows and ks={list(ks)}")
    n_tags = int(max(rec.max(initial=0), gold.values.max(initial=0))) + 1
    gold_keys = gold.row_ids.astype(np.int64) * n_tags + gold.values
    hits = (rec >= 0) & np.isin(np.arange(n_posts)[:, None] * n_tags + rec, gold_keys)
    sizes = gold.lengths.astype(np.float64)
    listed = (rec >= 0).sum(1)
    rank = np.arange(1, width + 1)
    cumulative = np.cumsum(hits, 1)
    out: dict[str, np.ndarray] = {}
    with np.errstate(divide="ignore", invalid="ignore"):
        for k in ks:
            found = cumulative[:, k - 1].astype(np.float64)
            n = np.minimum(listed, k) if precision_divisor == "list" else np.full(n_posts, k)
            out[f"recall@{k}"] = np.where(sizes > 0, found / sizes, 0.0)
            out[f"precision@{k}"] = np.where(n > 0, found / n, 0.0)
            out[f"mrr@{k}"] = np.where(sizes > 0, (hits[:, :k] / rank[:k]).sum(1) / sizes, 0.0)
            precision_at = cumulative[:, :k] / rank[:k]
            out[f"map@{k}"] = np.where(sizes > 0, (precision_at * hits[:, :k]).sum(1) / sizes,
                                       0.0)
            discount = 1.0 / np.log2(rank[:k] + 1)
            ideal = np.cumsum(discount)[np.minimum(sizes.astype(np.int64), k) - 1]
            out[f"ndcg@{k}"] = np.where(sizes > 0, (hits[:, :k] * discount).sum(1) / ideal, 0.0)
            first = np.argmax(hits[:, :k], 1)
            out[f"rr@{k}"] = np.where(hits[:, :k].any(1), 1.0 / (first + 1), 0.0)
    return out


def mean_metrics(values: dict[str, np.ndarray]) -> dict[str, float]:
    """The means over all test posts, and ``f1@k`` = 2 R P / (R + P) of the means.

    Example:
        >>> mean_metrics({"recall@5": np.array([1.0, 0.0]), "precision@5": np.array([0.2, 0.0])})
        {'recall@5': 0.5, 'precision@5': 0.1, 'f1@5': 0.16666666666666669}
    """
    means = {name: float(np.mean(v)) if len(v) else 0.0 for name, v in values.items()}
    for name in list(means):
        if name.startswith("recall@"):
            k = name.split("@")[1]
            r, p = means[name], means.get(f"precision@{k}", 0.0)
            means[f"f1@{k}"] = 2.0 * r * p / (r + p) if r + p > 0 else 0.0
    return means


def f1_randomization_p_value(recall: tuple[np.ndarray, np.ndarray],
                             precision: tuple[np.ndarray, np.ndarray],
                             n_resamples: int = 10_000, seed: int = 0) -> float:
    """Two-sided p-value of a paired randomization test of TagRec's F1 (of the means).

    F1 = 2 R P / (R + P) of the mean recall and precision is not a mean over posts, so a test
    of per-post differences does not apply. Under the null hypothesis both methods are
    exchangeable on each post: each draw swaps the two methods' (recall, precision) on a random
    half of the posts, and the p-value is ``(1 + hits) / (1 + n_resamples)``, ``hits`` the draws
    whose ``|F1_a − F1_b|`` reaches the observed one (within ``1e-12``).

    Args:
        recall: ``([Q], [Q])`` per-post recall of methods a and b (the same posts).
        precision: ``([Q], [Q])`` their per-post precision.
        n_resamples: swaps drawn.
        seed: of the draws.

    Example:
        >>> r = (np.array([1.0, 1.0, 1.0, 1.0]), np.zeros(4))
        >>> p = f1_randomization_p_value(r, r, n_resamples=2000)  # 2 of 16 swaps reach: 0.125
        >>> 0.1 < p < 0.15
        True
    """
    def f1(r: np.ndarray, p: np.ndarray) -> np.ndarray:
        with np.errstate(invalid="ignore"):
            return np.nan_to_num(2.0 * r * p / (r + p))

    n = len(recall[0])
    observed = abs(float(f1(recall[0].mean(), precision[0].mean())
                         - f1(recall[1].mean(), precision[1].mean())))
    rng = np.random.default_rng(seed)
    hits, block = 0, max(1, 2**22 // max(n, 1))
    dr, dp = recall[0] - recall[1], precision[0] - precision[1]
    for start in range(0, n_resamples, block):
        swap = rng.integers(0, 2, size=(min(block, n_resamples - start), n)).astype(np.float64)
        # a's mean after swapping: mean(a) - mean(swap * (a - b)); b's: mean(b) + the same
        shift_r, shift_p = swap @ dr / n, swap @ dp / n
        gap = np.abs(f1(recall[0].mean() - shift_r, precision[0].mean() - shift_p)
                     - f1(recall[1].mean() + shift_r, precision[1].mean() + shift_p))
        hits += int((gap >= observed - 1e-12).sum())
    return (1 + hits) / (1 + n_resamples)
