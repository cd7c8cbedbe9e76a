"""Resource ranking: the baselines against plain per-document formulas, the split, the task.

References are written here independently of :mod:`tagtorch.resources`: loops over documents and
query words computing SMatch, BM25 (Robertson and Zaragoza 2009) and the Dirichlet-smoothed query
likelihood (Zhai and Lafferty 2001) from raw counts, and the rank of the relevant object counted
by hand.
"""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pandas as pd
import pytest
import torch
from hydra.utils import instantiate
from test_train import compose_cfg

from tagtorch.data.folksonomy import Folksonomy
from tagtorch.data.ragged import Ragged
from tagtorch.data.splits import post_filter
from tagtorch.errors import UnreadableFileError
from tagtorch.resources.bayeslm import BayesLM
from tagtorch.resources.bm25 import BM25
from tagtorch.resources.data import resource_ranking_data
from tagtorch.resources.lda import LDARanker
from tagtorch.resources.lda_lm import LDALanguageModel
from tagtorch.resources.smatch import SMatch
from tagtorch.train import run_task

N_WORDS = 12


@pytest.fixture(scope="module")
def corpus() -> tuple[Ragged, Ragged]:
    rng = np.random.default_rng(0)
    docs = [list(rng.integers(0, N_WORDS - 2, rng.integers(0, 15))) for _ in range(30)]
    docs[3] = []  # an empty document
    queries = [sorted(set(rng.integers(0, N_WORDS, rng.integers(1, 4)).tolist()))
               for _ in range(25)]
    queries[0] = [N_WORDS - 1]  # a word no document holds
    return Ragged.from_lists(docs), Ragged.from_lists(queries)


def plain_scores(docs: Ragged, queries: Ragged, score_one) -> np.ndarray:
    counts = [Counter(d.tolist()) for d in docs]
    seen = set().union(*counts)
    out = np.zeros((len(queries), len(docs)))
    for q, query in enumerate(queries):
        words = [w for w in query.tolist() if w in seen]  # unseen words are dropped
        for d, c in enumerate(counts):
            out[q, d] = score_one(words, c, counts)
    return out


def smatch_one(words, c, counts):
    return sum(c[w] for w in words)


def bm25_one(words, c, counts, k1=1.2, b=0.75):
    docs = [x for x in counts if sum(x.values())]
    avgdl = sum(sum(x.values()) for x in docs) / len(docs)
    total = 0.0
    for w in words:
        n_w = sum(1 for x in docs if w in x)
        idf = math.log(1 + (len(docs) - n_w + 0.5) / (n_w + 0.5))
        tf = c[w]
        total += idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * sum(c.values()) / avgdl))
    return total


def bayeslm_one(words, c, counts, mu=7.0):
    collection = Counter()
    for x in counts:
        collection.update(x)
    n = sum(collection.values())
    return sum(math.log((c[w] + mu * collection[w] / n) / (sum(c.values()) + mu))
               for w in words)


@pytest.mark.parametrize(("ranker", "reference"), [
    (SMatch(device="cpu"), smatch_one),
    (BM25(k1=1.2, b=0.75, device="cpu"), bm25_one),
    (BM25(k1=0.5, b=0.3, device="cpu"), lambda w, c, cs: bm25_one(w, c, cs, k1=0.5, b=0.3)),
    (BayesLM(mu=7.0, device="cpu"), bayeslm_one),
], ids=["smatch", "bm25", "bm25-other", "bayeslm"])
def test_baselines_against_plain_formulas(corpus, ranker, reference, tmp_path):
    docs, queries = corpus
    scores = ranker.fit(docs, N_WORDS).score(queries)
    assert scores.shape == (len(queries), len(docs))
    np.testing.assert_allclose(scores.numpy(), plain_scores(docs, queries, reference),
                               rtol=1e-9, atol=1e-9)
    ranker.save(tmp_path / "model")
    again = type(ranker).load(tmp_path / "model")
    assert again.settings() == ranker.settings()
    assert torch.equal(again.score(queries), scores)


def test_lda_ranker_is_the_smoothed_query_likelihood(corpus, tmp_path):
    docs, queries = corpus
    ranker = LDARanker(n_topics=3, iterations=8, burn_in=4, prior_weight=0.3, device="cpu",
                       progress=False).fit(docs, N_WORDS)
    phi, theta = ranker.model_.phi_, ranker.model_.theta_  # [Z, W], [D, Z]
    lengths = docs.lengths
    n_docs = int((lengths > 0).sum())
    expected = np.zeros((len(queries), len(docs)))
    for q, query in enumerate(queries):
        for d in range(len(docs)):
            prior = 0.3 * lengths[d] / lengths.sum() + 0.7 / n_docs
            expected[q, d] = math.log(prior) + sum(
                math.log(sum(phi[z, w] * theta[d, z] for z in range(3))) for w in query)
    np.testing.assert_allclose(ranker.score(queries).numpy(), expected, rtol=1e-5, atol=1e-5)
    ranker.save(tmp_path / "lda")
    again = LDARanker.load(tmp_path / "lda")
    assert torch.equal(again.score(queries), ranker.score(queries))


