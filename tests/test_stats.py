"""Tests of tagtorch.evaluation.stats against hand arithmetic and scipy."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import torch
from scipy import stats

from tagtorch.evaluation.stats import (
    PairedTest,
    confidence_interval,
    effect_size,
    paired_test,
    randomization_p_value,
)


def test_confidence_interval_by_hand() -> None:
    # values 1, 2, 3, 4: mean 2.5; s^2 = (2.25 + 0.25 + 0.25 + 2.25) / 3 = 5/3
    # sem = sqrt(5/3) / sqrt(4) = 0.6454972; t_{0.975, 3} = 3.182446305 (t table)
    mean, half = confidence_interval([1.0, 2.0, 3.0, 4.0])
    assert mean == pytest.approx(2.5)
    assert half == pytest.approx(3.182446305 * math.sqrt(5 / 3) / 2, rel=1e-8)
    # 90%: t_{0.95, 3} = 2.353363435
    _, half90 = confidence_interval([1.0, 2.0, 3.0, 4.0], confidence=0.9)
    assert half90 == pytest.approx(2.353363435 * math.sqrt(5 / 3) / 2, rel=1e-8)


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("confidence", [0.9, 0.95, 0.99])
def test_confidence_interval_against_scipy(seed: int, confidence: float) -> None:
    rng = np.random.default_rng(seed)
    values = rng.random(rng.integers(2, 200))
    low, high = stats.t.interval(
        confidence, df=len(values) - 1, loc=values.mean(), scale=stats.sem(values)
    )
    mean, half = confidence_interval(values, confidence)
    assert mean - half == pytest.approx(low, rel=1e-9)
    assert mean + half == pytest.approx(high, rel=1e-9)


def test_confidence_interval_nan_single_and_inputs() -> None:
    with_nan = [0.2, math.nan, 0.4, 0.9, math.nan]
    assert confidence_interval(with_nan) == pytest.approx(confidence_interval([0.2, 0.4, 0.9]))
    tensor = torch.tensor(with_nan)
    assert confidence_interval(tensor) == pytest.approx(confidence_interval([0.2, 0.4, 0.9]))
    mean, half = confidence_interval([0.7, math.nan])  # one value: no interval
    assert mean == pytest.approx(0.7) and math.isnan(half)
    mean, half = confidence_interval([math.nan])
    assert math.isnan(mean) and math.isnan(half)
    for bad in (0.0, 1.0, 1.5):
        with pytest.raises(ValueError, match="confidence"):
            confidence_interval([1.0, 2.0], confidence=bad)
    with pytest.raises(ValueError, match="1-d"):
        confidence_interval(np.ones((2, 2)))


def test_paired_ttest_by_hand() -> None:
    a = [0.5, 0.6, 0.9, 0.4]
    b = [0.4, 0.6, 0.7, 0.1]
    # d = 0.1, 0, 0.2, 0.3; mean 0.15; squared deviations .0025 + .0225 + .0025 + .0225 = 0.05
    # s = sqrt(0.05 / 3); t = 0.15 / (s / sqrt(4))
    t_hand = 0.15 / (math.sqrt(0.05 / 3) / 2)
    result = paired_test(a, b)
    assert result.method == "ttest" and result.n == 4
    assert result.mean_difference == pytest.approx(0.15)
    assert result.statistic == pytest.approx(t_hand, rel=1e-9)
    assert result.p_value == pytest.approx(2 * stats.t.sf(t_hand, df=3), rel=1e-9)
    reverse = paired_test(b, a)
    assert reverse.statistic == pytest.approx(-t_hand)
    assert reverse.p_value == pytest.approx(result.p_value)


@pytest.mark.parametrize("seed", range(4))
def test_paired_ttest_random_by_formula(seed: int) -> None:
    rng = np.random.default_rng(seed)
    a = rng.random(50)
    b = a + rng.normal(0.05, 0.1, 50)
    d = a - b
    t_stat = d.mean() / (d.std(ddof=1) / math.sqrt(len(d)))
    result = paired_test(torch.tensor(a), torch.tensor(b))
    assert result.statistic == pytest.approx(t_stat, rel=1e-6)
    assert result.p_value == pytest.approx(2 * stats.t.sf(abs(t_stat), df=49), rel=1e-6)


def test_wilcoxon_by_hand() -> None:
    # d = 1, -2, 3, 4, 5: ranks of |d| are 1..5; W+ = 1 + 3 + 4 + 5 = 13, W- = 2 -> W = 2
    # exact two-sided p: subsets of {1..5} with rank sum <= 2 are {}, {1}, {2}: 2 * 3/32
    a = [2.0, 0.0, 4.0, 5.0, 6.0]
    b = [1.0, 2.0, 1.0, 1.0, 1.0]
    result = paired_test(a, b, method="wilcoxon")
    assert result.statistic == pytest.approx(2.0)
    assert result.p_value == pytest.approx(6 / 32)
    assert result.mean_difference == pytest.approx(11 / 5)


@pytest.mark.parametrize("seed", range(4))
def test_wilcoxon_against_scipy(seed: int) -> None:
    rng = np.random.default_rng(seed)
    a = rng.random(40)
    b = rng.random(40) * 0.9
    ref = stats.wilcoxon(a, b)
    result = paired_test(list(a), list(b), method="wilcoxon")
    assert result.statistic == pytest.approx(ref.statistic)
    assert result.p_value == pytest.approx(ref.pvalue)
    assert result.n == 40


def test_paired_nan_pairs_dropped_and_errors() -> None:
    a = [0.1, math.nan, 0.5, 0.7, 0.2, 0.9]
    b = [0.3, 0.4, math.nan, 0.2, 0.2, 0.1]
    kept_a, kept_b = [0.1, 0.7, 0.2, 0.9], [0.3, 0.2, 0.2, 0.1]
    for method in ("ttest", "wilcoxon"):
        result = paired_test(a, b, method=method)
        ref = (
            stats.ttest_rel(kept_a, kept_b) if method == "ttest" else stats.wilcoxon(kept_a, kept_b)
        )
        assert result.n == 4
        assert result.statistic == pytest.approx(ref.statistic)
        assert result.p_value == pytest.approx(ref.pvalue)
    with pytest.raises(ValueError, match="same objects"):
        paired_test([1.0, 2.0, 3.0], [1.0, 2.0])
    with pytest.raises(ValueError, match="at least 2"):
        paired_test([1.0, math.nan], [2.0, 3.0])
    with pytest.raises(ValueError, match="method"):
        paired_test([1.0, 2.0], [2.0, 3.0], method="sign")  # type: ignore[arg-type]
    same = paired_test([0.2, 0.4, 0.6], [0.2, 0.4, 0.6], method="wilcoxon")
    assert (same.statistic, same.p_value, same.mean_difference) == (0.0, 1.0, 0.0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        same.n = 5  # type: ignore[misc]
    assert isinstance(same, PairedTest)


def test_randomization_exact_by_hand() -> None:
    # d = 1, 2, 3: the 8 sums of +-1 +-2 +-3 are 6, 4, 2, 0, 0, -2, -4, -6
    assert randomization_p_value([1.0, 2.0, 3.0]) == pytest.approx(2 / 8)  # |S| >= 6
    assert randomization_p_value([1.0, -2.0, 3.0]) == pytest.approx(6 / 8)  # |S| >= 2
    # d = 0.1, 0.2, -0.3, 0.5 (S = 0.5): the 16 |sums| are 0.1 x4, 0.3 x2, 0.5 x4, 0.7 x2,
    # 0.9 x2, 1.1 x2; 10 reach 0.5, ties included although 0.1 + 0.2 - 0.3 != 0 in floats
    assert randomization_p_value([0.1, 0.2, -0.3, 0.5]) == pytest.approx(10 / 16)
    result = paired_test([0.6, 0.2, 0.0, 0.9], [0.5, 0.0, 0.3, 0.4], method="randomization")
    assert result.p_value == pytest.approx(10 / 16)
    assert result.statistic == pytest.approx(0.5 / 4) == result.mean_difference


@pytest.mark.parametrize("seed", range(3))
def test_randomization_exact_against_scipy_enumeration(seed: int) -> None:
    rng = np.random.default_rng(seed)
    a, b = rng.random(11), rng.random(11)  # 2^11 = 2048 <= n_resamples: enumerated
    ref = stats.permutation_test((a, b), lambda x, y, axis: np.mean(x - y, axis=axis),
                                 permutation_type="samples", vectorized=True,
                                 n_resamples=np.inf)
    result = paired_test(a, b, method="randomization", n_resamples=5000)
    assert result.p_value == pytest.approx(ref.pvalue, rel=1e-9)


@pytest.mark.parametrize("seed", range(3))
def test_randomization_sampled_against_scipy(seed: int) -> None:
    rng = np.random.default_rng(seed)
    a = rng.random(60)
    b = a + rng.normal(0.03, 0.15, 60)
    ref = stats.permutation_test((a, b), lambda x, y, axis: np.mean(x - y, axis=axis),
                                 permutation_type="samples", vectorized=True,
                                 n_resamples=20_000, random_state=seed + 100)
    result = paired_test(a, b, method="randomization", n_resamples=20_000, seed=seed)
    # two Monte-Carlo estimates of one p: each has a standard error <= 0.5 / sqrt(20000)
    assert abs(result.p_value - ref.pvalue) < 4 * math.sqrt(2) * 0.5 / math.sqrt(20_000)
    again = paired_test(a, b, method="randomization", n_resamples=20_000, seed=seed)
    assert again.p_value == result.p_value  # seeded: the same draws


def test_randomization_nan_pairs_and_bad_resamples() -> None:
    a = [0.1, math.nan, 0.5, 0.7, 0.2]
    b = [0.3, 0.4, math.nan, 0.2, 0.6]
    # kept d = -0.2, 0.5, -0.4 (S = -0.1): |sums| 0.1 x2, 0.3 x2, 0.7 x2, 1.1 x2: all reach 0.1
    result = paired_test(a, b, method="randomization")
    assert result.n == 3 and result.p_value == pytest.approx(1.0)
    with pytest.raises(ValueError, match="n_resamples"):
        randomization_p_value([1.0, 2.0], n_resamples=0)


def test_effect_size_by_hand() -> None:
    # d = 0.1, 0, 0.2, 0.3: mean 0.15, s = sqrt(0.05 / 3)
    assert effect_size([0.1, 0.0, 0.2, 0.3]) == pytest.approx(0.15 / math.sqrt(0.05 / 3))
    result = paired_test([0.5, 0.6, 0.9, 0.4], [0.4, 0.6, 0.7, 0.1], method="wilcoxon")
    assert result.effect_size == pytest.approx(0.15 / math.sqrt(0.05 / 3))
    assert effect_size([0.2, 0.2, math.nan, 0.2]) == math.inf  # no spread, a difference
    assert effect_size([-0.1, -0.1]) == -math.inf
    assert paired_test([0.3, 0.4], [0.3, 0.4]).effect_size == 0.0
    with pytest.raises(ValueError, match="at least 2"):
        effect_size([0.5, math.nan])
