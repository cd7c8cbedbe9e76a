"""Evaluation of personalized tag recommendation, TagRec's benchmark (``task=posts``).

For each seed the folksonomy's p-core is split into training and test posts as TagRec does
(:func:`~tagtorch.posts.data.personalized_split`: each user's last post held out by default; a
time split, a random one, or a given ``_train``/``_test`` pair); every configured post ranker
(:class:`~tagtorch.posts.base.PostRanker`) learns from the training posts and recommends its
``depth`` best tags for every test post at once. Metrics per test post (:mod:`tagtorch.posts.
metrics`): TagRec's, named apart and reported first (``tagrec_recall@k``,
``tagrec_precision@k``, ``tagrec_mrr@k``, ``tagrec_map@k``, ``tagrec_ndcg@k``, averaged as
TagRec does over the posts with a list; ``tagrec_f1@k`` of the means per seed), TagRec's
``coverage``, then tagtorch's standard ``p@k``, ``r@k``, ``s@k``, ``ndcg@k``, ``mrr@k`` (first
hit) and ``map@k`` over all posts, as every task reports them. A split that
does not depend on the seed (leave-last, given) is made once, and a method without a ``seed``
setting on such a split is fitted once and its outcome stands for every seed.

The run folder has what every tagtorch evaluation writes (:func:`~tagtorch.evaluation.runs.
write_run`: ``results.csv``, ``per_object.csv.gz`` (per test post, ``object`` = ``u{user}r
{resource}`` in codes), ``report.md`` with paired tests of every pair of methods on the posts'
means over the seeds, ``qrels.trec`` and a run file per method of the first seed) and, when
``targets`` names a method, ``targets.csv``: that method against each named baseline on each
target metric, Holm-corrected over all of them — a paired t-test over the posts for a mean
metric (``mrr@10``, ``tagrec_mrr@10``: over the posts both lists cover), and for
``tagrec_f1@k``, which is not a mean over posts, a paired randomization test of the F1 of the
means (:func:`~tagtorch.posts.metrics.f1_randomization_p_value`; a post without a list counts
0 there, where TagRec's mean leaves it out: the same when both methods cover every post).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pandas as pd
import torch

from tagtorch.data.folksonomy import Folksonomy
from tagtorch.evaluation.report import holm
from tagtorch.evaluation.runs import (
    EvaluationResult,
    MethodOutcome,
)
from tagtorch.evaluation.stats import paired_test
from tagtorch.evaluation.task import Outcomes, SeededTask
from tagtorch.evaluation.trec import qrels_lines, ranked_lines
from tagtorch.metrics.functional import TAGREC_FAMILIES, parse_key
from tagtorch.posts.base import PostRanker
from tagtorch.posts.data import SPLITS, PostData, personalized_split
from tagtorch.posts.metrics import f1_randomization_p_value, mean_metrics, post_metrics
from tagtorch.settings import ModelTask
from tagtorch.storage import atomic_write

log = logging.getLogger(__name__)

__all__ = ["PersonalizedTagTask", "target_tests", "trec_tag_codes"]


class PersonalizedTagTask(SeededTask):
    """Evaluates the configured post rankers (``model``: name -> config), module docstring.

    Args:
        seeds: the seeds of random splits and seeded methods.
        p: the p-core (1: none; TagRec's HetRec studies: 3).
        split: ``leave_last`` (TagRec), ``global_time``, ``random`` or ``given``.
        test_fraction: the share of test posts of ``global_time`` and ``random``.
        ks: the cut-offs of every metric.
        depth: how many tags each method recommends (TagRec: 10; at least ``max(ks)``).
        precision_divisor: ``k`` (TagRec's code: hits / k) or ``list`` (hits / the list's
            length) for ``tagrec_precision@k``.
        trec: write ``qrels.trec`` and the run files (the first seed).
        resume: reuse the finished (seed, method) outcomes in ``pieces/`` of the output folder.
        significance: the report's paired tests (:class:`~tagtorch.evaluation.report.
            Significance`).
        targets: ``{method, baselines, measures}``: the method the run is about, tested against
            each baseline on each metric of ``measures`` (``targets.csv``; None: no such table).
        backend: where each (seed, method) is fitted and evaluated: ``processes`` (here) or
            the workers of a ``dask`` or ``ray`` cluster (:meth:`~tagtorch.evaluation.task.
            SeededTask.take_shared`).
        address: that cluster's scheduler (None: a local cluster, started for the run).
    """

    model_tasks: ClassVar[tuple[ModelTask, ...]] = ("posts",)
    """The tasks of the models this task runs (read by the config checks)."""

    p: int
    split: str
    test_fraction: float
    depth: int
    precision_divisor: str
    trec: bool
    resume: bool

    def __init__(self, seeds: Sequence[int] = (0, 1, 2, 3, 4), p: int = 3,
                 split: str = "leave_last", test_fraction: float = 0.2,
                 ks: Sequence[int] = (1, 3, 5, 10), depth: int = 10,
                 precision_divisor: str = "k", trec: bool = True, resume: bool = False,
                 significance: Mapping[str, Any] | None = None,
                 targets: Mapping[str, Any] | None = None, backend: str = "processes",
                 address: str | None = None) -> None:
        self.take_shared(seeds, significance, backend, address)
        if split not in SPLITS:
            raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
        if not ks or min(ks) < 1 or max(ks) > depth:
            raise ValueError(f"ks must lie in [1, depth={depth}], got {list(ks)}")
        self.ks = tuple(ks)
        self.targets = dict(targets) if targets else None
        produced = {f"{family}@{k}" for k in self.ks for family in
                    ("p", "r", "s", "ndcg", "mrr", "map", *TAGREC_FAMILIES)}
        for measure in (self.targets or {}).get("measures", ()):  # keys of the one grammar
            if measure not in produced:
                raise ValueError(f"task.targets.measures: {measure!r} is not reported (ks = "
                                 f"{list(self.ks)}: FAMILY@k of p, r, s, ndcg, mrr, map, "
                                 "tagrec_*)")

    def split_seed(self, data: Folksonomy, seed: int, previous: PostData | None,
                   models: Mapping[str, Any]) -> PostData:
        """One seed's split (a fixed split, leave-last or given: the first seed's for all)."""
        if previous is not None and self._fixed_split:
            return previous
        split = personalized_split(data, self.p, self.split, self.test_fraction, seed)
        log.info("seed %d: %d training and %d test posts, %d tags", seed, len(split.train),
                 len(split.test), split.n_tags)
        return split

    def qrels(self, split: PostData) -> list[str]:
        """The test posts' tags (as :func:`trec_tag_codes` numbers them)."""
        codes = trec_tag_codes(split)
        return qrels_lines(self._ids(split), (codes[row] for row in split.test.tags))

    def outcome(self, data: Folksonomy, split: PostData, seed: int, name: str,
                node: Mapping[str, Any], done: Outcomes) -> MethodOutcome:
        """One method fitted and evaluated on a seed (:meth:`_outcome`)."""
        return self._outcome(split, seed, name, node, done)

    def protocol(self) -> list[Any]:
        """The settings every outcome depends on."""
        return [self.p, self.split, self.test_fraction, self.ks, self.depth,
                self.precision_divisor, self.seeds[0]]

    def write(self, data: Folksonomy, models: Mapping[str, Any], whole: MethodOutcome,
              qrels: list[str] | None, summaries: Mapping[int, Mapping[str, Any]],
              output_dir: Path) -> EvaluationResult:
        """The run folder: results, report (with the targets' tests), TREC files."""
        notes = [f"Split: {self.split} on the {self.p}-core. tagrec_* are TagRec's metrics "
                 "(its formulas, averaged over the posts with a list; tagrec_mrr sums 1/rank "
                 "over the found gold tags / |G|; tagrec_f1@k of the mean recall and "
                 "precision; tagrec_precision divides by "
                 f"{'the list length' if self.precision_divisor == 'list' else 'k'}); "
                 "coverage: the share of posts with a list; p, r, s, ndcg, mrr (first hit) "
                 "and map are tagtorch's standard metrics over all posts."]
        if self.targets:
            tests = target_tests(whole.frames()[1], **self.targets,
                                 average_folds=self._fixed_split)
            with atomic_write(output_dir / "targets.csv") as partial:
                tests.to_csv(partial, index=False)
            notes.append("Targets (targets.csv; p_holm over every row):\n\n```\n"
                         + tests.round(4).to_string(index=False) + "\n```")
            print(tests.round(4).to_string(index=False))
        return self.report(output_dir, whole, models, qrels, title=(
            f"Personalized tag recommendation on {data.name} ({len(self.seeds)} seeds)"),
            plot_metric=f"tagrec_mrr@{max(self.ks)}", notes=notes,
            average_folds=self._fixed_split)

    @property
    def _fixed_split(self) -> bool:
        """Whether every seed has the same test posts (leave-last, given)."""
        return self.split in ("leave_last", "given")

    @staticmethod
    def _ids(data: PostData) -> list[str]:
        """The test posts' query ids, ``u{user}r{resource}``."""
        return [f"u{u}r{r}" for u, r in zip(data.test.users, data.test.resources, strict=True)]

    def _outcome(self, data: PostData, seed: int, name: str, node: Mapping[str, Any],
                 done: Mapping[tuple[int, str], MethodOutcome]) -> MethodOutcome:
        """One method's outcome on a seed (a seed-free method on a fixed split: the first)."""
        seeded = "seed" in node
        if not seeded and self._fixed_split and (self.seeds[0], name) in done:
            return _relabelled(done[self.seeds[0], name], seed)
        model: PostRanker = self.given.build(name, node, {"seed": seed} if seeded else {})
        start = time.perf_counter()
        model.fit(data)
        fit_seconds = time.perf_counter() - start
        start = time.perf_counter()
        ranked = model.top_tags(data.test, self.depth)
        seconds = time.perf_counter() - start
        values = post_metrics(ranked, data.test.tags, self.ks, self.precision_divisor)
        means = mean_metrics(values)
        extra = {f"tagrec_f1@{k}": means[f"tagrec_f1@{k}"] for k in self.ks}
        extra.update(fit_seconds=fit_seconds, ms_model=1000 * seconds / max(len(data.test), 1))
        ids = self._ids(data)
        lines = (ranked_lines(ids, trec_tag_codes(data)[np.maximum(ranked, 0)], ranked >= 0,
                              name, self.depth) if self.writes_trec(seed) else None)
        outcome = MethodOutcome.from_values(
            name, seed, np.asarray(ids), {k: torch.from_numpy(v) for k, v in values.items()},
            extra=extra, run_lines=lines)
        log.info("seed %d, %s: tagrec_mrr@%d %.4f, tagrec_f1@%d %.4f (fit %.1f s, %.2f ms per "
                 "post)", seed, name, max(self.ks), means[f"tagrec_mrr@{max(self.ks)}"],
                 max(self.ks), means[f"tagrec_f1@{max(self.ks)}"], fit_seconds,
                 extra["ms_model"])
        return outcome


