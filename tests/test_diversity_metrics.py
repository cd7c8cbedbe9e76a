"""Diversity metrics (tagtorch.metrics.diversity) against hand-computed cases, plain per-list
references written here, and ndeval (through pyndeval) in the binary case."""

from __future__ import annotations

import math

import pytest
import torch

from tagtorch.metrics import diversity as dv
from tagtorch.metrics.functional import ndcg_at_k

# --------------------------------------------------------------------------------------------
# Plain per-list references (no tagtorch code): one list = python lists of its real candidates.


def ref_rank(scores: list[float], mask: list[bool]) -> list[int]:
    """Real candidate positions by score descending, ties by position."""
    real = [i for i in range(len(scores)) if mask[i]]
    return sorted(real, key=lambda i: (-scores[i], i))


def ref_alpha_ndcg(scores, mask, topics, pzo, k, alpha, weighted=False):
    zo = [z for z in range(len(pzo)) if pzo[z] > 0]
    if not zo:
        return math.nan
    w = {z: (pzo[z] if weighted else 1.0) for z in zo}

    def gain(t, seen):
        return sum(w[z] * topics[t][z] * (1 - alpha) ** seen[z] for z in zo)

    order = ref_rank(scores, mask)[:k]
    seen = dict.fromkeys(zo, 0.0)
    dcg = 0.0
    for i, t in enumerate(order):
        dcg += gain(t, seen) / math.log2(i + 2)
        for z in zo:
            seen[z] += topics[t][z]
    free = [i for i in range(len(scores)) if mask[i]]
    seen = dict.fromkeys(zo, 0.0)
    ideal = 0.0
    for i in range(min(k, len(free))):
        best = max(free, key=lambda t: (gain(t, seen), -t))  # ties: earlier candidate
        ideal += gain(best, seen) / math.log2(i + 2)
        for z in zo:
            seen[z] += topics[best][z]
        free.remove(best)
    return dcg / ideal if ideal > 0 else math.nan


def ref_err_ia(scores, mask, topics, pzo, k):
    zo = [z for z in range(len(pzo)) if pzo[z] > 0]
    if not zo:
        return math.nan
    order = ref_rank(scores, mask)[:k]
    total = 0.0
    for z in zo:
        survive, err = 1.0, 0.0
        for i, t in enumerate(order):
            err += survive * topics[t][z] / (i + 1)
            survive *= 1 - topics[t][z]
        total += pzo[z] * err
    return total


def ref_s_recall(scores, mask, topics, pzo, k, soft=False):
    zo = [z for z in range(len(pzo)) if pzo[z] > 0]
    if not zo:
        return math.nan
    order = ref_rank(scores, mask)[:k]
    if soft:
        return sum(1 - math.prod(1 - topics[t][z] for t in order) for z in zo) / len(zo)
    return sum(any(topics[t][z] > 0 for t in order) for z in zo) / len(zo)


def ref_jaccard(a: set, b: set) -> float:
    return 1.0 if not (a | b) else 1 - len(a & b) / len(a | b)


def ref_aild(scores, mask, tag_ids, objects_of, k, pairs="present"):
    top = [tag_ids[i] for i in ref_rank(scores, mask)[:k]]
    n = len(top)
    if n < 2:
        return math.nan
    total = sum(ref_jaccard(objects_of.get(top[i], set()), objects_of.get(top[j], set()))
                for i in range(n) for j in range(i + 1, n))
    return total / (n * (n - 1) / 2 if pairs == "present" else k * (k - 1) / 2)


def ref_aip(scores, mask, counts, n_objects, k):
    top = ref_rank(scores, mask)[:k]
    if not top:
        return math.nan
    iff = [math.log((n_objects + 1) / (counts[i] + 1)) / math.log(n_objects + 1) for i in top]
    return sum(iff) / len(iff)


# --------------------------------------------------------------------------------------------
# Random batches with padding (float64), scores with ties.


