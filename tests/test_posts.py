"""Personalized tag recommendation's posts, splits and metrics (tagtorch/posts/).

References: a plain per-post transcription of TagRec's ``PredictionData`` and
``MetricsCalculator`` (Java, github.com/learning-layers/TagRec) written from their code, list
by list; scikit-learn's ``ndcg_score`` for the IR nDCG; hand-made posts for the splits.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import ndcg_score

from tagtorch.data.folksonomy import Folksonomy
from tagtorch.data.ragged import Ragged
from tagtorch.errors import DataCheckError
from tagtorch.posts.data import personalized_split, posts_of
from tagtorch.posts.metrics import mean_metrics, post_metrics


def tagrec_prediction_data(real: Sequence[int | str], predicted: list[int], k: int
                           ) -> dict[str, float]:
    """TagRec's PredictionData for one post, transcribed: recall, precision, MRR, MAP, nDCG."""
    pred = predicted[:k]
    found = len([t for t in real if t in pred])
    recall = found / len(real) if real else 0.0
    precision = found / k if pred else 0.0  # getPrecision: "use this.k"
    mrr = (sum(1.0 / (pred.index(t) + 1) for t in real if t in pred) / len(real)
           if pred and real else 0.0)
    map_ = 0.0
    if pred and real and found:
        for i in range(1, len(pred) + 1):
            p_i = len([t for t in real if t in pred[:i]]) / i
            map_ += p_i * (1.0 if pred[i - 1] in real else 0.0)
        map_ /= len(real)
    idcg = sum(math.log(2) / math.log(i + 2) for i in range(len(real)))  # all of real, not k
    dcg = sum(math.log(2) / math.log(i + 2) for i, t in enumerate(pred) if t in real)
    return {"recall": recall, "precision": precision, "mrr": mrr, "map": map_,
            "ndcg": dcg / idcg}


def test_the_metrics_equal_tagrecs_own_definitions_list_by_list():
    rng = np.random.default_rng(7)
    lists, golds = [], []
    for _ in range(300):
        n = int(rng.integers(0, 11))
        lists.append([int(t) for t in rng.permutation(30)[:n]])
        golds.append([int(t) for t in rng.permutation(30)[:int(rng.integers(0, 13))]])
    rec = np.full((len(lists), 10), -1)
    for i, row in enumerate(lists):
        rec[i, :len(row)] = row
    values = post_metrics(rec, Ragged.from_lists([sorted(g) for g in golds]), [1, 3, 5, 10])
    listed = [i for i, p in enumerate(lists) if p]  # MetricsCalculator: getPredictionCount
    for k in (1, 3, 5, 10):
        # a post without tags: TagRec's PredictionFileReader reads its gold as one empty tag
        expected = [tagrec_prediction_data(g or [""], p, k)
                    for g, p in zip(golds, lists, strict=True)]
        for name in ("recall", "precision", "mrr", "map", "ndcg"):
            np.testing.assert_allclose(values[f"tagrec_{name}@{k}"][listed],
                                       [expected[i][name] for i in listed], rtol=1e-12,
                                       atol=1e-12)
            assert np.isnan(np.delete(values[f"tagrec_{name}@{k}"], listed)).all()
        means = mean_metrics(values)
        r = np.mean([expected[i]["recall"] for i in listed])
        p = np.mean([expected[i]["precision"] for i in listed])
        assert means[f"tagrec_recall@{k}"] == pytest.approx(r)  # over the posts with a list
        assert means[f"tagrec_f1@{k}"] == pytest.approx(2 * r * p / (r + p))
    assert means["coverage"] == pytest.approx(len(listed) / len(lists))


