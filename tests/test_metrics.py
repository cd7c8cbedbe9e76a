"""Tests of tagtorch.metrics against torchmetrics, scikit-learn, a plain reference and hand math."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import average_precision_score, dcg_score, ndcg_score
from torchmetrics.functional.retrieval import (
    retrieval_average_precision,
    retrieval_hit_rate,
    retrieval_normalized_dcg,
    retrieval_precision,
    retrieval_recall,
    retrieval_reciprocal_rank,
)

from tagtorch.metrics import (
    DCG,
    MAP,
    MRR,
    NDCG,
    Precision,
    Recall,
    Success,
    average_precision,
    dcg_at_k,
    ideal_dcg,
    ndcg_at_k,
    precision_at_k,
    ranking_metrics,
    recall_at_k,
    reciprocal_rank,
    success_at_k,
    top_ranking_metrics,
)
from tagtorch.metrics.functional import (
    MAX_CUTOFF,
    parse_key,
    parse_metric,
    rank_order,
    top_rank_order,
)

L2_3 = 1 / math.log2(3)  # discount at rank 2
L2_5 = 1 / math.log2(5)  # discount at rank 4
L2_6 = 1 / math.log2(6)  # discount at rank 5


def t(*rows: list) -> torch.Tensor:
    return torch.tensor(rows)


def full_mask(b: int, n: int) -> torch.Tensor:
    return torch.ones(b, n, dtype=torch.bool)


def random_batch(
    seed: int, b: int = 64, width: int = 12, graded: bool = False, min_len: int = 1
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Padded batch with continuous positive scores (no ties) and garbage in the padding.

    Returns scores, labels, mask and the real lengths.
    """
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(min_len, width + 1, (b,), generator=g)
    mask = torch.arange(width) < lengths[:, None]
    scores = torch.rand(b, width, generator=g) + 0.01
    high = 4 if graded else 2
    labels = torch.randint(0, high, (b, width), generator=g)
    # padding: huge scores and positive labels that must never count
    scores = torch.where(mask, scores, torch.full_like(scores, 1e6))
    labels = torch.where(mask, labels, torch.full_like(labels, 3))
    return scores, labels, mask, lengths


# --------------------------------------------------------------------------------------------
# Plain per-list reference (loops, Python floats): an independent statement of the convention.


def ref_list(scores, labels, n_relevant, k):
    """Returns (ndcg@k, p@k, r@k, s@k, rr, ap, ap@k) of one list, NaN where n_relevant == 0."""
    order = sorted(range(len(scores)), key=lambda i: (-scores[i], i))
    gains = [labels[i] for i in order]
    rel = [g > 0 for g in gains]
    n_missing = n_relevant - sum(rel)
    if n_relevant == 0:
        return (math.nan,) * 7
    dcg = sum(g / math.log2(r + 2) for r, g in enumerate(gains[:k]))
    ideal = sorted([*labels, *([1.0] * n_missing)], reverse=True)
    idcg = sum(g / math.log2(r + 2) for r, g in enumerate(ideal[:k]))
    hits = sum(rel[:k])
    rr = next((1 / (r + 1) for r, x in enumerate(rel) if x), 0.0)
    precisions = [sum(rel[: r + 1]) / (r + 1) for r in range(len(rel))]
    ap = sum(p for p, x in zip(precisions, rel, strict=True) if x) / n_relevant
    ap_k = sum(p for p, x in zip(precisions[:k], rel[:k], strict=True) if x) / min(k, n_relevant)
    return (dcg / idcg, hits / k, hits / n_relevant, float(hits > 0), rr, ap, ap_k)


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("k", [1, 3, 7, 20])
def test_against_plain_reference_with_ties_grades_and_missing(seed: int, k: int) -> None:
    g = torch.Generator().manual_seed(100 + seed)
    b, width = 40, 9
    lengths = torch.randint(0, width + 1, (b,), generator=g)
    mask = torch.arange(width) < lengths[:, None]
    scores = torch.randint(0, 4, (b, width), generator=g).float()  # many ties
    labels = torch.randint(0, 4, (b, width), generator=g) * (
        torch.rand(b, width, generator=g) < 0.5
    )
    present = ((labels > 0) & mask).sum(-1)
    n_relevant = present + torch.randint(0, 3, (b,), generator=g)
    got = ranking_metrics(scores, labels, mask, n_relevant, ks=(k,))
    ap_k = average_precision(scores, labels, mask, k=k, n_relevant=n_relevant)
    for i in range(b):
        n = int(lengths[i])
        exp = ref_list(
            scores[i, :n].tolist(), labels[i, :n].float().tolist(), int(n_relevant[i]), k
        )
        keys = (f"ndcg@{k}", f"p@{k}", f"r@{k}", f"s@{k}", "mrr", "map")
        actual = [got[key][i].item() for key in keys] + [ap_k[i].item()]
        np.testing.assert_allclose(actual, exp, rtol=1e-5, atol=1e-6, err_msg=f"list {i}")


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("k", [1, 4, 10])
def test_top_ranking_metrics_of_long_lists_against_the_plain_reference(seed: int, k: int) -> None:
    """The top places only, with ties, padding above the real scores, short and empty lists."""
    g = torch.Generator().manual_seed(200 + seed)
    b, width = 60, 80
    lengths = torch.randint(0, width + 1, (b,), generator=g)
    lengths[:6] = torch.tensor([0, 1, 3, 9, 10, 11])
    mask = torch.arange(width) < lengths[:, None]
    scores = torch.randint(0, 6, (b, width), generator=g).float()  # ties at every cut
    scores = torch.where(mask, scores, torch.full_like(scores, 99.0))
    labels = torch.rand(b, width, generator=g) < 0.04
    labels[::7] = False  # lists without a relevant candidate: NaN
    names = ("ndcg", "precision", "recall", "success", f"mrr@{k}", f"map@{k}")
    got = top_ranking_metrics(scores, labels, mask, ks=(k,), metrics=names)
    for i in range(b):
        n = int(lengths[i])
        row = labels[i, :n].float().tolist()
        ndcg, p, r, s, rr, _, ap_k = ref_list(scores[i, :n].tolist(), row, int(sum(row)), k)
        rr_k = rr if not rr < 1 / k else 0.0  # NaN stays NaN
        actual = [got[key][i].item() for key in
                  (f"ndcg@{k}", f"p@{k}", f"r@{k}", f"s@{k}", f"mrr@{k}", f"map@{k}")]
        np.testing.assert_allclose(actual, (ndcg, p, r, s, rr_k, ap_k), rtol=1e-5, atol=1e-6,
                                   err_msg=f"list {i}")


