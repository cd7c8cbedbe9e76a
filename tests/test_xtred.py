"""xTReD's batched greedy re-ranking (tagtorch.rankers.xtred) against a plain per-object
implementation of Algorithm 1 written here, the paper's hand example and λ = 0."""

from __future__ import annotations

import math

import pytest
import torch

from tagtorch.rankers.xtred import xtred_order, xtred_rerank


def ref_rank(scores: list[float], mask: list[bool]) -> list[int]:
    """Real candidate positions by score descending, ties by position."""
    real = [i for i in range(len(scores)) if mask[i]]
    return sorted(real, key=lambda i: (-scores[i], i))


def ref_xtred(scores, mask, topics, pzo, lam, tau, coverage="joint") -> list[int]:
    """Algorithm 1 for one object: greedy over the base top τ by Equation 2, then the rest."""
    base = ref_rank(scores, mask)
    rank = {t: i + 1 for i, t in enumerate(base)}
    zo = [z for z in range(len(pzo)) if pzo[z] > 0]

    def p_toz(t: int, z: int) -> float:  # p(t | o, z)
        return topics[t][z] / rank[t] if coverage == "joint" else topics[t][z]

    chosen: list[int] = []
    left = base[:tau]
    while left:
        def f(t: int) -> float:
            cover = sum(pzo[z] * p_toz(t, z) * math.prod(1 - p_toz(s, z) for s in chosen)
                        for z in zo)
            return (1 - lam) / rank[t] + lam * cover

        best = max(left, key=lambda t: (f(t), -rank[t]))  # ties: the better base rank
        chosen.append(best)
        left.remove(best)
    return chosen + base[tau:]


def random_batch(seed: int, b: int = 16, length: int = 12, z: int = 4):
    g = torch.Generator().manual_seed(seed)
    scores = torch.randint(0, 5, (b, length), generator=g).float()  # ties in the base scores
    lengths = torch.randint(0, length + 1, (b,), generator=g)
    lengths[1] = length
    mask = torch.rand(b, length, generator=g).argsort(-1).argsort(-1) < lengths.unsqueeze(-1)
    topics = torch.rand(b, length, z, generator=g, dtype=torch.float64)
    topics = topics * (torch.rand(b, length, z, generator=g) < 0.6) * mask.unsqueeze(-1)
    in_zo = torch.rand(b, z, generator=g) < 0.6
    in_zo[0] = False  # no topics: the base order
    weights = torch.rand(b, z, generator=g, dtype=torch.float64) * in_zo
    pzo = weights / weights.sum(-1, keepdim=True).clamp(min=1e-12)
    return scores, mask, topics, pzo


def check_against_reference(scores, mask, topics, pzo, lam, tau, coverage="joint") -> None:
    order = xtred_order(scores, mask, topics, pzo, lam, tau, coverage)
    new_scores = xtred_rerank(scores, mask, topics, pzo, lam, tau, coverage)
    for i in range(scores.shape[0]):
        want = ref_xtred(scores[i].tolist(), mask[i].tolist(), topics[i].tolist(),
                         pzo[i].tolist(), lam, tau, coverage)
        n = len(want)
        assert order[i, :n].tolist() == want, (i, lam, tau, coverage)
        padding = sorted(set(range(scores.shape[1])) - set(want))
        assert sorted(order[i, n:].tolist()) == padding
        # The scores rank the same way (by the metrics' convention, padding masked).
        assert ref_rank(new_scores[i].tolist(), mask[i].tolist()) == want


