import numpy as np
import pandas as pd
import pytest
from scipy import stats

from tagtorch.evaluation.report import (
    Significance,
    headline_section,
    headline_table,
    holm,
    markdown_report,
    significance,
    summarize,
)


def make_results():
    rng = np.random.default_rng(0)
    rows, per_object = [], []
    for method, shift in [("base", 0.0), ("better", 0.1)]:
        for fold in range(5):
            values = np.clip(rng.random(30) * 0.5 + shift, 0, 1)
            per_object += [{"method": method, "fold": fold, "object": fold * 100 + i,
                            "metric": "ndcg@5", "value": v} for i, v in enumerate(values)]
            rows.append({"method": method, "fold": fold, "metric": "ndcg@5",
                         "value": values.mean()})
    return pd.DataFrame(rows), pd.DataFrame(per_object)


def test_summary_is_the_t_interval_over_folds():
    results, _ = make_results()
    summary = summarize(results).set_index("method")
    folds = results.query("method == 'better'")["value"].to_numpy()
    half = 2.776445105 * folds.std(ddof=1) / np.sqrt(5)  # t_{0.975, 4} from a table
    assert summary.loc["better", "mean"] == pytest.approx(folds.mean())
    assert summary.loc["better", "ci"] == pytest.approx(half, rel=1e-6)
    assert summary.loc["better", "folds"] == 5


def test_significance_pairs_objects_across_folds():
    _, per_object = make_results()
    table = significance(per_object)
    base = per_object.query("method == 'base'").sort_values(["fold", "object"])["value"]
    better = per_object.query("method == 'better'").sort_values(["fold", "object"])["value"]
    expected = stats.ttest_rel(base.to_numpy(), better.to_numpy())
    row = table.iloc[0]
    assert (row["method_a"], row["method_b"], row["n"]) == ("base", "better", 150)
    assert row["statistic"] == pytest.approx(expected.statistic)
    assert row["p_value"] == pytest.approx(expected.pvalue)
    assert row["p_holm"] == pytest.approx(expected.pvalue)  # one pair: nothing to correct
    assert row["mean_difference"] == pytest.approx((base.to_numpy() - better.to_numpy()).mean())


def test_significance_on_means_over_folds_counts_each_object_once():
    rng = np.random.default_rng(1)
    rows = []
    for fold in range(3):  # the same 20 objects on every fold (sampler seeds)
        for method, shift in (("a", 0.0), ("b", 0.05)):
            rows += [{"method": method, "fold": fold, "object": i, "metric": "mrr",
                      "value": float(rng.random() + shift)} for i in range(20)]
    per_object = pd.DataFrame(rows)
    row = significance(per_object, average_folds=True).iloc[0]
    means = per_object.groupby(["method", "object"])["value"].mean()
    expected = stats.ttest_rel(means["a"].to_numpy(), means["b"].to_numpy())
    assert row["n"] == 20
    assert row["p_value"] == pytest.approx(expected.pvalue)
    assert significance(per_object).iloc[0]["n"] == 60


def test_holm_by_hand():
    # sorted p: 0.01 (x3 = 0.03), 0.02 (x2 = 0.04), 0.04 (x1 = 0.04); monotone max
    assert holm([0.04, 0.01, 0.02]).tolist() == pytest.approx([0.04, 0.03, 0.04])
    # a large first p caps the rest: 0.3 x 3 = 0.9, then max(0.9, 0.4 x 2) = 0.9, 0.5
    assert holm([0.3, 0.4, 0.5]).tolist() == pytest.approx([0.9, 0.9, 0.9])


def test_markdown_report_has_both_tables():
    results, per_object = make_results()
    text = markdown_report(results, per_object, title="T")
    assert text.startswith("# T")
    assert "| base |" in text and "| better |" in text
    assert "Paired ttest of every pair" in text
    single = markdown_report(results.query("method == 'base'"), per_object, title="T")
    assert "Paired" not in single