@pytest.mark.parametrize("k", [1, 3, 10])
def test_top_rank_order_equals_the_full_stable_sort(k: int) -> None:
    """Ties at the cut (mostly zeros, as a term-matching model's), NaN, -inf, padding above."""
    g = torch.Generator().manual_seed(7)
    b, width = 80, 200
    scores = torch.randint(0, 3, (b, width), generator=g).double()
    scores *= torch.rand(b, width, generator=g) < 0.05  # mostly 0: a tie at every cut
    lengths = torch.randint(0, width + 1, (b,), generator=g)
    lengths[:4] = torch.tensor([0, 2, k, k + 1])
    mask = torch.arange(width) < lengths[:, None]
    scores = torch.where(mask, scores, torch.full_like(scores, 9.0))
    scores[4, 5] = math.nan
    scores[5, :150] = -math.inf
    scores[6] = torch.arange(width, dtype=torch.float64)  # no tie
    for m in (mask, None):
        expected = rank_order(scores, torch.ones_like(mask) if m is None else m)[:, :k]
        assert torch.equal(top_rank_order(scores, m, k), expected)


def test_top_ranking_metrics_without_a_cut_off_read_whole_lists_and_take_bool_labels() -> None:
    scores, labels, mask, _ = random_batch(5, width=30)
    binary = labels > 1
    whole = ranking_metrics(scores, binary, mask, ks=(3,), metrics=("mrr", "map", "success"))
    top = top_ranking_metrics(scores, binary, mask, ks=(3,), metrics=("mrr", "map", "success"))
    for key, value in whole.items():
        torch.testing.assert_close(top[key], value, equal_nan=True)
    with pytest.raises(ValueError, match="bool labels"):
        top_ranking_metrics(scores, labels, mask, ks=(3,))


# --------------------------------------------------------------------------------------------
# torchmetrics.functional.retrieval on random padded batches (one call per real list)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("k", [1, 3, 5, 15])
def test_against_torchmetrics(seed: int, k: int) -> None:
    scores, labels, mask, lengths = random_batch(seed)
    ours = {
        "p": precision_at_k(scores, labels, mask, k, empty_target_action="neg"),
        "r": recall_at_k(scores, labels, mask, k, empty_target_action="neg"),
        "s": success_at_k(scores, labels, mask, k, empty_target_action="neg"),
        "rr": reciprocal_rank(scores, labels, mask, k=k, empty_target_action="neg"),
        "rr_full": reciprocal_rank(scores, labels, mask, empty_target_action="neg"),
        "ap_full": average_precision(scores, labels, mask, empty_target_action="neg"),
    }
    for i in range(len(lengths)):
        n = int(lengths[i])
        p, y = scores[i, :n], labels[i, :n]
        ref = {
            "p": retrieval_precision(p, y, top_k=k),
            "r": retrieval_recall(p, y, top_k=k),
            "s": retrieval_hit_rate(p, y, top_k=k),
            "rr": retrieval_reciprocal_rank(p, y, top_k=k),
            "rr_full": retrieval_reciprocal_rank(p, y),
            "ap_full": retrieval_average_precision(p, y),
        }
        for name, value in ref.items():
            assert ours[name][i].item() == pytest.approx(value.item(), abs=1e-6), (name, i)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("k", [1, 2, 5, 15])
def test_ndcg_against_torchmetrics_graded(seed: int, k: int) -> None:
    scores, labels, mask, lengths = random_batch(seed + 10, graded=True)
    ours = ndcg_at_k(scores, labels, mask, k, empty_target_action="neg")
    for i in range(len(lengths)):
        n = int(lengths[i])
        ref = retrieval_normalized_dcg(scores[i, :n], labels[i, :n], top_k=k)
        assert ours[i].item() == pytest.approx(ref.item(), abs=1e-5), i


