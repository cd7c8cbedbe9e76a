"""The hybrid's ``rounds``, chosen on validation posts only (issue 71).

``hybrid_lambdamart`` learns its ranker on validation posts carved from the training posts
(:mod:`tagtorch.posts.hybrid`); ``rounds`` is how many carves it learns from. This script
chooses it without reading a test post: on each HetRec 3-core (TagRec's protocol), each user's
last *training* post becomes a pseudo-test post, the hybrid is fitted on the training posts
before them with each ``rounds`` given, and its ``tagrec_mrr@10`` on the pseudo-test posts is
printed beside BLLac+MPr's (TagRec's best baseline there). The test posts of the split are never
read. ``hybrid_lambdamart``'s ``rounds: 8`` is the best mean of this table over both data sets.

Usage::

    TAGTORCH_DATA_DIR=/path/to/data python benchmarks/hybrid_rounds.py --data movielens lastfm \
        --rounds 1 2 3 5 8 12 20
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import numpy as np
from omegaconf import OmegaConf

from tagtorch.api import load
from tagtorch.data.folksonomy import Folksonomy
from tagtorch.posts.base import PostRanker
from tagtorch.posts.baselines import BaseLevelLearning
from tagtorch.posts.data import PostData, held_out_last, personalized_split
from tagtorch.posts.hybrid import Hybrid
from tagtorch.posts.metrics import mean_metrics, post_metrics

CONFIG = "tagtorch/conf/model/hybrid_lambdamart.yaml"


def pseudo_split(name: str) -> PostData:
    """The 3-core's training posts, each user's last one held out as the pseudo-test."""
    folksonomy = load(name)
    if not isinstance(folksonomy, Folksonomy):
        raise SystemExit(f"{name}: a folksonomy is needed, not a LETOR folder")
    data = personalized_split(folksonomy, p=3)
    train = data.train
    held = held_out_last(train, data.n_users)
    return PostData(train.take(np.flatnonzero(~held)), train.take(np.flatnonzero(held)),
                    data.n_users, data.n_resources, data.n_tags, data.folksonomy)


def tagrec_mrr(model: PostRanker, data: PostData) -> float:
    """The model's ``tagrec_mrr@10`` on ``data.test`` after fitting on ``data.train``."""
    ranked = model.fit(data).top_tags(data.test, 10)
    return mean_metrics(post_metrics(ranked, data.test.tags, [10]))["tagrec_mrr@10"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", nargs="+", default=["movielens", "lastfm"])
    parser.add_argument("--rounds", nargs="+", type=int, default=[1, 2, 3, 5, 8, 12, 20])
    args = parser.parse_args()
    node: dict[str, Any] = OmegaConf.to_container(  # type: ignore[assignment]
        OmegaConf.load(CONFIG).hybrid_lambdamart)
    ranker = {**node["ranker"], "seed": 0}
    print(f"{'data':10} {'method':22} {'tagrec_mrr@10':>13} {'fit s':>6}")
    for name in args.data:
        data = pseudo_split(name)
        print(f"{name:10} {'bll_c_ac':22} "
              f"{tagrec_mrr(BaseLevelLearning(beta=0.5, associative=True), data):13.4f}")
        for rounds in args.rounds:
            start = time.perf_counter()
            hybrid = Hybrid(ranker, depth=node["depth"], seed=0, selection=node["selection"],
                            rounds=rounds)
            value = tagrec_mrr(hybrid, data)
            print(f"{name:10} {f'hybrid rounds={rounds}':22} {value:13.4f} "
                  f"{time.perf_counter() - start:6.0f}", flush=True)


if __name__ == "__main__":
    main()
