"""A fitted tag recommender as one artifact: task=fit, the Python API and the CLI."""

import json
import shutil

import numpy as np
import pytest
import torch
from conftest import AUTH, CANDIDATES, serving
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_train import compose_cfg

from tagtorch.candidates.latre import LatreCandidates
from tagtorch.data.ragged import Ragged
from tagtorch.data.splits import TagQueries
from tagtorch.data.text import TextProcessor
from tagtorch.errors import UnreadableFileError
from tagtorch.rankers.latre import LatreWTS
from tagtorch.recommend import main as recommend_main
from tagtorch.serving.tags import MAX_TEXT_CHARS, TagRecommender
from tagtorch.train import run_task


def raw_object(raw, folksonomy, obj):
    """The raw texts and tags of object ``obj`` (codes of the normalized folksonomy)."""
    texts = {name: str(raw.texts[name].iloc[obj]) for name in folksonomy.text_fields}
    tag_codes = folksonomy.object_tags()[obj]
    return texts, [str(folksonomy.tags[t]) for t in tag_codes], tag_codes


def test_d_and_v_split_the_objects(fitted):
    _, folksonomy, recommender, _ = fitted
    d = set(recommender.train_objects.tolist())
    eligible = int((folksonomy.object_tags().lengths >= 2).sum())
    assert recommender.info["v_objects"] == round(0.25 * eligible)
    assert recommender.info["d_objects"] == len(d) == folksonomy.n_objects - recommender.info[
        "v_objects"] - int((folksonomy.object_tags().lengths == 0).sum())