# --------------------------------------------------------------------------------------------
# scikit-learn on full lists


@pytest.mark.parametrize("seed", range(3))
def test_against_sklearn_full_lists(seed: int) -> None:
    scores, labels, mask, lengths = random_batch(seed + 20, b=48, graded=True, min_len=2)
    width = scores.shape[1]
    ndcg_full = ndcg_at_k(scores, labels, mask, k=width)
    ndcg_3 = ndcg_at_k(scores, labels, mask, k=3)
    ap = average_precision(scores, labels, mask)
    checked = 0
    for i in range(len(lengths)):
        n = int(lengths[i])
        y, s = labels[i, :n].numpy()[None], scores[i, :n].numpy()[None]
        if y.sum() == 0:
            assert math.isnan(ndcg_full[i].item()) and math.isnan(ap[i].item())
            continue
        checked += 1
        assert ndcg_full[i].item() == pytest.approx(ndcg_score(y, s), abs=1e-5)
        assert ndcg_3[i].item() == pytest.approx(ndcg_score(y, s, k=3), abs=1e-5)
        ap_ref = average_precision_score((y[0] > 0).astype(int), s[0])
        assert ap[i].item() == pytest.approx(ap_ref, abs=1e-5)
    assert checked > 30


# --------------------------------------------------------------------------------------------
# hand-computed cases


def test_ties_broken_by_candidate_order() -> None:
    # scores tie at 0.5 for candidates 0, 1, 3 -> ranking: c2 (0.9), c0, c1, c3
    # relevant: c1 (rank 3) and c3 (rank 4)
    scores = t([0.5, 0.5, 0.9, 0.5])
    labels = t([0, 1, 0, 1])
    mask = full_mask(1, 4)
    assert precision_at_k(scores, labels, mask, 2).item() == 0.0
    assert precision_at_k(scores, labels, mask, 3).item() == pytest.approx(1 / 3)
    assert success_at_k(scores, labels, mask, 2).item() == 0.0
    assert reciprocal_rank(scores, labels, mask).item() == pytest.approx(1 / 3)
    # AP = (1/3 + 2/4) / 2
    assert average_precision(scores, labels, mask).item() == pytest.approx((1 / 3 + 2 / 4) / 2)
    # DCG@4 = 1/log2(4) + 1/log2(5); IDCG@4 = 1 + 1/log2(3)
    expected = (0.5 + L2_5) / (1 + L2_3)
    assert ndcg_at_k(scores, labels, mask, 4).item() == pytest.approx(expected, rel=1e-6)
    # all tied: candidate order decides; the relevant second candidate is at rank 2
    same = torch.ones(1, 3)
    assert reciprocal_rank(same, t([0, 1, 0]), full_mask(1, 3)).item() == 0.5
    assert reciprocal_rank(same, t([0, 0, 1]), full_mask(1, 3)).item() == pytest.approx(1 / 3)
    # a padding slot in between does not change the tie order of the real candidates
    mask = t([True, False, True, True])
    rr = reciprocal_rank(torch.ones(1, 4), t([0, 1, 0, 1]), mask)
    assert rr.item() == pytest.approx(1 / 3)  # real order c0, c2, c3: c3 at rank 3


def test_ties_in_long_lists_keep_candidate_order() -> None:
    # long lists with few distinct scores: an unstable sort would reorder tied candidates
    g = torch.Generator().manual_seed(5)
    b, width, k = 6, 300, 50
    scores = torch.randint(0, 2, (b, width), generator=g).float()
    labels = (torch.rand(b, width, generator=g) < 0.1).long()
    mask = full_mask(b, width)
    got = ranking_metrics(scores, labels, mask, ks=(k,))
    for i in range(b):
        exp = ref_list(scores[i].tolist(), labels[i].float().tolist(), int(labels[i].sum()), k)
        actual = [got[key][i].item() for key in (f"ndcg@{k}", f"p@{k}", "mrr", "map")]
        np.testing.assert_allclose(actual, [exp[0], exp[1], exp[4], exp[5]], rtol=1e-5)


def test_graded_labels() -> None:
    scores = t([0.9, 0.8, 0.7])
    labels = t([1, 3, 0])
    mask = full_mask(1, 3)
    # DCG@3 = 1/1 + 3/log2(3); IDCG@3 = 3/1 + 1/log2(3)
    dcg, idcg = 1 + 3 * L2_3, 3 + L2_3
    assert ndcg_at_k(scores, labels, mask, 3).item() == pytest.approx(dcg / idcg, rel=1e-6)
    assert ndcg_at_k(scores, labels, mask, 1).item() == pytest.approx(1 / 3, rel=1e-6)
    # binary metrics count label > 0: relevant at ranks 1 and 2
    assert precision_at_k(scores, labels, mask, 2).item() == 1.0
    assert average_precision(scores, labels.float(), mask).item() == pytest.approx(1.0)