def test_lda_lm_mixes_the_smoothed_language_model_and_the_topics(corpus, tmp_path):
    docs, queries = corpus
    ranker = LDALanguageModel(lam=0.3, mu=5.0, n_topics=3, iterations=8, burn_in=4,
                              device="cpu", progress=False).fit(docs, N_WORDS)
    phi, theta = ranker.model_.phi_, ranker.model_.theta_
    counts = [Counter(d.tolist()) for d in docs]
    collection = Counter()
    for c in counts:
        collection.update(c)
    n = sum(collection.values())
    lengths = docs.lengths
    n_docs = int((lengths > 0).sum())
    expected = np.zeros((len(queries), len(docs)))
    for q, query in enumerate(queries):
        for d, c in enumerate(counts):
            total = math.log(0.5 * lengths[d] / lengths.sum() + 0.5 / n_docs)
            for w in query.tolist():
                language = (c[w] + 5.0 * collection[w] / n) / (sum(c.values()) + 5.0)
                topics = sum(phi[z, w] * theta[d, z] for z in range(3))
                total += math.log(0.3 * language + 0.7 * topics)
            expected[q, d] = total
    np.testing.assert_allclose(ranker.score(queries).numpy(), expected, rtol=1e-5, atol=1e-5)
    # the scoring settings change without resampling; lam = 0 is the LDA ranker itself
    pure = ranker.with_scoring(lam=0.0)
    assert pure.model_.phi_ is not None and pure.lam == 0.0 and ranker.lam == 0.3
    lda = LDARanker(n_topics=3, iterations=8, burn_in=4, device="cpu", progress=False)
    lda._set_arrays(ranker._arrays())
    torch.testing.assert_close(pure.score(queries), lda.score(queries))
    with pytest.raises(ValueError, match="not scoring settings"):
        ranker.with_scoring(n_topics=5)
    ranker.save(tmp_path / "lda_lm")
    assert torch.equal(LDALanguageModel.load(tmp_path / "lda_lm").score(queries),
                       ranker.score(queries))


def test_saved_ranker_refuses_altered_files(corpus, tmp_path):
    docs, _ = corpus
    BM25(device="cpu").fit(docs, N_WORDS).save(tmp_path / "m")
    arrays = tmp_path / "m" / "arrays.npz"
    arrays.write_bytes(arrays.read_bytes()[:-10])
    with pytest.raises(UnreadableFileError, match=r"arrays\.npz"):
        BM25.load(tmp_path / "m")
    with pytest.raises(UnreadableFileError, match="BM25"):
        SMatch.load(tmp_path / "m")
    with pytest.raises(RuntimeError, match="not fitted"):
        SMatch().save(tmp_path / "unfitted")


def test_settings_are_checked():
    with pytest.raises(ValueError, match="b must"):
        BM25(b=1.5)
    with pytest.raises(ValueError, match="mu must"):
        BayesLM(mu=0)


def posts_frame() -> pd.DataFrame:
    """User 1 posts o0..o5 at times 0..5, user 2 o5..o0 then an object nobody posted before."""
    rows = []
    for t in range(6):
        rows += [(1, f"o{t}", "rock", t), (1, f"o{t}", f"g{t % 3}", t)]
        rows += [(2, f"o{5 - t}", "pop", t)]
    rows += [(1, "o5", "later", 5), (2, "new", "fresh", 9)]
    return pd.DataFrame(rows, columns=["user", "object", "tag", "timestamp"])


def test_split_documents_and_queries():
    f = Folksonomy.from_frame(posts_frame())
    obj = {name: code for code, name in enumerate(f.objects)}
    split = resource_ranking_data(f, test_fraction=0.34, val_fraction=0.25, seed=0)
    # user 1: 6 posts -> test o4, o5; val floor(0.25 * 4) = 1: o3; train o0, o1, o2
    # user 2: 7 posts -> test o0 (time 5), new (time 9); val floor(1.25) = 1: o1; train o5..o2
    assert split.counts["test_posts"] == 4 and split.counts["val_posts"] == 2
    assert split.counts["test_unanswerable"] == 1  # "new" has no training post
    assert sorted(f.objects[split.test.relevant].tolist()) == ["o0", "o4", "o5"]
    assert sorted(f.objects[split.val.relevant].tolist()) == ["o1", "o3"]
    assert sorted(f.tags[split.documents[obj["o2"]]].tolist()) == ["g2", "pop", "rock"]
    assert sorted(f.tags[split.documents[obj["o0"]]].tolist()) == ["g0", "rock"]
    assert split.candidates.sum() == 6 and not split.candidates[obj["new"]]
    row = int(np.flatnonzero(f.objects[split.test.relevant] == "o5")[0])
    assert sorted(f.tags[split.test.words[row]].tolist()) == ["g2", "rock"]  # "later": unseen
    assert split.test.ids[row] == 0 * f.n_objects + obj["o5"]  # user code 0, object o5


