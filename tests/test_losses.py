"""Tests of the ranking losses in tagtorch.losses.

The values and gradients are checked against plain, independent references written below from
the papers' formulas: one list at a time, unpadded, with explicit loops over candidates and
pairs, in float64 torch scalar ops (so autograd of the reference gives the reference gradient)
and no tagtorch helper. Then padding invariance, numerical stability, finite gradients on random
inputs, training on a toy problem, and argument checks.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tagtorch.losses import LOSSES, get_loss
from tagtorch.metrics.functional import ndcg_at_k

# ---------------------------------------------------------------------------------------------
# The cases: every loss with its defaults and a few parameter settings.
# ---------------------------------------------------------------------------------------------

CASES = [
    ("listnet", {}),
    ("ranknet", {}),
    ("ranknet", {"sigma": 2.5}),
    ("ranknet", {"reduction": "sum"}),
    ("lambdarank", {}),
    ("lambdarank", {"k": 3}),
    ("lambdarank", {"gain": "exp"}),
    ("lambdarank", {"k": 3, "sigma": 0.7, "reduction": "mean"}),
    ("lambdarank", {"k": 1, "gain": "exp", "reduction": "mean"}),
    ("lambdaloss", {}),
    ("lambdaloss", {"k": 3}),
    ("lambdaloss", {"gain": "exp", "mu": 0.0}),
    ("lambdaloss", {"k": 5, "sigma": 1.5, "mu": 3.0, "reduction": "sum"}),
    ("approxndcg", {}),
    ("approxndcg", {"alpha": 5.0}),
    ("approxndcg", {"alpha": 0.5, "gain": "exp"}),
    ("neuralndcg", {}),
    ("neuralndcg", {"k": 3}),
    ("neuralndcg", {"tau": 0.5, "gain": "exp"}),
    ("neuralndcg", {"tau": 2.0, "k": 1, "tol": 1e-9, "max_iter": 200}),
]


def case_id(case):
    name, params = case
    return name + "".join(f"-{key}={value}" for key, value in params.items())


CASE_PARAMS = pytest.mark.parametrize(("name", "params"), CASES, ids=[case_id(c) for c in CASES])
DEFAULTS = {name: params for name, params in reversed(CASES) if not params}


def test_every_loss_is_covered():
    assert {name for name, _ in CASES} == set(LOSSES)
    assert set(DEFAULTS) == set(LOSSES)
    for name, fn in LOSSES.items():
        assert get_loss(name) is fn
    with pytest.raises(ValueError, match="unknown loss 'nope'; valid names: approxndcg"):
        get_loss("nope")


# ---------------------------------------------------------------------------------------------
# Plain per-list references. ``s`` is a 1-D float64 tensor of the n real scores (in list order),
# ``y`` a Python list of their labels. Each returns the list's loss (a 0-d tensor attached to
# ``s``), or None when the list cannot contribute.
# ---------------------------------------------------------------------------------------------


def ref_gain(label, gain):
    return label if gain == "linear" else 2.0**label - 1.0


def ref_discount(rank):
    return 1.0 / math.log2(1.0 + rank)


def ref_idcg(gains, k=None):
    ordered = sorted(gains, reverse=True)
    if k is not None:
        ordered = ordered[:k]
    return sum(g * ref_discount(p) for p, g in enumerate(ordered, start=1))


def ref_ranks(values):
    """Ranks from 1 by value, descending; ties go to the earlier candidate."""
    order = sorted(range(len(values)), key=lambda i: (-values[i], i))
    ranks = [0] * len(values)
    for position, i in enumerate(order, start=1):
        ranks[i] = position
    return ranks


def ref_logistic(x):
    """log(1 + exp(-x)) for a 0-d tensor of moderate size."""
    return torch.log1p(torch.exp(-x))


def ref_listnet(s, y):
    n = len(y)
    if max(y) <= 0:
        return None
    z = sum(math.exp(v) for v in y)
    target = [math.exp(v) / z for v in y]
    top = max(s.tolist())
    log_norm = top + torch.log(sum(torch.exp(s[j] - top) for j in range(n)))
    return -sum(target[i] * (s[i] - log_norm) for i in range(n))


def ref_ranknet(s, y, sigma=1.0, reduction="mean"):
    n = len(y)
    terms = [ref_logistic(sigma * (s[i] - s[j])) for i in range(n) for j in range(n) if y[i] > y[j]]
    if not terms:
        return None
    return sum(terms) if reduction == "sum" else sum(terms) / len(terms)


def ref_lambdarank(s, y, k=None, sigma=1.0, gain="linear", reduction="sum"):
    n = len(y)
    gains = [ref_gain(v, gain) for v in y]
    ranks = ref_ranks(s.tolist())
    idcg = ref_idcg(gains, k)

    def d(rank):
        return 0.0 if k is not None and rank > k else ref_discount(rank)

    terms = []
    for i in range(n):
        for j in range(n):
            if y[i] <= y[j]:
                continue
            if k is not None and ranks[i] > k and ranks[j] > k:
                continue
            delta_ndcg = abs(gains[i] - gains[j]) * abs(d(ranks[i]) - d(ranks[j])) / idcg
            terms.append(delta_ndcg * ref_logistic(sigma * (s[i] - s[j])))
    if not terms:
        return None
    return sum(terms) if reduction == "sum" else sum(terms) / len(terms)


def ref_lambdaloss(s, y, k=None, sigma=1.0, mu=10.0, gain="linear", reduction="mean"):
    n = len(y)
    gains = [ref_gain(v, gain) for v in y]
    ranks = ref_ranks(s.tolist())
    idcg = ref_idcg(gains, k)

    def big_d(x):
        return math.log2(1.0 + x)

    terms = []
    for i in range(n):
        for j in range(n):
            if y[i] <= y[j]:
                continue
            if k is not None and not (ranks[i] <= k and ranks[j] <= k):
                continue
            rho = abs(1.0 / big_d(ranks[i]) - 1.0 / big_d(ranks[j]))
            dist = abs(ranks[i] - ranks[j])
            delta = abs(1.0 / big_d(dist) - 1.0 / big_d(dist + 1))
            weight = (rho + mu * delta) * abs(gains[i] / idcg - gains[j] / idcg)
            terms.append(-weight * torch.log2(torch.sigmoid(sigma * (s[i] - s[j]))))
    if not terms:
        return None
    return sum(terms) if reduction == "sum" else sum(terms) / len(terms)


def ref_approxndcg(s, y, alpha=1.0, gain="linear"):
    n = len(y)
    gains = [ref_gain(v, gain) for v in y]
    idcg = ref_idcg(gains)
    if idcg <= 0:
        return None
    dcg = 0.0
    for i in range(n):
        rank = 1.0 + sum(torch.sigmoid(-alpha * (s[i] - s[j])) for j in range(n) if j != i)
        dcg = dcg + gains[i] / torch.log2(1.0 + rank)
    return -dcg / idcg


def ref_neuralndcg(s, y, tau=1.0, k=None, max_iter=50, tol=1e-6, gain="linear"):
    n = len(y)
    gains = [ref_gain(v, gain) for v in y]
    idcg = ref_idcg(gains, k)
    if idcg <= 0:
        return None
    spread = [sum(torch.abs(s[j] - s[q]) for q in range(n) if q != j) for j in range(n)]
    rows = []
    for r in range(1, n + 1):
        logits = torch.stack([((n + 1 - 2 * r) * s[j] - spread[j]) / tau for j in range(n)])
        rows.append(torch.softmax(logits, dim=0))
    p = torch.stack(rows)  # p[r - 1, j]
    for _ in range(max_iter):
        p = p / p.sum(0, keepdim=True)  # columns
        p = p / p.sum(1, keepdim=True)  # then rows
        with torch.no_grad():
            row_err = float((p.sum(1) - 1).abs().max())
            col_err = float((p.sum(0) - 1).abs().max())
        if row_err < tol and col_err < tol:
            break
    dcg = 0.0
    for r in range(1, n + 1):
        if k is not None and r > k:
            break
        sorted_gain = sum(p[r - 1, j] * gains[j] for j in range(n))
        dcg = dcg + sorted_gain / math.log2(r + 1)
    return -dcg / idcg


REFERENCES = {
    "listnet": ref_listnet,
    "ranknet": ref_ranknet,
    "lambdarank": ref_lambdarank,
    "lambdaloss": ref_lambdaloss,
    "approxndcg": ref_approxndcg,
    "neuralndcg": ref_neuralndcg,
}


def reference_loss(name, scores, labels, mask, params):
    """Mean of the per-list references over the lists that contribute (0 when none does)."""
    per_list = []
    for b in range(scores.shape[0]):
        idx = [i for i in range(scores.shape[1]) if bool(mask[b, i])]
        if not idx:
            continue
        value = REFERENCES[name](scores[b, idx], [float(labels[b, i]) for i in idx], **params)
        if value is not None:
            per_list.append(value)
    if not per_list:
        return None
    return sum(per_list) / len(per_list)


# ---------------------------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------------------------

GARBAGE = (1e30, -1e30, math.inf, -math.inf, math.nan)


def random_batch(seed, *, graded, interleave, ties=False, n_lists=6, width=10):
    """A padded float64 batch with garbage padding and lists of 2-8 real candidates.

    List 0 has no relevant candidate; list 1 only equal positive labels (no pair); list 2 at
    least one pair. Padding holds garbage scores and labels (negative, NaN, large).
    """
    rng = np.random.default_rng(seed)
    scores = rng.choice(np.array([*GARBAGE, 7.0]), size=(n_lists, width))
    labels = rng.choice(np.array([-3.0, math.nan, 9.0, 0.0, 1.0]), size=(n_lists, width))
    mask = np.zeros((n_lists, width), dtype=bool)
    for b in range(n_lists):
        n = int(rng.integers(2, 9))
        pos = np.sort(rng.choice(width, n, replace=False)) if interleave else np.arange(n)
        mask[b, pos] = True
        real = rng.normal(0.0, 1.5, n)
        scores[b, pos] = np.round(real) if ties else real
        if graded:
            labels[b, pos] = rng.integers(0, 4, n)
        else:
            labels[b, pos] = rng.random(n) < 0.35
        if b == 0:
            labels[b, pos] = 0.0
        elif b == 1:
            labels[b, pos] = 2.0 if graded else 1.0
        elif b == 2:
            labels[b, pos[0]] = max(labels[b, pos[0]], 1.0)
            labels[b, pos[1]] = 0.0
    return torch.tensor(scores), torch.tensor(labels), torch.tensor(mask)


BATCHES = {
    "binary-prefix": {"seed": 0, "graded": False, "interleave": False},
    "graded-interleaved": {"seed": 1, "graded": True, "interleave": True},
    "graded-ties": {"seed": 2, "graded": True, "interleave": False, "ties": True},
    "binary-interleaved": {"seed": 3, "graded": False, "interleave": True},
    "graded-prefix": {"seed": 4, "graded": True, "interleave": False},
}


def value_and_grad(name, scores, labels, mask, params):
    scores = scores.detach().clone().requires_grad_(True)
    value = LOSSES[name](scores, labels, mask, **params)
    value.backward()
    return value.detach(), scores.grad


# ---------------------------------------------------------------------------------------------
# 1. Agreement with the independent references (float64, value and gradient)
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("batch", list(BATCHES))
@CASE_PARAMS
def test_matches_reference(name, params, batch):
    scores, labels, mask = random_batch(**BATCHES[batch])
    value, grad = value_and_grad(name, scores, labels, mask, params)

    leaf = scores.clone().requires_grad_(True)
    expected = reference_loss(name, leaf, labels, mask, params)
    assert expected is not None  # list 2 always contributes
    expected.backward()

    assert value.dtype == torch.float64
    assert value.ndim == 0
    torch.testing.assert_close(value, expected.detach(), rtol=1e-10, atol=1e-12)
    expected_grad = torch.where(mask, leaf.grad, 0.0)
    torch.testing.assert_close(grad, expected_grad, rtol=1e-9, atol=1e-12)
    assert bool((grad[~mask] == 0).all())


@pytest.mark.parametrize("name", list(LOSSES))
def test_lists_that_cannot_contribute_are_left_out(name):
    """A batch mean equals the mean of the contributing lists, each computed alone."""
    scores, labels, mask = random_batch(7, graded=True, interleave=True)
    fn = LOSSES[name]
    whole = fn(scores, labels, mask)
    contributing = [
        b
        for b in range(scores.shape[0])
        if REFERENCES[name](scores[b, mask[b]], labels[b, mask[b]].tolist()) is not None
    ]
    assert 0 not in contributing  # no relevant candidate
    assert (1 in contributing) == (name in {"listnet", "approxndcg", "neuralndcg"})
    alone = [fn(scores[b : b + 1], labels[b : b + 1], mask[b : b + 1]) for b in contributing]
    torch.testing.assert_close(whole, torch.stack(alone).mean(), rtol=1e-12, atol=1e-14)


def test_hand_computed_values():
    """Tiny lists whose losses are worked out by hand."""
    s = torch.tensor([[1.0, 0.0]], dtype=torch.float64)
    y = torch.tensor([[1.0, 0.0]], dtype=torch.float64)
    m = torch.ones(1, 2, dtype=torch.bool)
    softplus_m1 = math.log1p(math.exp(-1.0))  # log(1 + e^-1)
    # ListNet: target softmax(1, 0) = (e/(1+e), 1/(1+e)); log softmax(1, 0) = (-sp(-1), -sp(1))
    p = math.e / (1 + math.e)
    listnet = p * softplus_m1 + (1 - p) * math.log1p(math.exp(1.0))
    assert LOSSES["listnet"](s, y, m).item() == pytest.approx(listnet, rel=1e-12)
    assert LOSSES["ranknet"](s, y, m).item() == pytest.approx(softplus_m1, rel=1e-12)
    # LambdaRank: |ΔNDCG| = |1 - 0| * |1 - 1/log2(3)| / 1
    weight = 1 - 1 / math.log2(3)
    assert LOSSES["lambdarank"](s, y, m).item() == pytest.approx(weight * softplus_m1, rel=1e-12)
    # LambdaLoss: rho = 1 - 1/log2(3), delta = |1/log2(2) - 1/log2(3)|, mu = 10
    w = (weight + 10 * weight) * 1.0
    expected = w * softplus_m1 / math.log(2)
    assert LOSSES["lambdaloss"](s, y, m).item() == pytest.approx(expected, rel=1e-12)
    # ApproxNDCG: rank of the relevant one is 1 + sigmoid(-1)
    rank = 1 + 1 / (1 + math.e)
    expected = -1 / math.log2(1 + rank)
    assert LOSSES["approxndcg"](s, y, m).item() == pytest.approx(expected, rel=1e-12)


# ---------------------------------------------------------------------------------------------
# 2. Padding invariance
# ---------------------------------------------------------------------------------------------


@CASE_PARAMS
def test_padding_invariance(name, params):
    scores, labels, mask = random_batch(11, graded=True, interleave=False)
    clean_scores = torch.where(mask, scores, 0.0)
    clean_labels = torch.where(mask, labels, 0.0)
    value, grad = value_and_grad(name, clean_scores, clean_labels, mask, params)
    assert torch.isfinite(value)

    # the same lists with garbage in their padding
    v_garbage, g_garbage = value_and_grad(name, scores, labels, mask, params)
    torch.testing.assert_close(v_garbage, value, rtol=1e-12, atol=1e-14)
    torch.testing.assert_close(g_garbage, grad, rtol=1e-12, atol=1e-14)
    assert bool((g_garbage[~mask] == 0).all())

    # extra garbage columns interleaved between the real ones (their order is kept)
    rng = np.random.default_rng(12)
    n_lists, width = scores.shape
    wide = width + 7
    columns = np.sort(rng.choice(wide, width, replace=False))
    wide_scores = torch.tensor(rng.choice(np.array(GARBAGE), size=(n_lists, wide)))
    wide_labels = torch.tensor(rng.choice(np.array([-1.0, math.nan, 5.0, 1.0]), (n_lists, wide)))
    wide_mask = torch.zeros(n_lists, wide, dtype=torch.bool)
    wide_scores[:, columns] = scores
    wide_labels[:, columns] = labels
    wide_mask[:, columns] = mask
    v_wide, g_wide = value_and_grad(name, wide_scores, wide_labels, wide_mask, params)
    torch.testing.assert_close(v_wide, value, rtol=1e-12, atol=1e-14)
    torch.testing.assert_close(g_wide[:, columns], grad, rtol=1e-12, atol=1e-14)
    assert bool((g_wide[~wide_mask] == 0).all())


# ---------------------------------------------------------------------------------------------
# 3. Numerical stability
# ---------------------------------------------------------------------------------------------


def scaled_batch(regime, dtype):
    scores, labels, mask = random_batch(21, graded=True, interleave=True)
    real = torch.randn(scores.shape, generator=torch.Generator().manual_seed(5), dtype=dtype)
    if regime == "1e4":
        real = real.sign() * 1e4 + real
    elif regime == "1e8":
        real = real * 1e8
    elif regime == "tiny-diffs":
        real = 1.0 + 1e-8 * real
    elif regime == "tiny":
        real = 1e-8 * real
    scores = torch.where(mask, real, scores.to(dtype))
    return scores, labels, mask


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("regime", ["1e4", "1e8", "tiny-diffs", "tiny"])
@CASE_PARAMS
def test_extreme_scores_are_finite(name, params, regime, dtype):
    scores, labels, mask = scaled_batch(regime, dtype)
    value, grad = value_and_grad(name, scores, labels, mask, params)
    assert value.dtype == dtype
    assert torch.isfinite(value), value
    assert bool(torch.isfinite(grad).all())
    assert bool((grad[~mask] == 0).all())


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
@CASE_PARAMS
def test_no_contributing_list_gives_attached_zero(name, params, dtype):
    scores, labels, mask = random_batch(31, graded=False, interleave=True)
    scores = scores.to(dtype)
    for no_relevant in (torch.zeros_like(labels), torch.where(mask, 0.0, labels)):
        value, grad = value_and_grad(name, scores, no_relevant, mask, params)
        assert value.item() == 0.0
        assert bool((grad == 0).all())
    # an entirely padded batch
    value, grad = value_and_grad(name, scores, labels, torch.zeros_like(mask), params)
    assert value.item() == 0.0
    assert bool((grad == 0).all())


@pytest.mark.parametrize("name", ["ranknet", "lambdarank", "lambdaloss"])
def test_pairwise_losses_ignore_lists_without_pairs(name):
    scores, _, mask = random_batch(32, graded=False, interleave=True)
    equal = torch.where(mask, 1.0, 0.0)  # every real label equal: no pair
    value, grad = value_and_grad(name, scores, equal, mask, {})
    assert value.item() == 0.0
    assert bool((grad == 0).all())


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
@pytest.mark.parametrize("name", list(LOSSES))
def test_output_dtype(name, dtype):
    scores, labels, mask = random_batch(41, graded=True, interleave=False)
    scores = torch.where(mask, scores, 0.0).to(dtype)
    value = LOSSES[name](scores, labels.float(), mask)
    assert value.dtype == (torch.float64 if dtype == torch.float64 else torch.float32)
    assert value.ndim == 0


# ---------------------------------------------------------------------------------------------
# 4. Finite gradients on random inputs
# ---------------------------------------------------------------------------------------------


@st.composite
def padded_batches(draw):
    n_lists = draw(st.integers(1, 3))
    width = draw(st.integers(1, 6))
    size = n_lists * width
    scores = draw(
        st.lists(
            st.one_of(
                st.floats(-1e6, 1e6, width=32),
                st.sampled_from([0.0, 1.0, 1e-7]),
            ),
            min_size=size,
            max_size=size,
        )
    )
    labels = draw(st.lists(st.integers(0, 3), min_size=size, max_size=size))
    mask = draw(st.lists(st.booleans(), min_size=size, max_size=size))
    shape = (n_lists, width)
    mask_t = torch.tensor(mask).reshape(shape)
    scores_t = torch.tensor(scores, dtype=torch.float32).reshape(shape)
    scores_t = torch.where(mask_t, scores_t, math.nan)  # NaN padding must not matter
    return scores_t, torch.tensor(labels, dtype=torch.float32).reshape(shape), mask_t


@CASE_PARAMS
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batch=padded_batches())
def test_random_inputs_give_finite_gradients(name, params, batch):
    scores, labels, mask = batch
    value, grad = value_and_grad(name, scores, labels, mask, params)
    assert torch.isfinite(value)
    assert bool(torch.isfinite(grad).all())
    assert bool((grad[~mask] == 0).all())


# ---------------------------------------------------------------------------------------------
# 5. Training a linear scorer on a toy problem
# ---------------------------------------------------------------------------------------------


def toy_problem():
    g = torch.Generator().manual_seed(0)
    n_lists, width, dim = 24, 10, 6
    x = torch.randn(n_lists, width, dim, generator=g)
    w_true = torch.randn(dim, generator=g)
    latent = x @ w_true + 0.3 * torch.randn(n_lists, width, generator=g)
    lengths = torch.randint(6, width + 1, (n_lists,), generator=g)
    mask = torch.arange(width)[None, :] < lengths[:, None]
    latent = torch.where(mask, latent, -math.inf)
    labels = (latent > 1.0).float() + (latent > 2.5).float()
    best = latent.argmax(-1)
    labels[torch.arange(n_lists), best] = labels[torch.arange(n_lists), best].clamp_min(1.0)
    return x, labels, mask, w_true


@pytest.mark.parametrize("name", list(LOSSES))
def test_training_lowers_loss_and_raises_ndcg(name):
    x, labels, mask, w_true = toy_problem()
    fn = LOSSES[name]
    w = (-0.3 * w_true / w_true.norm()).requires_grad_(True)  # start badly
    optimizer = torch.optim.Adam([w], lr=0.1)

    def evaluate():
        with torch.no_grad():
            scores = x @ w
            loss = fn(scores, labels, mask).item()
            ndcg = ndcg_at_k(scores, labels, mask, k=5).nanmean().item()
        return loss, ndcg

    loss_before, ndcg_before = evaluate()
    for _ in range(60):
        optimizer.zero_grad()
        fn(x @ w, labels, mask).backward()
        optimizer.step()
    loss_after, ndcg_after = evaluate()

    assert loss_after < loss_before
    assert ndcg_after > ndcg_before + 0.3, (ndcg_before, ndcg_after)
    assert ndcg_after > 0.8, (ndcg_before, ndcg_after)


# ---------------------------------------------------------------------------------------------
# 6. Invalid arguments
# ---------------------------------------------------------------------------------------------

WITH_K = ["lambdarank", "lambdaloss", "neuralndcg"]
WITH_SIGMA = ["ranknet", "lambdarank", "lambdaloss"]
WITH_REDUCTION = ["ranknet", "lambdarank", "lambdaloss"]
WITH_GAIN = ["lambdarank", "lambdaloss", "approxndcg", "neuralndcg"]


def small_batch():
    scores = torch.tensor([[0.5, -0.2, 1.0], [0.1, 0.3, 0.0]])
    labels = torch.tensor([[1.0, 0.0, 2.0], [0.0, 1.0, 0.0]])
    mask = torch.tensor([[True, True, True], [True, True, False]])
    return scores, labels, mask


@pytest.mark.parametrize("k", [0, -1, 2.5, True, "3"])
@pytest.mark.parametrize("name", WITH_K)
def test_bad_k(name, k):
    with pytest.raises(ValueError, match=r"k must be an integer >= 1 or None"):
        LOSSES[name](*small_batch(), k=k)


@pytest.mark.parametrize("sigma", [0.0, -1.0, math.nan, math.inf])
@pytest.mark.parametrize("name", WITH_SIGMA)
def test_bad_sigma(name, sigma):
    with pytest.raises(ValueError, match=r"sigma must be a finite number > 0"):
        LOSSES[name](*small_batch(), sigma=sigma)


@pytest.mark.parametrize(
    ("name", "param", "value", "message"),
    [
        ("lambdaloss", "mu", -0.5, r"mu must be a finite number >= 0"),
        ("approxndcg", "alpha", 0.0, r"alpha must be a finite number > 0"),
        ("neuralndcg", "tau", -1.0, r"tau must be a finite number > 0"),
        ("neuralndcg", "max_iter", -1, r"max_iter must be an int >= 0"),
        ("neuralndcg", "tol", -1e-3, r"tol must be a finite number >= 0"),
    ],
)
def test_bad_temperature_and_weights(name, param, value, message):
    with pytest.raises(ValueError, match=message):
        LOSSES[name](*small_batch(), **{param: value})


@pytest.mark.parametrize("name", WITH_REDUCTION)
def test_bad_reduction(name):
    with pytest.raises(ValueError, match=r"reduction must be 'mean' or 'sum', got 'max'"):
        LOSSES[name](*small_batch(), reduction="max")


@pytest.mark.parametrize("name", WITH_GAIN)
def test_bad_gain(name):
    with pytest.raises(ValueError, match=r"gain must be 'linear' or 'exp', got 'log'"):
        LOSSES[name](*small_batch(), gain="log")


@pytest.mark.parametrize("name", list(LOSSES))
def test_bad_inputs(name):
    fn = LOSSES[name]
    scores, labels, mask = small_batch()
    with pytest.raises(ValueError, match=r"mask must be a bool tensor, got torch.float32"):
        fn(scores, labels, mask.float())
    with pytest.raises(ValueError, match=r"labels must have the shape of scores \(2, 3\)"):
        fn(scores, labels[:, :2], mask)
    with pytest.raises(ValueError, match=r"mask must have the shape of scores \(2, 3\)"):
        fn(scores, labels, mask[:1])
    with pytest.raises(ValueError, match=r"scores must have shape \[B, L\], got \(3,\)"):
        fn(scores[0], labels[0], mask[0])
    negative = labels.clone()
    negative[0, 1] = -1.0
    with pytest.raises(ValueError, match=r"labels of real candidates must be >= 0"):
        fn(scores, negative, mask)
    negative[0, 1] = math.nan
    with pytest.raises(ValueError, match=r"labels of real candidates must be >= 0"):
        fn(scores, negative, mask)
    with pytest.raises(TypeError, match=r"scores must be a torch.Tensor"):
        fn(scores.tolist(), labels, mask)
    # a negative or NaN label in the padding is fine
    padded = labels.clone()
    padded[1, 2] = -5.0
    assert torch.isfinite(fn(scores, padded, mask))


@pytest.mark.parametrize("name", list(LOSSES))
def test_lists_of_width_zero_give_an_attached_zero(name):
    scores = torch.zeros(2, 0, requires_grad=True)
    value = LOSSES[name](scores, torch.zeros(2, 0), torch.zeros(2, 0, dtype=torch.bool))
    assert value.item() == 0.0
    value.backward()  # still part of the graph
    assert scores.grad is not None and scores.grad.shape == (2, 0)


# ---------------------------------------------------------------------------------------------
# allRank 1.4.3 as an oracle for the losses it shares (skipped without it:
# pip install --no-deps allRank==1.4.3; benchmarks/allrank_oracle.py says why --no-deps).
# ---------------------------------------------------------------------------------------------

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from allrank_oracle import load_allrank_losses, to_allrank  # noqa: E402

ALLRANK = load_allrank_losses()


def _allrank_batch(seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Graded labels 0-3, real lists of 3 to 12 candidates padded to 12, moderate scores."""
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(3, 13, (6,), generator=g)
    mask = torch.arange(12) < lengths[:, None]
    labels = torch.randint(0, 4, (6, 12), generator=g).float().masked_fill(~mask, 0.0)
    labels[:, 0] = 2.0  # a relevant candidate in every list
    return torch.randn(6, 12, generator=g), labels, mask