def random_batch(seed: int, b: int = 12, length: int = 9, z: int = 4, binary: bool = False):
    g = torch.Generator().manual_seed(seed)
    scores = torch.randint(0, 4, (b, length), generator=g).double()  # many ties
    lengths = torch.randint(0, length + 1, (b,), generator=g)
    mask = torch.rand(b, length, generator=g).argsort(-1).argsort(-1) < lengths.unsqueeze(-1)
    if binary:
        topics = (torch.rand(b, length, z, generator=g) < 0.35).double()
    else:
        topics = torch.rand(b, length, z, generator=g, dtype=torch.float64)
        topics = topics * (torch.rand(b, length, z, generator=g) < 0.6)
    topics = topics * mask.unsqueeze(-1)
    in_zo = torch.rand(b, z, generator=g) < 0.5
    in_zo[0] = False  # an object without topics
    weights = torch.rand(b, z, generator=g, dtype=torch.float64) * in_zo
    pzo = weights / weights.sum(-1, keepdim=True).clamp(min=1e-12)
    return scores, mask, topics, pzo


def rows(*tensors):
    return [[t[i].tolist() for t in tensors] for i in range(tensors[0].shape[0])]


def assert_close(got: torch.Tensor, want: list[float]) -> None:
    assert got.shape == (len(want),)
    torch.testing.assert_close(got, torch.tensor(want, dtype=got.dtype), equal_nan=True)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("k", [1, 3, 5, 20])
def test_topic_metrics_match_the_plain_references(seed: int, k: int) -> None:
    scores, mask, topics, pzo = random_batch(seed)
    data = rows(scores, mask, topics, pzo)
    for alpha in (0.0, 0.5, 1.0):
        assert_close(dv.alpha_ndcg_at_k(scores, mask, topics, pzo, k, alpha),
                     [ref_alpha_ndcg(*r, k, alpha) for r in data])
    assert_close(dv.alpha_ndcg_at_k(scores, mask, topics, pzo, k, topic_weights="object"),
                 [ref_alpha_ndcg(*r, k, 0.5, weighted=True) for r in data])
    assert_close(dv.err_ia_at_k(scores, mask, topics, pzo, k),
                 [ref_err_ia(*r, k) for r in data])
    for soft in (False, True):
        assert_close(dv.s_recall_at_k(scores, mask, topics, pzo, k, soft=soft),
                     [ref_s_recall(*r, k, soft) for r in data])


def test_float32_inputs_give_float32_and_the_same_values() -> None:
    scores, mask, topics, pzo = random_batch(7)
    got = dv.err_ia_at_k(scores.float(), mask, topics.float(), pzo.float(), 5)
    assert got.dtype == torch.float32
    torch.testing.assert_close(got.double(), dv.err_ia_at_k(scores, mask, topics, pzo, 5),
                               equal_nan=True, rtol=1e-5, atol=1e-6)


def test_hand_computed_alpha_ndcg_err_ia_s_recall() -> None:
    # Ranked: a (Rock .8, Pop .2), b (Rock .6, Pop .4), c (Rock .1, Pop .9); p(z|o) = 1/2.
    topics = torch.tensor([[[0.8, 0.2], [0.6, 0.4], [0.1, 0.9]]], dtype=torch.float64)
    scores = torch.tensor([[3.0, 2.0, 1.0]], dtype=torch.float64)
    mask = torch.ones(1, 3, dtype=torch.bool)
    pzo = torch.tensor([[0.5, 0.5]], dtype=torch.float64)
    # alpha-DCG@2: a gains .8 + .2 = 1; b gains .6 * .5^.8 + .4 * .5^.2 at rank 2.
    g_b = 0.6 * 0.5**0.8 + 0.4 * 0.5**0.2
    dcg = 1.0 + g_b / math.log2(3)
    # Greedy ideal: a (gain 1; ties with b and c at 1, a is first), then c:
    g_c = 0.1 * 0.5**0.8 + 0.9 * 0.5**0.2
    assert g_c > g_b
    ideal = 1.0 + g_c / math.log2(3)
    got = dv.alpha_ndcg_at_k(scores, mask, topics, pzo, k=2)
    assert got.item() == pytest.approx(dcg / ideal)
    # ERR-IA@2: Rock .5 * (.8 + .6 * .2 / 2), Pop .5 * (.2 + .4 * .8 / 2).
    got = dv.err_ia_at_k(scores, mask, topics, pzo, k=2)
    assert got.item() == pytest.approx(0.5 * (0.8 + 0.06) + 0.5 * (0.2 + 0.16))
    # S-recall@1 covers both topics (p > 0); soft: (.8 + .2) / 2.
    assert dv.s_recall_at_k(scores, mask, topics, pzo, k=1).item() == 1.0
    assert dv.s_recall_at_k(scores, mask, topics, pzo, k=1, soft=True).item() == (
        pytest.approx(0.5))


