"""A seeded run says how long it will take before its first fit (tagtorch.evaluation.timings)."""

from __future__ import annotations

import json
import logging

from hydra.utils import instantiate

import tagtorch.evaluation.timings as timings
from tagtorch.api import compose
from tagtorch.evaluation.timings import TimingLog
from tagtorch.train import run_task

RUN = ["task=itemrec", "text=none", "data.n_objects=300", "task.p=2", "task.seeds=[0,1]",
       "model=[tag_popularity,two_dimensional]", "task.trec=false"]


def announced(caplog) -> str:
    return next(r.getMessage() for r in caplog.records if "fits to run" in r.getMessage())


def shown(seconds: float) -> str:
    """An estimate as the log shows it (issue 72: "about 0.0 min" for a few seconds)."""
    if seconds < 0.5:
        return "under 1 s"
    return f"{seconds:.0f} s" if seconds < 60 else f"{seconds / 60:.1f} min"


def test_a_second_run_estimates_from_the_first_runs_seconds(tmp_path, monkeypatch, caplog):
    path = tmp_path / "timings.jsonl"
    monkeypatch.setenv("TAGTORCH_TIMINGS", str(path))
    caplog.set_level(logging.INFO, logger="tagtorch.evaluation.timings")
    monkeypatch.setattr(timings, "REFERENCE_FILE", tmp_path / "no-reference.json")
    run_task(compose(RUN, tmp_path / "first"))
    assert announced(caplog) == "4 fits to run; none timed before: no estimate yet"
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert len(rows) == 4 and len({r["key"] for r in rows}) == 2
    caplog.clear()
    run_task(compose([*RUN, "task.seeds=[0,1,2]"], tmp_path / "second"))
    latest = {r["key"]: r["seconds"] for r in rows}  # the same size: the latest record each
    expected = 3 * sum(latest.values())
    assert announced(caplog).startswith(
        f"6 fits to run; about {shown(expected)} (6 timed before on this machine;")


def test_a_first_run_estimates_from_the_reference_timings(tmp_path, monkeypatch, caplog):
    """Never timed here: each model class's seconds on the reference machine, scaled by size."""
    monkeypatch.setenv("TAGTORCH_TIMINGS", str(tmp_path / "empty.jsonl"))
    reference = tmp_path / "reference.json"
    reference.write_text(json.dumps({"timings": {
        "ItemRecommendationTask|tagtorch.itemrec.baselines.TagPopularity": [1000, 6.0],
        "ItemRecommendationTask|tagtorch.itemrec.baselines.TwoDimensional": [2000, 3.0]}}))
    monkeypatch.setattr(timings, "REFERENCE_FILE", reference)
    caplog.set_level(logging.INFO, logger="tagtorch.evaluation.timings")
    cfg = compose([*RUN, "+task.tune={two_dimensional: {beta: [0.25, 0.5, 0.75]}}"],
                  tmp_path / "run")
    size = instantiate(cfg.data).n_assignments
    run_task(cfg)
    expected = 2 * (6.0 * size / 1000 + 3 * 3.0 * size / 2000)  # two seeds; a 3-point grid
    assert announced(caplog) == (
        f"4 fits to run; about {shown(expected)} (4 from the reference machine's timings "
        f"(2 cores); scaled to {size:,} tag assignments)")


def _reference(tmp_path, monkeypatch, timings_of: dict[str, list[float]]) -> None:
    monkeypatch.setenv("TAGTORCH_TIMINGS", str(tmp_path / "empty.jsonl"))
    reference = tmp_path / "reference.json"
    reference.write_text(json.dumps({"timings": timings_of}))
    monkeypatch.setattr(timings, "REFERENCE_FILE", reference)


def test_a_tag_recommendation_run_estimates_its_folds(tmp_path, monkeypatch, caplog):
    """The folds task: (fold, method) fits and each fold's candidate set, the reference's
    seconds scaled by tag assignments; a method or set the reference lacks is counted apart; a
    second run reads this run's records."""
    _reference(tmp_path, monkeypatch, {
        "TagRecommendationTask|tagtorch.rankers.latre.LatreWTS": [1000, 4.0],
        "TagRecommendationTask|tagtorch.candidates.latre.LatreCandidates": [1000, 2.0],
        # another set: the same generator class with tag neighbours, not this run's
        "TagRecommendationTask|tagtorch.candidates.latre.LatreCandidates+neighbours": [1, 1e6]})
    caplog.set_level(logging.INFO, logger="tagtorch.evaluation.timings")
    run = ["task=tagrec", "data.n_objects=200", "task.folds=[0,1]", "model=[latre_wts,sum]",
           "task.trec=false", "logger=none"]
    cfg = compose(run, tmp_path / "first")
    size = instantiate(cfg.text).apply(instantiate(cfg.data)).n_assignments  # stemmed tags
    run_task(cfg)
    expected = 2 * 4.0 * size / 1000 + 2 * 2.0 * size / 1000
    assert announced(caplog) == (  # 2 folds x (2 methods + the paper's candidate set)
        f"6 fits to run; about {shown(expected)} (4 from the reference machine's timings "
        f"(2 cores); scaled to {size:,} tag assignments); 2 never timed")
    rows = [json.loads(line) for line in (tmp_path / "empty.jsonl").read_text().splitlines()]
    assert len(rows) == 6 and len({r["key"] for r in rows}) == 3
    caplog.clear()
    run_task(compose(run, tmp_path / "second"))
    assert announced(caplog).startswith("6 fits to run; about ") and \
        "(6 timed before on this machine;" in announced(caplog)


