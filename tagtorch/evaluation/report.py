"""Reports: means with 95% confidence intervals over folds, and paired significance tests.

:func:`markdown_report` writes ``report.md``: a table of ``mean ± half-width`` per method and
metric (the half-width is ``n/a`` where one fold or seed gives no interval), the timings in a
table of their own, for tag recommendation the candidate coverage (:data:`COVERAGE_METRICS`:
test objects, and how many of them have no candidate at all or no gold tag among their
candidates, per method, as each method may use its own candidate set), and, with several
methods, paired tests of every pair of methods on the per-object values, Holm-corrected over
the pairs of each metric, with the effect size Cohen's ``d_z``. Which tests is the task's
``significance`` setting (:class:`Significance`): the paired t-test by default, Fisher's
randomization (sign-flip) test, or both (a table each).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
import pandas as pd

from tagtorch.evaluation.stats import (
    PairedTest,
    TestMethod,
    check_resamples,
    confidence_interval,
    paired_test,
)
from tagtorch.version import __version__

#: The candidate coverage of tag recommendation in ``results.csv``, per method and fold: the
#: evaluated (test) objects, and the shares of them with no candidate at all and with no gold
#: tag among their candidates (those without candidates included).
COVERAGE_METRICS = ("evaluated_objects", "no_candidates", "no_gold_candidates")
#: The values of ``significance.test``.
SIGNIFICANCE_TESTS = ("ttest", "wilcoxon", "randomization", "both")
#: The heading of the report's timing section (:func:`is_timing_metric`'s metrics).
TIMING_HEADING = "## Time per test object (ms; fit in seconds)"


@dataclass(frozen=True)
class Significance:
    """Which paired tests a report gives: the ``significance`` setting of a task config.

    Attributes:
        test: ``"ttest"`` (paired t-test, the default), ``"wilcoxon"`` (signed-rank test),
            ``"randomization"`` (Fisher's sign-flip test) or ``"both"`` (t-test and
            randomization test, a table each).
        n_resamples: sign assignments the randomization test draws (all ``2**n`` when that is
            no more: exact).
        seed: seed of the randomization test's draws.

    Raises:
        ValueError: an unknown test, ``n_resamples`` not from 1 to
            :data:`~tagtorch.evaluation.stats.MAX_RESAMPLES` or a seed that is not an integer.

    Example:
        >>> Significance.of({"test": "both"}).methods
        ('ttest', 'randomization')
    """

    test: str = "ttest"
    n_resamples: int = 10_000
    seed: int = 0

    def __post_init__(self) -> None:
        if self.test not in SIGNIFICANCE_TESTS:
            raise ValueError(f"significance.test must be one of {SIGNIFICANCE_TESTS}, "
                             f"got {self.test!r}")
        check_resamples(self.n_resamples, "significance.n_resamples")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int):
            raise ValueError(f"significance.seed must be an integer, got {self.seed!r}")

    @classmethod
    def of(cls, setting: Significance | Mapping[str, Any] | None) -> Significance:
        """The settings of a config node (None: the defaults)."""
        if isinstance(setting, Significance):
            return setting
        return cls(**dict(setting or {}))

    @property
    def methods(self) -> tuple[TestMethod, ...]:
        """The tests to run, in the report's order."""
        if self.test == "both":
            return ("ttest", "randomization")
        return (cast(TestMethod, self.test),)


def summarize(results: pd.DataFrame, confidence: float = 0.95) -> pd.DataFrame:
    """Mean and confidence half-width over folds of every (method, metric).

    Args:
        results: columns ``method, fold, metric, value`` (one row per method, fold and metric).
        confidence: confidence level of the t interval.

    Returns:
        Columns ``method, metric, mean, ci, folds``, methods and metrics in first-seen order;
        ``ci`` is NaN over one fold (one value gives no interval).
    """
    rows = []
    for (method, metric), group in results.groupby(["method", "metric"], sort=False):
        mean, half = confidence_interval(group["value"].to_numpy(), confidence)
        rows.append({"method": method, "metric": metric, "mean": mean, "ci": half,
                     "folds": int(group["value"].notna().sum())})
    return pd.DataFrame(rows, columns=["method", "metric", "mean", "ci", "folds"])


def holm(p_values: Sequence[float]) -> np.ndarray:
    """Holm-Bonferroni adjusted p-values (step-down, monotone, capped at 1).

    Example:
        >>> holm([0.01, 0.04, 0.03]).round(3).tolist()
        [0.03, 0.06, 0.06]
    """
    p = np.asarray(p_values, dtype=float)
    order = np.argsort(p, kind="stable")
    scaled = p[order] * (len(p) - np.arange(len(p)))
    adjusted = np.empty_like(p)
    adjusted[order] = np.minimum(np.maximum.accumulate(scaled), 1.0)
    return adjusted