def test_ranking_ties_padding_and_short_lists() -> None:
    # Equal scores: candidate order; padding (position 0) never ranked despite its score.
    topics = torch.tensor([[[1.0, 0.0], [0.0, 1.0], [1.0, 0.0], [0.0, 0.0]]])
    scores = torch.tensor([[9.0, 1.0, 1.0, 0.0]])
    mask = torch.tensor([[False, True, True, True]])
    pzo = torch.tensor([[1.0, 0.0]])  # only topic 0 is in Z_o
    # Ranked: 1 (topic 1, outside Z_o), 2 (topic 0), 3: ERR-IA@5 = 1 / 2.
    assert dv.err_ia_at_k(scores, mask, topics, pzo, k=5).item() == pytest.approx(0.5)
    assert dv.s_recall_at_k(scores, mask, topics, pzo, k=1).item() == 0.0
    # The topic of the padding never counts.
    assert dv.s_recall_at_k(scores, mask & False, topics, pzo, k=5).item() == 0.0


def test_empty_topics_and_zero_ideal_follow_empty_target_action() -> None:
    topics = torch.tensor([[[1.0, 0.0]], [[0.0, 1.0]]])
    scores, mask = torch.ones(2, 1), torch.ones(2, 1, dtype=torch.bool)
    pzo = torch.tensor([[0.0, 0.0], [1.0, 0.0]])  # no Z_o; Z_o = {0} never covered
    got = dv.alpha_ndcg_at_k(scores, mask, topics, pzo)
    assert math.isnan(got[0]) and math.isnan(got[1])
    assert dv.alpha_ndcg_at_k(scores, mask, topics, pzo, empty_target_action="neg").tolist() == [
        0.0, 0.0]
    err = dv.err_ia_at_k(scores, mask, topics, pzo, empty_target_action="pos")
    assert err.tolist() == [1.0, 0.0]
    with pytest.raises(ValueError, match="empty_target_action"):
        dv.s_recall_at_k(scores, mask, topics, pzo, empty_target_action="error")
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        dv.err_ia_at_k(scores, mask, topics * 2, pzo)
    with pytest.raises(ValueError, match="shape"):
        dv.err_ia_at_k(scores, mask, topics, pzo[:, :1])


def test_alpha_ndcg_of_one_topic_per_tag_and_alpha_zero_is_binary_ndcg() -> None:
    """With alpha = 0 and one topic, alpha-NDCG is NDCG with labels p(z | t) (an independent
    check through tagtorch's NDCG, itself tested against torchmetrics)."""
    scores, mask, topics, _ = random_batch(3, z=1)
    pzo = torch.ones(scores.shape[0], 1, dtype=torch.float64)
    got = dv.alpha_ndcg_at_k(scores, mask, topics, pzo, k=5, alpha=0.0)
    want = ndcg_at_k(scores, topics[..., 0], mask, k=5)
    torch.testing.assert_close(got, want, equal_nan=True)


# --------------------------------------------------------------------------------------------
# AILD, AIP and the Jaccard distance.


def random_incidence(seed: int, n_tags: int = 15, n_objects: int = 12):
    g = torch.Generator().manual_seed(seed)
    pairs = torch.rand(n_tags, n_objects, generator=g) < 0.25
    pairs[3] = False  # a tag in no object
    tag, obj = pairs.nonzero(as_tuple=True)
    objects_of = {t: set(obj[tag == t].tolist()) for t in range(n_tags)}
    return tag, obj, objects_of, pairs