def plain_rank(scores: np.ndarray, candidates: np.ndarray, relevant: int) -> int:
    """1-based rank of the relevant object: higher scores first, equal scores by object code."""
    rank = 1
    for d in np.flatnonzero(candidates):
        if scores[d] > scores[relevant] or (scores[d] == scores[relevant] and d < relevant):
            rank += 1
    return rank


def test_task_end_to_end_against_a_plain_evaluation(tmp_path):
    out = tmp_path
    cfg = compose_cfg(tmp_path, ["+experiment=lda_synthetic", "model=[smatch,bm25,bayeslm]",
                                 "~model.lda_resources", "~model.lda_lm", "task.seeds=[3]",
                                 "data.n_objects=800"])
    results = run_task(cfg).results
    assert list(dict.fromkeys(results["method"])) == ["smatch", "bm25", "bayeslm"]
    quality = ["s@1", "s@5", "s@10", "mrr@10"]
    assert list(dict.fromkeys(results["metric"]))[:4] == quality
    for name in ("report.md", "per_object.csv.gz", "qrels.trec", "run.bm25.trec",
                 "queries.csv", "tuning.csv", "mrr@10.png"):
        assert (out / name).is_file(), name
    # the chosen BM25 setting has the best validation score of the grid
    tuning = pd.read_csv(out / "tuning.csv")
    bm25 = tuning[tuning["method"] == "bm25"]
    assert bm25["chosen"].sum() == 1
    assert bm25.loc[bm25["chosen"], "val_mrr@10"].iloc[0] == bm25["val_mrr@10"].max()
    # SMatch's per-query values from a plain evaluation of the same split
    folksonomy = post_filter(instantiate(cfg.data), min_user_objects=10)
    split = resource_ranking_data(folksonomy, 0.1, 0.1, seed=3)
    scores = SMatch(device="cpu").fit(split.documents, split.n_words).score(split.test.words)
    ranks = np.array([plain_rank(scores[q].numpy(), split.candidates, split.test.relevant[q])
                      for q in range(len(split.test))])
    per_object = pd.read_csv(out / "per_object.csv.gz")
    ours = per_object[(per_object["method"] == "smatch")].pivot(index="object", columns="metric",
                                                                   values="value")
    ours = ours.loc[[f"q{i}" for i in split.test.ids]]  # the TREC files' query ids
    np.testing.assert_allclose(ours["s@5"], ranks <= 5)
    np.testing.assert_allclose(ours["mrr@10"], np.where(ranks <= 10, 1.0 / ranks, 0.0))
    assert len((out / "qrels.trec").read_text().splitlines()) == len(split.test)



# ---------------------------------------------------------------- data checks, global split


def _one_post_per_user(n_users: int = 40, with_time: bool = True) -> Folksonomy:
    """Each user posts once, to one of 4 objects; post i at time 10 * i."""
    rows = [(f"u{i}", f"o{i % 4}", tag, 10 * i if with_time else None)
            for i in range(n_users) for tag in ("a", f"t{i % 3}")]
    frame = pd.DataFrame(rows, columns=["user", "object", "tag", "timestamp"])
    return Folksonomy.from_frame(frame if with_time else frame.drop(columns="timestamp"))


def test_the_global_split_takes_the_last_posts_of_everyone():
    from tagtorch.data.splits import global_temporal_split

    folk = _one_post_per_user()
    split = global_temporal_split(folk, test_fraction=0.1, val_fraction=0.25, seed=0)
    a = folk.assignments
    times = {part: sorted(set(a.loc[mask, "timestamp"]))
             for part, mask in (("train", split.train), ("val", split.val),
                                ("test", split.test))}
    assert times["test"] == [360, 370, 380, 390]  # floor(0.1 * 40) = 4 last posts
    assert times["val"] == [270 + 10 * i for i in range(9)]  # floor(0.25 * 36) = 9 before them
    assert times["train"] == [10 * i for i in range(27)]


