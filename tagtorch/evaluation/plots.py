"""Figures for reports: methods' means with confidence whiskers."""

from __future__ import annotations

import textwrap
from collections.abc import Mapping
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import pandas as pd

from tagtorch.evaluation.report import summarize
from tagtorch.storage import atomic_write

TITLE_WIDTH = 64
"""Characters per line of a figure's title (a longer one wraps: the figure is 6.4 inches wide)."""


def _save(fig: plt.Figure, path: str | Path) -> Path:
    """Writes a figure as a PNG file, whole or not at all, and closes it."""
    with atomic_write(path) as partial:
        fig.savefig(partial, dpi=120, format="png")
    plt.close(fig)
    return Path(path)


def _whiskers(summary: pd.DataFrame, confidence: float) -> tuple[pd.DataFrame, str]:
    """The summary ready to draw, and the axis label's words on its whiskers.

    A half-width over one fold is NaN (no interval): it is drawn as no whisker, and the label
    says so.
    """
    one_fold = bool(summary["ci"].isna().any())
    label = f"mean over folds, {confidence:.0%} CI" + ("; one fold: none" if one_fold else "")
    return summary.assign(ci=summary["ci"].fillna(0.0)), label


def plot_comparison(results: pd.DataFrame, metric: str, path: str | Path,
                    confidence: float = 0.95, title: str | None = None) -> Path:
    """Writes a bar chart of each method's mean ``metric`` with its confidence interval.

    Args:
        results: columns ``method, fold, metric, value``.
        metric: the metric to draw (e.g. ``"ndcg@5"``).
        path: the PNG file to write.
        confidence: level of the t interval drawn as whiskers.
        title: the figure title (default: the metric).

    Returns:
        The path written.
    """
    summary = summarize(results[results["metric"] == metric], confidence)
    if summary.empty:
        raise ValueError(f"no values of {metric!r} in the results")
    summary, whiskers = _whiskers(summary.sort_values("mean", ascending=True), confidence)
    fig, ax = plt.subplots(figsize=(6.4, 0.45 * len(summary) + 1.4))
    ax.barh(summary["method"], summary["mean"], xerr=summary["ci"], capsize=4,
            color="#4c72b0", ecolor="black")
    for y, (mean, half) in enumerate(zip(summary["mean"], summary["ci"], strict=True)):
        ax.text(mean + half, y, f"  {mean:.3f}", va="center", fontsize=8)
    ax.set_xlabel(f"{metric} ({whiskers})")
    fig.suptitle(textwrap.fill(title or metric, TITLE_WIDTH), fontsize=10)  # on the figure
    ax.set_xlim(0, min(1.0, float((summary["mean"] + summary["ci"]).max()) * 1.25))
    fig.tight_layout()
    return _save(fig, path)


def plot_against_setting(results: pd.DataFrame, metric: str, setting: str,
                         values: Mapping[str, float], path: str | Path,
                         confidence: float = 0.95) -> Path:
    """A metric against one setting (e.g. topics), other methods as horizontal lines.

    The methods of ``values`` are points of one line at their setting's value (Harvey et al.
    2011, Figure 1: MRR@10 against the number of topics); every other method of ``results`` is
    a horizontal line at its mean. Whiskers and bands: the ``confidence`` t interval over folds.

    Args:
        results: columns ``method, fold, metric, value``.
        metric: the metric to draw.
        setting: the setting's name (the horizontal axis' label).
        values: method -> its value of the setting.
        path: the PNG file to write.
        confidence: level of the intervals.
    """
    summary = summarize(results[results["metric"] == metric], confidence).set_index("method")
    if summary.empty:
        raise ValueError(f"no values of {metric!r} in the results")
    summary, whiskers = _whiskers(summary, confidence)
    points = sorted((float(x), name) for name, x in values.items() if name in summary.index)
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    xs = [x for x, _ in points]
    ys = [summary.loc[name, "mean"] for _, name in points]
    ax.errorbar(xs, ys, yerr=[summary.loc[name, "ci"] for _, name in points], marker="o",
                capsize=3, label=", ".join(dict.fromkeys(n.rstrip("0123456789_z") for _, n in
                                                          points)) or "varied")
    others = [name for name in summary.index if name not in values]
    for name, color in zip(others, plt.rcParams["axes.prop_cycle"].by_key()["color"][1:],
                           strict=False):
        mean, half = summary.loc[name, "mean"], summary.loc[name, "ci"]
        ax.axhline(mean, color=color, linestyle="--", label=name)
        if xs:
            ax.fill_between([min(xs), max(xs)], mean - half, mean + half, color=color,
                            alpha=0.15)
    ax.set_xlabel(setting)
    ax.set_ylabel(f"{metric} ({whiskers})")
    ax.set_title(f"{metric} against {setting}")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return _save(fig, path)