def test_jaccard_distance_matches_sets() -> None:
    tag, obj, objects_of, _ = random_incidence(0)
    # Duplicated assignments are merged.
    inc = dv.tag_incidence(torch.cat([tag, tag[:5]]), torch.cat([obj, obj[:5]]), 15, 12)
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, 15, (7, 5), generator=g)
    ids[0, 1] = 3
    ids[1, 2] = ids[1, 3]  # the same tag twice in a list
    valid = torch.rand(7, 5, generator=g) < 0.8
    for chunk in (1, 3, 100):
        got = dv.jaccard_distance(ids, inc, valid, chunk_size=chunk)
        for b in range(7):
            for i in range(5):
                for j in range(5):
                    a = objects_of[int(ids[b, i])] if valid[b, i] else set()
                    c = objects_of[int(ids[b, j])] if valid[b, j] else set()
                    assert got[b, i, j].item() == pytest.approx(ref_jaccard(a, c)), (b, i, j)
    # Dense and COO incidences give the same distances.
    dense = dv.jaccard_distance(ids, inc.to_dense(), valid)
    coo = dv.jaccard_distance(ids, inc.to_dense().to_sparse(), valid)
    torch.testing.assert_close(dense, got)
    torch.testing.assert_close(coo, got)


def test_aild_and_aip_match_the_plain_references() -> None:
    tag, obj, objects_of, pairs = random_incidence(2)
    inc = dv.tag_incidence(tag, obj, 15, 12)
    counts_of = pairs.sum(-1)
    scores, mask, _, _ = random_batch(5, b=10, length=8)
    g = torch.Generator().manual_seed(3)
    tag_ids = torch.randint(0, 15, scores.shape, generator=g)
    counts = counts_of[tag_ids]
    for k in (1, 2, 5, 9):
        for pairs_mode in ("present", "k"):
            got = dv.aild_at_k(scores, mask, tag_ids, inc, k, pairs=pairs_mode)
            want = [ref_aild(s, m, t, objects_of, k, pairs_mode)
                    for s, m, t in rows(scores, mask, tag_ids)]
            assert_close(got.double(), want)
        got = dv.aip_at_k(scores, mask, counts, n_objects=12, k=k)
        want = [ref_aip(s, m, c, 12, k) for s, m, c in rows(scores, mask, counts)]
        assert_close(got.double(), want)


def test_aild_and_aip_hand_computed() -> None:
    # Tags 0: objects {0, 1}; 1: {1, 2}; 2: none. |O| = 4.
    inc = dv.tag_incidence(torch.tensor([0, 0, 1, 1]), torch.tensor([0, 1, 1, 2]), 3, 4)
    scores, mask = torch.tensor([[3.0, 2.0, 1.0]]), torch.ones(1, 3, dtype=torch.bool)
    ids = torch.tensor([[0, 1, 2]])
    # Pairs: (0, 1) 1 - 1/3, (0, 2) 1, (1, 2) 1.
    assert dv.aild_at_k(scores, mask, ids, inc, k=3).item() == pytest.approx((2 / 3 + 2) / 3)
    assert dv.aild_at_k(scores, mask, ids, inc, k=5, pairs="k").item() == pytest.approx(
        (2 / 3 + 2) / 10)
    assert math.isnan(dv.aild_at_k(scores, mask, ids, inc, k=1).item())
    # A callable distance.
    ones = dv.aild_at_k(scores, mask, ids, lambda t, v: torch.ones(*t.shape, t.shape[1]), k=3)
    assert ones.item() == 1.0
    # AIP@2: IFF = log(5 / 3) for both tags, normalized by log(5).
    counts = torch.tensor([[2, 2, 0]])
    want = math.log(5 / 3) / math.log(5)
    assert dv.aip_at_k(scores, mask, counts, 4, k=2).item() == pytest.approx(want)
    assert dv.aip_at_k(scores, mask, counts, 4, k=3).item() == pytest.approx((2 * want + 1) / 3)
    assert math.isnan(dv.aip_at_k(scores, mask & False, counts, 4).item())