def test_relevant_items_missing_from_list() -> None:
    scores = t([0.9, 0.8, 0.7])
    labels = t([1, 0, 1])
    mask = full_mask(1, 3)
    n_rel = torch.tensor([4])  # two gold tags absent from the candidates
    # DCG@3 = 1 + 1/log2(4) = 1.5; IDCG@3 = 1 + 1/log2(3) + 1/log2(4)
    assert ndcg_at_k(scores, labels, mask, 3, n_rel).item() == pytest.approx(
        1.5 / (1 + L2_3 + 0.5), rel=1e-6
    )
    # IDCG@5 = 1 + 1/log2(3) + 1/log2(4) + 1/log2(5) (only 4 relevant)
    assert ndcg_at_k(scores, labels, mask, 5, n_rel).item() == pytest.approx(
        1.5 / (1 + L2_3 + 0.5 + L2_5), rel=1e-6
    )
    assert recall_at_k(scores, labels, mask, 2, n_rel).item() == pytest.approx(1 / 4)
    assert recall_at_k(scores, labels, mask, 3, n_rel).item() == pytest.approx(2 / 4)
    # AP = (1/1 + 2/3) / 4; AP@2 = (1/1) / min(2, 4); AP@3 = (1 + 2/3) / 3
    assert average_precision(scores, labels, mask, n_relevant=n_rel).item() == pytest.approx(
        (1 + 2 / 3) / 4
    )
    assert average_precision(scores, labels, mask, 2, n_rel).item() == pytest.approx(0.5)
    assert average_precision(scores, labels, mask, 3, n_rel).item() == pytest.approx(5 / 9)
    # graded: labels [2, 0], one missing relevant -> ideal gains [2, 1]
    # DCG@2 = 2; IDCG@2 = 2 + 1/log2(3)
    got = ndcg_at_k(t([0.9, 0.1]), t([2, 0]), full_mask(1, 2), 2, torch.tensor([2]))
    assert got.item() == pytest.approx(2 / (2 + L2_3), rel=1e-6)
    # fractional grade below 1: the ideal sorts the missing gain 1 first -> [1, 0.5]
    got = ndcg_at_k(t([0.9]), t([0.5]), full_mask(1, 1), 2, torch.tensor([2]))
    assert got.item() == pytest.approx(0.5 / (1 + 0.5 * L2_3), rel=1e-6)
    # no relevant candidate but gold tags exist: 0, not skipped
    out = ranking_metrics(scores, torch.zeros(1, 3), mask, torch.tensor([2]), ks=(3,))
    assert all(v.item() == 0.0 for v in out.values())


def test_precision_with_list_shorter_than_k() -> None:
    scores = t([0.2, 0.9, 5.0, 7.0])
    labels = t([1, 1, 1, 1])
    mask = t([True, True, False, False])
    # 2 real candidates, both relevant: P@5 = 2/5, R@5 = 2/2, NDCG@5 = 1
    assert precision_at_k(scores, labels, mask, 5).item() == pytest.approx(0.4)
    assert recall_at_k(scores, labels, mask, 5).item() == 1.0
    assert ndcg_at_k(scores, labels, mask, 5).item() == pytest.approx(1.0)
    # list of width 2 and k = 10: P@10 = 1/10
    assert precision_at_k(t([0.3, 0.1]), t([0, 1]), full_mask(1, 2), 10).item() == pytest.approx(
        0.1
    )


def test_ranking_metrics_keys_and_agreement() -> None:
    scores, labels, mask, _ = random_batch(7, b=16, graded=True)
    out = ranking_metrics(scores, labels, mask, ks=(1, 5))
    assert list(out) == ["ndcg@1", "ndcg@5", "p@1", "p@5", "r@1", "r@5", "s@1", "s@5", "mrr", "map"]
    torch.testing.assert_close(out["ndcg@5"], ndcg_at_k(scores, labels, mask, 5), equal_nan=True)
    torch.testing.assert_close(out["r@1"], recall_at_k(scores, labels, mask, 1), equal_nan=True)
    torch.testing.assert_close(out["map"], average_precision(scores, labels, mask), equal_nan=True)
    assert list(ranking_metrics(scores, labels, mask, metrics=("mrr", "precision"))) == [
        "mrr",
        "p@5",
    ]
    assert all(v.shape == (16,) and v.dtype == torch.float32 for v in out.values())
    out64 = ranking_metrics(scores.double(), labels, mask)
    assert all(v.dtype == torch.float64 for v in out64.values())


def test_bool_labels_and_zero_width() -> None:
    scores = t([0.1, 0.7])
    labels = t([True, False])
    assert reciprocal_rank(scores, labels, full_mask(1, 2)).item() == 0.5
    empty = torch.zeros(2, 0)
    mask = torch.zeros(2, 0, dtype=torch.bool)
    out = ranking_metrics(empty, empty, mask, n_relevant=torch.tensor([1, 0]), ks=(3,))
    for value in out.values():
        assert value[0].item() == 0.0 and math.isnan(value[1].item())


# --------------------------------------------------------------------------------------------
# padding invariance


