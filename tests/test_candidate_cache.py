import torch

from tagtorch.candidates.cache import CandidateCache
from tagtorch.candidates.latre import LatreCandidates
from tagtorch.data.synthetic import generate_folksonomy
from tagtorch.data.terms import TermIndex
from tagtorch.data.text import TextProcessor
from tagtorch.evaluation.tag_recommendation import TagRecommendationProtocol


def test_cache_returns_the_stored_set_and_separates_keys(tmp_path):
    folksonomy = TextProcessor(cache=False).apply(generate_folksonomy(n_objects=200, seed=1))
    fold = TagRecommendationProtocol().splits(folksonomy)[0]
    generator = LatreCandidates(device="cpu").fit(
        fold.train_objects, fold.train_tags, TermIndex.from_folksonomy(folksonomy))
    built = []

    def build():
        built.append(1)
        return generator(fold.test)

    cache = CandidateCache(tmp_path, {"data": folksonomy.fingerprint(), "features": {"l": 3}})
    first = cache.get(0, "test", build)
    second = cache.get(0, "test", build)
    assert len(built) == 1
    for name in ("objects", "tags", "features", "labels", "mask", "n_relevant"):
        assert torch.equal(getattr(first, name), getattr(second, name))
    assert second.feature_names == first.feature_names
    other = CandidateCache(tmp_path, {"data": folksonomy.fingerprint(), "features": {"l": 1}})
    other.get(0, "test", build)
    cache.get(1, "test", build)
    cache.get(0, "val", build)
    assert len(built) == 4
    assert len(list(tmp_path.glob("*.npz"))) == 4


def test_fingerprint_changes_with_the_data():
    a = generate_folksonomy(n_objects=100, seed=1)
    b = generate_folksonomy(n_objects=100, seed=2)
    assert a.fingerprint() == generate_folksonomy(n_objects=100, seed=1).fingerprint()
    assert a.fingerprint() != b.fingerprint()