def trec_tag_codes(split: PostData) -> np.ndarray:
    """``[W]`` each tag's number in the run and qrels files: the training tags first.

    The split's codes number the tags of the training and the test posts together, so a test
    tag that sorts first would renumber every run file. Here the training tags keep their
    order and come first, the tags only the test posts hold after them: a run file (which
    only ever lists training tags) depends on the training posts alone.
    """
    seen = np.zeros(split.n_tags, dtype=bool)
    seen[np.asarray(split.train.tags.values, dtype=np.int64)] = True
    codes = np.empty(split.n_tags, dtype=np.int64)
    codes[np.r_[np.flatnonzero(seen), np.flatnonzero(~seen)]] = np.arange(split.n_tags)
    return codes


def _relabelled(outcome: MethodOutcome, seed: int) -> MethodOutcome:
    """A seed-free outcome as another seed's (the same values; no run lines)."""
    return MethodOutcome(results=[{**row, "fold": seed} for row in outcome.results],
                         per_object=[frame.assign(fold=seed) for frame in outcome.per_object],
                         means={k: dict(v) for k, v in outcome.means.items()})


def target_tests(per_object: pd.DataFrame, method: str, baselines: Sequence[str],
                 measures: Sequence[str] = ("tagrec_mrr@10", "mrr@10", "tagrec_f1@5"),
                 average_folds: bool = True,
                 n_resamples: int = 10_000, seed: int = 0) -> pd.DataFrame:
    """``method`` against each baseline on each metric, paired by post.

    Args:
        per_object: the run's per-post values (``method, fold, object, metric, value``).
        method: the method under test.
        baselines: the methods it must beat (those absent from the run are skipped).
        measures: mean metrics (a paired t-test over the posts where both are defined) or
            ``tagrec_f1@k`` (the randomization test of the F1 of the means, from
            ``tagrec_recall@k`` and ``tagrec_precision@k``, a post without a list as 0).
        average_folds: pair each post's mean over the seeds (a split that is the same on
            every seed); False: pair each (seed, post) (random splits).
        n_resamples: draws of the randomization test.
        seed: its seed.

    Returns:
        Columns ``method, baseline, metric, value, baseline_value, difference, test, p_value,
        p_holm`` (Holm over all rows).
    """
    wide = per_object.pivot_table(index="object" if average_folds else ["fold", "object"],
                                  columns=["method", "metric"], values="value", aggfunc="mean")
    wide = wide.reindex(columns=pd.MultiIndex.from_product(  # a method without any list: NaN
        [sorted(set(per_object["method"])), sorted(set(per_object["metric"]))]))
    rows = []
    present = set(per_object["method"])
    for baseline in [b for b in baselines if b in present]:
        for metric in measures:
            if metric.startswith("tagrec_f1@"):
                k = parse_key(metric)[1]
                pair = [(np.nan_to_num(wide[m, f"tagrec_recall@{k}"].to_numpy()),
                         np.nan_to_num(wide[m, f"tagrec_precision@{k}"].to_numpy()))
                        for m in (method, baseline)]
                f1 = [mean_metrics({f"tagrec_recall@{k}": r, f"tagrec_precision@{k}": p}
                                   )[f"tagrec_f1@{k}"] for r, p in pair]
                p_value = f1_randomization_p_value((pair[0][0], pair[1][0]),
                                                   (pair[0][1], pair[1][1]), n_resamples, seed)
                a, b, test = f1[0], f1[1], "randomization (F1 of means)"
            else:
                x, y = wide[method, metric].to_numpy(), wide[baseline, metric].to_numpy()
                both = np.isfinite(x) & np.isfinite(y)
                x, y = x[both], y[both]
                a, b, test = float(x.mean()), float(y.mean()), "paired t-test"
                p_value = paired_test(x, y).p_value if both.sum() > 1 else 1.0
            rows.append({"method": method, "baseline": baseline, "metric": metric, "value": a,
                         "baseline_value": b, "difference": a - b, "test": test,
                         "p_value": p_value})
    frame = pd.DataFrame(rows)
    frame["p_holm"] = holm(frame["p_value"].tolist()) if len(frame) else []
    return frame