@st.composite
def padded_pair(draw):
    n = draw(st.integers(1, 7))
    k = draw(st.integers(1, 8))
    score_values = st.sampled_from([0.0, 0.5, 1.0, -2.0, 3.25])  # ties on purpose
    scores = draw(st.lists(score_values, min_size=n, max_size=n))
    labels = draw(st.lists(st.integers(0, 3), min_size=n, max_size=n))
    extra = draw(st.integers(0, 2))
    n_pad = draw(st.integers(1, 6))
    pad_scores = draw(
        st.lists(
            st.sampled_from([1e30, -1e30, math.inf, -math.inf, math.nan, 3.25, 0.0]),
            min_size=n_pad,
            max_size=n_pad,
        )
    )
    pad_labels = draw(st.lists(st.integers(1, 5), min_size=n_pad, max_size=n_pad))
    # where each padding slot goes among the real candidates (real order kept)
    slots = draw(st.lists(st.integers(0, n), min_size=n_pad, max_size=n_pad))
    return scores, labels, extra, pad_scores, pad_labels, slots, k


@settings(max_examples=60, deadline=None)
@given(padded_pair())
def test_padding_invariance(case) -> None:
    scores, labels, extra, pad_scores, pad_labels, slots, k = case
    n_rel = torch.tensor([sum(x > 0 for x in labels) + extra])
    base = ranking_metrics(
        torch.tensor([scores]),
        torch.tensor([labels]),
        full_mask(1, len(scores)),
        n_rel,
        ks=(k, 1),
    )
    rows = [(s, y, True) for s, y in zip(scores, labels, strict=True)]
    for slot, s, y in sorted(zip(slots, pad_scores, pad_labels, strict=True), reverse=True):
        rows.insert(slot, (s, y, False))
    padded = ranking_metrics(
        torch.tensor([[r[0] for r in rows]]),
        torch.tensor([[r[1] for r in rows]]),
        torch.tensor([[r[2] for r in rows]]),
        n_rel,
        ks=(k, 1),
    )
    for key, value in base.items():
        torch.testing.assert_close(padded[key], value, equal_nan=True, msg=key)


# --------------------------------------------------------------------------------------------
# empty lists and validation

FUNCS_K = [ndcg_at_k, precision_at_k, recall_at_k, success_at_k, reciprocal_rank, average_precision]


@pytest.mark.parametrize("fn", FUNCS_K)
def test_empty_target_action(fn) -> None:
    scores = t([0.9, 0.1], [0.9, 0.1])
    labels = t([1, 0], [0, 0])  # second list has no relevant item
    mask = full_mask(2, 2)
    skip = fn(scores, labels, mask, 1)
    assert skip[0].item() == 1.0 and math.isnan(skip[1].item())
    assert fn(scores, labels, mask, 1, empty_target_action="neg").tolist() == [1.0, 0.0]
    assert fn(scores, labels, mask, 1, empty_target_action="pos").tolist() == [1.0, 1.0]
    with pytest.raises(ValueError, match="no relevant item"):
        fn(scores, labels, mask, 1, empty_target_action="error")
    with pytest.raises(ValueError, match="empty_target_action"):
        fn(scores, labels, mask, 1, empty_target_action="ignore")
    # a gold tag missing from the list makes the list non-empty: 0, not NaN
    missing = fn(scores, labels, mask, 1, n_relevant=torch.tensor([1, 1]))
    assert missing.tolist() == [1.0, 0.0]
    # padding with a positive label does not make a list non-empty
    pad_mask = t([True, True], [True, False])
    labels_pad = t([1, 0], [0, 1])
    assert math.isnan(fn(scores, labels_pad, pad_mask, 1)[1].item())


@pytest.mark.parametrize("fn", FUNCS_K)
def test_validation_errors(fn) -> None:
    scores, labels, mask = torch.rand(2, 3), torch.ones(2, 3), full_mask(2, 3)
    with pytest.raises(ValueError, match=r"\[B, L\]"):
        fn(torch.rand(3), torch.ones(3), torch.ones(3, dtype=torch.bool), 1)
    with pytest.raises(ValueError, match=r"\[B, L\]"):
        fn(scores, torch.ones(2, 4), mask, 1)
    with pytest.raises(ValueError, match=r"\[B, L\]"):
        fn(scores, labels, full_mask(3, 3), 1)
    with pytest.raises(ValueError, match="bool"):
        fn(scores, labels, mask.int(), 1)
    with pytest.raises(ValueError, match=r"n_relevant must have shape \[B\]"):
        fn(scores, labels, mask, 1, n_relevant=torch.tensor([3]))
    with pytest.raises(ValueError, match="smaller than"):
        fn(scores, labels, mask, 1, n_relevant=torch.tensor([3, 2]))
    with pytest.raises(ValueError, match=">= 0"):
        fn(scores, -labels, mask, 1)
    for bad_k in (0, -1, 2.0, True, 1e9, MAX_CUTOFF + 1, 10**30):
        with pytest.raises(ValueError, match="k must be an integer from 1 to 1000000000"):
            fn(scores, labels, mask, bad_k)


def test_ranking_metrics_validation() -> None:
    scores, labels, mask = torch.rand(2, 3), torch.ones(2, 3), full_mask(2, 3)
    with pytest.raises(ValueError, match="unknown metric"):
        ranking_metrics(scores, labels, mask, metrics=("ndcg", "auc"))
    with pytest.raises(ValueError, match="k"):
        ranking_metrics(scores, labels, mask, ks=(5, 0))


# --------------------------------------------------------------------------------------------
# torchmetrics wrappers


