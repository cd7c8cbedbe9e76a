"""LDA (tagtorch.topics) against tomotopy, the independent oracle, on a synthetic LDA corpus."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tagtorch.data.ragged import Ragged
from tagtorch.errors import UnreadableFileError
from tagtorch.topics import LDA

tomotopy = pytest.importorskip("tomotopy")

Z, W_TRUE, N_DOCS, LENGTH = 8, 200, 300, 40
ALPHA, BETA, ITERATIONS, BURN_IN = 0.1, 0.1, 200, 150


def _true_phi() -> np.ndarray:
    return np.random.default_rng(0).dirichlet(np.full(W_TRUE, 0.1), size=Z)


def _documents(rng: np.random.Generator, n: int, single_topic: bool = False
               ) -> tuple[list[np.ndarray], np.ndarray]:
    """Documents of the LDA generative process (or each of one topic); and each's main topic."""
    phi = _true_phi()
    rows, main = [], np.zeros(n, dtype=np.int64)
    for d in range(n):
        if single_topic:
            main[d] = rng.integers(Z)
            topics = np.full(LENGTH, main[d])
        else:
            theta = rng.dirichlet(np.full(Z, 0.3))
            topics = rng.choice(Z, size=LENGTH, p=theta)
            main[d] = np.bincount(topics, minlength=Z).argmax()
        rows.append(np.array([rng.choice(W_TRUE, p=phi[k]) for k in topics]))
    return rows, main


@pytest.fixture(scope="module")
def corpus() -> dict:
    """Training and held-out documents, with word ids compacted to the words that occur.

    tomotopy's likelihood counts only the words that occur (``realV``); compacting makes ``W``
    the same for both.
    """
    rng = np.random.default_rng(1)
    train, _ = _documents(rng, N_DOCS)
    test, _ = _documents(rng, 100)
    single, main = _documents(rng, 80, single_topic=True)
    used = np.unique(np.concatenate(train))
    code = np.full(W_TRUE, W_TRUE + 1000)  # words unseen in training: ids >= W (ignored)
    code[used] = np.arange(len(used))
    return {"train": Ragged.from_lists([code[r] for r in train]),
            "test": Ragged.from_lists([code[r] for r in test]),
            "single": Ragged.from_lists([code[r] for r in single]), "main": main,
            "n_words": len(used), "code": code}


@pytest.fixture(scope="module")
def oracle(corpus: dict) -> dict:
    """tomotopy fitted with the same Z, α, β and iterations; its ll per token and φ."""
    model = tomotopy.LDAModel(k=Z, alpha=ALPHA, eta=BETA, seed=3, tw=tomotopy.TermWeight.ONE)
    model.optim_interval = 0  # fixed priors, as ours
    for row in corpus["train"]:
        model.add_doc([f"w{w}" for w in row])
    lls = []
    for _ in range(ITERATIONS):
        model.train(1, workers=1)
        lls.append(model.ll_per_word)
    assert len(model.used_vocabs) == corpus["n_words"]
    phi = np.zeros((Z, corpus["n_words"]))
    ids = [int(v[1:]) for v in model.used_vocabs]
    for k in range(Z):
        phi[k, ids] = model.get_topic_word_dist(k)
    return {"ll": float(np.mean(lls[BURN_IN:])), "phi": phi}


@pytest.fixture(scope="module")
def fitted(corpus: dict) -> dict[str, LDA]:
    return {sampler: LDA(n_topics=Z, alpha=ALPHA, beta=BETA, iterations=ITERATIONS,
                         burn_in=BURN_IN, sampler=sampler, block_tokens=2000, seed=5,
                         progress=False).fit(corpus["train"], corpus["n_words"])
            for sampler in ("exact", "batched")}


def _with_phi(phi: np.ndarray) -> LDA:
    """An LDA whose φ is given (tomotopy's), for the same document-completion estimator."""
    model = LDA(n_topics=Z, alpha=ALPHA, beta=BETA, seed=7)
    model.phi_ = phi
    return model


@pytest.mark.parametrize("sampler", ["exact", "batched"])
def test_log_likelihood_per_token_matches_tomotopy(fitted: dict, oracle: dict,
                                                   sampler: str) -> None:
    ours = float(np.mean(fitted[sampler].log_likelihood_[BURN_IN:]))
    assert abs(ours - oracle["ll"]) < 0.02 * abs(oracle["ll"]), (ours, oracle["ll"])
    # it really converged from the random start
    assert fitted[sampler].log_likelihood_[0] < ours - 0.1


@pytest.mark.parametrize("sampler", ["exact", "batched"])
def test_held_out_perplexity_matches_tomotopy(corpus: dict, fitted: dict, oracle: dict,
                                              sampler: str) -> None:
    model = fitted[sampler]
    ours = model.perplexity(corpus["test"], seed=7)
    theirs = _with_phi(oracle["phi"]).perplexity(corpus["test"], seed=7)
    assert abs(ours - theirs) < 0.02 * theirs, (ours, theirs)
    # far better than the uniform model (perplexity = W)
    assert theirs < 0.6 * corpus["n_words"]


@pytest.mark.parametrize("sampler", ["exact", "batched"])
def test_rows_are_distributions(corpus: dict, fitted: dict, sampler: str) -> None:
    model = fitted[sampler]
    assert model.phi_.shape == (Z, corpus["n_words"]) and model.phi_.dtype == np.float64
    assert model.theta_.shape == (N_DOCS, Z) and model.theta_.dtype == np.float64
    np.testing.assert_allclose(model.phi_.sum(1), 1.0, rtol=1e-9)
    np.testing.assert_allclose(model.theta_.sum(1), 1.0, rtol=1e-9)
    assert (model.phi_ > 0).all() and (model.theta_ > 0).all()
    assert len(model.log_likelihood_) == ITERATIONS


