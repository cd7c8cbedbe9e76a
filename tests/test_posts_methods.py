"""TagRec's graph, recency and neighbour baselines (tagtorch/posts/) against plain references.

Each reference is written per post from TagRec's Java (github.com/learning-layers/TagRec:
``FolkRankAlgorithm.compute``, ``GIRPTMCalculator``, ``CFTagRecommender``) with dicts and loops,
sharing no code with the batched versions; hand-computed cases pin the formulas themselves.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
import torch

from tagtorch.data.folksonomy import Folksonomy
from tagtorch.errors import UnreadableFileError
from tagtorch.posts.base import recommend
from tagtorch.posts.cf import UserCF
from tagtorch.posts.data import PostData, personalized_split
from tagtorch.posts.folkrank import FolkRank, tag_sums
from tagtorch.posts.girp import Girp
from tagtorch.posts.local_folkrank import LocalFolkRank


def random_split(seed: int, n: int = 400, objects: int = 25) -> PostData:
    """A small random folksonomy, no core, each user's last post held out."""
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame({"user": rng.integers(0, 12, n).astype(str),
                          "object": rng.integers(0, objects, n).astype(str),
                          "tag": rng.zipf(1.6, n).clip(1, 30).astype(str),
                          "timestamp": rng.integers(0, 10_000, n)})
    return personalized_split(Folksonomy.from_frame(frame), p=1)


def train_posts(data: PostData) -> list[tuple[int, int, int, list[int]]]:
    """``(user, resource, time, tags)`` per training post, in the split's order."""
    t = data.train
    return [(int(t.users[i]), int(t.resources[i]), int(t.times[i]), t.tags[i].tolist())
            for i in range(len(t))]


def folkrank_reference(data: PostData, user: int, resource: int, adapted: bool
                       ) -> dict[int, float]:
    """TagRec's FolkRankAlgorithm for one post, transcribed (dims: tags, users, resources)."""
    facts = [(t, u, r) for u, r, _, tags in train_posts(data) for t in tags]
    ids: list[dict[int, int]] = [{}, {}, {}]
    for fact in facts:  # FactReaderFactPreprocessor: ids in order of appearance
        for d in range(3):
            ids[d].setdefault(fact[d], len(ids[d]))
    mapped = [[ids[d][fact[d]] for d in range(3)] for fact in facts]
    counts = [[0] * len(ids[d]) for d in range(3)]
    for fact in mapped:  # FolkRankData.setFact: a fact adds 2 (two directed edges per node)
        for d in range(3):
            counts[d][fact[d]] += 2
    prefs: list[list[tuple[int, float]]] = [[], [], []]
    if user in ids[1]:
        prefs[1].append((ids[1][user], float(len(ids[1]))))
    if resource in ids[2]:
        prefs[2].append((ids[2][resource], float(len(ids[2]))))
    # FolkRankCalculator always sets the preference weights [|U|] and [|R|]: they count in the
    # norm even when the post's user or resource has no node
    preferred = folkrank_compute(mapped, counts, prefs, [0.0, len(ids[1]), len(ids[2])])
    if not adapted:
        base = folkrank_compute(mapped, counts, [[], [], []], [0.0, 0.0, 0.0])
        preferred = [[p - b for p, b in zip(pd_, bd, strict=True)]
                     for pd_, bd in zip(preferred, base, strict=True)]
    return {tag: preferred[0][node] for tag, node in ids[0].items()}


def folkrank_compute(facts: list[list[int]], counts: list[list[int]],
                     prefs: list[list[tuple[int, float]]], pref_sums: list[float]
                     ) -> list[list[float]]:
    """``FolkRankAlgorithm.compute`` with α = 0, β = 0.7, γ = 0.3, 10 iterations, ε = 1e-5."""
    alpha, beta, gamma = 0.0, 0.7, 0.3
    weights = [[1.0 / len(c)] * len(c) for c in counts]
    norm = [len(c) + s for c, s in zip(counts, pref_sums, strict=True)]
    surfer = [1.0 / n for n in norm]
    delta, iteration = math.inf, 0
    while iteration < 10 and delta > 1e-5:
        iteration += 1
        spread = [[w / c for w, c in zip(ws, cs, strict=True)]
                  for ws, cs in zip(weights, counts, strict=True)]
        new = [[0.0] * len(c) for c in counts]
        for fact in facts:
            for d in range(3):
                for e in range(3):
                    if d != e:
                        new[d][fact[d]] += spread[e][fact[e]]
        delta = 0.0
        for d in range(3):
            for node, value in prefs[d]:
                new[d][node] += (gamma / beta) * (value / norm[d])
            for node in range(len(weights[d])):
                updated = alpha * weights[d][node] + beta * new[d][node] + gamma * surfer[d]
                delta += abs(weights[d][node] - updated)
                weights[d][node] = updated
    return weights


@pytest.mark.parametrize("solver", ["per_post", "by_tag"])
@pytest.mark.parametrize("adapted", [False, True])
def test_folkrank_and_apr_equal_tagrecs_per_post_loop(adapted, solver):
    data = random_split(3)
    scores = FolkRank(adapted=adapted, chunk=4, solver=solver).fit(data).score(data.test)
    for q in range(len(data.test)):
        expected = folkrank_reference(data, int(data.test.users[q]),
                                      int(data.test.resources[q]), adapted)
        got = {t: scores[q, t] for t in range(data.n_tags) if np.isfinite(scores[q, t])}
        assert got.keys() == expected.keys()
        np.testing.assert_allclose([got[t] for t in expected], list(expected.values()),
                                   rtol=1e-9, atol=1e-15)


