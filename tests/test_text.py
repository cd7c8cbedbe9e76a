import numpy as np
import pandas as pd

from tagtorch.data.folksonomy import Folksonomy
from tagtorch.data.text import TextProcessor, english_stopwords

# Outputs of Martin Porter's published algorithm (tartarus.org vocabulary/output pairs).
PORTER = {
    "caresses": "caress", "ponies": "poni", "cats": "cat", "agreed": "agre",
    "plastered": "plaster", "motoring": "motor", "hopping": "hop", "happy": "happi",
    "relational": "relat", "generalizations": "gener", "running": "run", "rocks": "rock",
}


def test_porter_stems_match_the_published_algorithm():
    p = TextProcessor()
    assert {w: p.stem(w) for w in PORTER} == PORTER


def test_terms_lowercase_tokenize_drop_stopwords_and_stem():
    p = TextProcessor()
    # "don't" loses its apostrophe and is a stopword
    assert p.terms("The Ponies AND the cats, don't run!") == ["poni", "cat", "run"]
    assert p.terms("") == []
    assert "the" in english_stopwords() and "rock" not in english_stopwords()


def test_options_turn_steps_off():
    p = TextProcessor(lowercase=False, remove_stopwords=False, stemmer=None)
    assert p.terms("The Rocks") == ["The", "Rocks"]
    assert TextProcessor(min_token_length=3).terms("a bb ccc dddd") == ["ccc", "dddd"]


def test_tags_and_text_meet_after_normalization():
    p = TextProcessor()
    assert p.normalize_tag("Rock") == p.normalize_tag("rocks") == p.terms("Rocks")[0]
    assert p.normalize_tag("Hard  Rocks") == "hard rock"
    assert p.normalize_tag("The Who") == "the who"  # only stopwords: kept, not dropped
    assert p.normalize_tag("!!!") == ""


def test_apply_merges_tags_and_normalizes_texts():
    frame = pd.DataFrame({
        "user": [1, 1, 2, 3],
        "object": ["a", "a", "a", "b"],
        "tag": ["Rock", "rocks", "ROCK", "!!"],
    })
    texts = pd.DataFrame({"title": ["The Rolling Stones", "Nothing"]}, index=["a", "b"])
    f = Folksonomy.from_frame(frame, texts=texts)
    g = TextProcessor().apply(f)
    assert list(g.tags) == ["rock"]
    # user 1's "Rock" and "rocks" on object a merge; the "!!" assignment vanishes
    assert sorted(map(tuple, g.assignments[["user", "object", "tag"]].to_numpy().tolist())) == [
        (0, 0, 0), (1, 0, 0)]
    assert list(g.texts["title"]) == ["roll stone", "noth"]
    assert np.array_equal(g.objects, f.objects)


def test_processed_text_is_cached_on_disk(tmp_path, monkeypatch):
    frame = pd.DataFrame({"user": [1, 2], "object": ["a", "b"], "tag": ["Rocks", "Jazz"]})
    texts = pd.DataFrame({"title": ["Rolling Stones", "Miles"]}, index=["a", "b"])
    f = Folksonomy.from_frame(frame, texts=texts)
    first = TextProcessor(cache_dir=str(tmp_path)).apply(f)
    assert len(list(tmp_path.glob("*.npz"))) == 1

    def no_stemming(self, token):
        raise AssertionError("the cache should have been used")

    monkeypatch.setattr(TextProcessor, "stem", no_stemming)
    second = TextProcessor(cache_dir=str(tmp_path)).apply(f)
    assert list(second.tags) == list(first.tags) == ["jazz", "rock"]
    assert list(second.texts["title"]) == ["roll stone", "mile"]
    # other settings or other raw texts never read that entry
    changed = Folksonomy.from_frame(frame, texts=texts.assign(title=["Rolling", "Miles"]))
    try:
        TextProcessor(cache_dir=str(tmp_path)).apply(changed)
    except AssertionError as error:
        assert "cache should have been used" in str(error)
    else:
        raise AssertionError("a changed text must not hit the cache")
    monkeypatch.undo()
    TextProcessor(cache_dir=str(tmp_path), stemmer=None).apply(f)
    assert len(list(tmp_path.glob("*.npz"))) == 2