@pytest.mark.parametrize("sampler", ["exact", "batched"])
def test_same_seed_same_model_other_seed_other_model(sampler: str) -> None:
    docs = Ragged.from_lists([[0, 1, 2, 1], [3, 4, 3], [], [0, 2, 4, 5, 5], [1, 1]])

    def fit(seed: int) -> LDA:
        return LDA(n_topics=3, iterations=12, burn_in=4, sampler=sampler, block_tokens=3,
                   seed=seed, progress=False).fit(docs, n_words=6)

    first, again, other = fit(11), fit(11), fit(12)
    np.testing.assert_array_equal(first.phi_, again.phi_)
    np.testing.assert_array_equal(first.theta_, again.theta_)
    assert first.log_likelihood_ == again.log_likelihood_
    assert not np.array_equal(first.phi_, other.phi_)
    np.testing.assert_allclose(first.theta_[2], 1 / 3)  # an empty document: the prior
    np.testing.assert_array_equal(first.infer(docs, seed=4), first.infer(docs, seed=4))


def test_fold_in_finds_the_topic_of_single_topic_documents(corpus: dict, fitted: dict) -> None:
    model = fitted["exact"]
    true_phi = _true_phi()[:, np.argsort(corpus["code"])[: corpus["n_words"]]]
    # each learned topic is matched to the true topic it overlaps most
    match = (model.phi_ @ true_phi.T).argmax(1)
    theta = model.infer(corpus["single"], iterations=40, burn_in=20, seed=2)
    assert theta.shape == (80, Z)
    np.testing.assert_allclose(theta.sum(1), 1.0, rtol=1e-9)
    found = match[theta.argmax(1)]
    assert (found == corpus["main"]).mean() >= 0.9


def test_infer_ignores_unknown_words_and_gives_empty_documents_the_prior(fitted: dict) -> None:
    model = fitted["exact"]
    n_words = model.phi_.shape[1]
    docs = Ragged.from_lists([[], [n_words, n_words + 5], [0, 0, 0, n_words]])
    theta = model.infer(docs, iterations=10, burn_in=5)
    np.testing.assert_allclose(theta[:2], 1 / Z)
    alone = model.infer(Ragged.from_lists([[0, 0, 0]]), iterations=10, burn_in=5)
    np.testing.assert_array_equal(theta[2], alone[0])


def test_save_load_round_trip_and_tampering(fitted: dict, tmp_path) -> None:
    model = fitted["batched"]
    model.save(tmp_path / "lda")
    loaded = LDA.load(tmp_path / "lda")
    np.testing.assert_array_equal(loaded.phi_, model.phi_)
    np.testing.assert_array_equal(loaded.theta_, model.theta_)
    assert loaded.log_likelihood_ == model.log_likelihood_
    assert loaded.settings() == model.settings()
    manifest = json.loads((tmp_path / "lda" / "manifest.json").read_text())
    assert manifest["class"] == "tagtorch.topics.lda.LDA"
    arrays = tmp_path / "lda" / "arrays.npz"
    data = bytearray(arrays.read_bytes())
    data[len(data) // 2] ^= 0xFF
    arrays.write_bytes(bytes(data))
    with pytest.raises(UnreadableFileError, match="altered"):
        LDA.load(tmp_path / "lda")


@pytest.mark.parametrize(("settings", "message"), [
    ({"n_topics": 0}, "n_topics"), ({"alpha": 0.0}, "alpha"), ({"beta": -1.0}, "beta"),
    ({"iterations": 10, "burn_in": 10}, "burn_in"), ({"burn_in": -1}, "burn_in"),
    ({"sampler": "gibbs"}, "sampler"), ({"block_tokens": 0}, "block_tokens"),
    ({"device": "nonsense"}, "device"),
])
def test_bad_settings_are_refused(settings: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        LDA(**settings)


def test_bad_inputs_are_refused() -> None:
    model = LDA(n_topics=2, iterations=3, burn_in=1, progress=False)
    with pytest.raises(ValueError, match=r"word id 5 is outside \[0, n_words=5\)"):
        model.fit(Ragged.from_lists([[0, 5]]), n_words=5)
    with pytest.raises(ValueError, match="outside"):
        model.fit(Ragged.from_lists([[-1, 2]]), n_words=5)
    with pytest.raises(ValueError, match="no tokens"):
        model.fit(Ragged.from_lists([[], []]), n_words=5)
    with pytest.raises(ValueError, match="Ragged"):
        model.fit([[0, 1]], n_words=5)  # type: ignore[arg-type]
    with pytest.raises(RuntimeError, match="not fitted"):
        model.infer(Ragged.from_lists([[0]]))
    with pytest.raises(RuntimeError, match="not fitted"):
        model.save("unused")
    model.fit(Ragged.from_lists([[0, 1, 2], [3, 4]]), n_words=5)
    with pytest.raises(ValueError, match="burn_in"):
        model.infer(Ragged.from_lists([[0]]), iterations=5, burn_in=5)
    with pytest.raises(ValueError, match="nothing to score"):
        model.perplexity(Ragged.from_lists([[0], [1]]))