@pytest.mark.parametrize(
    ("cls", "fn", "k"),
    [
        (NDCG, ndcg_at_k, 3),
        (Precision, precision_at_k, 2),
        (Recall, recall_at_k, 4),
        (Success, success_at_k, 1),
        (MRR, reciprocal_rank, None),
        (MAP, average_precision, None),
        (MAP, average_precision, 2),
    ],
)
@pytest.mark.parametrize("action", ["skip", "neg", "pos"])
def test_wrappers_accumulate(cls, fn, k, action) -> None:
    batches = [random_batch(30 + i, b=5 + i, width=4 + 2 * i, graded=True) for i in range(4)]
    metric = (
        cls(k=k, empty_target_action=action) if k is not None else cls(empty_target_action=action)
    )
    width = max(b[0].shape[1] for b in batches)
    cat_s, cat_y, cat_m, cat_n = [], [], [], []
    for scores, labels, mask, _ in batches:
        n_rel = ((labels > 0) & mask).sum(-1) + (torch.arange(len(labels)) % 3 == 0)
        metric.update(scores, labels, mask, n_rel)
        pad = width - scores.shape[1]
        cat_s.append(torch.nn.functional.pad(scores, (0, pad), value=9.0))
        cat_y.append(torch.nn.functional.pad(labels, (0, pad), value=1))
        cat_m.append(torch.nn.functional.pad(mask, (0, pad), value=False))
        cat_n.append(n_rel)
    per_list = fn(
        torch.cat(cat_s),
        torch.cat(cat_y),
        torch.cat(cat_m),
        k,
        torch.cat(cat_n),
        empty_target_action=action,
    )
    values = [v for v in per_list.tolist() if not math.isnan(v)]
    assert len(values) >= (10 if action == "skip" else len(per_list))
    assert metric.compute().item() == pytest.approx(sum(values) / len(values), rel=1e-5)
    metric.reset()
    with warnings.catch_warnings():  # compute() before update() warns
        warnings.simplefilter("ignore", UserWarning)
        assert math.isnan(metric.compute().item())


def test_wrapper_requires_k() -> None:
    with pytest.raises(ValueError, match="k must be"):
        NDCG()
    with pytest.raises(ValueError, match="empty_target_action"):
        MRR(empty_target_action="drop")


# --------------------------------------------------------------------------------------------
# the DCG pieces the other modules share (GP fitness, item models, losses)


def test_dcg_at_k_matches_sklearn_and_breaks_ties_by_candidate_order() -> None:
    scores, labels, mask, lengths = random_batch(7, b=20, width=9, graded=True)
    dcg = dcg_at_k(scores, labels.float(), mask, 5)
    for row in range(len(scores)):
        n = int(lengths[row])
        y, s = labels[row, :n].numpy()[None], scores[row, :n].numpy()[None]
        expected = dcg_score(y, s, k=5, ignore_ties=True) if n > 1 else float(y[0, 0])
        assert dcg[row].item() == pytest.approx(expected, rel=1e-5)
    tied = dcg_at_k(t([0.5, 0.5, 0.5]), t([0.0, 1.0, 2.0]), full_mask(1, 3), 2)
    assert tied.item() == pytest.approx(1 / math.log2(3))  # candidates 0 and 1 come first


def test_ndcg_is_dcg_over_ideal_dcg() -> None:
    scores, labels, mask, _ = random_batch(8, b=30, width=10, graded=True)
    n_rel = ((labels > 0) & mask).sum(-1) + torch.arange(30) % 3
    for k in (1, 3, 5, 12):
        ratio = dcg_at_k(scores, labels.float(), mask, k) / ideal_dcg(labels.float(), mask, k,
                                                                       n_rel)
        torch.testing.assert_close(ratio, ndcg_at_k(scores, labels, mask, k, n_rel),
                                   equal_nan=True)


def test_dcg_metric_is_the_mean_over_every_list() -> None:
    metric = DCG(k=3)
    parts = [random_batch(20 + i, b=4, width=5 + i) for i in range(3)]
    values = []
    for scores, labels, mask, _ in parts:
        metric.update(scores, labels, mask)
        values += dcg_at_k(scores, labels.float(), mask, 3).tolist()
    assert metric.compute().item() == pytest.approx(sum(values) / len(values), rel=1e-9)


@pytest.mark.parametrize("seed", range(4))
def test_dcg_at_k_of_long_lists_with_ties_follows_candidate_order(seed) -> None:
    g = torch.Generator().manual_seed(seed)
    scores = torch.randint(0, 5, (16, 60), generator=g).float()  # many ties, some at the cut
    scores[torch.rand(16, 60, generator=g) < 0.1] = -math.inf
    scores[torch.arange(16) % 5 == 0] = torch.rand(60, generator=g)  # some rows without ties
    labels = torch.randint(0, 3, (16, 60), generator=g).float()
    mask = torch.rand(16, 60, generator=g) < 0.8
    for k in (1, 3, 10):
        got = dcg_at_k(scores, labels, mask, k)
        for row in range(16):
            real = [j for j in range(60) if mask[row, j]]
            ranked = sorted(real, key=lambda j: -scores[row, j].item())  # stable
            expected = sum(labels[row, j].item() / math.log2(r + 2)
                           for r, j in enumerate(ranked[:k]))
            assert got[row].item() == pytest.approx(expected, rel=1e-6, abs=1e-9)