def test_diversity_metrics_keys_and_values() -> None:
    scores, mask, topics, pzo = random_batch(11)
    tag, obj, _, pairs = random_incidence(4)
    inc = dv.tag_incidence(tag, obj, 15, 12)
    tag_ids = torch.randint(0, 15, scores.shape, generator=torch.Generator().manual_seed(0))
    out = dv.diversity_metrics(scores, mask, topics, pzo, k=5, tag_ids=tag_ids, incidence=inc,
                               tag_counts=pairs.sum(-1)[tag_ids], n_objects=12)
    assert list(out) == ["alpha_ndcg@5", "err_ia@5", "s_recall@5", "aild@5", "aip@5"]
    torch.testing.assert_close(out["err_ia@5"], dv.err_ia_at_k(scores, mask, topics, pzo, 5),
                               equal_nan=True)
    assert list(dv.diversity_metrics(scores, mask, topics, pzo, k=3)) == [
        "alpha_ndcg@3", "err_ia@3", "s_recall@3"]


# --------------------------------------------------------------------------------------------
# ndeval (pyndeval), binary p(z | t).


def test_binary_case_matches_ndeval() -> None:
    """alpha-nDCG@5, ERR-IA@5 and S-recall@5 of ndeval on subtopic qrels built from binary
    p(z | t): subtopic z of query o is judged relevant for the document (tag) t iff
    p(z | t) = 1, for z in Z_o, every candidate judged.

    How the parameters are matched to ndeval's definitions:

    - ndeval weighs the subtopics that have a relevant document uniformly and ignores the
      others; every z of Z_o is made relevant for some candidate, and p(z | o) is uniform on
      Z_o, so both sides count the same intents with the same weights (our S-recall divides by
      |Z_o|, ndeval's by the subtopics with a relevant document: the same here);
    - ndeval's alpha-nDCG ideal is greedy over the judged documents, which are exactly the
      candidates. Its greedy step resolves ties of gain by docno, taking the **largest** docno
      (``idealResult`` in ndeval.c), ours by candidate position, taking the first; the tie
      can change the ideal's value, so candidate ``t`` is named ``t{99 - t}``, which makes the
      two tie rules pick the same candidate;
    - ndeval's ERR-IA discounts each further relevant document of a subtopic by (1 - alpha)
      and normalizes by sum_{i <= k} (1 - alpha)^(i - 1) / i; with alpha = 1 this is 1 and the
      cascade stops at the first relevant document, which is ERR-IA with binary p(z | t).
      So ERR-IA is compared with ndeval run at alpha = 1, alpha-nDCG at alpha = 0.5;
    - ndeval ranks by its own ordering of the run, so the run gives each candidate our rank.
    """
    pyndeval = pytest.importorskip("pyndeval")
    b, length, z = 80, 16, 5
    scores, mask, topics, _ = random_batch(21, b=b, length=length, z=z, binary=True)
    g = torch.Generator().manual_seed(5)
    in_zo = torch.rand(b, z, generator=g) < 0.6
    in_zo[:, 0] = True
    mask[:, 0] = True  # at least one candidate, then every topic of Z_o is relevant to one
    for i in range(b):
        for zz in range(z):
            if in_zo[i, zz] and not bool((topics[i, :, zz] * mask[i]).any()):
                real = mask[i].nonzero().flatten()
                topics[i, real[int(torch.randint(len(real), (1,), generator=g))], zz] = 1.0
    pzo = in_zo.double() / in_zo.sum(-1, keepdim=True)
    qrels, run = [], []
    for i in range(b):
        order = ref_rank(scores[i].tolist(), mask[i].tolist())
        for rank, t in enumerate(order):
            run.append((f"q{i}", f"t{99 - t:02d}", float(len(order) - rank)))
            for zz in range(z):
                if in_zo[i, zz]:
                    qrels.append((f"q{i}", f"z{zz}", f"t{99 - t:02d}",
                                  int(topics[i, t, zz])))
    measures = [f"{m}@{k}" for m in ("alpha-nDCG", "ERR-IA", "strec") for k in (5, 10)]
    half = pyndeval.ndeval(qrels, run, measures, alpha=0.5)
    full = pyndeval.ndeval(qrels, run, measures, alpha=1.0)
    for k in (5, 10):
        ours_ndcg = dv.alpha_ndcg_at_k(scores, mask, topics, pzo, k, alpha=0.5)
        ours_err = dv.err_ia_at_k(scores, mask, topics, pzo, k)
        ours_rec = dv.s_recall_at_k(scores, mask, topics, pzo, k)
        assert len({round(v, 6) for v in ours_ndcg.tolist()}) > 10  # not a trivial comparison
        assert len({round(v, 6) for v in ours_err.tolist()}) > 10
        for i in range(b):
            assert ours_ndcg[i].item() == pytest.approx(half[f"q{i}"][f"alpha-nDCG@{k}"]), i
            assert ours_err[i].item() == pytest.approx(full[f"q{i}"][f"ERR-IA@{k}"]), i
            assert ours_rec[i].item() == pytest.approx(half[f"q{i}"][f"strec@{k}"]), i


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_gives_the_cpu_values() -> None:
    scores, mask, topics, pzo = random_batch(13, b=64)
    tag, obj, _, pairs = random_incidence(6)
    inc = dv.tag_incidence(tag, obj, 15, 12)
    tag_ids = torch.randint(0, 15, scores.shape, generator=torch.Generator().manual_seed(2))
    counts = pairs.sum(-1)[tag_ids]

    def run(device: str) -> dict[str, torch.Tensor]:
        return dv.diversity_metrics(
            scores.to(device), mask.to(device), topics.to(device), pzo.to(device),
            tag_ids=tag_ids.to(device), incidence=dv.tag_incidence(tag.to(device),
                                                                   obj.to(device), 15, 12),
            tag_counts=counts.to(device), n_objects=12)

    cpu, gpu = run("cpu"), run("cuda")
    assert inc.layout == torch.sparse_csr
    for key in cpu:
        assert gpu[key].device.type == "cuda"
        torch.testing.assert_close(gpu[key].cpu(), cpu[key], equal_nan=True)