def significance(per_object: pd.DataFrame, method: TestMethod = "ttest",
                 average_folds: bool = False, n_resamples: int = 10_000,
                 seed: int = 0) -> pd.DataFrame:
    """Paired tests of every pair of methods on per-object values, Holm-corrected per metric.

    Args:
        per_object: columns ``method, fold, object, metric, value``; pairs are formed in the
            methods' first-seen order (``method_a`` before ``method_b``).
        method: ``"ttest"`` (paired t-test), ``"wilcoxon"`` (signed-rank test) or
            ``"randomization"`` (Fisher's sign-flip test, :func:`~.stats.randomization_p_value`).
        average_folds: pair each object's mean over the folds (seeds) instead of its value on
            each fold: for repeated runs over the same objects (sampler seeds), where pairing
            every (fold, object) would count one query several times.
        n_resamples: sign assignments drawn by the randomization test.
        seed: seed of the randomization test (the same draws for every pair).

    Returns:
        Columns ``method_a, method_b, metric, mean_difference`` (a minus b), ``d_z`` (Cohen's
        effect size of the paired differences), ``statistic, p_value, p_holm, n``; ``p_holm``
        adjusts over all pairs of one metric. Pairs of methods with fewer than two objects in
        common (evaluated on different folds) are left out.
    """
    wide = _paired_values(per_object, average_folds)
    methods = list(dict.fromkeys(per_object["method"]))
    rows: list[dict[str, Any]] = []
    for metric, group in wide.groupby(level="metric", sort=False):
        first = len(rows)
        for i, a in enumerate(methods):
            for b in methods[i + 1:]:
                test = _test_pair(group[a].to_numpy(), group[b].to_numpy(), method,
                                  n_resamples, seed)
                if test is None:
                    continue
                rows.append({"method_a": a, "method_b": b, "metric": metric,
                             "mean_difference": test.mean_difference, "d_z": test.effect_size,
                             "statistic": test.statistic, "p_value": test.p_value, "n": test.n})
        adjusted = holm([r["p_value"] for r in rows[first:]])
        for row, p in zip(rows[first:], adjusted, strict=True):
            row["p_holm"] = float(p)
    return pd.DataFrame(rows, columns=["method_a", "method_b", "metric", "mean_difference",
                                       "d_z", "statistic", "p_value", "p_holm", "n"])


def _paired_values(per_object: pd.DataFrame, average_folds: bool) -> pd.DataFrame:
    """Per-object values by ``(fold, object, metric)``, a column per method.

    With ``average_folds``, one row per ``(object, metric)``: its mean over the folds.
    """
    if average_folds:
        per_object = per_object.assign(fold=0)  # pivot_table's mean averages the folds
    return per_object.pivot_table(index=["fold", "object", "metric"], columns="method",
                                  values="value", dropna=False)


def _test_pair(x: np.ndarray, y: np.ndarray, method: TestMethod, n_resamples: int,
               seed: int) -> PairedTest | None:
    """The paired test of two methods' values.

    None when they have fewer than two objects in common (e.g. run on different folds).
    """
    if int((~(np.isnan(x) | np.isnan(y))).sum()) < 2:
        return None
    return paired_test(x, y, method=method, n_resamples=n_resamples, seed=seed)


