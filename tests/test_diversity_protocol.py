"""Diversity metrics in the tag-recommendation protocol: every method's per-object results get
alpha_ndcg@k, err_ia@k, s_recall@k, aild@k and aip@k when the candidate sets carry topics
(checked against plain per-object computations written here), and nothing changes without."""

from __future__ import annotations

import math
from functools import partial

import numpy as np
import pandas as pd
import pytest
import torch

from tagtorch.candidates.latre import LatreCandidates
from tagtorch.data.synthetic import generate_folksonomy
from tagtorch.data.terms import TermIndex
from tagtorch.evaluation.tag_recommendation import TagRecommendationProtocol, topic_diversity
from tagtorch.rankers.latre import LatreWTS
from tagtorch.rankers.xtred import XTReD

DIVERSITY = ("alpha_ndcg@5", "err_ia@5", "s_recall@5", "aild@5", "aip@5")


@pytest.fixture(scope="module")
def folksonomy():
    return generate_folksonomy(n_objects=150, n_categories=5, seed=2)


def _protocol(**kwargs):
    return TagRecommendationProtocol(folds=[0], device="cpu", online_objects=0,
                                     trec=False, **kwargs)


def _run(folksonomy, diversity):
    candidates = LatreCandidates(max_rule_candidates=20, device="cpu", diversity=diversity)
    return _protocol().evaluate(folksonomy, candidates, {"latre_wts": partial(LatreWTS,
                                                                              alpha=0.9)})


def ref_metrics(ranked: list[int], pzt: dict[int, list[float]], pzo: list[float],
                objects_of: dict[int, set[int]], n_d: int, k: int = 5) -> dict[str, float]:
    """ERR-IA, S-recall, AILD and AIP of one ranked tag list, by the paper's definitions."""
    top = ranked[:k]
    zo = [z for z in range(len(pzo)) if pzo[z] > 0]
    out: dict[str, float] = {}
    if zo:
        err = 0.0
        for z in zo:
            left = 1.0
            for i, t in enumerate(top):
                err += pzo[z] * left * pzt[t][z] / (i + 1)
                left *= 1 - pzt[t][z]
        out["err_ia@5"] = err
        out["s_recall@5"] = sum(any(pzt[t][z] > 0 for t in top) for z in zo) / len(zo)
    pairs = [(a, b) for i, a in enumerate(top) for b in top[i + 1:]]
    if pairs:
        def dist(a, b):
            union = objects_of.get(a, set()) | objects_of.get(b, set())
            inter = objects_of.get(a, set()) & objects_of.get(b, set())
            return 1.0 if not union else 1 - len(inter) / len(union)
        out["aild@5"] = sum(dist(a, b) for a, b in pairs) / len(pairs)
    if top:
        out["aip@5"] = sum(math.log((n_d + 1) / (len(objects_of.get(t, ())) + 1))
                           / math.log(n_d + 1) for t in top) / len(top)
    return out


def test_the_protocol_reports_diversity_only_when_the_candidates_carry_topics(folksonomy):
    plain = _run(folksonomy, None)
    diverse = _run(folksonomy, {"source": "categories"})
    assert not set(DIVERSITY) & set(plain.results["metric"])
    assert set(DIVERSITY) <= set(diverse.results["metric"])
    assert set(DIVERSITY) <= set(diverse.per_object["metric"])
    # the relevance results are the same either way
    keep = ~plain.results["metric"].str.contains("ms_|seconds")
    same = diverse.results[diverse.results["metric"].isin(plain.results["metric"][keep])]
    assert np.allclose(same.sort_values("metric")["value"].to_numpy(),
                       plain.results[keep].sort_values("metric")["value"].to_numpy())


def test_topic_diversity_against_plain_per_object_values(folksonomy):
    fold = _protocol().splits(folksonomy)[0]
    generator = LatreCandidates(max_rule_candidates=20, device="cpu",
                                diversity={"source": "categories"}).fit(
        fold.train_objects, fold.train_tags, TermIndex.from_folksonomy(folksonomy))
    test = generator(fold.test)
    scores = torch.rand(test.mask.shape, generator=torch.Generator().manual_seed(0))
    values = topic_diversity(scores, test, fold.train_tags, ks=(5,))
    assert set(values) == set(DIVERSITY)
    objects_of: dict[int, set[int]] = {}
    for d in range(len(fold.train_tags)):
        for t in fold.train_tags[d].tolist():
            objects_of.setdefault(t, set()).add(d)
    for b in range(len(test)):
        real = [j for j in range(test.mask.shape[1]) if test.mask[b, j]]
        ranked_pos = sorted(real, key=lambda j: (-float(scores[b, j]), j))
        ranked = [int(test.tags[b, j]) for j in ranked_pos]
        pzt = {int(test.tags[b, j]): test.tag_topics[b, j].double().tolist() for j in real}
        want = ref_metrics(ranked, pzt, test.object_topics[b].double().tolist(), objects_of,
                           len(fold.train_tags))
        for key in ("err_ia@5", "s_recall@5", "aild@5", "aip@5"):
            got = float(values[key][b])
            if key in want:
                assert got == pytest.approx(want[key], abs=1e-5), (b, key)
            else:
                assert math.isnan(got), (b, key)
    assert torch.isfinite(values["alpha_ndcg@5"][test.object_topics.sum(1) > 0]).any()


def test_xtred_runs_through_the_protocol_with_its_stage_and_trade_off(folksonomy, tmp_path):
    candidates = LatreCandidates(max_rule_candidates=20, device="cpu",
                                 diversity={"source": "categories"})
    base = {"_target_": "tagtorch.rankers.latre.LatreWTS", "alpha": 0.9}
    rankers = {"latre_wts": partial(LatreWTS, alpha=0.9),
               "xtred_0": partial(XTReD, base=base, lam=0.0),
               "xtred_grid": partial(XTReD, base=base, lam_grid=[0.0, 0.5, 1.0])}
    protocol = TagRecommendationProtocol(folds=[0], device="cpu", online_objects=3,
                                         trec=True)
    result = protocol.evaluate(folksonomy, candidates, rankers, output_dir=tmp_path)
    means = result.results.set_index(["method", "metric"])["value"]
    for metric in ("ndcg@5", "p@5", *DIVERSITY):  # λ = 0: the base ranking
        assert means["xtred_0", metric] == pytest.approx(means["latre_wts", metric])
    stages = set(result.results.loc[result.results["method"] == "xtred_grid", "metric"])
    assert {"ms_diversify", "online_ms_diversify"} <= stages
    plain = set(result.results.loc[result.results["method"] == "latre_wts", "metric"])
    assert not {"ms_diversify", "online_ms_diversify"} & plain
    tradeoff = pd.read_csv(tmp_path / "tradeoff.csv")
    grid = tradeoff[tradeoff["method"] == "xtred_grid"]
    assert grid["value"].tolist() == [0.0, 0.5, 1.0] and set(grid["setting"]) == {"lam"}
    assert {"val_ndcg@5", "val_alpha_ndcg@5", "seed"} <= set(tradeoff.columns)
    assert (tmp_path / "tradeoff.png").stat().st_size > 0
    assert "diversify" in (tmp_path / "report.md").read_text()
