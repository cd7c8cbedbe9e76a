"""Serving a personalized tag recommender: the API, the artifact, the CLI and the real service.

The reference is MP_u,r computed by hand from the core's raw assignments (dicts of counts, a
softmax per user and resource), not by the recommender's code.
"""

from __future__ import annotations

import json
import math
import shutil

import numpy as np
import pytest
from conftest import AUTH
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_serving import JSON_VALUES, serving

from tagtorch.data.splits import p_core
from tagtorch.data.synthetic import generate_folksonomy
from tagtorch.data.text import TextProcessor
from tagtorch.errors import UnreadableFileError
from tagtorch.posts.baselines import MostPopularUserResource
from tagtorch.posts.data import posts_of
from tagtorch.recommend import main as recommend_main
from tagtorch.serving import PostRecommender, Recommender

P = 2


@pytest.fixture(scope="module")
def fitted(tmp_path_factory):
    processor = TextProcessor(cache=False)
    folksonomy = processor.apply(generate_folksonomy(n_objects=300, seed=3))
    recommender = PostRecommender.fit(folksonomy, processor, MostPopularUserResource(), p=P)
    folder = recommender.save(tmp_path_factory.mktemp("artifact") / "synthetic-mp_ur")
    return folksonomy, recommender, folder


def by_hand(folksonomy, user: str | None, resource: str | None, k: int
            ) -> list[tuple[str, float]]:
    """TagRec's MP_u,r (β = 0.5) of the raw ids from the core's posts, in plain Python.

    The user's raw tag counts plus 0.5 · the softmax of the resource's; equal scores in
    TagRec's order: its map holds the user's tags by first use, then the resource's others by
    theirs (posts by user, then time, then resource; a post's tags by code), and the later
    insertion comes first.
    """
    core = p_core(folksonomy, P)
    posts = posts_of(core)
    users, objects = core.users.astype(str), core.objects.astype(str)
    by_user: dict[int, int] = {}
    by_resource: dict[int, int] = {}  # dicts keep the order of first use
    for i in range(len(posts)):
        for tag in posts.tags[i].tolist():
            if users[posts.users[i]] == user:
                by_user[tag] = by_user.get(tag, 0) + 1
            if objects[posts.resources[i]] == resource:
                by_resource[tag] = by_resource.get(tag, 0) + 1
    scores = {tag: float(c) for tag, c in by_user.items()}
    if by_resource:
        top = max(by_resource.values())
        total = sum(math.exp(c - top) for c in by_resource.values())
        for tag, c in by_resource.items():
            scores[tag] = scores.get(tag, 0.0) + 0.5 * math.exp(c - top) / total
    place = {tag: i for i, tag in enumerate(scores)}  # insertion order
    ranked = sorted(scores.items(), key=lambda pair: (-pair[1], -place[pair[0]]))[:k]
    return [(str(core.tags[t]), s) for t, s in ranked]


def test_a_post_gets_mp_urs_tags_and_newcomers_get_their_known_part(fitted):
    folksonomy, recommender, _ = fitted
    core = p_core(folksonomy, P)
    a = core.assignments
    for row in (0, 7, 40):
        user = str(core.users[a["user"].iloc[row]])
        resource = str(core.objects[a["object"].iloc[(row * 13) % len(a)]])
        got = recommender.recommend_tags(user, resource, k=6).tags
        want = by_hand(folksonomy, user, resource, 6)
        assert [t for t, _ in got] == [t for t, _ in want]
        np.testing.assert_allclose([s for _, s in got], [s for _, s in want], rtol=1e-9)
    newcomer = recommender.recommend_tags("nobody-knows-me", resource, k=4).tags
    assert [t for t, _ in newcomer] == [t for t, _ in by_hand(folksonomy, None, resource, 4)]
    empty = recommender.recommend_tags("nobody", "nothing", k=4)
    assert empty.tags == [] and "no tag" in empty.reason