def _pair_counts(labels: torch.Tensor, mask: torch.Tensor) -> tuple[int, int]:
    """(lists with a pair label_i > label_j, such pairs in the batch), counted by hand."""
    pairs = [sum(1 for i in range(int(m.sum())) for j in range(int(m.sum())) if y[i] > y[j])
             for y, m in zip(labels.tolist(), mask, strict=True)]
    return sum(1 for p in pairs if p), sum(pairs)


# tagtorch settings, allRank settings, and how allRank's batch reduction relates to ours
ALLRANK_CASES = [
    ("listnet", {}, {}, "same"),
    ("approxndcg", {"gain": "exp"}, {"alpha": 1.0}, "same"),
    ("approxndcg", {"gain": "exp", "alpha": 3.0}, {"alpha": 3.0}, "same"),
    ("neuralndcg", {"gain": "exp"}, {}, "same"),
    ("neuralndcg", {"gain": "exp", "k": 4, "tau": 0.5}, {"k": 4, "temperature": 0.5}, "same"),
    ("neuralndcg", {"k": 3}, {"k": 3, "powered_relevancies": False}, "same"),
    ("ranknet", {"reduction": "sum"}, {}, "pooled_mean"),  # allRank: mean over the batch's pairs
    ("lambdaloss", {"gain": "exp", "reduction": "sum"},
     {"weighing_scheme": "ndcgLoss2PP_scheme", "reduction": "sum"}, "sum"),  # allRank: batch sum
    ("lambdaloss", {"gain": "exp", "reduction": "sum", "k": 5, "mu": 3.0, "sigma": 1.5},
     {"weighing_scheme": "ndcgLoss2PP_scheme", "reduction": "sum", "k": 5, "mu": 3.0,
      "sigma": 1.5}, "sum"),
]