def test_the_tags_columns_sum_the_powers_of_the_spreading_matrix():
    """``tag_sums`` against ``Σ_{j<K} M^j`` by dense matrix powers (``M = β A D⁻¹``)."""
    model = FolkRank().fit(random_split(4))
    summed, scale = model._summed_graph()
    spread = 0.7 * model.graph_.toarray() / model.degree_[None, :]
    powers = sum(np.linalg.matrix_power(spread, j) for j in range(10))
    tags, rows = np.array([3, 0, 5]), np.array([model.sizes_[0] + 2, 1, 40])
    got = tag_sums(summed.indptr, summed.indices, summed.data, scale, tags, 10, rows)
    np.testing.assert_allclose(got, powers[np.ix_(tags, rows)].T, rtol=1e-12)


@pytest.mark.parametrize("adapted", [False, True])
def test_the_tags_columns_leave_the_posts_that_stop_early_to_their_own_runs(adapted):
    """With ε between the posts' ninth changes, some posts stop early: ``by_tag`` must not
    certify them, and its scores and lists are the per-post runs' (TagRec's loop)."""
    data = random_split(5, n=1500, objects=80)
    model = FolkRank(adapted=adapted, solver="by_tag").fit(data)
    users = model.preferred_[0][data.test.users]
    resources = model.preferred_[1][data.test.resources]
    deltas: list[np.ndarray] = []
    model._spread(users, resources, len(users), deltas=deltas)
    ninth = np.abs(deltas[8]).sum(0)
    epsilon = float(np.median(ninth))
    stops = ninth <= epsilon
    assert 0 < stops.sum() < len(stops)
    tagged, own = (FolkRank(adapted=adapted, solver=s, epsilon=epsilon).fit(data)
                   for s in ("by_tag", "per_post"))
    certified = tagged._by_tag(users, resources)[1]
    assert not (certified & stops).any() and (certified & ~stops).any()
    finite = np.isfinite(own.score(data.test))
    np.testing.assert_allclose(tagged.score(data.test)[finite], own.score(data.test)[finite],
                               rtol=1e-10, atol=1e-14)
    assert (tagged.top_tags(data.test, 10) == own.top_tags(data.test, 10)).all()


@pytest.mark.parametrize("adapted", [False, True])
def test_the_local_folkrank_stays_within_its_error_bound(adapted):
    """LocalFolkRank against the exact runs of every iteration (no ε stop), tag by tag."""
    data = random_split(6, n=1500, objects=80)
    exact = FolkRank(adapted=adapted, epsilon=-1.0, solver="per_post").fit(data)
    for push in (1e-3, 1e-5):
        local = LocalFolkRank(adapted=adapted, push_epsilon=push, exact_tags=2).fit(data)
        error = np.abs(local.score(data.test) - exact.score(data.test))[:, local.tag_codes_]
        assert (error <= local.error_bound()[None, :] + 1e-15).all()
    assert error.max() < 1e-3
    with pytest.raises(ValueError, match="push_epsilon"):
        LocalFolkRank(push_epsilon=0.0)


def test_folkrank_ranks_the_users_and_the_resources_tags_first_in_a_hand_made_graph():
    # c's last post (c, s) is held out: c used x before, s carries z and w; y only came with r
    frame = pd.DataFrame({"user": ["a", "a", "b", "b", "c", "c"],
                          "object": ["r", "r", "s", "s", "r", "s"],
                          "tag": ["x", "y", "z", "w", "x", "v"], "timestamp": [1, 1, 2, 2, 3, 4]})
    data = personalized_split(Folksonomy.from_frame(frame), p=1)
    names = np.asarray(data.folksonomy.tags)
    apr = recommend(FolkRank(adapted=True).fit(data).score(data.test), 4)[0]
    assert set(names[apr[:3]]) == {"x", "z", "w"} and names[apr[3]] == "y"
    # FolkRank subtracts the run without preference: s's tags first, then x (the user's) before
    # y, as TagRec's Java lists them (z, w, x, y)
    folkrank = recommend(FolkRank().fit(data).score(data.test), 4)[0]
    assert set(names[folkrank[:2]]) == {"z", "w"}
    assert names[folkrank[2]] == "x" and names[folkrank[3]] == "y"


def girp_reference(data: PostData, user: int, resource: int, with_resource: bool
                   ) -> dict[int, float]:
    """``GIRPTMCalculator.getRankedTagList`` for one post, transcribed."""
    mine = [tags for u, _, _, tags in train_posts(data) if u == user]
    n = len(mine)
    counts = Counter(t for tags in mine for t in tags)
    total = sum(counts.values())
    first: dict[int, int] = {}
    last: dict[int, int] = {}
    for i, tags in enumerate(mine):
        for t in tags:
            first.setdefault(t, i)
            last[t] = i
    out: dict[int, float] = {}
    for t in counts:
        f, l_ = math.log(n + 1 - first[t]), math.log(n + 1 - last[t])
        out[t] = counts[t] / total * f * l_ ** -f
    if with_resource:
        res = Counter(t for _, r, _, tags in train_posts(data) if r == resource for t in tags)
        for t, c in res.items():
            out[t] = out.get(t, 0.0) + c / sum(res.values())
    return out