def test_success_and_mrr_at_k_hand_computed() -> None:
    """One relevant resource per query, as in resource ranking: S@k and MRR@k by hand."""
    scores = torch.tensor([[0.9, 0.5, 0.7, 0.1], [0.2, 0.4, 0.3, 0.8], [0.5, 0.5, 0.5, 0.5]])
    labels = torch.tensor([[0, 1, 0, 0], [1, 0, 0, 0], [0, 0, 1, 0]])
    mask = torch.ones(3, 4, dtype=torch.bool)
    # ranks of the relevant item: 3; 4; 3 (ties by candidate order)
    out = ranking_metrics(scores, labels, mask, ks=(1, 3), metrics=("success", "mrr@3", "mrr"))
    assert out["s@1"].tolist() == [0.0, 0.0, 0.0]
    assert out["s@3"].tolist() == [1.0, 0.0, 1.0]
    assert [round(v, 6) for v in out["mrr@3"].tolist()] == [round(1 / 3, 6), 0.0, round(1 / 3, 6)]
    assert [round(v, 6) for v in out["mrr"].tolist()] == [round(1 / 3, 6), 0.25, round(1 / 3, 6)]


@pytest.mark.parametrize("seed", [0, 1])
def test_success_and_mrr_at_k_against_ranx(seed: int) -> None:
    ranx = pytest.importorskip("ranx")
    rng = np.random.default_rng(seed)
    n_queries, n_docs = 40, 30
    scores = torch.from_numpy(rng.permutation(n_queries * n_docs).reshape(n_queries, n_docs)
                              .astype(np.float64))  # distinct scores: no tie conventions involved
    relevant = rng.integers(0, n_docs, n_queries)
    labels = torch.zeros(n_queries, n_docs)
    labels[torch.arange(n_queries), torch.from_numpy(relevant)] = 1
    mask = torch.ones(n_queries, n_docs, dtype=torch.bool)
    ours = ranking_metrics(scores, labels, mask, ks=(1, 5, 10), metrics=("success", "mrr@10"))
    qrels = ranx.Qrels({f"q{q}": {f"d{relevant[q]}": 1} for q in range(n_queries)})
    run = ranx.Run({f"q{q}": {f"d{d}": float(scores[q, d]) for d in range(n_docs)}
                    for q in range(n_queries)})
    theirs = ranx.evaluate(qrels, run, ["hit_rate@1", "hit_rate@5", "hit_rate@10", "mrr@10"])
    for ours_key, ranx_key in (("s@1", "hit_rate@1"), ("s@5", "hit_rate@5"),
                               ("s@10", "hit_rate@10"), ("mrr@10", "mrr@10")):
        assert ours[ours_key].mean().item() == pytest.approx(theirs[ranx_key], abs=1e-9)


def test_metric_names_with_a_cut_off() -> None:
    assert parse_metric("map@5") == ("map", 5)
    for bad in ("mrr@0", "ndcg@5", "mrr@", "auc"):
        with pytest.raises(ValueError, match="unknown metric"):
            parse_metric(bad)


@pytest.mark.parametrize("seed", range(4))
def test_cut_metrics_of_long_lists_with_ties_equal_a_plain_sort(seed):
    """Issue 54: with every metric cut (``s@k``, ``mrr@10``, ...) only the first places are
    found (no whole-list sort, which grew as queries x candidates); the values must be those
    of a plain stable sort (ties by candidate position, padding last)."""
    import math

    from tagtorch.metrics.functional import ranking_metrics

    rng = np.random.default_rng(seed)
    b, length = 40, 300
    scores = torch.from_numpy(rng.integers(0, 6, size=(b, length)).astype(np.float32))
    labels = torch.from_numpy((rng.random((b, length)) < 0.02).astype(np.float32))
    mask = torch.from_numpy(rng.random((b, length)) < 0.9)
    mask[0, 5:] = False  # a list shorter than the cut
    got = ranking_metrics(scores, labels, mask, ks=(1, 5, 10),
                          metrics=("ndcg", "precision", "recall", "success", "mrr@10",
                                   "map@10"), empty_target_action="neg")
    for row in range(b):
        real = [i for i in range(length) if mask[row, i]]
        order = sorted(real, key=lambda i: (-float(scores[row, i]), i))
        rel = [float(labels[row, i]) for i in order]
        n_rel = sum(float(labels[row, i]) for i in real)
        for k in (1, 5, 10):
            hits = sum(rel[:k])
            dcg = sum(g / math.log2(p + 2) for p, g in enumerate(rel[:k]))
            idcg = sum(1 / math.log2(p + 2) for p in range(int(min(n_rel, k))))
            expected = {f"p@{k}": hits / k, f"r@{k}": hits / n_rel if n_rel else 0.0,
                        f"s@{k}": float(hits > 0), f"ndcg@{k}": dcg / idcg if idcg else 0.0}
            for key, value in expected.items():
                assert float(got[key][row]) == pytest.approx(value, abs=1e-6), (row, key)
        first = next((p + 1 for p, g in enumerate(rel[:10]) if g), None)
        assert float(got["mrr@10"][row]) == pytest.approx(1 / first if first else 0.0)
        precisions = [sum(rel[:p + 1]) / (p + 1) for p in range(min(10, len(rel))) if rel[p]]
        ap = sum(precisions) / min(n_rel, 10) if n_rel else 0.0
        assert float(got["map@10"][row]) == pytest.approx(ap, abs=1e-6), row


