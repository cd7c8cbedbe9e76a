"""The metrics of personalized tag recommendation: TagRec's (named apart) and the standard ones.

TagRec (github.com/learning-layers/TagRec, ``common/PredictionData.java`` and
``processing/MetricsCalculator.java``) scores each test post's list cut at ``k`` against the
post's tags (the gold ``G``), with ``found`` the gold tags in the cut list:

- ``tagrec_recall@k`` = found / |G|;
- ``tagrec_precision@k`` = found / k (TagRec's code; ``precision_divisor="list"`` divides by
  the cut list's length instead, which inflates methods whose lists can be short);
- ``tagrec_mrr@k`` = Σ over the found gold tags of 1 / rank, divided by |G| (not the first
  hit's reciprocal rank: that is ``mrr@k``);
- ``tagrec_map@k`` = Σ_i P@i · rel(i) over the list's positions, divided by |G| (``map@k``
  divides by ``min(k, |G|)``);
- ``tagrec_ndcg@k``: binary gains, ``1 / log2(rank + 1)``, the ideal DCG of all |G| gold tags
  even when |G| > k (``ndcg@k``: of ``min(|G|, k)``);
- ``tagrec_f1@k`` = 2 R P / (R + P) of the *means* R and P (``writeAverageMetrics``);
- TagRec averages over the posts that have a list (``getPredictionCount``): a post without a
  recommendation is NaN here, left out of the mean as TagRec leaves it out, and ``coverage``
  (1 for a post with a list, else 0) is TagRec's user coverage;
- a post without tags (TagRec's line with an empty tag field) has TagRec's gold of one empty
  tag, never hit: every ``tagrec_*`` value is 0, in the mean when the post has a list.

Beside them tagtorch's standard metrics, one grammar and one implementation for every task
(:func:`tagtorch.metrics.functional.ranking_metrics`), averaged over *all* test posts (an
empty list scores 0): ``p@k``, ``r@k``, ``s@k``, ``ndcg@k``, ``mrr@k`` (first hit) and
``map@k``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from tagtorch.data.ragged import Ragged
from tagtorch.metrics.functional import parse_key, ranking_metrics

__all__ = ["f1_randomization_p_value", "mean_metrics", "post_metrics"]



def _hits(recommended: np.ndarray, gold: Ragged) -> np.ndarray:
    """``[Q, K]`` bool: each listed tag is one of its post's gold tags."""
    n_posts = recommended.shape[0]
    n_tags = int(max(recommended.max(initial=0), gold.values.max(initial=0))) + 1
    gold_keys = gold.row_ids.astype(np.int64) * n_tags + gold.values
    return (recommended >= 0) & np.isin(np.arange(n_posts)[:, None] * n_tags + recommended,
                                        gold_keys)


def _tagrec_values(hits: np.ndarray, listed: np.ndarray, sizes: np.ndarray, k: int,
                   precision_divisor: str) -> dict[str, np.ndarray]:
    """TagRec's per-post values at ``k`` (module docstring), NaN for a post without a list.

    A post without gold tags scores 0 (TagRec's gold of one empty tag).
    """
    rank = np.arange(1, k + 1)
    cut = hits[:, :k]
    found = cut.sum(1).astype(np.float64)
    n = np.minimum(listed, k) if precision_divisor == "list" else np.full(len(hits), k)
    precision_at = np.cumsum(cut, 1) / rank
    discount = 1.0 / np.log2(rank + 1)
    sizes = np.maximum(sizes, 1.0)  # no gold tag: TagRec's one empty gold tag
    ideal = np.cumsum(1.0 / np.log2(np.arange(1, int(sizes.max(initial=1)) + 2) + 1))
    values = {"tagrec_recall": found / sizes, "tagrec_precision": found / np.maximum(n, 1),
              "tagrec_mrr": (cut / rank).sum(1) / sizes,
              "tagrec_map": (precision_at * cut).sum(1) / sizes,
              "tagrec_ndcg": (cut * discount).sum(1) / ideal[sizes.astype(np.int64) - 1]}
    return {f"{name}@{k}": np.where(listed == 0, np.nan, v) for name, v in values.items()}