@pytest.mark.parametrize("with_resource", [False, True])
def test_girp_and_girptm_equal_tagrecs_per_post_loop(with_resource):
    data = random_split(5)
    scores = Girp(resource=with_resource).fit(data).score(data.test)
    for q in range(len(data.test)):
        expected = girp_reference(data, int(data.test.users[q]), int(data.test.resources[q]),
                                  with_resource)
        row = scores[q]
        assert dict(zip(row.indices.tolist(), row.data, strict=True)) == pytest.approx(expected)


def test_girp_recency_by_hand():
    # one user, three posts in time: x in posts 0 and 2, y in post 1 (n = 3, so n + 1 = 4)
    frame = pd.DataFrame({"user": ["u"] * 5, "object": ["a", "b", "c", "c", "d"],
                          "tag": ["x", "y", "x", "z", "q"], "timestamp": [1, 2, 3, 3, 4]})
    data = personalized_split(Folksonomy.from_frame(frame), p=1)
    scores = Girp(resource=False).fit(data).score(data.test).toarray()[0]
    codes = {t: i for i, t in enumerate(data.folksonomy.tags)}
    x = 2 / 4 * math.log(4) * math.log(2) ** -math.log(4)  # first 0, last 2; 2 of 4 uses
    y = 1 / 4 * math.log(3) * math.log(3) ** -math.log(3)  # first = last = 1
    z = 1 / 4 * math.log(2) * math.log(2) ** -math.log(2)  # first = last = 2
    assert scores[codes["x"]] == pytest.approx(x)
    assert scores[codes["y"]] == pytest.approx(y)
    assert scores[codes["z"]] == pytest.approx(z)


def cf_reference(data: PostData, user: int, resource: int) -> dict[int, float]:
    """``CFTagRecommender.getRankedTagList`` (user-based, 20 neighbours), transcribed."""
    posts = train_posts(data)
    profiles: dict[int, Counter[int]] = defaultdict(Counter)
    for u, _, _, tags in posts:
        profiles[u].update(tags)
    candidates = {u for u, r, _, _ in posts if r == resource and u != user}
    fallback = not candidates
    if fallback:
        candidates = {u for u, _, _, _ in posts}

    def cosine(a: Counter[int], b: Counter[int]) -> float:
        dot = sum(a[t] * b[t] for t in a if t in b)
        norm = math.sqrt(sum(v * v for v in a.values()) * sum(v * v for v in b.values()))
        return dot / norm if norm else 0.0

    sims = sorted(((cosine(profiles[user], profiles[v]), v) for v in candidates),
                  key=lambda s: (-s[0], s[1]))[:20]
    out: dict[int, float] = {}
    for sim, v in sims:
        own = [tags for u, r, _, tags in posts if u == v and r == resource]
        tags = own[0] if own else [tags for u, _, _, tags in posts if u == v][-1]
        for t in tags:
            if sim > 0:
                out[t] = out.get(t, 0.0) + sim
    return out


@pytest.mark.parametrize("objects", [25, 300])
def test_cf_equals_tagrecs_per_post_loop_including_the_fallback(objects):
    data = random_split(11, n=600, objects=objects)
    scores = UserCF().fit(data).score(data.test)
    fallbacks = 0
    for q in range(len(data.test)):
        user, resource = int(data.test.users[q]), int(data.test.resources[q])
        fallbacks += not any(data.train.resources[data.train.users != user] == resource)
        row = scores[q]
        assert dict(zip(row.indices.tolist(), row.data, strict=True)) == pytest.approx(
            cf_reference(data, user, resource))
    assert fallbacks if objects == 300 else not fallbacks  # the every-user fallback's cases


def test_cf_keeps_only_the_most_similar_neighbours():
    data = random_split(11, n=600)
    one = UserCF(neighbours=1).fit(data).score(data.test)
    many = UserCF().fit(data).score(data.test)
    assert (one.getnnz(1) <= many.getnnz(1)).all() and one.nnz < many.nnz
    with pytest.raises(ValueError, match="neighbours"):
        UserCF(neighbours=0)


def test_folkranks_edge_spreading_keeps_the_total_weight_and_tagrecs_doubles_it():
    data = random_split(3)
    for spread, factor in (("edges", 1.0), ("facts", 2.0)):
        model = FolkRank(spread=spread, max_iterations=1).fit(data)
        weights = model._spread(np.full(0, -1), np.full(0, -1), 1)[:, 0]
        # from 1 per dimension: β · (factor · 3) + γ · 3 after one iteration
        assert weights.sum() == pytest.approx(0.7 * factor * 3 + 0.3 * 3)
    with pytest.raises(ValueError, match="spread"):
        FolkRank(spread="nodes")
    with pytest.raises(ValueError, match="n_jobs"):
        FolkRank(n_jobs=0)
    one, two = (FolkRank(n_jobs=j, chunk=3).fit(data).score(data.test) for j in (1, 2))
    np.testing.assert_array_equal(one, two)  # threads change nothing


def test_a_saved_post_ranker_refuses_altered_posts(tmp_path):
    data = random_split(3)
    Girp().fit(data).save(tmp_path / "m")
    arrays = dict(np.load(tmp_path / "m" / "arrays.npz"))
    assert Girp.load(tmp_path / "m").score(data.test).nnz > 0
    arrays["users"] = arrays["users"] + 1000  # codes beyond the saved sizes
    np.savez(tmp_path / "m" / "arrays.npz", **arrays)
    with pytest.raises(UnreadableFileError):
        Girp.load(tmp_path / "m")