# --------------------------------------------------------------------------------------------
# cut-offs beyond the lists (issue 69: ``task.ks=[1000000000]`` padded the ideal to K places)


def hostile_batch() -> tuple[torch.Tensor, ...]:
    """40 lists of width 9: ties, grades, short and empty lists, up to 2 relevant items missing."""
    g = torch.Generator().manual_seed(69)
    b, width = 40, 9
    mask = torch.arange(width) < torch.randint(0, width + 1, (b,), generator=g)[:, None]
    scores = torch.randint(0, 4, (b, width), generator=g).double()
    labels = torch.randint(0, 4, (b, width), generator=g)
    labels = labels * (torch.rand(b, width, generator=g) < 0.5)
    present = ((labels > 0) & mask).sum(-1)
    return scores, labels, mask, present + torch.randint(0, 3, (b,), generator=g)


def test_a_cut_off_beyond_every_list_scores_the_whole_lists():
    """K = 10**9 against the plain reference (each list whole; P@K divides by K), and exactly
    the values at the lists' width plus the missing items: the work stops at the lists (at K
    places, the ideal ranking alone would take 8 GB per list)."""
    scores, labels, mask, n_relevant = hostile_batch()
    huge, whole = MAX_CUTOFF, scores.shape[1] + 2
    names = ("ndcg", "precision", "recall", "success", f"mrr@{huge}", f"map@{huge}")
    got = ranking_metrics(scores, labels, mask, n_relevant, ks=(huge,), metrics=names)
    for i in range(scores.shape[0]):
        real = mask[i]
        exp = ref_list(scores[i, real].tolist(), labels[i, real].double().tolist(),
                       int(n_relevant[i]), huge)
        keys = (f"ndcg@{huge}", f"p@{huge}", f"r@{huge}", f"s@{huge}", f"mrr@{huge}")
        actual = [got[key][i].item() for key in keys] + [got[f"map@{huge}"][i].item()]
        np.testing.assert_allclose(actual, [*exp[:5], exp[6]], rtol=1e-12, err_msg=f"list {i}")
    at_width = ranking_metrics(scores, labels, mask, n_relevant, ks=(whole,),
                               metrics=("ndcg", "recall", "success", "mrr", "map"))
    exact = {"ndcg": "ndcg", "r": "recall", "s": "success"}
    for short, name in exact.items():
        torch.testing.assert_close(got[f"{short}@{huge}"], at_width[f"{short}@{whole}"],
                                   rtol=0, atol=0, equal_nan=True, msg=name)
    for name in ("mrr", "map"):  # their cut-off beyond the lists: no cut-off at all
        torch.testing.assert_close(got[f"{name}@{huge}"], at_width[name], rtol=0, atol=0,
                                   equal_nan=True)
    for fn in (ndcg_at_k, recall_at_k, success_at_k, reciprocal_rank, average_precision):
        torch.testing.assert_close(fn(scores, labels, mask, huge, n_relevant),
                                   fn(scores, labels, mask, whole, n_relevant), rtol=0, atol=0,
                                   equal_nan=True, msg=fn.__name__)
    grades = torch.where(mask, labels, 0).double()
    torch.testing.assert_close(ideal_dcg(grades, mask, huge, n_relevant),
                               ideal_dcg(grades, mask, whole, n_relevant), rtol=0, atol=0)
    torch.testing.assert_close(dcg_at_k(scores, grades, mask, huge),
                               dcg_at_k(scores, grades, mask, whole), rtol=0, atol=0)


def test_cut_offs_above_the_largest_are_refused_in_one_line():
    """A 30-digit cut-off raised OverflowError deep in torch (issue 69); Unicode digits are not
    a cut-off."""
    assert parse_key(f"ndcg@{MAX_CUTOFF}") == ("ndcg", MAX_CUTOFF)
    for bad in ("ndcg@123456789012345678901234567890", f"p@{MAX_CUTOFF + 1}", "map@" + "9" * 5000,
                "tagrec_f1@99999999999"):
        with pytest.raises(ValueError, match="expected a cut-off K from 1 to 1000000000") as info:
            parse_key(bad)
        assert "\n" not in str(info.value) and len(str(info.value)) < 300
    with pytest.raises(ValueError, match="expected a cut-off K from 1 to 1000000000"):
        parse_metric("mrr@10000000000")
    for digits in ("\u0661\u0660", "\uff11"):  # Arabic-Indic 10, fullwidth 1
        with pytest.raises(ValueError, match="unknown metric"):
            parse_key(f"ndcg@{digits}")
    scores, labels, mask = torch.rand(2, 3), torch.ones(2, 3), full_mask(2, 3)
    with pytest.raises(ValueError, match="each k in ks must be an integer from 1 to 1000000000"):
        ranking_metrics(scores, labels, mask, ks=(10**30,))
    with pytest.raises(ValueError, match="k must be an integer from 1 to 1000000000"):
        NDCG(k=10**30)