def test_data_that_cannot_support_the_task_is_one_error_with_true_advice(tmp_path):
    from tagtorch.errors import DataCheckError
    from tagtorch.evaluation.resource_ranking import ResourceRankingTask

    folk = _one_post_per_user()
    with pytest.raises(DataCheckError, match=r"post filter leaves nothing.*most objects of one "
                                             r"user 1\); lower task.min_object_users"):
        post_filter(folk)
    with pytest.raises(DataCheckError, match=r"40 of 40 posts have no timestamp"):
        resource_ranking_data(_one_post_per_user(with_time=False))
    cfg = compose_cfg(tmp_path, ["task=resources", "model=[smatch,bm25]", "task.seeds=[0]",
                                 "task.min_object_users=1", "task.min_user_objects=1",
                                 "task.min_tag_uses=1"])
    task = instantiate(cfg.task)
    assert isinstance(task, ResourceRankingTask)
    with pytest.raises(DataCheckError, match=r"no test query.*a user needs >= 10 posts.*most "
                                             r"posts of one user is 1.*task.split=global_time"):
        task.run(folk, cfg, tmp_path / "per_user")
    task.split = "global_time"
    result = task.run(folk, cfg, tmp_path / "global")  # 4 test posts, all answerable
    assert set(result.results["method"]) == {"smatch", "bm25"}
    task.val_fraction = 0.01  # floor(0.01 * 36) = 0 validation posts; bm25 tunes a grid
    with pytest.raises(DataCheckError, match=r"no validation query to tune bm25 on.*raise "
                                             r"task.val_fraction"):
        task.run(folk, cfg, tmp_path / "no_val")


def test_the_command_line_shows_a_data_check_as_one_line_and_exits_2(tmp_path):
    import subprocess
    import sys

    path = tmp_path / "posts.txt"
    path.write_text("".join(f'"u{i}";"o{i % 4}";"{10 * i}";"a,t{i % 3}";""\n'
                            for i in range(40)))
    done = subprocess.run([sys.executable, "-m", "tagtorch.train", "task=resources",
                           "data=tagrec", f"data.path={path}", "logger=none",
                           "task.seeds=[0]", "model=[smatch]", f"hydra.run.dir={tmp_path}/run"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stderr[-2000:]
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "post filter leaves nothing" in errors[0], done.stderr[-2000:]
    assert "Traceback" not in done.stderr


def test_a_given_split_is_evaluated_exactly(tmp_path):
    """task.split=given: the test queries are the marked posts, nothing drawn."""
    from tagtorch.evaluation.resource_ranking import ResourceRankingTask

    rows = [(f"u{i}", f"o{i % 4}", tag, 10 * i) for i in range(40) for tag in ("a", f"t{i % 3}")]
    frame = pd.DataFrame(rows, columns=["user", "object", "tag", "timestamp"])
    marked = pd.DataFrame({"user": ["u3", "u17", "u30"], "object": ["o3", "o1", "o2"]})
    folk = Folksonomy.from_frame(frame, test_posts=marked)
    cfg = compose_cfg(tmp_path, ["task=resources", "model=[smatch]", "task.seeds=[0]",
                                 "task.min_object_users=1", "task.min_user_objects=1",
                                 "task.min_tag_uses=1", "task.split=given"])
    task = instantiate(cfg.task)
    assert isinstance(task, ResourceRankingTask)
    result = task.run(folk, cfg, tmp_path / "given")
    queries = set(result.per_object["object"].astype(str))
    posts = {f"q{folk.users.tolist().index(u) * folk.n_objects + folk.objects.tolist().index(o)}"
             for u, o in marked.itertuples(index=False)}
    assert queries == posts


def test_tuning_scores_a_seeded_sample_of_at_most_tune_queries(tmp_path):
    """Issue 54 (ours, for scale): a grid scores at most ``tune_queries`` validation queries,
    a subset of the split's own drawn with the seed; the test queries are untouched."""
    cfg = compose_cfg(tmp_path, ["task=resources", "data.n_objects=600", "text=none",
                                 "task.min_user_objects=5", "task.tune_queries=40"])
    task = instantiate(cfg.task, _convert_="all")
    data = task.prepare(instantiate(cfg.data))
    full = resource_ranking_data(data, task.test_fraction, task.val_fraction, 3, task.split)
    sampled = task.split_seed(data, 3, None, {})
    assert len(full.val) > 40 and len(sampled.val) == 40
    assert set(sampled.val.ids) < set(full.val.ids)
    assert np.array_equal(sampled.test.ids, full.test.ids)
    again = task.split_seed(data, 3, None, {})
    assert np.array_equal(again.val.ids, sampled.val.ids)  # the seed's own sample