def test_the_papers_example() -> None:
    """Z_o = {Rock, Pop}, p(z|o) = 1/2, base order rock, indie, pop, 80s with p(Rock|t) = .8,
    .6, .1, .5 and p(Pop|t) = .2, .4, .9, .5; λ = 1 gives rock, pop, indie, 80s (hand: f at the
    first step .5, .25, .167, .125; at the second indie .11 < pop .123; then indie .085 > 80s
    .047). Under coverage="topic" the four tags tie at the first step (f = 1/2 for all, in
    exact arithmetic), so float rounding of p(z | t) decides it: not tested on this example."""
    rock, indie, pop, eighties = 0, 1, 2, 3
    # Candidate positions shuffled so that the order comes from the scores.
    positions = {pop: 0, eighties: 1, rock: 2, indie: 3}
    scores = torch.zeros(1, 4)
    topics = torch.zeros(1, 4, 2)
    for tag, (score, p_rock, p_pop) in {rock: (4.0, 0.8, 0.2), indie: (3.0, 0.6, 0.4),
                                        pop: (2.0, 0.1, 0.9), eighties: (1.0, 0.5, 0.5)}.items():
        scores[0, positions[tag]] = score
        topics[0, positions[tag]] = torch.tensor([p_rock, p_pop])
    mask = torch.ones(1, 4, dtype=torch.bool)
    pzo = torch.tensor([[0.5, 0.5]])
    name = {v: k for k, v in positions.items()}
    order = xtred_order(scores, mask, topics, pzo, lam=1.0)
    assert [name[p] for p in order[0].tolist()] == [rock, pop, indie, eighties]
    # λ = 0: the base order.
    assert [name[p] for p in xtred_order(scores, mask, topics, pzo, lam=0.0)[0].tolist()] == [
        rock, indie, pop, eighties]


@pytest.mark.parametrize("seed", range(3))
def test_lambda_zero_returns_the_base_ranking(seed: int) -> None:
    scores, mask, topics, pzo = random_batch(seed)
    for tau in (1, 5, 25):
        order = xtred_order(scores, mask, topics, pzo, lam=0.0, tau=tau)
        for i in range(scores.shape[0]):
            base = ref_rank(scores[i].tolist(), mask[i].tolist())
            assert order[i, : len(base)].tolist() == base


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("tau", [1, 3, 7, 25])
def test_batched_matches_the_plain_algorithm(seed: int, tau: int) -> None:
    scores, mask, topics, pzo = random_batch(seed)
    for lam in (0.3, 0.7, 1.0):
        check_against_reference(scores, mask, topics, pzo, lam, tau)
    check_against_reference(scores, mask, topics, pzo, 0.6, tau, coverage="topic")


def test_uniform_object_topics_and_binary_topics_with_ties() -> None:
    """Binary p(z | t) and λ = 1 give many exact ties in f: they go to the base rank."""
    scores, mask, topics, pzo = random_batch(9, b=20)
    topics = (topics > 0.5).double()
    pzo = (pzo > 0).double() / (pzo > 0).sum(-1, keepdim=True).clamp(min=1)
    for tau in (4, 25):
        check_against_reference(scores, mask, topics, pzo, 1.0, tau)
        check_against_reference(scores, mask, topics, pzo, 1.0, tau, coverage="topic")


def test_diversity_moves_an_uncovered_topic_up() -> None:
    # Base: three Rock tags, then a Pop tag; λ = 1 puts the Pop tag second, λ = 0 keeps it last.
    topics = torch.tensor([[[1.0, 0.0], [1.0, 0.0], [1.0, 0.0], [0.0, 1.0]]])
    scores, mask = torch.tensor([[4.0, 3.0, 2.0, 1.0]]), torch.ones(1, 4, dtype=torch.bool)
    pzo = torch.tensor([[0.5, 0.5]])
    assert xtred_order(scores, mask, topics, pzo, lam=1.0).tolist() == [[0, 3, 1, 2]]
    # τ = 3 keeps the Pop tag out of the re-ranked head.
    assert xtred_order(scores, mask, topics, pzo, lam=1.0, tau=3).tolist() == [[0, 1, 2, 3]]