def test_the_posts_task_runs_the_real_way_and_writes_targets(tmp_path):
    from test_train import compose_cfg

    from tagtorch.train import run_task

    cfg = compose_cfg(tmp_path, [
        "task=posts", "model=[mp_ur,bll_c,girptm]", "text=none", "logger=none",
        "data.n_objects=300", "task.seeds=[0,1]", "task.split=random", "task.p=2",
        "+task.targets={method: bll_c, baselines: [mp_ur, girptm, folkrank], "
        "measures: [mrr@10, tagrec_f1@5]}"])
    result = run_task(cfg)
    out = Path(cfg.paths.output_dir)
    results = pd.read_csv(out / "results.csv")
    assert set(results["fold"]) == {0, 1}
    assert {"tagrec_f1@5", "tagrec_mrr@10", "tagrec_ndcg@3", "coverage", "mrr@10", "ndcg@10",
            "map@3", "p@5", "s@1"} <= set(results["metric"])
    targets = pd.read_csv(out / "targets.csv")
    assert targets[["baseline", "metric"]].values.tolist() == [
        ["mp_ur", "mrr@10"], ["mp_ur", "tagrec_f1@5"], ["girptm", "mrr@10"],
        ["girptm", "tagrec_f1@5"]]
    mine = results[(results.method == "bll_c") & (results.metric == "mrr@10")]["value"].mean()
    assert targets["value"].iloc[0] == pytest.approx(mine)  # (seed, post) pairs, equal seeds
    assert (out / "run.bll_c.trec").exists() and "Targets" in result.report


HYBRID_RANKER = {"_target_": "tagtorch.rankers.trees.LambdaMARTRanker", "n_leaves": 7,
                 "n_iterations": 20, "k": 10, "n_jobs": 1, "min_leaf_size": 5}


def test_the_hybrids_candidates_are_the_union_of_the_sources_top_lists():
    from tagtorch.posts.baselines import BaseLevelLearning
    from tagtorch.posts.hybrid import Hybrid

    data = random_split(11, n=600)
    hybrid = Hybrid(HYBRID_RANKER, depth=3).fit(data)
    batch = hybrid._candidates(data.test)
    bll_c = BaseLevelLearning(beta=0.5).fit(data).score(data.test).toarray()
    sources = {name: recommend(m.score(data.test), 3) for name, m in hybrid.sources_.items()}
    names = list(batch.feature_names)
    for q in range(len(data.test)):
        got = batch.tags[q][batch.mask[q]].tolist()
        expected = {int(t) for ranked in sources.values() for t in ranked[q] if t >= 0}
        assert expected <= set(got) and len(got) == len(set(got))
        for j, tag in enumerate(got):  # a feature is the source's own score
            assert batch.features[q, j, names.index("bll_c")] == pytest.approx(
                bll_c[q, tag], rel=1e-5, abs=1e-7)
            if tag in sources["cf"][q]:
                rank = sources["cf"][q].tolist().index(tag) + 1
                assert batch.features[q, j, names.index("cf_rank")] == rank
            else:
                assert batch.features[q, j, names.index("cf_rank")] == 4


def test_the_hybrid_never_reads_test_tags_and_beats_popularity():
    from tagtorch.data.ragged import Ragged
    from tagtorch.data.synthetic import generate_folksonomy
    from tagtorch.posts.baselines import MostPopular
    from tagtorch.posts.hybrid import Hybrid
    from tagtorch.posts.metrics import mean_metrics, post_metrics

    data = personalized_split(generate_folksonomy(n_objects=300, seed=0), p=2)
    ranked = recommend(Hybrid(HYBRID_RANKER, depth=10).fit(data).score(data.test), 10)
    scrambled = Ragged.from_lists([[0]] * len(data.test))  # other gold: the same scores
    other = PostData(data.train, type(data.test)(data.test.users, data.test.resources,
                                                 data.test.times, scrambled),
                     data.n_users, data.n_resources, data.n_tags, data.folksonomy)
    again = recommend(Hybrid(HYBRID_RANKER, depth=10).fit(other).score(other.test), 10)
    np.testing.assert_array_equal(ranked, again)
    popular = recommend(MostPopular().fit(data).score(data.test), 10)
    mine = mean_metrics(post_metrics(ranked, data.test.tags, [10]))["mrr@10"]
    base = mean_metrics(post_metrics(popular, data.test.tags, [10]))["mrr@10"]
    assert mine > base
    with pytest.raises(ValueError, match="depth"):
        Hybrid(HYBRID_RANKER, depth=0)


@pytest.mark.parametrize("sparse", [False, True])
def test_recommend_in_blocks_of_rows_ranks_as_a_plain_sort_per_row(monkeypatch, sparse):
    import tagtorch.posts.base as base

    monkeypatch.setattr(base, "RANKED_ROWS", 7)  # many blocks, one ragged
    rng = np.random.default_rng(3)
    values = rng.integers(-1, 5, (50, 12)).astype(np.float64)
    values[::5, 5:] = -1  # rows of at most 5 candidates, some of fewer than 4
    values[::9] = -1  # rows of none
    ties = rng.integers(0, 4, (50, 12)).astype(np.float64)
    scores = (sp.csr_matrix(np.where(values >= 0, values + 1, 0.0)) if sparse
              else np.where(values >= 0, values + 1, -np.inf))
    expected = [sorted((t for t in range(12) if values[q, t] >= 0),
                       key=lambda t, q=q: (-values[q, t], -ties[q, t], t))[:4]
                for q in range(50)]
    got = base.recommend(scores, 4, ties)
    assert got.tolist() == [e + [-1] * (4 - len(e)) for e in expected]


