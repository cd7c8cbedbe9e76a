"""Statistics for reports: confidence intervals, paired significance tests, effect sizes.

Both take per-object metric values (for instance the per-list outputs of
:func:`tagtorch.metrics.functional.ranking_metrics`), as a sequence, a NumPy array or a tensor
(on any device). NaN values (lists skipped by ``empty_target_action="skip"``) are ignored.

The paired tests (:func:`paired_test`) are the paired t-test, Wilcoxon's signed-rank test and
Fisher's randomization test (:func:`randomization_p_value`: the per-object differences' signs
flipped at random, exactly enumerated when there are few objects), each with the effect size
Cohen's ``d_z`` (:func:`effect_size`). A confidence interval of one value is undefined: its
half-width is NaN, which reports print as ``n/a``.

The randomization test draws from 1 to :data:`MAX_RESAMPLES` sign assignments
(:func:`check_resamples`: the ``significance.n_resamples`` setting and the ``--resamples``
option of ``python -m tagtorch.evaluation``), so its work is at most that many times the
objects; a confidence level lies strictly between 0 and 1 (:func:`check_confidence`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch
from scipy import stats

__all__ = ["MAX_RESAMPLES", "PairedTest", "check_confidence", "check_resamples",
           "confidence_interval", "effect_size", "paired_test", "randomization_p_value"]

ArrayLike = Sequence[float] | np.ndarray | torch.Tensor


#: The paired significance tests on offer.
TestMethod = Literal["ttest", "wilcoxon", "randomization"]

MAX_RESAMPLES = 10**6
"""The most sign assignments the randomization test draws: p-values down to ``1e-6``, at most
a million times the objects' work."""


def check_resamples(value: object, name: str = "n_resamples") -> None:
    """Refuses a number of resamples that is not an integer from 1 to :data:`MAX_RESAMPLES`.

    Args:
        value: the number given (booleans, floats and strings are refused).
        name: the setting or option named in the message.

    Raises:
        ValueError: in one line naming ``name``, the value and the range.

    Example:
        >>> check_resamples(10**12, "--resamples")
        Traceback (most recent call last):
        ...
        ValueError: --resamples must be an integer from 1 to 1000000, got 1000000000000
    """
    if (isinstance(value, bool) or not isinstance(value, int)
            or not 1 <= value <= MAX_RESAMPLES):
        raise ValueError(f"{name} must be an integer from 1 to {MAX_RESAMPLES}, got "
                         f"{value!r:.80}")


