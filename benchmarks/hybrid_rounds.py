"""The hybrid's ``rounds``, chosen on validation posts only (issue 71).

``hybrid_lambdamart`` learns its ranker on validation posts carved from the training posts
(:mod:`tagtorch.posts.hybrid`); ``rounds`` is how many carves it learns from. This script
chooses it without reading a test post: on each HetRec 3-core (TagRec's protocol), each user's
last *training* post becomes a pseudo-test post, the hybrid is fitted on the training posts
before them with each ``rounds`` given, and its ``tagrec_mrr@10`` on the pseudo-test posts is
printed beside BLLac+MPr's (TagRec's best baseline there). The test posts of the split are never
read. ``hybrid_lambdamart``'s ``rounds: 12`` is the best mean of this table over both data sets.

``--given STEM``: a TagRec split's training file (``STEM_train.txt.gz``, e.g. the one-post-per-
user samples' random splits in ``tests/fixtures/tagrec/``), a random 20% of its training posts
as the pseudo-test and the hybrid validating on random posts, as their experiment does.

Usage::

    TAGTORCH_DATA_DIR=/path/to/data python benchmarks/hybrid_rounds.py --data movielens lastfm \
        --rounds 1 2 3 5 8 12 20
    python benchmarks/hybrid_rounds.py --data --rounds 1 8 \
        --given tests/fixtures/tagrec/bib_random/bib_s tests/fixtures/tagrec/cul_random/cul_s
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

import numpy as np
from omegaconf import OmegaConf

from tagtorch.api import load
from tagtorch.data.folksonomy import Folksonomy
from tagtorch.data.loaders.tagrec import load_tagrec
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


def pseudo_given(stem: str) -> PostData:
    """A TagRec split's training posts, a random 20% of them held out as the pseudo-test."""
    folksonomy = load_tagrec(f"{stem}_train.txt.gz", integer_ids=True)
    return personalized_split(folksonomy, p=1, split="random", test_fraction=0.2, seed=71)


def measures(model: PostRanker, data: PostData) -> tuple[float, float]:
    """The model's ``tagrec_mrr@10`` and ``mrr@10`` on ``data.test`` (fitted on ``data.train``)."""
    ranked = model.fit(data).top_tags(data.test, 10)
    means = mean_metrics(post_metrics(ranked, data.test.tags, [10]))
    return means["tagrec_mrr@10"], means["mrr@10"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", nargs="*", default=["movielens", "lastfm"])
    parser.add_argument("--given", nargs="*", default=[], metavar="STEM")
    parser.add_argument("--rounds", nargs="+", type=int, default=[1, 2, 3, 5, 8, 12, 20])
    args = parser.parse_args()
    node: dict[str, Any] = OmegaConf.to_container(  # type: ignore[assignment]
        OmegaConf.load(CONFIG).hybrid_lambdamart)
    ranker = {**node["ranker"], "seed": 0}
    print(f"{'data':10} {'method':22} {'tagrec_mrr@10':>13} {'mrr@10':>7} {'fit s':>6}")
    splits = [*((name, pseudo_split(name), "leave_last") for name in args.data),
              *((Path(stem).name, pseudo_given(stem), "random") for stem in args.given)]
    for name, data, validation in splits:
        baseline = measures(BaseLevelLearning(beta=0.5, associative=True), data)
        print(f"{name:10} {'bll_c_ac':22} {baseline[0]:13.4f} {baseline[1]:7.4f}")
        for rounds in args.rounds:
            start = time.perf_counter()
            hybrid = Hybrid(ranker, depth=node["depth"], seed=0, selection=node["selection"],
                            rounds=rounds, validation=validation)
            value = measures(hybrid, data)
            print(f"{name:10} {f'hybrid rounds={rounds}':22} {value[0]:13.4f} {value[1]:7.4f} "
                  f"{time.perf_counter() - start:6.0f}", flush=True)


if __name__ == "__main__":
    main()
