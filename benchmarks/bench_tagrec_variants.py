"""TagRec's odd choices (tagtorch's defaults) beside the named variants, on the HetRec 3-cores.

Issue 51: where TagRec's code does something odd, tagtorch reproduces it by default and keeps a
better reading as a named option, measured beside it. This prints, for each data set (3-core,
each user's last post held out, TagRec's protocol), TagRec's ``tagrec_mrr@10`` and
``tagrec_f1@5`` and the first-hit ``mrr@10`` of each default and its variants, and the paired
t-test of each variant against the default over the test posts (TagRec's MRR):

- ``mp_ur``: TagRec adds the user's raw counts; ``user_part="softmax"`` mixes β times their
  softmax (the commented-out line of TagRec's code);
- ``apr`` and ``folkrank``: ``renormalize=True`` gives a dimension whose preferred node is
  absent its whole random-surfer weight (TagRec keeps the preference weight in the norm);
  ``spread="facts"`` is the reading tagtorch had before issue 51 (a node's weight over its
  facts, not twice them).

Usage::

    TAGTORCH_DATA_DIR=/path/to/data python benchmarks/bench_tagrec_variants.py
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from tagtorch.api import load
from tagtorch.evaluation.stats import paired_test
from tagtorch.posts.base import PostRanker
from tagtorch.posts.baselines import MostPopularUserResource
from tagtorch.posts.data import personalized_split
from tagtorch.posts.folkrank import FolkRank
from tagtorch.posts.metrics import mean_metrics, post_metrics

VARIANTS: dict[str, dict[str, Callable[[], PostRanker]]] = {
    "mp_ur": {"TagRec (raw user counts)": MostPopularUserResource,
              "user_part=softmax (ours)": lambda: MostPopularUserResource(user_part="softmax")},
    "apr": {"TagRec": lambda: FolkRank(adapted=True),
            "renormalize=True (ours)": lambda: FolkRank(adapted=True, renormalize=True)},
    "folkrank": {"TagRec": FolkRank,
                 "renormalize=True (ours)": lambda: FolkRank(renormalize=True),
                 "spread=facts (the reading before issue 51)": lambda: FolkRank(spread="facts")},
}
"""Method -> label -> factory; each method's first entry is tagtorch's default (TagRec's)."""


def main() -> None:
    """Prints one line per data set, method and variant."""
    print(f"{'data':<10} {'method':<9} {'variant':<44} {'tagrec_mrr@10':>13} "
          f"{'tagrec_f1@5':>11} {'mrr@10':>7} {'p vs default':>12}")
    for name in ("movielens", "lastfm"):
        data = personalized_split(load(name), p=3)
        for method, variants in VARIANTS.items():
            default: np.ndarray | None = None
            for label, make in variants.items():
                values = post_metrics(make().fit(data).top_tags(data.test, 10), data.test.tags,
                                      [5, 10])
                means = mean_metrics(values)
                mine = values["tagrec_mrr@10"]
                p_value = (float("nan") if default is None
                           else paired_test(mine, default).p_value)
                default = mine if default is None else default
                print(f"{name:<10} {method:<9} {label:<44} {means['tagrec_mrr@10']:>13.4f} "
                      f"{means['tagrec_f1@5']:>11.4f} {means['mrr@10']:>7.4f} {p_value:>12.2g}")


if __name__ == "__main__":
    main()