def markdown_report(
    results: pd.DataFrame,
    per_object: pd.DataFrame | None = None,
    title: str = "Results",
    confidence: float = 0.95,
    significance: Significance | Mapping[str, Any] | None = None,
    average_folds: bool = False,
    headline_metric: str | None = None,
) -> str:
    """A markdown report: tables of ``mean ± half-width`` per method and metric.

    With ``headline_metric`` (a metric of ``results``), it opens with :func:`headline_table`
    (the section :func:`headline_section` reads back). Quality metrics, timings
    (:func:`is_timing_metric`) and the candidate coverage (:data:`COVERAGE_METRICS`) get one
    table each. With two or more methods and per-object values, a table per test of
    ``significance`` (:class:`Significance`; default: the paired t-test) compares every pair
    of methods, Holm-corrected, with Cohen's ``d_z``. A half-width over one fold (seed) is
    ``n/a``.
    """
    summary = summarize(results, confidence)
    settings = Significance.of(significance)
    headline = ([] if headline_metric is None or headline_metric not in set(summary["metric"])
                else ["", *headline_table(summary, per_object, headline_metric, settings,
                                          average_folds)])
    is_timing = summary["metric"].map(is_timing_metric)
    is_coverage = summary["metric"].isin(COVERAGE_METRICS)
    n_folds = int(summary["folds"].max()) if len(summary) else 0
    lines = [
        f"# {title}",
        "",
        f"Mean ± half-width of the {confidence:.0%} confidence interval (t distribution) over "
        + (f"{n_folds} folds." if n_folds != 1 else
           "1 fold: one value gives no interval (n/a)."),
        *headline,
        "",
        *quality_tables(summary[~is_timing & ~is_coverage]),
    ]
    if is_timing.any():
        lines += ["", TIMING_HEADING, "",
                  _timing_note(summary), "", summary_table(summary[is_timing])]
    if is_coverage.any():
        lines += ["", "## Candidate coverage (mean over folds)", "",
                  "Test objects, and those with no candidate at all or with no gold tag among "
                  "their candidates (no candidate included), of each method's candidate set: "
                  "a ranker cannot recommend a gold tag to them.", "",
                  _coverage_table(results)]
    methods = list(dict.fromkeys(results["method"]))
    if per_object is not None and len(methods) > 1:
        for method in settings.methods:
            lines += ["", *paired_test_table(per_object, method, settings, average_folds)]
    return "\n".join([*lines, "", version_line()]) + "\n"


HEADLINE = "## Best first by "
"""The heading that opens :func:`headline_table`'s section (:func:`headline_section`)."""


def headline_table(summary: pd.DataFrame, per_object: pd.DataFrame | None, metric: str,
                   settings: Significance, average_folds: bool = False) -> list[str]:
    """The methods best first by ``metric``: mean ± half-width and the paired test to the best.

    Each other method's mean difference to the best and the p-value of the first test of
    ``settings`` on the per-object values (pairs as in :func:`significance`), Holm-corrected
    over these comparisons with the best only (not every pair, as the report's full tables).

    Returns:
        The section's lines: heading, a sentence, the markdown table.
    """
    rows = summary[summary["metric"] == metric].sort_values("mean", ascending=False,
                                                            kind="stable")
    best = str(rows["method"].iloc[0])
    test = settings.methods[0]
    differences, p_values = {}, {}
    if per_object is not None and len(rows) > 1:
        wide = _paired_values(per_object[per_object["metric"] == metric], average_folds)
        for other in rows["method"].iloc[1:]:
            result = _test_pair(wide[other].to_numpy(), wide[best].to_numpy(), test,
                                settings.n_resamples, settings.seed)
            if result is not None:
                differences[other], p_values[other] = result.mean_difference, result.p_value
    adjusted = dict(zip(p_values, holm(list(p_values.values())), strict=True))
    table = pd.DataFrame({
        "rank": range(1, len(rows) + 1), "method": rows["method"].to_numpy(),
        metric: [interval_cell(m, c) for m, c in zip(rows["mean"], rows["ci"], strict=True)],
        "minus best": [f"{differences[m]:+.4f}" if m in differences else "–"
                       for m in rows["method"]],
        "p (Holm)": [f"{adjusted[m]:.2e}" if m in adjusted else "–" for m in rows["method"]]})
    return [f"{HEADLINE}{metric}", "",
            f"Paired {test} of each method against the best ({best}) on the per-query values"
            + (" (each query's mean over the folds)" if average_folds else "")
            + ", Holm-corrected over these comparisons.", "", markdown_table(table)]


def headline_section(report: str) -> str:
    """The :func:`headline_table` section of a report ("" when it has none)."""
    start = report.find(HEADLINE)
    if start < 0:
        return ""
    lines = report[start:].splitlines()
    first = next((i for i, line in enumerate(lines) if line.startswith("|")), None)
    if first is None:  # a heading without its table
        return ""
    last = next((i for i in range(first, len(lines)) if not lines[i].startswith("|")),
                len(lines))
    return "\n".join(lines[:last])


def version_line() -> str:
    """The line that ends every report: the tagtorch version that wrote it."""
    return f"_Written by tagtorch {__version__}._"


def _timing_note(summary: pd.DataFrame) -> str:
    """What the timing table's columns measure."""
    if summary["metric"].isin(["ms_rules", "ms_features", "ms_sort"]).any():
        return ("Stages as in Canuto et al. (2013), Table VII: rules (lazy rule generation), "
                "features (metric computation), model (application of the ranker), sort; "
                "diversify: xTReD's re-ranking (out of model). "
                "`ms_*`: batched; `online_ms_*`: one object at a time.")
    return ("`ms_model`: scoring per test query, batched; `fit_seconds`: fitting the "
            "reported model.")