def post_metrics(recommended: np.ndarray, gold: Ragged, ks: Sequence[int],
                 precision_divisor: str = "k") -> dict[str, np.ndarray]:
    """Per test post: TagRec's metrics and the standard ones at each ``k`` (module docstring).

    Args:
        recommended: ``[Q, K]`` tag codes in rank order, ``-1`` after a shorter list.
        gold: ragged ``[Q]`` each post's tags (distinct).
        ks: the cut-offs (each ``1 <= k <= K``).
        precision_divisor: ``"k"`` (TagRec: hits / k) or ``"list"`` (hits / the cut list's
            length).

    Returns:
        Metric name -> ``[Q]`` float64 values: ``tagrec_*@k`` (NaN for a post without a list),
        ``coverage``, then ``p@k``, ``r@k``, ``s@k``, ``ndcg@k``, ``mrr@k``, ``map@k``.

    Example:
        >>> rec = np.array([[4, 1, 7], [2, -1, -1], [-1, -1, -1]])
        >>> gold = Ragged.from_lists([[1, 7, 9], [2], [3]])
        >>> m = post_metrics(rec, gold, [3])
        >>> [round(float(m[f"tagrec_{n}@3"][0]), 4) for n in ("recall", "precision", "mrr",
        ...                                                    "map")]
        [0.6667, 0.6667, 0.2778, 0.3889]
        >>> float(m["tagrec_precision@3"][1]), float(m["p@3"][1]), float(m["mrr@3"][0])
        (0.3333333333333333, 0.3333333333333333, 0.5)
        >>> bool(np.isnan(m["tagrec_recall@3"][2])), float(m["r@3"][2]), m["coverage"].tolist()
        (True, 0.0, [1.0, 1.0, 0.0])
    """
    if precision_divisor not in ("list", "k"):
        raise ValueError(f"precision_divisor must be 'k' or 'list', got {precision_divisor!r}")
    rec = np.asarray(recommended, dtype=np.int64)
    n_posts, width = rec.shape
    if len(gold) != n_posts or any(not 1 <= k <= width for k in ks):
        raise ValueError(f"{n_posts} lists of {width}: need as many gold rows and "
                         f"1 <= k <= {width}, got {len(gold)} rows and ks={list(ks)}")
    hits = _hits(rec, gold)
    listed = (rec >= 0).sum(1)
    sizes = gold.lengths.astype(np.float64)
    out: dict[str, np.ndarray] = {}
    with np.errstate(divide="ignore", invalid="ignore"):
        for k in ks:
            out.update(_tagrec_values(hits, listed, sizes, k, precision_divisor))
    out["coverage"] = (listed > 0).astype(np.float64)
    mask = torch.from_numpy(rec >= 0)
    scores = torch.arange(width, 0, -1, dtype=torch.float64).expand(n_posts, width)
    standard = ranking_metrics(scores, torch.from_numpy(hits), mask,
                               torch.from_numpy(gold.lengths.astype(np.int64)), ks=tuple(ks),
                               metrics=("precision", "recall", "success", "ndcg",
                                        *(f"{m}@{k}" for m in ("mrr", "map") for k in ks)),
                               empty_target_action="neg")
    out.update({name: value.numpy().astype(np.float64) for name, value in standard.items()})
    return out


def mean_metrics(values: dict[str, np.ndarray]) -> dict[str, float]:
    """The means (NaN left out, as TagRec leaves out posts without a list), and ``tagrec_f1@k``.

    ``tagrec_f1@k`` = 2 R P / (R + P) of the mean TagRec recall and precision.

    Example:
        >>> mean_metrics({"tagrec_recall@5": np.array([1.0, 0.0, np.nan]),
        ...               "tagrec_precision@5": np.array([0.2, 0.0, np.nan])})
        {'tagrec_recall@5': 0.5, 'tagrec_precision@5': 0.1, 'tagrec_f1@5': 0.16666666666666669}
    """
    means = {name: float(np.nanmean(v)) if np.isfinite(v).any() else 0.0
             for name, v in values.items()}
    for name in list(means):
        if name.startswith("tagrec_recall@"):
            k = parse_key(name)[1]
            r, p = means[name], means.get(f"tagrec_precision@{k}", 0.0)
            means[f"tagrec_f1@{k}"] = 2.0 * r * p / (r + p) if r + p > 0 else 0.0
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
