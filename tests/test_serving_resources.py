"""Issue 53: resource ranking has ``tt.fit`` and a recommender of its own, served like the others.

The reference is Okapi BM25 written out by hand over the assignment table (the formula of
:mod:`tagtorch.resources.bm25`'s docstring, Robertson and Zaragoza 2009), never the ranker's
own scores; the service and the command line must answer what the Python object answers.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from collections import Counter

import httpx
import pandas as pd
import pytest
from conftest import serving

import tagtorch as tt
from tagtorch.errors import UnreadableFileError

TAGS = ["rock", "jazz", "pop", "blue", "folk", "metal"]


@pytest.fixture(scope="module")
def folk():
    """Resources r0..r29 tagged by 40 users from six tags that Porter leaves as they are."""
    rows = []
    for user in range(40):
        for resource in range(30):
            if (user * 7 + resource * 3) % 5 == 0:
                for j in range(1 + (user + resource) % 3):
                    rows.append((f"u{user}", f"r{resource}", TAGS[(resource + j * user) % 6],
                                 1_000_000 + user * 100 + resource))
    frame = pd.DataFrame(rows, columns=["user", "object", "tag", "timestamp"])
    return tt.Folksonomy.from_frame(frame, name="handmade")


def bm25_by_hand(frame: pd.DataFrame, query: list[str], k1: float = 1.2, b: float = 0.75
                 ) -> dict[str, float]:
    """BM25 of every resource for ``query`` from the raw table (module docstring)."""
    documents = {r: Counter(g["tag"]) for r, g in frame.groupby("object")}
    lengths = {r: sum(c.values()) for r, c in documents.items()}
    average = sum(lengths.values()) / len(lengths)
    scores = {}
    for resource, counts in documents.items():
        total = 0.0
        for word in dict.fromkeys(query):
            n_w = sum(word in c for c in documents.values())
            idf = math.log(1 + (len(documents) - n_w + 0.5) / (n_w + 0.5))
            tf = counts.get(word, 0)
            total += idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * lengths[resource] / average))
        scores[resource] = total
    return scores


@pytest.fixture(scope="module")
def fitted(folk, tmp_path_factory):
    folder = tmp_path_factory.mktemp("resources")
    return tt.fit(folk, "bm25", output_dir=folder, overrides=["model.bm25.device=cpu"])


def test_fit_gives_a_resource_recommender_that_ranks_as_bm25_by_hand(folk, fitted):
    assert isinstance(fitted, tt.ResourceRecommender)
    frame = folk.assignments.assign(object=folk.objects[folk.assignments["object"]],
                                    tag=folk.tags[folk.assignments["tag"]])
    expected = bm25_by_hand(frame, ["rock", "jazz"])
    result = fitted.recommend_resources(["Rock", "jazz", "no-such-tag"], k=5)
    best = sorted(expected.items(), key=lambda item: -item[1])[:5]
    assert [r for r, _ in result.resources] == [r for r, _ in best]
    assert [s for _, s in result.resources] == pytest.approx([s for _, s in best], rel=1e-5)
    assert result.unknown_tags == ["no-such-tag"] and result.reason is None


def test_a_query_without_a_known_tag_gets_a_reason_and_bad_input_an_error(fitted):
    empty = fitted.recommend_resources(["nothing-known"])
    assert empty.resources == [] and "none of the query's tags" in (empty.reason or "")
    with pytest.raises(ValueError, match="query 0: expected a list of tags"):
        fitted.recommend_resources("rock")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="k must be"):
        fitted.recommend_resources(["rock"], k=0)


def test_the_folder_reads_back_and_refuses_an_altered_vocabulary(fitted, tmp_path):
    folder = fitted.save(tmp_path / "copy")
    again = tt.Recommender.load(folder)
    assert isinstance(again, tt.ResourceRecommender)
    assert again.recommend_resources(["pop"]).as_dict() == \
        fitted.recommend_resources(["pop"]).as_dict()
    vocabulary = folder / "vocabulary.json"
    names = json.loads(vocabulary.read_text())
    names["resources"] = names["resources"][:-1]
    vocabulary.write_text(json.dumps(names))
    with pytest.raises(UnreadableFileError, match=r"vocabulary\.json"):
        tt.Recommender.load(folder)


@pytest.mark.integration  # an end-to-end run (the default run keeps its 8 minutes)
def test_the_command_line_answers_as_the_object(fitted, tmp_path):
    folder = fitted.save(tmp_path / "cli")
    done = subprocess.run([sys.executable, "-m", "tagtorch.recommend", str(folder), "--tags",
                           "rock,jazz", "-k", "3", "--json"], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout) == fitted.recommend_resources(["rock", "jazz"], k=3).as_dict()
    wrong = subprocess.run([sys.executable, "-m", "tagtorch.recommend", str(folder), "--user",
                            "u1"], capture_output=True, text=True, timeout=120)
    assert wrong.returncode == 2 and "--tags only" in wrong.stderr


@pytest.mark.integration
def test_the_service_answers_as_the_object(fitted, tmp_path):
    folder = fitted.save(tmp_path / "served")
    with serving(folder, "--read-only", token=False) as url:
        answer = httpx.post(f"{url}/v1/resources", json={"tags": ["rock", "jazz"], "k": 3},
                            timeout=30)
        assert answer.status_code == 200
        assert answer.json() == fitted.recommend_resources(["rock", "jazz"], k=3).as_dict()
        wrong = httpx.post(f"{url}/v1/tags", json={"tags": ["rock"]}, timeout=30)
        assert wrong.status_code == 404 and "/v1/resources" in wrong.json()["detail"]
        refused = httpx.post(f"{url}/v1/resources", json={"tags": [], "k": 3}, timeout=30)
        assert refused.status_code == 422
        info = httpx.get(f"{url}/v1/info", timeout=30).json()
        assert info["kind"] == "resources" and info["resources"] == len(fitted.resources)
        assert "resources for a tag query" in httpx.get(url, timeout=30).text