def test_precision_over_k_is_the_named_option_and_ir_metrics_match_references():
    rec = np.array([[3, 8, -1, -1, -1], [1, 2, 3, 4, 5]])
    gold = Ragged.from_lists([[3], [5, 9]])
    tagrec = post_metrics(rec, gold, [5])
    by_list = post_metrics(rec, gold, [5], precision_divisor="list")
    assert tagrec["tagrec_precision@5"].tolist() == [0.2, 0.2]  # found / k (TagRec's code)
    assert by_list["tagrec_precision@5"].tolist() == [0.5, 0.2]  # found / list length
    assert tagrec["p@5"].tolist() == [0.2, 0.2]
    assert tagrec["mrr@5"].tolist() == [1.0, 0.2]  # the first hit
    assert tagrec["tagrec_mrr@5"].tolist() == [1.0, 0.1]  # TagRec: Σ 1/rank over gold / |G|
    for row in range(2):  # binary relevance over the listed tags and the unlisted gold
        listed = [t for t in rec[row] if t >= 0]
        universe = sorted(set(listed) | set(gold[row].tolist()))
        truth = [[1.0 if t in gold[row] else 0.0 for t in universe]]
        scores = [[len(universe) - listed.index(t) if t in listed else 0.0 for t in universe]]
        assert tagrec["ndcg@5"][row] == pytest.approx(ndcg_score(truth, scores, k=5))
        assert tagrec["r@5"][row] == pytest.approx(len(set(listed) & set(gold[row].tolist()))
                                                   / len(gold[row]))
    with pytest.raises(ValueError, match="precision_divisor"):
        post_metrics(rec, gold, [5], precision_divisor="n")


def _folk() -> Folksonomy:
    rows = [("a", "r1", "x", 10), ("a", "r1", "y", 10), ("a", "r2", "x", 20),
            ("a", "r3", "z", 20), ("b", "r1", "y", 5), ("c", "r2", "x", 3),
            ("c", "r3", "y", 30), ("c", "r3", "x", 31)]
    return Folksonomy.from_frame(pd.DataFrame(rows, columns=["user", "object", "tag",
                                                             "timestamp"]))


def test_leave_last_post_out_holds_out_each_users_latest_post_if_it_has_another():
    folk = _folk()
    posts = posts_of(folk)
    assert [(folk.users[u], folk.objects[r], t) for u, r, t in zip(
        posts.users, posts.resources, posts.times, strict=True)] == [
        ("a", "r1", 10), ("a", "r2", 20), ("a", "r3", 20), ("b", "r1", 5), ("c", "r2", 3),
        ("c", "r3", 30)]  # by user, then time, then resource; a post's time its earliest
    data = personalized_split(folk, p=1)
    held = {(folk.users[u], folk.objects[r]) for u, r in zip(data.test.users,
                                                             data.test.resources, strict=True)}
    assert held == {("a", "r3"), ("c", "r3")}  # b has one post: it stays in training
    assert len(data.train) == 4 and [t.tolist() for t in data.test.tags] == [
        [int(np.flatnonzero(folk.tags == "z")[0])],
        sorted(int(np.flatnonzero(folk.tags == t)[0]) for t in ("x", "y"))]


def test_other_splits_and_their_checks():
    folk = _folk()
    newest = personalized_split(folk, p=1, split="global_time", test_fraction=0.34)
    assert sorted(newest.test.times.tolist()) == [20, 30]  # floor(0.34 * 6) = 2 latest
    one_post = Folksonomy.from_frame(pd.DataFrame(
        [(f"u{i}", f"r{i % 2}", "t", i) for i in range(6)],
        columns=["user", "object", "tag", "timestamp"]))
    with pytest.raises(DataCheckError, match=r"no test post.*task.split=global_time"):
        personalized_split(one_post, p=1)
    with pytest.raises(DataCheckError, match="marks no test post"):
        personalized_split(folk, p=1, split="given")
    marked = Folksonomy.from_frame(folk.assignments.assign(
        user=folk.users[folk.assignments["user"]], object=folk.objects[
            folk.assignments["object"]], tag=folk.tags[folk.assignments["tag"]]),
        test_posts=pd.DataFrame({"user": ["b"], "object": ["r1"]}))
    given = personalized_split(marked, p=1, split="given")
    assert (marked.users[given.test.users].tolist(),
            marked.objects[given.test.resources].tolist()) == (["b"], ["r1"])
    assert len(given.train) + len(given.test) == 6


# ---------------------------------------------------------------- baselines, per post


def _random_folk(seed: int = 3) -> Folksonomy:
    rng = np.random.default_rng(seed)
    rows = []
    for post in range(400):
        user, resource, time = int(rng.integers(30)), int(rng.integers(40)), int(rng.integers(
            1_000, 100_000))
        for tag in rng.choice(25, size=int(rng.integers(1, 5)), replace=False):
            rows.append((f"u{user}", f"r{resource}", f"t{tag}", time + post))
    return Folksonomy.from_frame(pd.DataFrame(rows, columns=["user", "object", "tag",
                                                             "timestamp"]))