def test_the_hybrids_candidates_in_chunks_of_posts_equal_one_chunk(monkeypatch):
    import tagtorch.posts.hybrid as hybrid_module

    rng = np.random.default_rng(12)
    frame = pd.DataFrame({"user": rng.integers(0, 150, 3000).astype(str),
                          "object": rng.integers(0, 40, 3000).astype(str),
                          "tag": rng.zipf(1.6, 3000).clip(1, 20).astype(str),
                          "timestamp": rng.integers(0, 10_000, 3000)})
    data = personalized_split(Folksonomy.from_frame(frame), p=1)
    model = hybrid_module.Hybrid(HYBRID_RANKER, depth=3).fit(data)
    whole = model._candidates(data.test, with_labels=True)
    monkeypatch.setattr(hybrid_module, "CANDIDATE_CHUNK", 1)  # chunks of twice the tags
    assert len(data.test) > 3 * 2 * data.n_tags
    chunked = model._candidates(data.test, with_labels=True)
    for name in ("tags", "features", "labels", "mask", "n_relevant"):
        assert torch.equal(getattr(whole, name), getattr(chunked, name)), name
    assert whole.feature_names == chunked.feature_names


def test_the_hybrids_local_graph_takes_the_local_folkrank_as_its_two_graph_sources():
    from tagtorch.posts.hybrid import Hybrid

    data = random_split(11, n=600)
    hybrid = Hybrid(HYBRID_RANKER, depth=3, local_graph=True).fit(data)
    local = {name: type(source) for name, source in hybrid.sources_.items()
             if isinstance(source, FolkRank)}
    assert local == {"folkrank": LocalFolkRank, "apr": LocalFolkRank}
    exact = LocalFolkRank(adapted=True).fit(data).score(data.test)
    np.testing.assert_array_equal(hybrid.sources_["apr"].score(data.test), exact)
    assert recommend(hybrid.score(data.test), 3).shape == (len(data.test), 3)


def test_lda_posts_sums_the_thresholded_topic_mixtures_of_the_users_and_resources_documents():
    from tagtorch.data.ragged import Ragged
    from tagtorch.posts.lda import TopicTags
    from tagtorch.topics.lda import LDA

    data = random_split(5)
    settings = {"n_topics": 6, "alpha": 0.5, "beta": 0.05, "iterations": 20, "seed": 3}
    scores = TopicTags(**settings, threshold=0.1).fit(data).score(data.test)
    expected = np.zeros_like(scores)
    for keys, codes, n in ((data.train.users, data.test.users, data.n_users),
                           (data.train.resources, data.test.resources, data.n_resources)):
        documents: dict[int, list[int]] = defaultdict(list)  # plain dicts: doc -> its tokens
        for i in range(len(data.train)):
            documents[int(keys[i])] += data.train.tags[i].tolist()
        lda = LDA(n_topics=6, alpha=0.5, beta=0.05, iterations=20, burn_in=19, seed=3,
                  progress=False).fit(Ragged.from_lists([documents[d] for d in range(n)]),
                                      data.n_tags)
        for q, code in enumerate(codes):
            if documents[int(code)]:
                theta = lda.theta_[code]
                expected[q] += sum(theta[z] * lda.phi_[z] for z in range(6) if theta[z] > 0.1)
    expected = np.where(expected > 0, expected, -np.inf)
    np.testing.assert_allclose(scores, expected, rtol=1e-10)


def test_lda_posts_recommends_the_tags_of_the_users_community():
    from tagtorch.posts.lda import TopicTags

    # two communities with disjoint tags; each user's last post is held out
    rows = [(f"{c}{u}", f"{c}r{(u + p) % 6}", f"{c}t{(u + p + k) % 4}", 10 * p + k)
            for c in "ab" for u in range(6) for p in range(3) for k in range(2)]
    frame = pd.DataFrame(rows, columns=["user", "object", "tag", "timestamp"])
    data = personalized_split(Folksonomy.from_frame(frame), p=1)
    model = TopicTags(n_topics=2, alpha=0.1, beta=0.01, iterations=200, user=True,
                      resource=False, seed=0).fit(data)
    names = np.asarray(data.folksonomy.tags)
    users = np.asarray(data.folksonomy.users)
    for q, top in enumerate(recommend(model.score(data.test), 4)):
        community = users[data.test.users[q]][0]
        assert {name[0] for name in names[top[top >= 0]]} == {community}
    with pytest.raises(ValueError, match="user model"):
        TopicTags(user=False, resource=False)


def test_pitf_posts_scores_by_the_papers_pairwise_interactions_and_learns():
    from tagtorch.data.synthetic import generate_folksonomy
    from tagtorch.posts.baselines import MostPopular
    from tagtorch.posts.metrics import mean_metrics, post_metrics
    from tagtorch.posts.pitf import TagPITF

    data = personalized_split(generate_folksonomy(n_objects=300, seed=0), p=2)
    model = TagPITF(rank=8, max_epochs=15, seed=1).fit(data)
    scores = model.score(data.test)
    factors = model.model_  # U_u, T^U_t (the item-user factors), R_r, T^R_t (item-tag factors)
    users = factors.user_factors.detach().numpy()
    tag_user = factors.item_user_factors.detach().numpy()
    resources = factors.tag_factors.detach().numpy()
    tag_resource = factors.item_tag_factors.detach().numpy()
    for q in range(0, len(data.test), 7):
        u, r = data.test.users[q], data.test.resources[q]
        for t in range(0, data.n_tags, 11):
            want = float(users[u] @ tag_user[t] + resources[r] @ tag_resource[t])
            assert scores[q, t] == pytest.approx(want, rel=1e-5, abs=1e-6)
    ranked = recommend(scores, 10)
    popular = recommend(MostPopular().fit(data).score(data.test), 10)
    mine = mean_metrics(post_metrics(ranked, data.test.tags, [10]))["mrr@10"]
    base = mean_metrics(post_metrics(popular, data.test.tags, [10]))["mrr@10"]
    assert mine > base