def test_ranked_top_k_is_the_metrics_order_and_handles_empty_lists() -> None:
    scores, mask, topics, pzo = random_batch(17, b=30)
    for k in (1, 4, 50):
        index, valid = dv.ranked_top_k(scores, mask, k)
        for i in range(scores.shape[0]):
            want = ref_rank(scores[i].tolist(), mask[i].tolist())[:k]
            assert index[i, : len(want)].tolist() == want
            assert valid[i].tolist() == [True] * len(want) + [False] * (index.shape[1] - len(want))
    width0 = (scores[:, :0], mask[:, :0], topics[:, :0], pzo)
    out = dv.diversity_metrics(*width0, tag_ids=torch.zeros(30, 0, dtype=torch.long),
                               incidence=dv.tag_incidence(torch.tensor([0]), torch.tensor([0]),
                                                          1, 1),
                               tag_counts=torch.zeros(30, 0), n_objects=1)
    assert all(bool(torch.isnan(v).all()) for key, v in out.items()
               if key in ("alpha_ndcg@5", "aild@5", "aip@5"))
    has_topics = pzo.sum(-1) > 0
    assert out["s_recall@5"][has_topics].eq(0).all()
    with pytest.raises(ValueError, match="out of range"):
        dv.tag_incidence(torch.tensor([2]), torch.tensor([0]), 2, 1)


def test_candidate_topics_gathers_by_code() -> None:
    table = torch.rand(6, 3, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    tags = torch.tensor([[4, 0, 9, -1], [2, 2, -1, -1]])
    mask = torch.tensor([[True, True, True, False], [True, True, False, False]])
    got = dv.candidate_topics(tags, mask, table)
    for b in range(2):
        for i in range(4):
            code = int(tags[b, i])
            want = table[code] if mask[b, i] and 0 <= code < 6 else torch.zeros(3).double()
            assert torch.equal(got[b, i], want)