def _plain_mp_ur(data, beta, user, resource, user_part):
    """MPurCalculator.getRankedTagList, post by post, with Python dictionaries."""
    def counts(key_of):
        out: dict[int, dict[int, int]] = {}
        for i in range(len(data.train)):
            for tag in data.train.tags[i]:
                row = out.setdefault(int(key_of[i]), {})
                row[int(tag)] = row.get(int(tag), 0) + 1
        return out

    def softmax(row):
        top = max(row.values())
        denom = sum(math.exp(v - top) for v in row.values())
        return {t: math.exp(v - top) / denom for t, v in row.items()}

    by_user, by_resource = counts(data.train.users), counts(data.train.resources)
    result = []
    for u, r in zip(data.test.users, data.test.resources, strict=True):
        scores: dict[int, float] = {}
        if user and int(u) in by_user:
            row = by_user[int(u)]
            if user_part == "softmax":
                row = {t: beta * v for t, v in softmax(row).items()}
            for t, v in row.items():  # TagRec's code: the raw counts
                scores[t] = scores.get(t, 0.0) + v
        if resource and int(r) in by_resource:
            for t, v in softmax(by_resource[int(r)]).items():
                scores[t] = scores.get(t, 0.0) + (1 - beta) * v
        result.append(scores)
    return result


def _plain_bll(data, d, beta, reference):
    """BLLCalculator's user activations and resource part, post by post (``reference``: the
    user's latest test time, TagRec's ``getBaselineTimestamp``, or the post's own)."""
    latest: dict[int, float] = {}
    for u, t in zip(data.test.users, data.test.times, strict=True):
        latest[int(u)] = max(latest.get(int(u), -math.inf), t)
    result = []
    for u, r, own in zip(data.test.users, data.test.resources, data.test.times, strict=True):
        now = own if reference == "post" else latest[int(u)]
        act: dict[int, float] = {}
        for i in range(len(data.train)):
            if data.train.users[i] == u and data.train.times[i] <= now:
                for tag in data.train.tags[i]:
                    act[int(tag)] = act.get(int(tag), 0.0) + (now - data.train.times[i] + 1.0) ** -d
        total = sum(act.values())
        scores = {t: beta * v / total for t, v in act.items()}
        if beta < 1:
            res: dict[int, float] = {}
            for i in range(len(data.train)):
                if data.train.resources[i] == r:
                    for tag in data.train.tags[i]:
                        res[int(tag)] = res.get(int(tag), 0.0) + 1.0
            for t, v in res.items():
                scores[t] = scores.get(t, 0.0) + (1 - beta) * v / sum(res.values())
        result.append(scores)
    return result


def _as_dicts(matrix) -> list[dict[int, float]]:
    matrix = matrix.tocsr()
    return [{int(t): float(v) for t, v in zip(matrix[i].indices, matrix[i].data, strict=True)
             if v != 0} for i in range(matrix.shape[0])]


@pytest.mark.parametrize("split", ["leave_last", "random"])
def test_the_batched_baselines_equal_plain_per_post_implementations(split):
    from tagtorch.posts.base import recommend
    from tagtorch.posts.baselines import BaseLevelLearning, MostPopular, MostPopularUserResource

    data = personalized_split(_random_folk(), p=1, split=split)
    for (beta, user, resource), user_part in itertools.product(
            ((0.5, True, True), (0.5, True, False), (0.5, False, True)), ("counts", "softmax")):
        got = _as_dicts(MostPopularUserResource(beta, user, resource, user_part).fit(data).score(
            data.test))
        for mine, plain in zip(got, _plain_mp_ur(data, beta, user, resource, user_part),
                               strict=True):
            assert mine.keys() == plain.keys()
            assert all(math.isclose(mine[t], plain[t], rel_tol=1e-12) for t in plain)
    for beta, reference in itertools.product((1.0, 0.5), ("user_latest", "post")):
        got = _as_dicts(BaseLevelLearning(0.5, beta, reference).fit(data).score(data.test))
        for mine, plain in zip(got, _plain_bll(data, 0.5, beta, reference), strict=True):
            assert mine.keys() == plain.keys()
            assert all(math.isclose(mine[t], plain[t], rel_tol=1e-9) for t in plain)
    popular = MostPopular().fit(data).top_tags(data.test, 10)
    counts = np.bincount(data.train.tags.values, minlength=data.n_tags)
    first = {}  # TagRec's tag index: the order of first appearance, posts in order
    for i in range(len(data.train)):
        for tag in data.train.tags[i]:
            first.setdefault(int(tag), len(first))
    # equal counts: the later first appearance first (TagRec's comparator)
    expected = sorted(first, key=lambda t: (-counts[t], -first[t]))[:10]
    assert (popular == expected).all()
    assert (recommend(MostPopular().fit(data).score(data.test), 10)
            == sorted(first, key=lambda t: (-counts[t], t))[:10]).all()  # no tie keys