def test_a_given_tagrec_split_is_evaluated_exactly_as_given(tmp_path):
    from test_train import compose_cfg

    from tagtorch.data.loaders.tagrec import last_post_per_user, write_tagrec_split
    from tagtorch.data.synthetic import generate_folksonomy
    from tagtorch.train import run_task

    folk = generate_folksonomy(n_objects=200, seed=4)
    train, test, _ = write_tagrec_split(folk, tmp_path / "split", "syn", last_post_per_user(folk))
    n_test = len(test.read_text().splitlines())
    cfg = compose_cfg(tmp_path, ["task=posts", "model=[mp_ur]", "text=none", "logger=none",
                                 "data=tagrec", f"data.path={train}", f"data.test_path={test}",
                                 "task.split=given", "task.p=1", "task.seeds=[0]"])
    run_task(cfg)
    per_post = pd.read_csv(Path(cfg.paths.output_dir) / "per_object.csv.gz")
    assert per_post["object"].nunique() == n_test > 0


def test_learned_methods_validate_by_time_where_users_have_one_post_each():
    from tagtorch.errors import DataCheckError
    from tagtorch.posts.hybrid import Hybrid

    rng = np.random.default_rng(0)
    n = 600  # 300 users, two assignments each, one post per user
    frame = pd.DataFrame({"user": np.repeat(np.arange(300), 2).astype(str),
                          "object": rng.integers(0, 40, n).astype(str),
                          "tag": rng.zipf(1.5, n).clip(1, 25).astype(str),
                          "timestamp": np.repeat(np.arange(300), 2)})
    frame["object"] = np.repeat(frame["object"].to_numpy()[::2], 2)
    data = personalized_split(Folksonomy.from_frame(frame), p=1, split="global_time")
    with pytest.raises(DataCheckError, match="validation=global_time"):
        Hybrid(HYBRID_RANKER, depth=5).fit(data)
    model = Hybrid(HYBRID_RANKER, depth=5, validation="global_time").fit(data)
    assert (recommend(model.score(data.test), 3)[:, 0] >= 0).any()
    # choosing on held validation posts: a source that wins there ranks the test posts itself
    always = Hybrid(HYBRID_RANKER, depth=5, validation="global_time", selection=0.0).fit(data)
    assert always.choice_ == "ranker"
    weak = {**HYBRID_RANKER, "n_iterations": 1, "n_leaves": 2}  # a ranker that learns nothing
    chosen = Hybrid(weak, depth=5, validation="global_time", selection=0.5).fit(data)
    assert chosen.choice_ in chosen.sources_
    source = chosen.sources_[chosen.choice_]
    np.testing.assert_array_equal(chosen.top_tags(data.test, 10),
                                  source.top_tags(data.test, 10))
    with pytest.raises(ValueError, match="selection"):
        Hybrid(HYBRID_RANKER, selection=1.0)


def test_targets_take_a_baseline_that_lists_nothing():
    """A baseline without any list (a user part on new users) has only NaN TagRec values."""
    from tagtorch.evaluation.personalized_tags import target_tests

    rows = []
    for post in range(4):
        for metric, mine, theirs in (("tagrec_recall@5", 0.5, np.nan),
                                     ("tagrec_precision@5", 0.2, np.nan),
                                     ("mrr@10", 1.0 / (post + 1), 0.0)):
            rows += [{"method": "hybrid", "fold": 0, "object": post, "metric": metric,
                      "value": mine},
                     {"method": "bll", "fold": 0, "object": post, "metric": metric,
                      "value": theirs}]
    tests = target_tests(pd.DataFrame(rows), "hybrid", ["bll"], ("mrr@10", "tagrec_f1@5"),
                         n_resamples=200)
    assert tests["baseline_value"].tolist() == [0.0, 0.0]  # F1 over all posts: none listed
    assert tests["value"].tolist()[1] == pytest.approx(2 * 0.5 * 0.2 / 0.7)


def test_a_saved_post_ranker_refuses_repeated_tags_and_bad_source_order(tmp_path):
    """Hostile arrays that pass the digests (written by save itself) are refused at load."""
    from tagtorch.data.ragged import Ragged
    from tagtorch.posts.data import Posts

    data = random_split(3)
    train = data.train
    n = len(train.tags.values)
    repeated = Ragged.from_lists([[0, 0], *[row.tolist() for row in train.tags][1:]])
    cases = {"distinct and ascending": (repeated, None),
             "source_order": (train.tags, np.full(n, -1)),
             "source_order must": (train.tags, np.zeros(n, dtype=np.int64))}  # not distinct
    for i, (message, (tags, order)) in enumerate(cases.items()):
        bad = Posts(train.users, train.resources, train.times, tags, order)
        UserCF().fit(PostData(bad, data.test, data.n_users, data.n_resources, data.n_tags,
                              None)).save(tmp_path / str(i))
        with pytest.raises(UnreadableFileError, match=message):
            UserCF.load(tmp_path / str(i))
    good = Posts(train.users, train.resources, train.times, train.tags, np.arange(n) * 3)
    UserCF().fit(PostData(good, data.test, data.n_users, data.n_resources, data.n_tags,
                          None)).save(tmp_path / "good")
    assert UserCF.load(tmp_path / "good").data_.train.source_order.tolist() == (
        np.arange(n) * 3).tolist()