def test_the_artifact_loads_to_the_same_answers_and_refuses_altered_files(fitted, tmp_path):
    _, recommender, folder = fitted
    loaded = Recommender.load(folder)
    assert isinstance(loaded, PostRecommender)
    user, resource = recommender.users[3], recommender.resources[5]
    assert loaded.recommend_tags(user, resource).tags == recommender.recommend_tags(
        user, resource).tags
    altered = shutil.copytree(folder, tmp_path / "altered")
    vocabulary = json.loads((altered / "vocabulary.json").read_text())
    vocabulary["users"].append("intruder")
    (altered / "vocabulary.json").write_text(json.dumps(vocabulary))
    with pytest.raises(UnreadableFileError, match=r"vocabulary\.json"):
        Recommender.load(altered)
    with pytest.raises(ValueError, match="k must be"):
        recommender.recommend_tags(user, resource, k=0)
    with pytest.raises(ValueError, match="time"):
        recommender.recommend_tags(user, resource, time=-5)
    with pytest.raises(ValueError, match="unknown fields"):
        recommender.recommend_tags_batch([{"user": user, "resource": resource, "x": 1}])


def test_new_posts_are_learned_and_a_bad_batch_changes_nothing(fitted):
    folksonomy, _, _ = fitted
    processor = TextProcessor(cache=False)
    recommender = PostRecommender.fit(folksonomy, processor, MostPopularUserResource(), p=P)
    before = len(recommender.users)
    with pytest.raises(ValueError, match="post 1"):
        recommender.add_posts([{"user": "newbie", "resource": "r-new", "tags": ["Qwxyzzy"]},
                               {"user": "newbie", "resource": "r-new"}])
    assert len(recommender.users) == before
    added = recommender.add_posts([{"user": "newbie", "resource": "r-new", "tags": ["Qwxyzzy"],
                                    "time": 5}])
    assert added == 1 and len(recommender.users) == before + 1
    got = recommender.recommend_tags("newbie", recommender.resources[0], k=50).tags
    assert "Qwxyzzy" in [t for t, _ in got]  # the user's own new tag, shown as posted
    assert recommender.recommend_tags("someone", "r-new").tags[0][0] == "Qwxyzzy"


def test_the_command_line_answers_as_the_api_does(fitted, capsys):
    _, recommender, folder = fitted
    user, resource = recommender.users[1], recommender.resources[2]
    assert recommend_main([str(folder), "--user", user, "--resource", resource, "-k", "3",
                           "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed == json.loads(json.dumps(recommender.recommend_tags(user, resource,
                                                                        k=3).as_dict()))
    assert recommend_main([str(folder), "--tags", "rock"]) == 2
    assert "tags for a post" in capsys.readouterr().err
    assert recommend_main([str(folder), "--user", user]) == 2
    assert "--user and --resource" in capsys.readouterr().err


@pytest.fixture(scope="module")
def server(fitted):
    with serving(fitted[2]) as url:
        yield url


def test_the_service_answers_posts_and_refuses_objects(fitted, server):
    import httpx

    _, recommender, _ = fitted
    user, resource = recommender.users[4], recommender.resources[1]
    body = {"user": user, "resource": resource, "k": 3, "time": 10**9}
    response = httpx.post(f"{server}/v1/tags", json=body, timeout=30)
    assert response.status_code == 200, response.text
    want = recommender.recommend_tags(user, resource, k=3, time=10**9)
    assert response.json()["tags"] == json.loads(json.dumps(want.as_dict()))["tags"]
    refused = httpx.post(f"{server}/v1/tags", json={"tags": ["rock"]}, timeout=10)
    assert refused.status_code == 422 and "user and resource" in refused.text
    info = httpx.get(f"{server}/v1/info", timeout=10).json()
    assert info["kind"] == "posts" and info["users"] == len(recommender.users)
    assert httpx.post(f"{server}/v1/items", json={"user": user}, timeout=10).status_code == 404
    assert 'id="resource"' in httpx.get(f"{server}/", timeout=10).text