def test_a_raw_object_is_scored_as_the_protocol_scores_its_code(fitted):
    """Raw strings through the text pipeline and vocabulary give the lists of the TermIndex."""
    raw, folksonomy, recommender, _ = fitted
    for obj in range(5):
        texts, tag_strings, tag_codes = raw_object(raw, folksonomy, obj)
        given = tag_strings[: max(1, len(tag_strings) // 2)]
        got = recommender.recommend_tags(tags=given, k=10, **texts)
        codes = np.sort(tag_codes[: len(given)])
        lists = recommender.generator(TagQueries(np.array([obj]), Ragged.from_lists([codes]),
                                                 Ragged.from_lists([[]])))
        scores = recommender.ranker.score(lists)[0][lists.mask[0]]
        tags = lists.tags[0][lists.mask[0]]
        order = torch.argsort(scores, descending=True, stable=True)[:10]
        want = [recommender.display[int(tags[i])] for i in order]
        assert [tag for tag, _ in got.tags] == want
        np.testing.assert_allclose([s for _, s in got.tags], scores[order].tolist(), rtol=1e-6)


def test_unknown_input_is_reported_and_no_candidate_is_an_empty_list(fitted):
    raw, folksonomy, recommender, _ = fitted
    texts, tag_strings, _ = raw_object(raw, folksonomy, 0)
    got = recommender.recommend_tags(tags=[*tag_strings[:1], "never-seen-tag"],
                                     title="zzqx " + texts["title"])
    assert got.unknown_tags == ["never-seen-tag"] and "zzqx" in got.unknown_words
    assert got.tags and got.reason is None
    empty = recommender.recommend_tags(tags=["never-seen-tag"], title="zzqx")
    assert empty.tags == [] and "no candidate" in empty.reason


@pytest.mark.parametrize(("call", "message"), [
    (lambda r: r.recommend_tags(k=0), "k must be"),
    (lambda r: r.recommend_tags(genre="rock"), "unknown fields"),
    (lambda r: r.recommend_tags(tags="rock"), "list of strings"),
    (lambda r: r.recommend_tags(tags=[3]), "must be strings"),
    (lambda r: r.recommend_tags(title=5), "must be a string"),
    (lambda r: r.recommend_tags(title="a" * (MAX_TEXT_CHARS + 1)), "characters"),
    (lambda r: r.recommend_tags_batch(["rock"]), "object 0"),
])
def test_bad_input_gets_a_clear_error(fitted, call, message):
    with pytest.raises(ValueError, match=message):
        call(fitted[2])


def test_the_saved_folder_reads_back_the_same(fitted):
    raw, folksonomy, recommender, folder = fitted
    loaded = TagRecommender.load(folder)
    for obj in range(3):
        texts, tag_strings, _ = raw_object(raw, folksonomy, obj)
        assert (loaded.recommend_tags(tags=tag_strings[:1], **texts)
                == recommender.recommend_tags(tags=tag_strings[:1], **texts))
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["fingerprint"] == folksonomy.fingerprint()
    assert set(manifest["files"]) == {"data.npz", "vocabulary.json", "ranker"}


def test_an_altered_or_untrusted_artifact_is_refused(fitted, tmp_path):
    folder = tmp_path / "copy"
    shutil.copytree(fitted[3], folder)
    with open(folder / "data.npz", "ab") as handle:
        handle.write(b"x")
    with pytest.raises(UnreadableFileError, match=r"data\.npz"):
        TagRecommender.load(folder)
    shutil.rmtree(folder)
    shutil.copytree(fitted[3], folder)
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["ranker_class"] = "os.system"
    (folder / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(UnreadableFileError, match="not in"):
        TagRecommender.load(folder)


def test_task_fit_writes_an_artifact_the_cli_reads(tmp_path, capsys):
    cfg = compose_cfg(tmp_path, ["task=fit", "data.n_objects=300",
                                 "candidates.max_rule_candidates=30"])
    (folder,) = run_task(cfg)
    assert folder == tmp_path / "checkpoints" / "recommenders" / "synthetic-latre_wts"
    vocabulary = json.loads((folder / "vocabulary.json").read_text())
    tags = ",".join(vocabulary["display"][:2])
    capsys.readouterr()
    assert recommend_main([str(folder), "--tags", tags, "-k", "3", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert len(out["tags"]) == 3 and out["reason"] is None
    assert recommend_main([str(folder), "--tags", tags, "--title", "the"]) == 0
    assert capsys.readouterr().out.splitlines()[0].split() == ["tag", "score"]
    csv = tmp_path / "objects.csv"
    csv.write_text(f'tags,title\n"{tags}",x\nnope,\n')
    assert recommend_main([str(folder), "--csv", str(csv), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert len(rows) == 2 and rows[1]["tags"] == [] and rows[1]["unknown_tags"] == ["nope"]
    assert recommend_main([str(folder), "--text", "genre=rock"]) == 2
    assert "unknown fields" in capsys.readouterr().err
    assert recommend_main([str(tmp_path / "missing")]) == 2


def test_task_fit_uses_the_methods_own_candidate_set(tmp_path):
    """A method named in method_candidates is fitted with that set, as the evaluation runs it."""
    cfg = compose_cfg(tmp_path, ["task=fit", "data.n_objects=300", "model=[latre_wts,rf]",
                                 "+candidates@candidate_sets.small=latre",
                                 "candidate_sets.small.max_rule_candidates=7",
                                 "candidate_sets.small.text_candidates=false",
                                 "+method_candidates.rf=small"])
    folders = {folder.name: folder for folder in run_task(cfg)}
    manifests = {name: json.loads((folder / "manifest.json").read_text())
                 for name, folder in folders.items()}
    assert [m["candidate_set"] for m in manifests.values()] == ["candidates", "small"]
    paper, small = (m["settings"]["candidates"] for m in manifests.values())
    assert (paper["max_rule_candidates"], paper["text_candidates"]) == (200, True)
    assert (small["max_rule_candidates"], small["text_candidates"]) == (7, False)
    recommender = TagRecommender.load(folders["synthetic-rf"])
    vocabulary = json.loads((folders["synthetic-rf"] / "vocabulary.json").read_text())
    lists = recommender.generator(TagQueries(np.zeros(1, dtype=np.int64), Ragged.from_lists(
        [[0]]), Ragged.from_lists([[]])), {name: Ragged.from_lists([[]])
                                           for name in vocabulary["fields"]})
    assert 0 < int(lists.mask.sum()) <= 7


def test_profile_neighbours_are_refused_with_the_reason(with_profiles):
    with pytest.raises(ValueError, match="new objects do not have"):
        TagRecommender.fit(with_profiles[2], TextProcessor(cache=False),
                           LatreCandidates(**CANDIDATES, profile_neighbours={"k": 10}),
                           LatreWTS(alpha=0.9))


@pytest.fixture(scope="module")
def server(fitted, tmp_path_factory):
    copy = tmp_path_factory.mktemp("served") / "artifact"
    shutil.copytree(fitted[3], copy)
    with serving(copy) as url:
        yield url


def test_the_service_answers_as_the_api_does(fitted, server):
    import httpx

    raw, folksonomy, recommender, _ = fitted
    texts, tag_strings, _ = raw_object(raw, folksonomy, 1)
    body = {"tags": tag_strings[:2], "title": texts["title"], "k": 4}
    response = httpx.post(f"{server}/v1/tags", json=body, timeout=30)
    assert response.status_code == 200
    want = recommender.recommend_tags(tags=tag_strings[:2], k=4, title=texts["title"])
    got = response.json()
    assert [(t["tag"], pytest.approx(t["score"])) for t in got["tags"]] == want.tags
    info = httpx.get(f"{server}/v1/info", timeout=10).json()
    assert info["data"] == "synthetic" and info["text_fields"] == ["title", "description"]
    assert "/v1/tags" in httpx.get(f"{server}/openapi.json", timeout=10).json()["paths"]


@pytest.mark.parametrize("body", [
    {"tags": "rock"}, {"k": 0}, {"k": "five"}, {"genre": "x"}, {"texts": {"genre": "rock"}},
    {"tags": [1, 2]}, [], "not json", {"title": None, "description": 3},
])
def test_malformed_requests_get_4xx_never_5xx(server, body):
    import httpx

    if isinstance(body, str):
        response = httpx.post(f"{server}/v1/tags", content=body, timeout=30,
                              headers={"content-type": "application/json"})
    else:
        response = httpx.post(f"{server}/v1/tags", json=body, timeout=30)
    assert 400 <= response.status_code < 500, response.text
    assert response.json()["detail"]


def test_an_oversized_body_gets_413(server):
    import httpx

    response = httpx.post(f"{server}/v1/tags", json={"title": "x" * 30000}, timeout=30)
    assert response.status_code == 413


def test_concurrent_requests_are_all_answered(fitted, server):
    from concurrent.futures import ThreadPoolExecutor

    import httpx

    raw, folksonomy, _, _ = fitted
    bodies = []
    for obj in range(32):
        texts, tag_strings, _ = raw_object(raw, folksonomy, obj)
        bodies.append({"tags": tag_strings[:1], "title": texts["title"]})
    with httpx.Client(timeout=60) as client, ThreadPoolExecutor(8) as pool:
        codes = list(pool.map(lambda b: client.post(f"{server}/v1/tags", json=b).status_code,
                              bodies))
    assert codes == [200] * 32


def rare_tag(folksonomy, recommender) -> str:
    """A tag of one object: a new tag posted with it ranks within the best 50 candidates."""
    uses = np.bincount(folksonomy.object_tags().values)
    return recommender.display[int(np.flatnonzero(uses == 1)[0])]


def post_new_tag(recommender, known: str, n: int = 3):
    """Posts n new objects tagged ``known`` and a tag no object had before."""
    return recommender.add_posts([{"user": "u1", "object": f"new-{i}",
                                   "tags": [known, "Brandnewtag"], "title": "fresh words"}
                                  for i in range(n)])


def test_posts_reach_the_next_recommendation_and_survive_a_reload(fitted, tmp_path):
    _, folksonomy, _, folder = fitted
    copy = tmp_path / "artifact"
    shutil.copytree(folder, copy)
    recommender = TagRecommender.load(copy)
    known = rare_tag(folksonomy, recommender)
    before = recommender.recommend_tags(tags=[known], k=1000)
    assert "Brandnewtag" not in dict(before.tags)
    n_d = len(recommender.train_objects)
    assert post_new_tag(recommender, known) == 3
    assert len(recommender.train_objects) == n_d + 3
    after = recommender.recommend_tags(tags=[known], k=1000)
    assert "Brandnewtag" in dict(after.tags)
    assert recommender.recommend_tags(tags=["brandnewtag"]).unknown_tags == []
    lines = (copy / "journal.jsonl").read_text().splitlines()
    assert len(lines) == 1  # one record per batch
    assert [post["object"] for post in json.loads(lines[0])["posts"]] == [
        "new-0", "new-1", "new-2"]
    reloaded = TagRecommender.load(copy)
    assert reloaded.recommend_tags(tags=[known], k=1000) == after
    with pytest.raises(ValueError, match="post 0"):
        recommender.add_posts([{"user": "", "object": "x", "tags": ["a"]}])
    with pytest.raises(ValueError, match="no tags"):
        recommender.add_posts([{"user": "u", "object": "x", "tags": []}])
    assert len((copy / "journal.jsonl").read_text().splitlines()) == 1  # refused: not journaled


def test_a_torn_last_journal_line_is_skipped(fitted, tmp_path):
    copy = tmp_path / "artifact"
    shutil.copytree(fitted[3], copy)
    recommender = TagRecommender.load(copy)
    post_new_tag(recommender, recommender.display[0], n=1)
    with open(copy / "journal.jsonl", "a") as handle:
        handle.write('{"posts": [{"user": "u", "obj')
    assert len(TagRecommender.load(copy).train_objects) == len(recommender.train_objects)


def test_the_demo_page_is_served(server):
    import httpx

    page = httpx.get(f"{server}/", timeout=10)
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert '<form id="ask">' in page.text and 'fetch("/v1/tags"' in page.text


def chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        found = shutil.which(name)
        if found:
            return found
    return None


def test_the_demo_page_in_a_headless_browser(fitted, server, tmp_path):
    """The form, filled and sent in a real browser, shows the API's recommendations."""
    playwright = pytest.importorskip("playwright.sync_api",
                                     reason="playwright is not installed")
    browser_path = chromium()
    if browser_path is None:
        pytest.skip("no Chromium from the system packages on this machine")
    raw, folksonomy, recommender, _ = fitted
    texts, tag_strings, _ = raw_object(raw, folksonomy, 0)
    want = recommender.recommend_tags(tags=tag_strings[:2], title=texts["title"], k=4)
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=browser_path, args=[
            "--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--no-first-run"])
        page = browser.new_page()
        page.goto(f"{server}/")
        page.fill("#title", texts["title"])
        page.fill("#tags", ", ".join(tag_strings[:2]))
        page.fill("#k", "4")
        page.click("button")
        page.wait_for_selector("#result td", timeout=30_000)
        rows = page.eval_on_selector_all(
            "#result tr", "rows => rows.map(r => [...r.cells].map(c => c.textContent))")
        page.screenshot(path=str(tmp_path / "demo.png"))
        browser.close()
    assert rows[0] == ["tag", "score"]
    assert [row[0] for row in rows[1:]] == [tag for tag, _ in want.tags]
    assert [float(row[1]) for row in rows[1:]] == pytest.approx(
        [score for _, score in want.tags], abs=1e-4)
    assert (tmp_path / "demo.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20)
    | st.floats(allow_nan=False, allow_infinity=False),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                 max_size=4),
    max_leaves=10)
FIELDS = st.sampled_from(["tags", "title", "description", "texts", "k", "user", "object",
                          "posts", "genre"])


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=st.dictionaries(FIELDS, JSON_VALUES, max_size=5) | JSON_VALUES,
       path=st.sampled_from(["/v1/tags", "/v1/posts"]))
def test_fuzzed_requests_never_get_a_5xx(server, body, path):
    import httpx

    response = httpx.post(f"{server}{path}", json=body, headers=AUTH, timeout=60)
    assert response.status_code < 500, (body, response.text)