def test_the_targets_take_only_reported_metrics_and_a_refit_hybrid_chooses_anew():
    from tagtorch.evaluation.personalized_tags import PersonalizedTagTask
    from tagtorch.posts.hybrid import Hybrid

    for bad in ("tagrec_f1@7", "mrr", "rr@10"):
        with pytest.raises(ValueError):
            PersonalizedTagTask(ks=(1, 5, 10), targets={"method": "h", "baselines": ["b"],
                                                        "measures": [bad]})
    data = random_split(11, n=600)
    hybrid = Hybrid(HYBRID_RANKER, depth=5, validation="random", selection=0.5)
    first = hybrid.fit(data).choice_
    assert first != "ranker"  # a source wins here, so a stale choice could shadow the ranker
    assert hybrid.fit(data).choice_ == first  # refit: the ranker is scored, not the old choice


def test_target_f1_on_random_splits_counts_only_the_posts_of_each_seed():
    """Each seed has its own test posts: no (seed, post) pair that never existed is counted."""
    from tagtorch.evaluation.personalized_tags import target_tests

    rows = [{"method": method, "fold": fold, "object": 3 * fold + post, "metric": metric,
             "value": value}
            for fold in (0, 1) for post in range(3)
            for method, value in (("hybrid", 1.0), ("bll", 0.5))
            for metric in ("tagrec_recall@5", "tagrec_precision@5")]
    tests = target_tests(pd.DataFrame(rows), "hybrid", ["bll"], ("tagrec_f1@5",),
                         average_folds=False, n_resamples=200)
    assert tests[["value", "baseline_value"]].values.tolist() == [[1.0, 0.5]]


@pytest.mark.parametrize("method", ["hybrid_lambdamart", "hybrid_rf", "hybrid_lambdarank",
                                    "pitf_posts"])
def test_the_validation_override_of_the_docs_works_without_an_experiment(tmp_path, method):
    """Issue 71: ``model.hybrid_lambdamart.validation=random`` failed outside
    ``+experiment=posts_tagrec_sample`` (Hydra wanted ``+``): the setting is in every config."""
    from hydra.utils import instantiate
    from test_train import compose_cfg

    cfg = compose_cfg(tmp_path, ["task=posts", f"model=[{method}]",
                                 f"model.{method}.validation=random"])
    model = instantiate(cfg.model[method])
    assert model.validation == "random" and model.validation_fraction == 0.2


def test_three_layers_saved_with_its_categories_refits_on_more_resources(tmp_path):
    """The categories travel with a saved ThreeLayers; posts of resources added later (as the
    tag service adds them) have none, and the refit does not fail on them."""
    import scipy.sparse as sp

    from tagtorch.data.ragged import Ragged
    from tagtorch.posts.data import Posts
    from tagtorch.posts.three_layers import ThreeLayers

    folk = Folksonomy.from_frame(
        pd.DataFrame({"user": ["a", "a", "b", "b"], "object": ["r1", "r2", "r1", "r3"],
                      "tag": ["x", "y", "x", "z"], "timestamp": [1, 2, 3, 4]}),
        categories=pd.DataFrame({"object": ["r1", "r2", "r3"], "category": ["c", "c", "d"]}))
    data = personalized_split(folk, p=1, split="leave_last")
    model = ThreeLayers().fit(data)
    model.save(tmp_path / "m")
    loaded = ThreeLayers.load(tmp_path / "m")
    assert model.categories_.nnz == 3 and (loaded.categories_ != model.categories_).nnz == 0
    more = data.train.take(np.arange(len(data.train)))
    grown = PostData(more, more.take(np.zeros(0, dtype=np.int64)), data.n_users,
                     data.n_resources + 1, data.n_tags, None)
    refitted = loaded.fit(grown)
    new_post = Posts(np.array([0]), np.array([data.n_resources]), np.array([9]),
                     Ragged.from_lists([[]]))
    assert refitted.categories_.shape[0] == data.n_resources + 1
    assert isinstance(refitted.score(new_post), sp.csr_matrix)


def test_a_saved_hybrid_keeps_its_3layers_sources_categories(tmp_path):
    """The hybrid's 3Layers source reads the resources' categories, which the saved posts do
    not hold: they travel with the saved hybrid, whose lists after loading are the same."""
    from tagtorch.posts.hybrid import Hybrid

    rng = np.random.default_rng(3)
    n = 500
    frame = pd.DataFrame({"user": rng.integers(0, 12, n).astype(str),
                          "object": rng.integers(0, 30, n).astype(str),
                          "tag": rng.zipf(1.6, n).clip(1, 30).astype(str),
                          "timestamp": rng.integers(0, 10_000, n)})
    objects = np.unique(frame["object"])
    categories = pd.DataFrame({"object": np.repeat(objects, 2),
                               "category": rng.integers(0, 4, 2 * len(objects)).astype(str)})
    data = personalized_split(Folksonomy.from_frame(frame, categories=categories), p=1)
    model = Hybrid(HYBRID_RANKER, depth=10, selection=0.0).fit(data)
    assert model.sources_["three_layers"].categories_.nnz > len(objects)
    model.save(tmp_path / "hybrid")
    loaded = Hybrid.load(tmp_path / "hybrid")
    assert (loaded.sources_["three_layers"].categories_
            != model.sources_["three_layers"].categories_).nnz == 0
    np.testing.assert_array_equal(loaded.top_tags(data.test, 10), model.top_tags(data.test, 10))


