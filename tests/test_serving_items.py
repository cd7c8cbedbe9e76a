"""A fitted item recommender as one artifact: task=fit, the Python API, the CLI and the service."""

import json
import shutil

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_serving import JSON_VALUES, serving
from test_train import compose_cfg

from tagtorch.data.splits import p_core
from tagtorch.data.synthetic import generate_folksonomy
from tagtorch.data.text import TextProcessor
from tagtorch.errors import UnreadableFileError
from tagtorch.itemrec.baselines import TwoDimensional
from tagtorch.itemrec.pitf import PITF
from tagtorch.recommend import main as recommend_main
from tagtorch.serving import ItemRecommender, Recommender, TagRecommender
from tagtorch.train import run_task

P = 3


@pytest.fixture(scope="module")
def fitted(tmp_path_factory):
    raw = generate_folksonomy(n_objects=400, seed=7)
    processor = TextProcessor(cache=False)
    folksonomy = processor.apply(raw)
    titles = {str(o): str(t) for o, t in zip(raw.objects, raw.texts["title"], strict=True)}
    recommender = ItemRecommender.fit(folksonomy, processor, TwoDimensional(), titles=titles,
                                      p=P, val_fraction=0.2, seed=1)
    folder = recommender.save(tmp_path_factory.mktemp("artifact") / "synthetic-2d")
    return folksonomy, recommender, folder


def tagged_items(folksonomy, user: str) -> set[str]:
    """The raw ids of the items ``user`` tagged in the p-core, from the assignments."""
    core = p_core(folksonomy, P)
    a = core.assignments
    codes = a.loc[core.users[a["user"].to_numpy()].astype(str) == user, "object"]
    return {str(core.objects[c]) for c in codes.unique()}


def reference(recommender, user: str, tag_scores: dict[str, torch.Tensor], k: int
              ) -> list[tuple[str, float]]:
    """The ``k`` best untagged items of ``sum_t w_t s(u, ., t)``, ranked by a plain loop."""
    total = sum(weight * scores for weight, scores in tag_scores.values())
    known = recommender.known[recommender.user_codes[user]].tolist()
    ranked = sorted(((float(total[i]), i) for i in range(len(total)) if i not in known),
                    key=lambda pair: (-pair[0], pair[1]))
    return [(recommender.items[i], s) for s, i in ranked[:k]]


def test_a_user_and_a_tag_get_the_model_s_best_untagged_items(fitted):
    folksonomy, recommender, _ = fitted
    for user in recommender.users[:5]:
        code = recommender.user_codes[user]
        tag = recommender.tags[int(recommender.profile.tags[code][0])]
        got = recommender.recommend_items(user=user, tag=tag, k=8)
        scores = recommender.model.score(torch.tensor([code]),
                                         torch.tensor([recommender.tag_codes[tag]]))[0]
        want = reference(recommender, user, {tag: (1.0, scores)}, 8)
        assert [i for i, _ in got.items] == [i for i, _ in want]
        np.testing.assert_allclose([s for _, s in got.items], [s for _, s in want], rtol=1e-5)
        assert not {i for i, _ in got.items} & tagged_items(folksonomy, user)


def test_a_user_alone_gets_the_profile_aggregation(fitted):
    """``sum_t P(t | u) s(u, i, t)`` with ``P(t | u)`` counted from the core's assignments."""
    folksonomy, recommender, _ = fitted
    core = p_core(folksonomy, P)
    a = core.assignments
    for user in recommender.users[:4]:
        code = recommender.user_codes[user]
        mine = a[core.users[a["user"].to_numpy()].astype(str) == user]
        shares = mine["tag"].value_counts(normalize=True)
        tag_scores = {}
        for tag_code, share in shares.items():
            tag = str(core.tags[tag_code])
            scores = recommender.model.score(torch.tensor([code]),
                                             torch.tensor([recommender.tag_codes[tag]]))[0]
            tag_scores[tag] = (share, scores)
        got = recommender.recommend_items(user=user, k=6)
        want = reference(recommender, user, tag_scores, 6)
        assert [i for i, _ in got.items] == [i for i, _ in want]
        np.testing.assert_allclose([s for _, s in got.items], [s for _, s in want], rtol=1e-4)


def test_items_come_with_their_raw_titles(fitted):
    _, recommender, _ = fitted
    raw = generate_folksonomy(n_objects=400, seed=7)
    titles = dict(zip(raw.objects.astype(str), raw.texts["title"], strict=True))
    got = recommender.recommend_items(user=recommender.users[0], k=5)
    assert got.titles == [titles[item] for item, _ in got.items]


def test_unknown_users_and_tags_get_an_empty_list_and_a_reason(fitted):
    recommender = fitted[1]
    nobody = recommender.recommend_items(user="nobody-at-all")
    assert nobody.items == [] and "unknown user" in nobody.reason
    no_tag = recommender.recommend_items(user=recommender.users[0], tag="never-seen-tag")
    assert no_tag.items == [] and "unknown tag" in no_tag.reason