def plot_learning_curves(curves: pd.DataFrame, path: str | Path, x: str = "epoch",
                         series: Mapping[str, str] | None = None,
                         ylabel: str = "DCG@10") -> Path:
    """Per-epoch (or per-iteration) curves of every trained method and seed (one PNG).

    Args:
        curves: columns ``method, seed``, ``x`` and the columns of ``series``.
        path: the PNG file to write.
        x: the column on the horizontal axis.
        series: legend label -> column (default: ``train_dcg@10`` and ``val_dcg@10``).
        ylabel: the vertical axis' label.
    """
    series = dict(series or {"train": "train_dcg@10", "validation": "val_dcg@10"})
    colors = ("#4c72b0", "#dd8452", "#55a868")
    methods = list(dict.fromkeys(curves["method"]))
    fig, axes = plt.subplots(1, len(methods), figsize=(4.2 * len(methods), 3.4), squeeze=False)
    for ax, method in zip(axes[0], methods, strict=True):
        for seed, group in curves[curves["method"] == method].groupby("seed"):
            for (label, column), color in zip(series.items(), colors, strict=False):
                ax.plot(group[x], group[column], color=color, alpha=0.8,
                        label=label if seed == curves["seed"].min() else None)
        ax.set_title(method)
        ax.set_xlabel(x)
        ax.set_ylabel(ylabel)
        ax.legend()
    fig.tight_layout()
    return _save(fig, path)


def plot_tradeoff(curves: pd.DataFrame, path: str | Path, x: str = "val_alpha_ndcg@5",
                  y: str = "val_ndcg@5") -> Path:
    """Relevance against diversity as a tuned setting varies, one curve per method (one PNG).

    The relevance-diversity trade-off of Belém et al. (Figure 2): each method's mean over folds
    of ``y`` (NDCG@5) against ``x`` (alpha-NDCG@5) at each ``value`` of its ``setting``:
    xTReD's ``λ`` from 0 to 1 as a line with its ends labelled, another setting (GP_rnd's
    ``α``) as labelled points.

    Args:
        curves: columns ``method``, ``seed`` (the fold), ``setting`` (its name), ``value``,
            ``x`` and ``y``.
        path: the PNG file to write.
        x: the diversity column (horizontal axis).
        y: the relevance column (vertical axis).
    """
    means = (curves.groupby(["method", "setting", "value"], sort=True)[[x, y]].mean()
             .reset_index())
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    for (method, setting), group in means.groupby(["method", "setting"], sort=False):
        line = "-" if setting == "lam" else ":"
        ax.plot(group[x], group[y], marker="o" if setting == "lam" else "s", markersize=3,
                linestyle=line, label=f"{method} ({setting})")
        labelled = [group.iloc[0], group.iloc[-1]] if setting == "lam" else \
            [row for _, row in group.iterrows()]
        for end in labelled:
            ax.annotate(f"{setting}={end['value']:g}", (end[x], end[y]), fontsize=7,
                        textcoords="offset points", xytext=(4, 4))
    ax.set_xlabel(f"{x} (mean over folds)")
    ax.set_ylabel(f"{y} (mean over folds)")
    ax.set_title(f"{y} against {x} on V")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return _save(fig, path)


def plot_quality_against_time(panels: Mapping[str, pd.DataFrame], metric: str,
                              path: str | Path, time: str = "fit_seconds") -> Path:
    """Each method's mean ``metric`` against its mean ``time``, one panel per run (one PNG).

    A point per method (labelled), the time on a log scale: where a person sees at once which
    method buys its quality with time.

    Args:
        panels: the panel's title -> that run's results (columns ``method, fold, metric,
            value``, the ``results.csv`` of a run folder).
        metric: the quality (vertical axis), e.g. ``"ndcg@5"``.
        path: the PNG file to write.
        time: the timing metric (horizontal axis), e.g. ``"fit_seconds"``.

    Raises:
        ValueError: a run lacks ``metric`` or ``time``.
    """
    fig, axes = plt.subplots(1, len(panels), figsize=(5.2 * len(panels), 4.6), squeeze=False)
    for ax, (title, results) in zip(axes[0], panels.items(), strict=True):
        means = (results[results["metric"].isin([metric, time])]
                 .pivot_table(index="method", columns="metric", values="value", aggfunc="mean"))
        if metric not in means or time not in means:
            raise ValueError(f"{title}: the results lack {metric!r} or {time!r}")
        means = means.dropna()
        ax.scatter(means[time], means[metric], s=18, color="#4c72b0")
        for method, row in means.iterrows():
            ax.annotate(str(method), (row[time], row[metric]), fontsize=6,
                        textcoords="offset points", xytext=(3, 2))
        ax.set_xscale("log")
        ax.set_xlabel(f"{time} (mean over folds, log scale)")
        ax.set_ylabel(f"{metric} (mean over folds)")
        ax.set_title(textwrap.fill(title, TITLE_WIDTH // 2), fontsize=9)
    fig.tight_layout()
    return _save(fig, path)
