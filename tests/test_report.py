import numpy as np
import pandas as pd
import pytest
from scipy import stats

from tagtorch.evaluation.report import holm, markdown_report, significance, summarize


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