@pytest.mark.parametrize(("call", "message"), [
    (lambda r: r.recommend_items(user=r.users[0], k=0), "k must be"),
    (lambda r: r.recommend_items(user=3), "user must be"),
    (lambda r: r.recommend_items(user=""), "user must be"),
    (lambda r: r.recommend_items(user=r.users[0], tag=["rock"]), "tag must be"),
    (lambda r: r.recommend_items_batch([{"user": "1", "genre": "x"}]), "unknown fields"),
    (lambda r: r.recommend_items_batch(["1"]), "query 0"),
])
def test_bad_input_gets_a_clear_error(fitted, call, message):
    with pytest.raises(ValueError, match=message):
        call(fitted[1])


def test_the_saved_folder_reads_back_the_same(fitted, tmp_path):
    _, recommender, folder = fitted
    loaded = Recommender.load(folder)
    assert isinstance(loaded, ItemRecommender)
    for user in recommender.users[:3]:
        assert loaded.recommend_items(user=user) == recommender.recommend_items(user=user)
    copy = tmp_path / "copy"
    shutil.copytree(folder, copy)
    manifest = json.loads((copy / "manifest.json").read_text())
    manifest["model_class"] = "tagtorch.rankers.latre.LatreWTS"  # not an item model's module
    (copy / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(UnreadableFileError, match="not in"):
        ItemRecommender.load(copy)
    with pytest.raises(UnreadableFileError, match="expected"):
        TagRecommender.load(folder)
    with pytest.raises(UnreadableFileError, match="no such file"):
        Recommender.load(tmp_path)


def test_task_fit_with_an_item_model_and_the_cli(tmp_path, capsys):
    cfg = compose_cfg(tmp_path, ["task=fit", "data.n_objects=400", "model=pitf",
                                 "task.p=3", "trainer.max_epochs=2"])
    (folder,) = run_task(cfg)
    assert folder == tmp_path / "checkpoints" / "recommenders" / "synthetic-pitf"
    recommender = Recommender.load(folder)
    assert isinstance(recommender.model, PITF)
    user = recommender.users[0]
    tag = recommender.display[int(recommender.profile.tags[0][0])]
    capsys.readouterr()
    assert recommend_main([str(folder), "--user", user, "--tag", tag, "-k", "3", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    want = recommender.recommend_items(user=user, tag=tag, k=3)
    assert [entry["item"] for entry in out["items"]] == [i for i, _ in want.items]
    assert recommend_main([str(folder), "--user", user]) == 0
    assert capsys.readouterr().out.splitlines()[0].split() == ["item", "title", "score"]
    csv = tmp_path / "queries.csv"
    csv.write_text(f"user,tag\n{user},{tag}\n{user},\nnobody,\n")
    assert recommend_main([str(folder), "--csv", str(csv), "--json", "-k", "2"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [len(r["items"]) for r in rows] == [2, 2, 0] and "unknown user" in rows[2]["reason"]
    assert recommend_main([str(folder), "--tags", "rock"]) == 2
    assert "this one recommends items" in capsys.readouterr().err
    assert recommend_main([str(folder)]) == 2


@pytest.fixture(scope="module")
def server(fitted):
    with serving(fitted[2]) as url:
        yield url


def test_the_service_answers_as_the_api_does(fitted, server):
    import httpx

    recommender = fitted[1]
    user = recommender.users[2]
    tag = recommender.display[int(recommender.profile.tags[2][0])]
    for body in ({"user": user, "k": 4}, {"user": user, "tag": tag}):
        response = httpx.post(f"{server}/v1/items", json=body, timeout=30)
        assert response.status_code == 200, response.text
        want = recommender.recommend_items(**body)
        assert response.json() == json.loads(json.dumps(want.as_dict()))
    info = httpx.get(f"{server}/v1/info", timeout=10).json()
    assert info["kind"] == "items" and info["users"] == len(recommender.users)
    wrong = httpx.post(f"{server}/v1/tags", json={"tags": ["x"]}, timeout=10)
    assert wrong.status_code == 404 and "/v1/items" in wrong.json()["detail"]
    page = httpx.get(f"{server}/", timeout=10).text
    assert 'fetch("/v1/items"' in page and 'id="user"' in page


ITEM_FIELDS = st.sampled_from(["user", "tag", "k", "tags", "title"])


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=st.dictionaries(ITEM_FIELDS, JSON_VALUES, max_size=4) | JSON_VALUES)
def test_fuzzed_item_requests_never_get_a_5xx(server, body):
    import httpx

    response = httpx.post(f"{server}/v1/items", json=body, timeout=60)
    assert response.status_code < 500, (body, response.text)