def test_a_letor_run_estimates_by_training_documents(tmp_path, monkeypatch, caplog):
    from tagtorch.candidates.letor import load_letor, write_synthetic_letor

    _reference(tmp_path, monkeypatch, {
        "LetorTask|tagtorch.rankers.ranksvm.RankSVM": [500, 30.0]})
    caplog.set_level(logging.INFO, logger="tagtorch.evaluation.timings")
    folder = write_synthetic_letor(tmp_path / "Fold1", queries=30, mean_documents=10)
    documents = int(load_letor(folder).train.mask.sum())
    run_task(compose(["task=letor", "data=letor", f"data.path={folder}", "model=[ranksvm]",
                      "task.trec=false", "logger=none"], tmp_path / "run"))
    expected = 30.0 * documents / 500
    assert announced(caplog) == (
        f"1 fits to run; about {shown(expected)} (1 from the reference machine's timings "
        f"(2 cores); scaled to {documents:,} training documents)")


def test_the_shipped_reference_covers_the_cards_models_and_every_task():
    table = json.loads(timings.REFERENCE_FILE.read_text())["timings"]
    for model in ("dorank.DoRank", "dorank_plus.DoRankPlus", "pitf.PITF", "ease.EASE"):
        assert f"ItemRecommendationTask|tagtorch.itemrec.{model}" in table
    for model in ("latre.LatreWTS", "trees.RandomForestRanker", "trees.LambdaMARTRanker"):
        assert f"TagRecommendationTask|tagtorch.rankers.{model}" in table
        if "trees" in model:
            assert f"LetorTask|tagtorch.rankers.{model}" in table
    generator = "TagRecommendationTask|tagtorch.candidates.latre.LatreCandidates"
    for sources in ("", "+diversity+distances", "+neighbours+embeddings",  # the experiments' sets
                    "+neighbours+profile_neighbours+embeddings", "+topics+neighbours+embeddings"):
        assert generator + sources in table


def test_the_estimate_scales_the_nearest_size_and_skips_what_is_not_a_record(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text('{"key": "a", "size": 100, "seconds": 1.0}\nnot json\n{"key": "a"}\n'
                    '{"key": "a", "size": 10000, "seconds": 50.0}\n'
                    '{"key": "b", "size": -5, "seconds": 3.0}\n'
                    '{"key": "a", "size": 100, "seconds": NaN}\n')
    log = TimingLog(path)
    assert log.estimate(["a"], 200) == (2.0, 0)  # 100 is nearer than 10000 in log size
    assert log.estimate(["a"], 5000) == (25.0, 0)
    assert log.estimate(["a", "b", "c"], 5000) == (25.0, 2)


def test_a_record_never_writes_through_a_link_and_never_fails_the_run(tmp_path):
    target = tmp_path / "precious.txt"
    target.write_text("keep\n")
    link = tmp_path / "timings.jsonl"
    link.symlink_to(target)
    TimingLog(link).record("k", 10, 1.0)
    assert target.read_text() == "keep\n"
    (tmp_path / "a-file").write_text("")
    TimingLog(tmp_path / "a-file" / "t.jsonl").record("k", 10, 1.0)  # its folder is a file
    assert TimingLog(None).estimate(["k"], 10) == (0.0, 1)


def test_a_large_file_is_cut_to_its_tail(tmp_path, monkeypatch):
    monkeypatch.setattr(timings, "MAX_BYTES", 400)
    monkeypatch.setattr(timings, "READ_BYTES", 200)
    log = TimingLog(tmp_path / "t.jsonl")
    for i in range(20):
        log.record(f"k{i}", 10, float(i))
    text = (tmp_path / "t.jsonl").read_text()
    assert len(text) <= 400 + 60 and '"k19"' in text and '"k0"' not in text
    assert all(json.loads(line)["key"] for line in text.splitlines())


def test_off_keeps_nothing(monkeypatch):
    monkeypatch.setenv("TAGTORCH_TIMINGS", "off")
    assert TimingLog.default().path is None