def test_comparison_plot_is_written(tmp_path):
    from tagtorch.evaluation.plots import plot_comparison

    results, _ = make_results()
    path = plot_comparison(results, "ndcg@5", tmp_path / "ndcg.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(ValueError, match="no values"):
        plot_comparison(results, "p@5", tmp_path / "p.png")


def test_notebook_runs_on_a_report_folder(tmp_path, monkeypatch):
    import json
    from pathlib import Path

    results, per_object = make_results()
    results.to_csv(tmp_path / "results.csv", index=False)
    per_object.to_csv(tmp_path / "per_object.csv.gz", index=False)
    monkeypatch.setenv("TAGTORCH_REPORT_DIR", str(tmp_path))
    notebook = Path(__file__).parents[1] / "notebooks" / "compare_methods.ipynb"
    cells = json.loads(notebook.read_text())["cells"]
    assert all(not c.get("outputs") for c in cells if c["cell_type"] == "code")
    namespace: dict = {}
    for cell in cells:
        if cell["cell_type"] == "code":
            exec("".join(cell["source"]), namespace)
    assert (tmp_path / "ndcg@5_notebook.png").is_file()
    assert list(namespace["tests"]["method_a"]) == ["base"]


def test_significance_leaves_out_methods_without_common_objects():
    _, per_object = make_results()
    other = per_object.query("method == 'better'").assign(method="other",
                                                         object=lambda f: f["object"] + 10_000)
    table = significance(pd.concat([per_object, other]))
    assert table[["method_a", "method_b"]].values.tolist() == [["base", "better"]]


def test_a_metric_one_method_lacks_is_a_dash():
    results, _ = make_results()
    extra = pd.DataFrame([{"method": "base", "fold": f, "metric": "mrr", "value": 0.5}
                          for f in range(5)])
    text = markdown_report(pd.concat([results, extra]), title="T")
    assert "| better | " in text and text.split("| better | ")[1].split("\n")[0].endswith("| – |")


def test_metric_against_a_setting_is_drawn(tmp_path):
    from PIL import Image

    from tagtorch.evaluation.plots import plot_against_setting

    rows = [{"method": m, "fold": f, "metric": "mrr@10", "value": v + 0.01 * f}
            for m, v in (("lda_z100", 0.1), ("lda_z200", 0.2), ("bm25", 0.15)) for f in range(3)]
    path = plot_against_setting(pd.DataFrame(rows), "mrr@10", "n_topics",
                                {"lda_z100": 100, "lda_z200": 200}, tmp_path / "z.png")
    assert Image.open(path).size[0] > 100
    with pytest.raises(ValueError, match="no values"):
        plot_against_setting(pd.DataFrame(rows), "s@1", "n_topics", {}, tmp_path / "x.png")


def test_one_fold_shows_no_interval():
    results, per_object = make_results()
    one = results.query("fold == 0")
    text = markdown_report(one, per_object.query("fold == 0"), title="T")
    assert "± 0.0000" not in text and "± nan" not in text
    row = text.split("| better | ")[1].split("\n")[0]
    mean = one.query("method == 'better'")["value"].iloc[0]
    assert row.startswith(f"{mean:.4f} ± n/a"), row
    assert "1 fold: one value gives no interval (n/a)" in text
    assert "± n/a" not in markdown_report(results, title="T")  # five folds: intervals


def test_one_fold_charts_draw_no_whisker(tmp_path):
    from tagtorch.evaluation.plots import plot_against_setting, plot_comparison

    one = make_results()[0].query("fold == 0")
    assert plot_comparison(one, "ndcg@5", tmp_path / "a.png").read_bytes()[:4] == b"\x89PNG"
    path = plot_against_setting(one, "ndcg@5", "x", {"base": 1, "better": 2}, tmp_path / "b.png")
    assert path.read_bytes()[:4] == b"\x89PNG"


def test_effect_size_column_and_randomization_table():
    _, per_object = make_results()
    base = per_object.query("method == 'base'").sort_values(["fold", "object"])["value"]
    better = per_object.query("method == 'better'").sort_values(["fold", "object"])["value"]
    d = base.to_numpy() - better.to_numpy()
    t_row = significance(per_object).iloc[0]
    assert t_row["d_z"] == pytest.approx(d.mean() / d.std(ddof=1))
    rows = significance(per_object, method="randomization", n_resamples=2000, seed=3).iloc[0]
    assert rows["statistic"] == pytest.approx(d.mean()) and rows["n"] == 150
    # |mean d| is 6.2 standard errors (t): no drawn sign assignment reaches it, p = 1 / 2001
    assert rows["p_value"] == pytest.approx(1 / 2001)
    default = markdown_report(*make_results(), title="T")
    assert "Paired ttest" in default and "randomization" not in default and "d_z" in default
    both = markdown_report(*make_results(), title="T",
                           significance={"test": "both", "n_resamples": 2000})
    assert "Paired ttest" in both and "Paired randomization test (sign flips: 2000" in both
    only = markdown_report(*make_results(), title="T", significance={"test": "randomization"})
    assert "Paired ttest" not in only and "Paired randomization" in only
    with pytest.raises(ValueError, match=r"significance\.test"):
        markdown_report(*make_results(), significance={"test": "sign"})


def test_coverage_table_by_hand():
    results, _ = make_results()
    coverage = {  # method: per fold (evaluated objects, no candidates, no gold candidates)
        "base": [(10, 0.3, 0.5), (20, 0.25, 0.45)],  # counts 3, 5 and 5, 9
        "better": [(10, 0.1, 0.2), (20, 0.05, 0.1)],  # counts 1, 1 and 2, 2
    }
    rows = [{"method": m, "fold": f, "metric": metric, "value": value}
            for m, folds in coverage.items() for f, values in enumerate(folds)
            for metric, value in zip(("evaluated_objects", "no_candidates",
                                      "no_gold_candidates"), values, strict=True)]
    text = markdown_report(pd.concat([results, pd.DataFrame(rows)]), title="T")
    main, coverage_part = text.split("## Candidate coverage (mean over folds)")
    assert "no_candidates" not in main and "evaluated_objects" not in main
    assert "| base | 15 | 4 (27.5%) | 7 (47.5%) |" in coverage_part
    assert "| better | 15 | 1 (7.5%) | 2 (15.0%) |" in coverage_part
    assert "## Candidate coverage" not in markdown_report(results, title="T")


def test_candidate_coverage_of_a_hand_built_set():
    import torch

    from tagtorch.candidates.candidate_set import CandidateSet
    from tagtorch.evaluation.tag_recommendation import candidate_coverage

    # 5 objects: two candidates with one gold; none; three without gold; none; one gold
    mask = torch.tensor([[1, 1, 0], [0, 0, 0], [1, 1, 1], [0, 0, 0], [1, 0, 0]], dtype=bool)
    labels = torch.tensor([[0, 1, 0], [0, 0, 0], [0, 0, 0], [0, 0, 0], [1, 0, 0]]).float()
    test = CandidateSet(torch.arange(5), torch.where(mask, 7, -1), torch.zeros(5, 3, 0),
                        labels, mask, torch.full((5,), 2), ())
    assert candidate_coverage(test) == pytest.approx(
        {"evaluated_objects": 5, "no_candidates": 2 / 5, "no_gold_candidates": 3 / 5})


def test_tag_recommendation_reports_each_methods_candidate_coverage():
    from functools import partial

    from tagtorch.candidates.latre import LatreCandidates
    from tagtorch.data.synthetic import generate_folksonomy
    from tagtorch.data.terms import TermIndex
    from tagtorch.data.text import TextProcessor
    from tagtorch.evaluation.tag_recommendation import TagRecommendationProtocol
    from tagtorch.rankers.single_feature import FeatureRanker

    folksonomy = TextProcessor(cache=False).apply(generate_folksonomy(n_objects=300, seed=5))
    protocol = TagRecommendationProtocol(folds=[0], device="cpu", online_objects=0,
                                         trec=False)
    sets = {"candidates": LatreCandidates(max_rule_candidates=30, device="cpu"),
            "few": LatreCandidates(max_rule_candidates=1, fields=[], device="cpu")}
    result = protocol.evaluate(folksonomy, sets["candidates"],
                               {"wide": partial(FeatureRanker, feature="sum_1"),
                                "narrow": partial(FeatureRanker, feature="sum_1")},
                               candidate_sets={"few": sets["few"]},
                               method_candidates={"narrow": "few"})
    got = result.results.set_index(["method", "metric"])["value"]
    fold = protocol.splits(folksonomy)[0]
    terms = TermIndex.from_folksonomy(folksonomy)
    for method, name in (("wide", "candidates"), ("narrow", "few")):
        test = sets[name].unfitted().fit(fold.train_objects, fold.train_tags, terms)(fold.test)
        # by hand: an object has no candidate, or none of its candidate tags is a gold tag
        empty = no_gold = 0
        for i, gold in enumerate(fold.test.gold_tags):
            tags = set(test.tags[i][test.mask[i]].tolist())
            empty += not tags
            no_gold += not tags & set(gold.tolist())
        n = len(fold.test)
        assert got[method, "evaluated_objects"] == n
        assert got[method, "no_candidates"] == pytest.approx(empty / n)
        assert got[method, "no_gold_candidates"] == pytest.approx(no_gold / n)
    assert got["narrow", "no_candidates"] > 0  # the case is not trivial
    assert got["narrow", "no_gold_candidates"] > got["wide", "no_gold_candidates"]
    assert "## Candidate coverage" in result.report


def three_methods() -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per-object values of three methods on two folds of four queries, and fold means."""
    rng = np.random.default_rng(3)
    values = {"weak": rng.random(8) * 0.3, "best": 0.4 + rng.random(8) * 0.5,
              "middle": 0.2 + rng.random(8) * 0.4}
    per_object = pd.DataFrame([{"method": m, "fold": i // 4, "object": f"q{i % 4}",
                                "metric": "ndcg@10", "value": v[i]}
                               for m, v in values.items() for i in range(8)])
    results = per_object.groupby(["method", "fold", "metric"], sort=False, as_index=False
                                 )["value"].mean()
    return results, per_object


def test_the_headline_ranks_best_first_with_tests_against_the_best_by_hand():
    results, per_object = three_methods()
    lines = headline_table(summarize(results), per_object, "ndcg@10", Significance())
    table = [line.split(" | ") for line in "\n".join(lines).splitlines()
             if line.startswith("| ") and "rank" not in line]
    assert [row[1] for row in table] == ["best", "middle", "weak"]
    wide = per_object.pivot_table(index=["fold", "object"], columns="method", values="value")
    p = {m: stats.ttest_rel(wide[m], wide["best"]).pvalue for m in ("middle", "weak")}
    low, high = sorted(p, key=p.get)  # Holm over two comparisons, by hand
    holm_of = {low: min(1.0, 2 * p[low])}
    holm_of[high] = min(1.0, max(holm_of[low], p[high]))
    for row in table[1:]:
        assert float(row[4].rstrip(" |")) == pytest.approx(holm_of[row[1]], rel=1e-2)
        difference = (wide[row[1]] - wide["best"]).mean()
        assert float(row[3]) == pytest.approx(difference, abs=1e-4)
    assert table[0][3] == "–"


def test_the_report_opens_with_the_headline_and_the_section_reads_back():
    results, per_object = three_methods()
    report = markdown_report(results, per_object, title="t", headline_metric="ndcg@10")
    section = headline_section(report)
    assert section.startswith("## Best first by ndcg@10")
    assert section.splitlines()[-1].startswith("| 3 | weak |")
    assert report.index(section) < report.index("## Paired")
    assert headline_section(markdown_report(results, per_object, title="t")) == ""


def test_a_long_figure_title_stays_inside_the_figure(tmp_path, monkeypatch):
    """The card's figure had its title cut at both edges."""
    from tagtorch.evaluation import plots

    seen = []
    save = plots._save

    def check(fig, path):
        fig.canvas.draw()
        box = fig.get_suptitle() and fig._suptitle.get_window_extent()
        assert fig.axes[0].get_window_extent().y1 < box.y0  # no overlap with the bars
        seen.append((box.x0, box.x1, box.y1, fig.bbox.width, fig.bbox.height))
        return save(fig, path)

    monkeypatch.setattr(plots, "_save", check)
    results, _ = three_methods()
    title = ("ndcg@10: Tag-based item recommendation on the 5-core of HetRec 2011 Last.fm "
             "(5 seeds as folds), per-user queries")
    plots.plot_comparison(results, "ndcg@10", tmp_path / "f.png", title=title)
    x0, x1, top, width, height = seen[0]
    assert x0 >= 0 and x1 <= width and top <= height


def test_quality_against_time_draws_each_methods_means(tmp_path, monkeypatch):
    """The figure of docs/neural_vs_trees.md: the scattered points are the methods' means."""
    import matplotlib.pyplot as plt

    from tagtorch.evaluation import plots

    rows = [("rf", f, "ndcg@5", 0.3 + f / 100) for f in range(2)]
    rows += [("rf", f, "fit_seconds", 10.0 * (f + 1)) for f in range(2)]
    rows += [("mlp", f, "ndcg@5", 0.2) for f in range(2)]
    rows += [("mlp", f, "fit_seconds", 4.0) for f in range(2)]
    results = pd.DataFrame(rows, columns=["method", "fold", "metric", "value"])
    drawn = []
    original = plt.Axes.scatter

    def spy(ax, x, y, *args, **kwargs):
        drawn.append(dict(zip(x.index, zip(x, y, strict=True), strict=True)))
        return original(ax, x, y, *args, **kwargs)

    monkeypatch.setattr(plt.Axes, "scatter", spy)
    path = plots.plot_quality_against_time({"run": results}, "ndcg@5", tmp_path / "q.png")
    assert path.read_bytes()[:4] == b"\x89PNG"
    assert drawn == [{"mlp": (4.0, 0.2), "rf": (15.0, pytest.approx(0.305))}]
    with pytest.raises(ValueError, match="lack 'map'"):
        plots.plot_quality_against_time({"run": results}, "map", tmp_path / "x.png")