def test_a_refused_post_names_the_fields_the_posts_schema_takes(server):
    """Issue 69: the message offered "object (or resource)"; the schema refuses resource."""
    import re

    import httpx

    def refusal(**fields):
        body = {"posts": [{"user": "u", "tags": ["!!!"], **fields}]}
        response = httpx.post(f"{server}/v1/posts", json=body, headers=AUTH, timeout=30)
        assert response.status_code == 422, response.text  # nothing is journaled
        return response.json()["detail"]

    detail = refusal(object="o", title="a text")
    named = re.fullmatch(r"post 0: 'title' not taken: a post to a personalized tag recommender "
                         r"has (.*), and no texts", detail)
    assert named, detail
    fields = re.findall(r"'(\w+)'", named.group(1))
    assert {"user", "object", "tags"} <= set(fields), detail
    taken = refusal(**{field: {"time": 5}.get(field, "o") for field in fields
                       if field not in ("user", "tags")})
    assert "no tag left" in taken, taken  # past the schema: each field named is taken
    schema = refusal(resource="o")
    assert any(problem["loc"][-1] == "resource" for problem in schema), schema


POST_FIELDS = st.sampled_from(["user", "resource", "time", "k", "tags", "title"])


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=st.dictionaries(POST_FIELDS, JSON_VALUES, max_size=4) | JSON_VALUES)
def test_fuzzed_post_requests_never_get_a_5xx(server, body):
    import httpx

    response = httpx.post(f"{server}/v1/tags", json=body, timeout=60)
    assert response.status_code < 500, (body, response.text)


def test_task_fit_writes_a_personalized_recommender(tmp_path):
    import tagtorch as tt

    recommender = tt.fit(tt.load("synthetic", n_objects=200), "bll_c", p=2,
                         output_dir=tmp_path)
    assert isinstance(recommender, PostRecommender)
    assert recommender.recommend_tags(recommender.users[0], recommender.resources[0]).tags


def test_posts_are_journaled_replayed_and_compacted(fitted, tmp_path):
    _, _, folder = fitted
    copy = shutil.copytree(folder, tmp_path / "artifact")
    served = PostRecommender.load(copy)
    post = {"user": "newbie", "resource": "r-new", "tags": ["Qwxyzzy"], "time": 7}
    assert served.add_posts([post]) == 1
    assert len((copy / "journal.jsonl").read_text().splitlines()) == 1
    with pytest.raises(ValueError, match="post 0"):
        served.add_posts([{"user": "x", "resource": "y"}])  # refused: nothing journaled
    assert len((copy / "journal.jsonl").read_text().splitlines()) == 1
    replayed = PostRecommender.load(copy)  # the journal replayed
    assert replayed.recommend_tags("newbie", "elsewhere").tags[0][0] == "Qwxyzzy"
    assert replayed.compact()
    assert not (copy / "journal.jsonl").exists() or not (copy / "journal.jsonl").read_text()
    again = PostRecommender.load(copy)  # now from the data
    assert "newbie" in again.users
    assert again.recommend_tags("newbie", "elsewhere").tags[0][0] == "Qwxyzzy"
    assert again.add_posts([post]) == 1  # a post already in the data changes nothing
    assert again.recommend_tags("someone", "r-new").tags == replayed.recommend_tags(
        "someone", "r-new").tags


def test_tags_with_line_separators_survive_the_journal_and_compaction(fitted, tmp_path):
    """Issue 71 (and issue 52's restart defect): a journal line is split on newlines only, so a
    tag holding U+2028, U+2029, U+0085 or a C1 control comes back whole from the journal, and
    from the compacted data."""
    _, _, folder = fitted
    copy = shutil.copytree(folder, tmp_path / "artifact")
    tags = ["one\u2028a", "two\u2029b", "three\u0085c", "sci\u008ffi"]
    served = PostRecommender.load(copy)
    assert served.add_posts([{"user": "sep", "resource": "r-sep", "tags": tags, "time": 7}]) == 1
    assert len((copy / "journal.jsonl").read_bytes().split(b"\n")) == 2  # one whole record
    for restarted in (PostRecommender.load(copy), None):
        if restarted is None:
            assert PostRecommender.load(copy).compact()
            restarted = PostRecommender.load(copy)
        answer = [tag for tag, _ in restarted.recommend_tags("sep", "elsewhere", k=10).tags]
        assert sorted(answer[:4]) == sorted(tags)


