"""Reports: means with 95% confidence intervals over folds, and paired significance tests."""

from __future__ import annotations

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


def significance(per_object: pd.DataFrame, baseline: str,
                 method: TestMethod = "ttest") -> pd.DataFrame:
    """Paired tests of every method against ``baseline`` on per-object values of each metric.

    Args:
        per_object: columns ``method, fold, object, metric, value``.
        baseline: the method the others are compared with.
        method: ``"ttest"`` (paired t-test) or ``"wilcoxon"`` (signed-rank test).

    Returns:
        Columns ``method, metric, mean_difference, statistic, p_value, n``.
    """
    wide = per_object.pivot_table(index=["fold", "object", "metric"], columns="method",
                                  values="value", dropna=False)
    rows = []
    for other in [m for m in per_object["method"].unique() if m != baseline]:
        for metric, group in wide.groupby(level="metric", sort=False):
            test = paired_test(group[other].to_numpy(), group[baseline].to_numpy(), method=method)
            rows.append({"method": other, "metric": metric,
                         "mean_difference": test.mean_difference, "statistic": test.statistic,
                         "p_value": test.p_value, "n": test.n})
    return pd.DataFrame(rows, columns=["method", "metric", "mean_difference", "statistic",
                                       "p_value", "n"])


def markdown_report(
    results: pd.DataFrame,
    per_object: pd.DataFrame | None = None,
    title: str = "Results",
    confidence: float = 0.95,
    test: TestMethod = "ttest",
) -> str:
    """A markdown report: tables of ``mean ± half-width`` per method and metric.

    Quality metrics and timings (:func:`is_timing_metric`) get one table each. With two or more
    methods and per-object values, another table gives paired significance tests of every
    method against the first one.
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
        lines += ["", "## Time per test object (ms; fit in seconds)", "",
                  "Stages as in Canuto et al. (2013), Table VII: rules (lazy rule generation), "
                  "features (metric computation), model (application of the ranker), sort. "
                  "`ms_*`: batched; `online_ms_*`: one object at a time.",
                  "", _summary_table(summary[is_timing])]
    methods = list(dict.fromkeys(results["method"]))
    if per_object is not None and len(methods) > 1:
        tests = significance(per_object, baseline=methods[0], method=test)
        tests = tests.assign(p_value=tests["p_value"].map(lambda p: f"{p:.2e}"))
        lines += ["", f"## Paired {test} against {methods[0]} (per-object values, all folds)", "",
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
    table = table.loc[list(dict.fromkeys(summary["method"])), metrics]
    return _markdown_table(table.reset_index())


def _markdown_table(frame: pd.DataFrame) -> str:
    """Renders a frame as a GitHub markdown table (no extra dependency)."""
    header = "| " + " | ".join(str(c) for c in frame.columns) + " |"
    rule = "|" + "|".join("---" for _ in frame.columns) + "|"
    body = ["| " + " | ".join(str(v) for v in row) + " |" for row in frame.itertuples(index=False)]
    return "\n".join([header, rule, *body])
