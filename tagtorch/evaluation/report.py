"""Reports: means with 95% confidence intervals over folds, and paired significance tests."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from tagtorch.evaluation.stats import TestMethod, confidence_interval, paired_test


def summarize(results: pd.DataFrame, confidence: float = 0.95) -> pd.DataFrame:
    """Mean and confidence half-width over folds of every (method, metric).

    Args:
        results: columns ``method, fold, metric, value`` (one row per method, fold and metric).
        confidence: confidence level of the t interval.

    Returns:
        Columns ``method, metric, mean, ci, folds``, methods and metrics in first-seen order.
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
                 average_folds: bool = False) -> pd.DataFrame:
    """Paired tests of every pair of methods on per-object values, Holm-corrected per metric.

    Args:
        per_object: columns ``method, fold, object, metric, value``; pairs are formed in the
            methods' first-seen order (``method_a`` before ``method_b``).
        method: ``"ttest"`` (paired t-test) or ``"wilcoxon"`` (signed-rank test).
        average_folds: pair each object's mean over the folds (seeds) instead of its value on
            each fold: for repeated runs over the same objects (sampler seeds), where pairing
            every (fold, object) would count one query several times.

    Returns:
        Columns ``method_a, method_b, metric, mean_difference`` (a minus b), ``statistic,
        p_value, p_holm, n``; ``p_holm`` adjusts over all pairs of one metric. Pairs of methods
        with fewer than two objects in common (evaluated on different folds) are left out.
    """
    if average_folds:
        per_object = per_object.assign(fold=0)  # pivot_table's mean averages the folds
    wide = per_object.pivot_table(index=["fold", "object", "metric"], columns="method",
                                  values="value", dropna=False)
    methods = list(dict.fromkeys(per_object["method"]))
    rows: list[dict[str, Any]] = []
    for metric, group in wide.groupby(level="metric", sort=False):
        first = len(rows)
        for i, a in enumerate(methods):
            for b in methods[i + 1:]:
                x, y = group[a].to_numpy(), group[b].to_numpy()
                if int((~(np.isnan(x) | np.isnan(y))).sum()) < 2:
                    continue  # no two objects in common (e.g. run on different folds)
                test = paired_test(x, y, method=method)
                rows.append({"method_a": a, "method_b": b, "metric": metric,
                             "mean_difference": test.mean_difference,
                             "statistic": test.statistic, "p_value": test.p_value, "n": test.n})
        adjusted = holm([r["p_value"] for r in rows[first:]])
        for row, p in zip(rows[first:], adjusted, strict=True):
            row["p_holm"] = float(p)
    return pd.DataFrame(rows, columns=["method_a", "method_b", "metric", "mean_difference",
                                       "statistic", "p_value", "p_holm", "n"])


def markdown_report(
    results: pd.DataFrame,
    per_object: pd.DataFrame | None = None,
    title: str = "Results",
    confidence: float = 0.95,
    test: TestMethod = "ttest",
    average_folds: bool = False,
) -> str:
    """A markdown report: tables of ``mean ± half-width`` per method and metric.

    Quality metrics and timings (:func:`is_timing_metric`) get one table each. With two or more
    methods and per-object values, another table gives paired significance tests of every pair
    of methods, Holm-corrected.
    """
    summary = summarize(results, confidence)
    is_timing = summary["metric"].map(is_timing_metric)
    n_folds = int(summary["folds"].max()) if len(summary) else 0
    lines = [
        f"# {title}",
        "",
        f"Mean ± half-width of the {confidence:.0%} confidence interval (t distribution) over "
        f"{n_folds} folds.",
        "",
        _summary_table(summary[~is_timing]),
    ]
    if is_timing.any():
        staged = summary["metric"].isin(["ms_rules", "ms_features", "ms_sort"]).any()
        note = ("Stages as in Canuto et al. (2013), Table VII: rules (lazy rule generation), "
                "features (metric computation), model (application of the ranker), sort; "
                "diversify: xTReD's re-ranking (out of model). "
                "`ms_*`: batched; `online_ms_*`: one object at a time." if staged else
                "`ms_model`: scoring per test query, batched; `fit_seconds`: fitting the "
                "reported model.")
        lines += ["", "## Time per test object (ms; fit in seconds)", "", note,
                  "", _summary_table(summary[is_timing])]
    methods = list(dict.fromkeys(results["method"]))
    if per_object is not None and len(methods) > 1:
        tests = significance(per_object, method=test, average_folds=average_folds)
        tests = tests.assign(**{c: tests[c].map(lambda p: f"{p:.2e}")
                                for c in ("p_value", "p_holm")})
        pairs = ("per-object means over the folds" if average_folds
                 else "per-object values, all folds")
        lines += ["", f"## Paired {test} of every pair of methods ({pairs}; "
                  "p_holm: Holm-corrected over the pairs of each metric)", "",
                  _markdown_table(tests.round(4))]
    return "\n".join(lines) + "\n"


def is_timing_metric(metric: str) -> bool:
    """Whether a results metric is a timing (reported in its own table)."""
    return metric.startswith(("ms_", "online_ms_")) or metric == "fit_seconds"


def _summary_table(summary: pd.DataFrame) -> str:
    """Methods as rows, metrics as columns, cells ``mean ± half-width``."""
    metrics = list(dict.fromkeys(summary["metric"]))
    table = summary.assign(
        cell=[f"{m:.4f} ± {c:.4f}" for m, c in zip(summary["mean"], summary["ci"], strict=True)]
    ).pivot(index="method", columns="metric", values="cell")
    table = table.loc[list(dict.fromkeys(summary["method"])), metrics].fillna("–")  # not measured
    return _markdown_table(table.reset_index())


def _markdown_table(frame: pd.DataFrame) -> str:
    """Renders a frame as a GitHub markdown table (no extra dependency)."""
    header = "| " + " | ".join(str(c) for c in frame.columns) + " |"
    rule = "|" + "|".join("---" for _ in frame.columns) + "|"
    body = ["| " + " | ".join(str(v) for v in row) + " |" for row in frame.itertuples(index=False)]
    return "\n".join([header, rule, *body])