@pytest.mark.integration  # an end-to-end run (the default run keeps its 8 minutes)
def test_the_service_takes_posts_that_survive_a_restart(fitted, tmp_path):
    import time as clock

    import httpx

    _, _, folder = fitted
    copy = shutil.copytree(folder, tmp_path / "artifact")
    with serving(copy, "--apply-interval", "0.1") as url:  # writes need the token
        body = {"posts": [{"user": "newbie", "object": "r-new", "tags": ["Qwxyzzy"],
                           "time": 9}]}
        assert httpx.post(f"{url}/v1/posts", json=body, timeout=30).status_code == 401
        response = httpx.post(f"{url}/v1/posts", json=body, headers=AUTH, timeout=30)
        assert response.status_code == 200 and response.json()["added"] == 1, response.text
        deadline = clock.monotonic() + 60
        while httpx.get(f"{url}/v1/info", timeout=10).json()["pending_posts"]:
            assert clock.monotonic() < deadline
            clock.sleep(0.1)
        answer = httpx.post(f"{url}/v1/tags", json={"user": "newbie", "resource": "other"},
                            timeout=30).json()
        assert answer["tags"][0]["tag"] == "Qwxyzzy"
        bad = httpx.post(f"{url}/v1/posts", json={"posts": [{"user": "a", "object": "b",
                                                             "tags": ["t"], "title": "x"}]},
                         headers=AUTH, timeout=10)
        assert bad.status_code == 422 and "no texts" in bad.text  # named as the API names it
    with serving(copy, token=False) as url:  # no writes: the journal is replayed
        answer = httpx.post(f"{url}/v1/tags", json={"user": "newbie", "resource": "other"},
                            timeout=30).json()
        assert answer["tags"][0]["tag"] == "Qwxyzzy"


def test_new_posts_keep_a_tagrec_files_line_order(tmp_path):
    """A model from a TagRec file ranks ties by the file's lines; new posts come after them."""
    from tagtorch.data.loaders.tagrec import load_tagrec

    path = tmp_path / "x.txt"  # r1's tags all once: the later first use first (c, a, b)
    path.write_text('"u1";"r1";"10";"b,a"\n"u2";"r1";"11";"c"\n"u3";"r2";"12";"d"\n')
    folksonomy = load_tagrec(path)
    model = MostPopularUserResource(user=False)
    recommender = PostRecommender.fit(folksonomy, TextProcessor(cache=False), model, p=1)
    assert [t for t, _ in recommender.recommend_tags("u9", "r1", k=3).tags] == ["c", "a", "b"]
    recommender.add_posts([{"user": "u4", "resource": "r2", "tags": ["e"], "time": 13}])
    assert [t for t, _ in recommender.recommend_tags("u9", "r1", k=3).tags] == ["c", "a", "b"]
    assert recommender.model.data_.train.source_order is not None


def test_more_journaled_posts_than_one_request_takes_come_back(fitted, tmp_path):
    """Issue 52, serious case 1: 11 acknowledged requests of 1,000 posts each load again."""
    _, _, folder = fitted
    copy = shutil.copytree(folder, tmp_path / "artifact")
    served = PostRecommender.load(copy)
    for request in range(11):
        batch = [{"user": f"bulk{request}-{i}", "resource": "r-bulk", "tags": ["bulky"],
                  "time": 100 + i} for i in range(1000)]
        assert served.add_posts(batch) == 1000
    replayed = PostRecommender.load(copy)  # 11,000 journaled posts, above the request limit
    assert {f"bulk{r}-999" for r in range(11)} <= set(replayed.users)
    assert replayed.recommend_tags("anyone", "r-bulk").tags[0][0] == "bulky"