@pytest.mark.integration
def test_the_posts_benchmark_prints_every_method(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_posts.py"
    done = subprocess.run([sys.executable, str(script), "--data", "synthetic", "--objects",
                           "600", "--lda-iterations", "20"], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = [line.split() for line in done.stdout.splitlines() if line.startswith("synthetic ")]
    assert [row[1] for row in rows] == ["mp", "mp_u", "mp_r", "mp_ur", "cf", "apr", "folkrank",
                                        "girp", "girptm", "bll", "bll_c", "lda_posts",
                                        "pitf_posts", "hybrid_lambdamart", "hybrid_rf",
                                        "hybrid_lambdarank"]
    assert all(0.0 <= float(value) <= 1.0 for row in rows for value in row[3:])


def test_the_f1_randomization_test_matches_exact_enumeration():
    import itertools

    from tagtorch.posts.metrics import f1_randomization_p_value

    rng = np.random.default_rng(2)
    n = 10
    recall = (rng.random(n), rng.random(n) * 0.6)
    precision = (rng.random(n) * 0.5, rng.random(n) * 0.4)

    def f1(r, p):
        return 2 * r * p / (r + p) if r + p > 0 else 0.0

    def gap(swap):
        ra = [recall[1][i] if s else recall[0][i] for i, s in enumerate(swap)]
        rb = [recall[0][i] if s else recall[1][i] for i, s in enumerate(swap)]
        pa = [precision[1][i] if s else precision[0][i] for i, s in enumerate(swap)]
        pb = [precision[0][i] if s else precision[1][i] for i, s in enumerate(swap)]
        return abs(f1(np.mean(ra), np.mean(pa)) - f1(np.mean(rb), np.mean(pb)))

    observed = gap([0] * n)
    exact = np.mean([gap(s) >= observed - 1e-12 for s in itertools.product([0, 1], repeat=n)])
    drawn = f1_randomization_p_value(recall, precision, n_resamples=20_000, seed=1)
    assert 0.0 < exact < 1.0
    assert drawn == pytest.approx(exact, abs=0.015)


def test_a_tagrec_files_line_order_orders_ties_and_survives_save_and_load(tmp_path):
    """TagRec fills its maps in its file's line order: shuffled lines give other ties."""
    from tagtorch.data.loaders.tagrec import load_tagrec
    from tagtorch.posts.baselines import MostPopularUserResource

    lines = ['"u1";"r1";"10";"b,a"', '"u2";"r1";"11";"c"', '"u3";"r2";"12";"d"',
             '"u4";"r1";"20";"x"']  # u4's post of r1 is the test post
    for name, order in (("forward", lines[:3]), ("backward", lines[2::-1])):
        (tmp_path / f"{name}_train.txt").write_text("\n".join(order) + "\n")
        (tmp_path / f"{name}_test.txt").write_text(lines[3] + "\n")
    ranked = {}
    for name in ("forward", "backward"):
        folk = load_tagrec(tmp_path / f"{name}_train.txt", test_path=tmp_path / f"{name}_test.txt")
        data = personalized_split(folk, p=1, split="given")
        model = MostPopularUserResource(user=False).fit(data)
        ranked[name] = [str(folk.tags[t]) for t in model.top_tags(data.test, 3)[0]]
        model.save(tmp_path / name)
        again = MostPopularUserResource.load(tmp_path / name).top_tags(data.test, 3)
        assert [str(folk.tags[t]) for t in again[0]] == ranked[name]
    # r1's tags all once: the later first use first (b, a in the line's order, then c)
    assert ranked == {"forward": ["c", "a", "b"], "backward": ["a", "b", "c"]}