def paired_test_table(per_object: pd.DataFrame, method: TestMethod, settings: Significance,
                average_folds: bool) -> list[str]:
    """The heading and table of one paired test of every pair of methods."""
    tests = significance(per_object, method=method, average_folds=average_folds,
                         n_resamples=settings.n_resamples, seed=settings.seed)
    tests = tests.assign(**{c: tests[c].map(lambda p: f"{p:.2e}") for c in ("p_value", "p_holm")})
    pairs = "per-object means over the folds" if average_folds else "per-object values, all folds"
    name = (f"randomization test (sign flips: {settings.n_resamples} drawn with seed "
            f"{settings.seed}, or all 2^n when fewer; statistic: the mean difference)"
            if method == "randomization" else str(method))
    return [f"## Paired {name} of every pair of methods ({pairs}; p_holm: Holm-corrected over "
            "the pairs of each metric; d_z: mean difference / its standard deviation)", "",
            markdown_table(tests.round(4))]


def is_timing_metric(metric: str) -> bool:
    """Whether a results metric is a timing (reported in its own table)."""
    return metric.startswith(("ms_", "online_ms_")) or metric == "fit_seconds"


def interval_cell(mean: float, half: float) -> str:
    """A ``mean ± half-width`` cell; ``n/a`` for the half-width of one value (NaN).

    Example:
        >>> interval_cell(0.25, 0.0123), interval_cell(0.25, float("nan"))
        ('0.2500 ± 0.0123', '0.2500 ± n/a')
    """
    return f"{mean:.4f} ± {'n/a' if math.isnan(half) else f'{half:.4f}'}"


def summary_table(summary: pd.DataFrame) -> str:
    """Methods as rows, metrics as columns, cells ``mean ± half-width``."""
    metrics = list(dict.fromkeys(summary["metric"]))
    table = summary.assign(
        cell=[interval_cell(m, c) for m, c in zip(summary["mean"], summary["ci"], strict=True)]
    ).pivot(index="method", columns="metric", values="cell")
    table = table.loc[list(dict.fromkeys(summary["method"])), metrics].fillna("–")  # not measured
    return markdown_table(table.reset_index())


WIDEST_TABLE = 8
"""Metric columns of one table; more are split into a table per metric family."""


def quality_tables(summary: pd.DataFrame) -> list[str]:
    """The quality table, or, above :data:`WIDEST_TABLE` metrics, one table per family.

    A family is a metric's name before ``@`` (``tagrec_mrr`` of ``tagrec_mrr@10``), in the
    order the metrics come, so that each table stays about one screen wide.

    Example:
        >>> frame = pd.DataFrame({"method": "m", "metric": [f"{f}@{k}" for f in "ab"
        ...                       for k in range(1, 6)], "mean": 0.5, "ci": 0.0})
        >>> [line for line in quality_tables(frame) if line.startswith("###")]
        ['### a', '### b']
    """
    metrics = list(dict.fromkeys(summary["metric"]))
    if len(metrics) <= WIDEST_TABLE:
        return [summary_table(summary)]
    families = summary["metric"].str.split("@").str[0]
    lines: list[str] = []
    for family in dict.fromkeys(families):
        lines += [f"### {family}", "", summary_table(summary[families == family]), ""]
    return lines[:-1]


def _coverage_table(results: pd.DataFrame) -> str:
    """Per method: test objects, and ``n (share)`` without candidates and without gold ones.

    Means over the folds: of the objects, of the counts (each fold's share times its objects)
    and of the shares.
    """
    wide = results[results["metric"].isin(COVERAGE_METRICS)].pivot_table(
        index=["method", "fold"], columns="metric", values="value", sort=False,
    ).reindex(columns=list(COVERAGE_METRICS))
    rows = []
    for method, group in wide.groupby(level="method", sort=False):
        objects = group["evaluated_objects"]
        row = {"method": method, "objects": f"{objects.mean():.0f}"}
        for metric, label in (("no_candidates", "no candidates"),
                              ("no_gold_candidates", "no gold among candidates")):
            share = group[metric]
            row[label] = f"{(share * objects).mean():.0f} ({100 * share.mean():.1f}%)"
        rows.append(row)
    return markdown_table(pd.DataFrame(rows))


def markdown_table(frame: pd.DataFrame) -> str:
    """Renders a frame as a GitHub markdown table (no extra dependency)."""
    header = "| " + " | ".join(str(c) for c in frame.columns) + " |"
    rule = "|" + "|".join("---" for _ in frame.columns) + "|"
    body = ["| " + " | ".join(str(v) for v in row) + " |" for row in frame.itertuples(index=False)]
    return "\n".join([header, rule, *body])