@pytest.mark.skipif(ALLRANK is None, reason="allRank is not installed")
@pytest.mark.parametrize(("name", "ours", "theirs", "relation"), ALLRANK_CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(ALLRANK_CASES)])
@pytest.mark.parametrize("seed", [0, 1])
def test_matches_allrank(name, ours, theirs, relation, seed):
    """Value and gradient equal to allRank's loss at matching settings (float32: allRank's)."""
    assert ALLRANK is not None
    scores, labels, mask = _allrank_batch(seed)
    ours_scores = scores.clone().requires_grad_(True)
    ours_value = get_loss(name)(ours_scores, labels, mask, **ours)
    valid_lists, n_pairs = _pair_counts(labels, mask)
    factor = {"same": 1.0, "sum": float(valid_lists),
              "pooled_mean": valid_lists / n_pairs}[relation]
    (ours_value * factor).backward()
    y_pred, y_true = to_allrank(scores.clone().requires_grad_(True), labels, mask)
    theirs_value = ALLRANK[name](y_pred, y_true, **theirs)
    theirs_value.backward()
    assert ours_value.item() * factor == pytest.approx(theirs_value.item(), rel=1e-5, abs=1e-7)
    # NeuralNDCG: each list's Sinkhorn scaling stops at its own tolerance 1e-6 (allRank's runs
    # until the whole batch is within it), which moves gradients by about 1e-6
    atol = 1e-5 if name == "neuralndcg" else 1e-6
    np.testing.assert_allclose(ours_scores.grad[mask].numpy(), y_pred.grad[mask].numpy(),
                               rtol=1e-4, atol=atol)