def test_the_hybrids_rounds_learn_each_users_earlier_posts_described_by_sources_before_them(
        monkeypatch):
    """``rounds=3``: the ranker learns the lists of each user's last, second-to-last and
    third-to-last training posts (a user needs one more post than it gives), each with the
    sources fitted on the user's posts before it; one round learns the last ones only, with
    the same features."""
    from tagtorch.posts.hybrid import Hybrid

    data = random_split(5, n=500)
    per_user = np.bincount(data.train.users, minlength=data.n_users)
    learned: list[int] = []
    fitted: list[int] = []
    features: dict[int, torch.Tensor] = {}
    original_fit, original_sources = Hybrid._build_ranker, Hybrid._fit_sources

    def capture(self):
        ranker = original_fit(self)
        fit = ranker.fit

        def record(lists):
            learned.append(len(lists))
            features[self.rounds] = lists.features.clone()
            return fit(lists)

        ranker.fit = record
        return ranker

    def sources(self, part):
        fitted.append(len(part.train))
        return original_sources(self, part)

    monkeypatch.setattr(Hybrid, "_build_ranker", capture)
    monkeypatch.setattr(Hybrid, "_fit_sources", sources)
    for rounds in (1, 3):
        learned.clear()
        fitted.clear()
        Hybrid(HYBRID_RANKER, depth=5, selection=0.0, rounds=rounds).fit(data)
        expected = [int((per_user >= r + 1).sum()) for r in range(1, rounds + 1)]
        assert learned == [sum(expected)]
        # the sources: on the posts before each round, then on all training posts
        assert fitted == [len(data.train) - sum(expected[:r + 1]) for r in range(rounds)] + [
            len(data.train)]
    # the last carve's lists are described by the sources fitted before them, as with one
    # round (the first round's lists come first, padded to the widest part)
    one, three = features[1], features[3]
    assert torch.equal(three[:len(one), :one.shape[1]], one)
    # max_learned_posts: a round starts only while the lists hold fewer posts
    expected = [int((per_user >= r + 1).sum()) for r in range(1, 4)]
    for cap, rounds_run in ((expected[0], 1), (expected[0] + 1, 2), (sum(expected), 3)):
        learned.clear()
        Hybrid(HYBRID_RANKER, depth=5, selection=0.0, rounds=3,
               max_learned_posts=cap).fit(data)
        assert learned == [sum(expected[:rounds_run])], cap
    with pytest.raises(ValueError, match="rounds"):
        Hybrid(HYBRID_RANKER, rounds=0)
    with pytest.raises(ValueError, match="max_learned_posts"):
        Hybrid(HYBRID_RANKER, max_learned_posts=0)


def test_three_layers_on_lda_topics_weighs_the_exemplars_of_the_resources_theme():
    """Without categories 3Layers weighs every tag of the user the same (TagRec's fallback);
    with ``topics``, each resource's LDA topics over its training tags are its categories. On
    two themes of disjoint tags, a user with one post per theme and a test post of theme A:
    the A exemplar has similarity 1 (v = ln 2), the B exemplar 0, which TagRec's normalization
    weighs 1, so U = ln 2 / (1 + ln 2) and 1 / (1 + ln 2) by hand (0.5 each without topics)."""
    from tagtorch.posts.three_layers import ThreeLayers

    rng = np.random.default_rng(0)
    rows = []
    for theme, tags in (("a", ["a1", "a2", "a3"]), ("b", ["b1", "b2", "b3"])):
        for r in range(8):
            for u in range(6):  # others tag the theme's resources with its tags
                rows += [(f"o{u}", f"{theme}{r}", str(t), 1) for t in rng.choice(tags, 2,
                                                                                  replace=False)]
    rows += [(f"o{u}", "later", "a1", 20) for u in range(6)]  # the others' test posts
    # users with one post per theme, then a test post of theme A (me) or B (me2)
    rows += [("me", "a0", "a1", 2), ("me", "b0", "b2", 3), ("me", "a7", "a2", 9),
             ("me2", "b1", "b2", 2), ("me2", "a1", "a1", 3), ("me2", "b7", "b3", 9)]
    folk = Folksonomy.from_frame(pd.DataFrame(rows, columns=["user", "object", "tag",
                                                             "timestamp"]))
    data = personalized_split(folk, p=1)
    tags = list(folk.tags)
    plain = ThreeLayers(resource=False).fit(data).user_part(data.test).toarray()
    topics = ThreeLayers(topics=2, topic_iterations=200, resource=False).fit(data)
    part = topics.user_part(data.test).toarray()
    users = [folk.users[u] for u in data.test.users]
    same, other = math.log(2) / (1 + math.log(2)), 1 / (1 + math.log(2))
    for user, theme_tag, other_tag in (("me", "a1", "b2"), ("me2", "b2", "a1")):
        row = users.index(user)
        assert plain[row, tags.index(theme_tag)] == plain[row, tags.index(other_tag)] == 0.5
        assert part[row, tags.index(theme_tag)] == pytest.approx(same)
        assert part[row, tags.index(other_tag)] == pytest.approx(other)
    assert topics.categories_.shape == (data.n_resources, 2)