def check_confidence(value: object, name: str = "confidence") -> None:
    """Refuses a confidence level that is not a number strictly between 0 and 1.

    Raises:
        ValueError: in one line naming ``name`` and the value (NaN and booleans refused).

    Example:
        >>> check_confidence(float("nan"), "--confidence")
        Traceback (most recent call last):
        ...
        ValueError: --confidence must be a number in (0, 1), e.g. 0.95, got nan
    """
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0.0 < value < 1.0:
        raise ValueError(f"{name} must be a number in (0, 1), e.g. 0.95, got {value!r:.80}")


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
        ``(mean, half_width)``; the half-width is NaN when ``n == 1`` (one value gives no
        interval), and both are NaN when no value is left.

    Raises:
        ValueError: if ``values`` is not 1-d or ``confidence`` is not in ``(0, 1)``.

    Example:
        >>> mean, half = confidence_interval([1.0, 2.0, 3.0, float("nan")])
        >>> round(mean, 4), round(half, 4)  # 2 ± t_{0.975, 2} * 1 / sqrt(3)
        (2.0, 2.4841)
        >>> confidence_interval([0.5])
        (0.5, nan)
    """
    check_confidence(confidence)
    array = _as_array(values, "values")
    array = array[~np.isnan(array)]
    n = len(array)
    if n == 0:
        return math.nan, math.nan
    mean = float(array.mean())
    if n == 1:
        return mean, math.nan
    sem = float(array.std(ddof=1)) / math.sqrt(n)
    return mean, float(stats.t.ppf((1.0 + confidence) / 2.0, df=n - 1)) * sem


@dataclass(frozen=True)
class PairedTest:
    """Result of :func:`paired_test`.

    Attributes:
        method: ``"ttest"`` (paired Student t test), ``"wilcoxon"`` (signed-rank test) or
            ``"randomization"`` (Fisher's sign-flip test).
        statistic: t statistic, the Wilcoxon signed-rank statistic (the smaller rank sum), or
            for the randomization test the mean difference.
        p_value: two-sided p-value.
        mean_difference: mean of ``a - b`` over the pairs kept.
        n: number of pairs kept (pairs with a NaN are dropped).
        effect_size: Cohen's ``d_z`` of the differences (:func:`effect_size`).
    """

    method: str
    statistic: float
    p_value: float
    mean_difference: float
    n: int
    effect_size: float = math.nan


def effect_size(differences: ArrayLike) -> float:
    """Cohen's ``d_z`` of paired differences: their mean over their standard deviation.

    ``d_z = mean(d) / s_d`` with ``s_d`` the sample standard deviation (``ddof=1``): the
    standardized mean difference of paired data. Differences that are all equal give 0 when
    they are 0 and ``±inf`` otherwise.

    Args:
        differences: ``[n]`` per-object differences ``a - b`` (NaNs dropped), ``n >= 2``.

    Raises:
        ValueError: fewer than 2 differences without NaN.

    Example:
        >>> round(effect_size([0.1, 0.0, 0.2, 0.3]), 4)  # mean 0.15 / s, s = sqrt(0.05 / 3)
        1.1619
    """
    d = _as_array(differences, "differences")
    d = d[~np.isnan(d)]
    if len(d) < 2:
        raise ValueError(f"an effect size needs at least 2 differences, got {len(d)}")
    if np.ptp(d) == 0.0:  # all equal (their float mean and deviation may not be exact)
        return 0.0 if d[0] == 0.0 else math.copysign(math.inf, float(d[0]))
    return float(d.mean()) / float(d.std(ddof=1))


def randomization_p_value(differences: ArrayLike, n_resamples: int = 10_000,
                          seed: int = 0) -> float:
    """Two-sided p-value of Fisher's randomization (sign-flip) test of paired differences.

    Under the null hypothesis that both methods are exchangeable on each object, every
    difference ``d_i = a_i - b_i`` is as likely to have the other sign. The p-value is the share
    of sign assignments whose ``|sum_i s_i d_i|`` is at least the observed ``|sum_i d_i|``
    (ties within ``1e-9 * sum_i |d_i|`` count, so rounding does not decide them). With ``2**n <=
    n_resamples`` all ``2**n`` assignments are enumerated (the exact p-value); otherwise
    ``n_resamples`` are drawn with ``seed``, and the p-value is ``(1 + hits) / (1 +
    n_resamples)`` (the observed assignment counted once; never 0).

    Args:
        differences: ``[n]`` per-object differences (NaNs dropped).
        n_resamples: drawn sign assignments, from 1 to :data:`MAX_RESAMPLES`.
        seed: seed of the draws.

    Raises:
        ValueError: ``n_resamples`` out of that range (:func:`check_resamples`).

    Example:
        >>> randomization_p_value([1.0, 2.0, 3.0])  # exact: of 8 sums, +-6 reach |6|
        0.25
    """
    check_resamples(n_resamples)
    d = _as_array(differences, "differences")
    d = d[~np.isnan(d)]
    n = len(d)
    observed = abs(float(d.sum()))
    threshold = observed - 1e-9 * float(np.abs(d).sum())
    exact = n < 63 and 2**n <= n_resamples
    rng = np.random.default_rng(seed)
    total = 2**n if exact else n_resamples
    rows = max(1, 2**22 // max(n, 1))  # sign assignments per block (bounded memory)
    hits = 0
    bits: np.ndarray
    for start in range(0, total, rows):
        count = min(rows, total - start)
        if exact:  # bit j of the assignment's number flips d_j
            bits = (np.arange(start, start + count)[:, None] >> np.arange(n)) & 1
        else:
            packed = rng.integers(0, 256, size=(count, (n + 7) // 8), dtype=np.uint8)
            bits = np.unpackbits(packed, axis=1, count=n)
        flips = bits.astype(np.float64)
        sums = d.sum() - 2.0 * (flips @ d)
        hits += int((np.abs(sums) >= threshold).sum())
    return hits / total if exact else (1 + hits) / (1 + n_resamples)


def paired_test(
    a: ArrayLike, b: ArrayLike, method: TestMethod = "ttest", n_resamples: int = 10_000,
    seed: int = 0,
) -> PairedTest:
    """Two-sided paired significance test between two methods' per-object values.

    ``a[i]`` and ``b[i]`` must be the values of the same object. Pairs where either value is
    NaN are dropped. ``"ttest"`` is :func:`scipy.stats.ttest_rel`; ``"wilcoxon"`` is
    :func:`scipy.stats.wilcoxon` (zero differences dropped, scipy's default);
    ``"randomization"`` is Fisher's sign-flip test (:func:`randomization_p_value`, with
    ``n_resamples`` and ``seed``). When every difference is zero the methods are
    indistinguishable: the statistic is 0 and the p-value 1. Every result carries Cohen's
    ``d_z`` (:func:`effect_size`).

    Args:
        a: ``[n]`` values of the first method.
        b: ``[n]`` values of the second method, same objects in the same order.
        method: ``"ttest"``, ``"wilcoxon"`` or ``"randomization"``.
        n_resamples: sign assignments drawn by the randomization test.
        seed: seed of the randomization test's draws.

    Returns:
        The :class:`PairedTest` result.

    Raises:
        ValueError: on different lengths, an unknown method, or fewer than 2 pairs left.

    Example:
        >>> result = paired_test([0.5, 0.6, 0.9, 0.4], [0.4, 0.6, 0.7, 0.1])
        >>> result.n, round(result.mean_difference, 4), round(result.statistic, 4)
        (4, 0.15, 2.3238)
        >>> round(result.p_value, 4), round(result.effect_size, 4)
        (0.1027, 1.1619)
    """
    if method not in ("ttest", "wilcoxon", "randomization"):
        raise ValueError(f"method must be 'ttest', 'wilcoxon' or 'randomization', got {method!r}")
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
        return PairedTest(method, 0.0, 1.0, mean_difference, n, 0.0)
    d_z = effect_size(diff)
    if method == "randomization":
        p_value = randomization_p_value(diff, n_resamples, seed)
        return PairedTest(method, mean_difference, p_value, mean_difference, n, d_z)
    result = stats.ttest_rel(x, y) if method == "ttest" else stats.wilcoxon(x, y)
    return PairedTest(method, float(result.statistic), float(result.pvalue), mean_difference, n,
                      d_z)