def test_shapes_and_bad_inputs() -> None:
    scores, mask, topics, pzo = random_batch(0, b=3)
    assert xtred_rerank(scores, mask, topics, pzo, 0.5).dtype == torch.float32
    assert xtred_order(scores[:, :0], mask[:, :0], topics[:, :0], pzo, 0.5).shape == (3, 0)
    with pytest.raises(ValueError, match="lam"):
        xtred_order(scores, mask, topics, pzo, 1.5)
    with pytest.raises(ValueError, match="tau"):
        xtred_order(scores, mask, topics, pzo, 0.5, tau=0)
    with pytest.raises(ValueError, match="coverage"):
        xtred_order(scores, mask, topics, pzo, 0.5, coverage="x")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="object_topics"):
        xtred_order(scores, mask, topics, pzo[:, :2], 0.5)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        xtred_order(scores, mask, topics + 2 * mask.unsqueeze(-1), pzo, 0.5)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_gives_the_cpu_result() -> None:
    scores, mask, topics, pzo = random_batch(4, b=64)
    cpu = xtred_order(scores, mask, topics, pzo, 0.8, tau=6)
    gpu = xtred_order(scores.cuda(), mask.cuda(), topics.cuda(), pzo.cuda(), 0.8, tau=6)
    assert gpu.device.type == "cuda"
    assert torch.equal(gpu.cpu(), cpu)


def test_on_a_synthetic_fold_xtred_raises_topic_diversity() -> None:
    """The pieces wired as the task will: Z_o and p(z | t) from the fold's D, p(z | o) uniform,
    LATRE candidates of V ranked by a base score, then xTReD. λ = 0 keeps every metric; λ = 1
    raises the mean alpha-NDCG@5 and ERR-IA@5 (the paper's finding, on this data; S-recall@5
    is already 1 here: nearly every tag has p(z | t) > 0 for every category in D)."""
    import numpy as np

    from tagtorch.candidates.latre import LatreCandidates
    from tagtorch.data.categories import object_categories, topic_given_object, topic_given_tag
    from tagtorch.data.splits import tag_recommendation_folds
    from tagtorch.data.synthetic import generate_folksonomy
    from tagtorch.data.terms import TermIndex
    from tagtorch.metrics.diversity import candidate_topics, diversity_metrics
    from tagtorch.metrics.functional import ndcg_at_k

    folksonomy = generate_folksonomy(n_objects=240, n_categories=6, seed=0)
    fold = tag_recommendation_folds(folksonomy, n_folds=5, seed=0)[0]
    terms = TermIndex.from_folksonomy(folksonomy)
    n_codes, n_topics = len(terms.vocabulary), len(folksonomy.category_names)
    table = torch.as_tensor(topic_given_tag(
        fold.train_tags, object_categories(folksonomy, fold.train_objects), n_codes, n_topics))
    candidates = LatreCandidates(max_rule_candidates=30, device="cpu").fit(
        fold.train_objects, fold.train_tags, terms)(fold.val)
    pzo = torch.as_tensor(topic_given_object(
        object_categories(folksonomy, candidates.objects.numpy()), n_topics))
    topics = candidate_topics(candidates.tags, candidates.mask, table)
    base = candidates.features[..., list(candidates.feature_names).index("sum_1")]
    mask = candidates.mask

    def metrics(scores: torch.Tensor) -> dict[str, float]:
        out = diversity_metrics(scores, mask, topics, pzo)
        out["ndcg@5"] = ndcg_at_k(scores, candidates.labels, mask, 5, candidates.n_relevant)
        return {key: float(np.nanmean(v.double().numpy())) for key, v in out.items()}

    before = metrics(base)
    assert metrics(xtred_rerank(base, mask, topics, pzo, lam=0.0)) == pytest.approx(before)
    after = metrics(xtred_rerank(base, mask, topics, pzo, lam=1.0))
    assert after["alpha_ndcg@5"] > before["alpha_ndcg@5"]
    assert after["err_ia@5"] > before["err_ia@5"]
    assert after["s_recall@5"] >= before["s_recall@5"]
