"""Statistics for reports: confidence intervals and paired significance tests.

Both take per-object metric values (for instance the per-list outputs of
:func:`tagtorch.metrics.functional.ranking_metrics`), as a sequence, a NumPy array or a tensor
(on any device). NaN values (lists skipped by ``empty_target_action="skip"``) are ignored.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch
from scipy import stats

__all__ = ["PairedTest", "confidence_interval", "paired_test"]

ArrayLike = Sequence[float] | np.ndarray | torch.Tensor


#: The paired significance tests on offer.
TestMethod = Literal["ttest", "wilcoxon"]


def _as_array(values: ArrayLike, name: str) -> np.ndarray:
    """A 1-d float64 NumPy copy of ``values``."""
    if isinstance(values, torch.Tensor):
        values = values.detach().to("cpu", torch.float64).numpy()
    array = np.asarray(values, dtype=np.float64)
    if array.ndim != 1:
        raise ValueError(f"{name} must be 1-d, got shape {array.shape}")
    return array


def confidence_interval(values: ArrayLike, confidence: float = 0.95) -> tuple[float, float]:
    """Mean and half-width of the Student t confidence interval of the mean.

    ``half_width = t_{(1 + confidence) / 2, n - 1} * s / sqrt(n)`` with ``s`` the sample
    standard deviation (``ddof=1``); the interval is ``mean ± half_width``.

    Args:
        values: ``[n]`` per-object values; NaNs are dropped first.
        confidence: confidence level in ``(0, 1)``.

    Returns:
        ``(mean, half_width)``; the half-width is 0 when ``n == 1``, and both are NaN when no
        value is left.

    Raises:
        ValueError: if ``values`` is not 1-d or ``confidence`` is not in ``(0, 1)``.

    Example:
        >>> mean, half = confidence_interval([1.0, 2.0, 3.0, float("nan")])
        >>> round(mean, 4), round(half, 4)  # 2 ± t_{0.975, 2} * 1 / sqrt(3)
        (2.0, 2.4841)
        >>> confidence_interval([0.5])
        (0.5, 0.0)
    """
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    array = _as_array(values, "values")
    array = array[~np.isnan(array)]
    n = len(array)
    if n == 0:
        return math.nan, math.nan
    mean = float(array.mean())
    if n == 1:
        return mean, 0.0
    sem = float(array.std(ddof=1)) / math.sqrt(n)
    return mean, float(stats.t.ppf((1.0 + confidence) / 2.0, df=n - 1)) * sem


@dataclass(frozen=True)
class PairedTest:
    """Result of :func:`paired_test`.

    Attributes:
        method: ``"ttest"`` (paired Student t test) or ``"wilcoxon"`` (signed-rank test).
        statistic: t statistic, or the Wilcoxon signed-rank statistic (the smaller rank sum).
        p_value: two-sided p-value.
        mean_difference: mean of ``a - b`` over the pairs kept.
        n: number of pairs kept (pairs with a NaN are dropped).
    """

    method: str
    statistic: float
    p_value: float
    mean_difference: float
    n: int


def paired_test(
    a: ArrayLike, b: ArrayLike, method: TestMethod = "ttest"
) -> PairedTest:
    """Two-sided paired significance test between two methods' per-object values.

    ``a[i]`` and ``b[i]`` must be the values of the same object. Pairs where either value is
    NaN are dropped. ``"ttest"`` is :func:`scipy.stats.ttest_rel`; ``"wilcoxon"`` is
    :func:`scipy.stats.wilcoxon` (zero differences dropped, scipy's default). When every
    difference is zero the methods are indistinguishable: the statistic is 0 and the p-value 1.

    Args:
        a: ``[n]`` values of the first method.
        b: ``[n]`` values of the second method, same objects in the same order.
        method: ``"ttest"`` or ``"wilcoxon"``.

    Returns:
        The :class:`PairedTest` result.

    Raises:
        ValueError: on different lengths, an unknown method, or fewer than 2 pairs left.

    Example:
        >>> result = paired_test([0.5, 0.6, 0.9, 0.4], [0.4, 0.6, 0.7, 0.1])
        >>> result.n, round(result.mean_difference, 4), round(result.statistic, 4)
        (4, 0.15, 2.3238)
        >>> round(result.p_value, 4)
        0.1027
    """
    if method not in ("ttest", "wilcoxon"):
        raise ValueError(f"method must be 'ttest' or 'wilcoxon', got {method!r}")
    x, y = _as_array(a, "a"), _as_array(b, "b")
    if len(x) != len(y):
        raise ValueError(f"paired values need the same objects: got {len(x)} and {len(y)} values")
    keep = ~(np.isnan(x) | np.isnan(y))
    x, y = x[keep], y[keep]
    n = len(x)
    if n < 2:
        raise ValueError(f"a paired test needs at least 2 pairs without NaN, got {n}")
    diff = x - y
    mean_difference = float(diff.mean())
    if not np.any(diff):
        return PairedTest(method, 0.0, 1.0, mean_difference, n)
    result = stats.ttest_rel(x, y) if method == "ttest" else stats.wilcoxon(x, y)
    return PairedTest(method, float(result.statistic), float(result.pvalue), mean_difference, n)
