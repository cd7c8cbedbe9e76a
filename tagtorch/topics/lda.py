"""Latent Dirichlet Allocation by collapsed Gibbs sampling, as Harvey, Ruthven and Carman use it.

Harvey, Ruthven and Carman ("Ranking Social Bookmarks Using Topic Models", CIKM 2010, Section
3) model each resource as a document whose words are its tags (repeats kept) and fit LDA with
the Rao-Blackwellised (collapsed) Gibbs sampler of Griffiths and Steyvers (2004). The extracted
text of the paper lost its equations; they are read as the standard ones::

    P(z_i = z | z_-i, w) ∝ (N_wz + β) / (N_z + Wβ) · (N_zd + α)       the sampler
    φ_{w|z} = (N_wz + β) / (N_z + Wβ)                                   P(w | z)
    θ_{z|d} = (N_zd + α) / (N_d + Zα)                                   P(z | d)

with ``N_wz``, ``N_zd``, ``N_z`` the counts of topic ``z`` with word ``w``, in document ``d``
and in total, ``W`` words and ``Z`` topics. "We set the concentration parameters α and β to be
25.0 and 0.1W" is read as total concentrations: ``α = 25 / Z`` per topic and ``β = 0.1`` per
word (the defaults here). The chain runs 300 iterations, the first 200 are burn-in and "the
remaining 100 samples ... were averaged over to obtain the final parameter values": ``phi_``
and ``theta_`` average ``φ`` and ``θ`` over the samples of every iteration after ``burn_in``.
The paper uses ``Z = 250`` topics (the default).

Deviations and additions (ours):

- The initial topics are drawn uniformly at random (seeded); the paper does not say.
- ``sampler="batched"`` is an approximate sampler (blocks of tokens drawn in parallel from the
  counts at the start of their block, like AD-LDA; :mod:`tagtorch.topics.gibbs`) that runs on
  any torch device; ``"exact"`` (default) is the sequential sampler on the CPU.
- :meth:`LDA.infer` (fold-in of new documents with ``φ`` fixed) and :meth:`LDA.perplexity`
  (held-out perplexity by document completion) are not in the paper; their estimators are
  stated in their docstrings.
- ``log_likelihood_`` records the joint ``log P(w, z)`` per token at every iteration (the
  paper watches "the model likelihood" for convergence), computed as tomotopy's
  ``ll_per_word`` does, with ``W`` the ``n_words`` given to :meth:`LDA.fit` (tomotopy counts
  only the words that occur).

Example:
    >>> from tagtorch.data.ragged import Ragged
    >>> docs = Ragged.from_lists([[0, 1, 0, 1], [2, 3, 3, 2], [0, 1, 1], [2, 3, 2]])
    >>> lda = LDA(n_topics=2, iterations=30, burn_in=20, progress=False).fit(docs, n_words=4)
    >>> lda.phi_.shape, lda.theta_.shape, [round(float(s), 6) for s in lda.phi_.sum(1)]
    ((2, 4), (4, 2), [1.0, 1.0])
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Self

import numpy as np
import torch
from tqdm.auto import tqdm

from tagtorch.data.ragged import Ragged
from tagtorch.errors import UnreadableFileError
from tagtorch.storage import ARRAYS_FILE, load_array_model, save_array_model
from tagtorch.topics import gibbs

__all__ = ["LDA", "SAMPLERS"]

SAMPLERS = ("exact", "batched")
"""The samplers :class:`LDA` offers (:mod:`tagtorch.topics.gibbs`)."""

# batched sampler: the conditionals are computed [chunk, Z] at a time, about this many floats
# (small on the CPU, to stay in its caches; large on a GPU, to fill it)
_CHUNK_ELEMENTS = {"cpu": 1 << 21, "cuda": 1 << 24}


class LDA:
    """LDA fitted by collapsed Gibbs sampling (Harvey, Ruthven and Carman, Section 3).

    Args:
        n_topics: number of topics ``Z`` (the paper: 250).
        alpha: symmetric document-topic prior α per topic; None: ``25 / n_topics`` (the paper's
            total concentration 25).
        beta: symmetric topic-word prior β per word (the paper: 0.1).
        iterations: Gibbs sweeps over the corpus (the paper: 300).
        burn_in: sweeps discarded before averaging; ``phi_`` and ``theta_`` average the samples
            of the ``iterations - burn_in`` last sweeps (the paper: 200, averaging 100).
        sampler: ``"exact"`` (sequential, compiled by numba, CPU) or ``"batched"`` (blocks of
            tokens drawn in parallel by torch on ``device``; an approximation).
        device: torch device of the batched sampler (``"cpu"``, ``"cuda"``, ...).
        block_tokens: batched sampler: tokens drawn in parallel from the same counts.
        seed: seed of the initial topics and of every draw; the same seed gives the same
            model on the same machine.
        progress: show a progress bar over the iterations.

    Attributes:
        phi_: ``[Z, W]`` float64 ``P(w | z)``, rows sum to 1.
        theta_: ``[D, Z]`` float64 ``P(z | d)`` of the fitted documents, rows sum to 1 (an
            empty document has the prior, uniform).
        log_likelihood_: the joint ``log P(w, z)`` per token after each iteration.
    """

    phi_: np.ndarray
    theta_: np.ndarray
    log_likelihood_: list[float]

    def __init__(self, n_topics: int = 250, alpha: float | None = None, beta: float = 0.1,
                 iterations: int = 300, burn_in: int = 200, sampler: str = "exact",
                 device: str = "cpu", block_tokens: int = 1_000_000, seed: int = 0,
                 progress: bool = True) -> None:
        if int(n_topics) != n_topics or n_topics < 1:
            raise ValueError(f"n_topics must be a positive integer, got {n_topics!r}")
        if alpha is not None and not alpha > 0:
            raise ValueError(f"alpha must be > 0 (or None for 25 / n_topics), got {alpha!r}")
        if not beta > 0:
            raise ValueError(f"beta must be > 0, got {beta!r}")
        if int(iterations) != iterations or iterations < 1:
            raise ValueError(f"iterations must be a positive integer, got {iterations!r}")
        if int(burn_in) != burn_in or not 0 <= burn_in < iterations:
            raise ValueError(f"burn_in must be an integer in [0, iterations={iterations}), "
                             f"got {burn_in!r}")
        if sampler not in SAMPLERS:
            raise ValueError(f"sampler must be one of {SAMPLERS}, got {sampler!r}")
        if int(block_tokens) != block_tokens or block_tokens < 1:
            raise ValueError(f"block_tokens must be a positive integer, got {block_tokens!r}")
        try:
            torch.device(device)
        except (RuntimeError, TypeError) as error:
            raise ValueError(f"device {device!r} is not a torch device ({error})") from None
        self.n_topics = int(n_topics)
        self.alpha_setting = alpha
        self.alpha = 25.0 / self.n_topics if alpha is None else float(alpha)
        self.beta = float(beta)
        self.iterations = int(iterations)
        self.burn_in = int(burn_in)
        self.sampler = sampler
        self.device = device
        self.block_tokens = int(block_tokens)
        self.seed = int(seed)
        self.progress = progress

    def settings(self) -> dict[str, Any]:
        """The constructor arguments: ``LDA(**lda.settings())`` is an unfitted copy."""
        return {"n_topics": self.n_topics, "alpha": self.alpha_setting, "beta": self.beta,
                "iterations": self.iterations, "burn_in": self.burn_in,
                "sampler": self.sampler, "device": self.device,
                "block_tokens": self.block_tokens, "seed": self.seed,
                "progress": self.progress}

    def __repr__(self) -> str:
        return f"LDA({', '.join(f'{k}={v!r}' for k, v in self.settings().items())})"

    # -- fitting ----------------------------------------------------------------------------

    def fit(self, documents: Ragged, n_words: int) -> Self:
        """Samples the topics of every token and estimates ``phi_`` and ``theta_``.

        Args:
            documents: one row of word ids per document (int, in ``[0, n_words)``, repeats
                allowed: a tag assigned twice is two tokens); empty rows are allowed.
            n_words: vocabulary size ``W``.

        Returns:
            self, fitted.

        Raises:
            ValueError: a word id outside ``[0, n_words)``, no tokens at all, or too many
                tokens for int32 counts.
        """
        if int(n_words) != n_words or n_words < 1:
            raise ValueError(f"n_words must be a positive integer, got {n_words!r}")
        words = _word_ids(documents)
        if len(words) == 0:
            raise ValueError("the documents hold no tokens: nothing to fit")
        if len(words) >= np.iinfo(np.int32).max:
            raise ValueError(f"{len(words)} tokens exceed the int32 counts")
        if words.min() < 0 or words.max() >= n_words:
            bad = words[(words < 0) | (words >= n_words)][0]
            raise ValueError(f"word id {bad} is outside [0, n_words={n_words})")
        bar = tqdm(range(self.iterations), desc=f"LDA ({self.sampler})", unit="it",
                   disable=not self.progress)
        if self.sampler == "exact":
            phi_wz, theta = self._fit_exact(words, documents.offsets, int(n_words), bar)
        else:
            phi_wz, theta = self._fit_batched(words, documents, int(n_words), bar)
        self.phi_ = np.ascontiguousarray(phi_wz.T)
        self.theta_ = theta
        return self

    def _fit_exact(self, words: np.ndarray, offsets: np.ndarray, n_words: int,
                   bar: tqdm) -> tuple[np.ndarray, np.ndarray]:
        """The sequential sampler; returns ``φ [W, Z]`` and ``θ [D, Z]`` averaged."""
        n_docs, n_topics, n_tokens = len(offsets) - 1, self.n_topics, len(words)
        rng = np.random.default_rng(self.seed)
        words32 = words.astype(np.int32)
        offsets = np.ascontiguousarray(offsets, dtype=np.int64)
        z = rng.integers(0, n_topics, n_tokens, dtype=np.int32)
        doc_of = np.repeat(np.arange(n_docs), np.diff(offsets))
        nwz = np.zeros((n_words, n_topics), dtype=np.int32)
        ndz = np.zeros((n_docs, n_topics), dtype=np.int32)
        np.add.at(nwz, (words32, z), 1)
        np.add.at(ndz, (doc_of, z), 1)
        nz = nwz.sum(0, dtype=np.int32)
        inv_den = 1.0 / (nz + n_words * self.beta)
        phi_sum = np.zeros((n_words, n_topics))
        ndz_sum = np.zeros((n_docs, n_topics))
        self.log_likelihood_ = []
        for iteration in bar:
            gibbs.exact_sweep(words32, offsets, z, nwz, ndz, nz, inv_den, self.alpha,
                              self.beta, rng.random(n_tokens))
            inv_den = 1.0 / (nz + n_words * self.beta)  # exact, without drift
            ll = gibbs.log_likelihood(nwz, ndz, nz, self.alpha, self.beta)
            self.log_likelihood_.append(float(ll) / n_tokens)
            if iteration >= self.burn_in:
                gibbs.accumulate_phi(phi_sum, nwz, inv_den, self.beta)
                ndz_sum += ndz
            bar.set_postfix(ll=f"{self.log_likelihood_[-1]:.4f}", refresh=False)
        samples = self.iterations - self.burn_in
        theta = (ndz_sum / samples + self.alpha)
        theta /= theta.sum(1, keepdims=True)
        return phi_sum / samples, theta

    def _fit_batched(self, words: np.ndarray, documents: Ragged, n_words: int,
                     bar: tqdm) -> tuple[np.ndarray, np.ndarray]:
        """The batched sampler on ``device``; returns ``φ [W, Z]`` and ``θ [D, Z]``."""
        device = torch.device(self.device)
        n_docs, n_topics, n_tokens = len(documents), self.n_topics, len(words)
        generator = torch.Generator(device=device).manual_seed(self.seed)
        w = torch.as_tensor(words, dtype=torch.int64, device=device)
        d = torch.as_tensor(documents.row_ids, device=device)
        z = torch.randint(n_topics, (n_tokens,), generator=generator, device=device)
        nwz = torch.zeros(n_words * n_topics, dtype=torch.int32, device=device)
        nwz.index_add_(0, w * n_topics + z, torch.ones_like(z, dtype=torch.int32))
        nwz = nwz.view(n_words, n_topics)
        ndz = torch.zeros(n_docs * n_topics, dtype=torch.int32, device=device)
        ndz.index_add_(0, d * n_topics + z, torch.ones_like(z, dtype=torch.int32))
        ndz = ndz.view(n_docs, n_topics)
        nz = nwz.sum(0, dtype=torch.int32)
        chunk = max(1, _CHUNK_ELEMENTS.get(device.type, 1 << 24) // n_topics)
        phi_sum = torch.zeros(n_words, n_topics, dtype=torch.float64, device=device)
        ndz_sum = torch.zeros(n_docs, n_topics, dtype=torch.float64, device=device)
        self.log_likelihood_ = []
        for iteration in bar:
            gibbs.batched_sweep(w, d, z, nwz, ndz, nz, self.alpha, self.beta,
                                self.block_tokens, generator, chunk)
            ll = gibbs.torch_log_likelihood(nwz, ndz, nz, self.alpha, self.beta)
            self.log_likelihood_.append(ll / n_tokens)
            if iteration >= self.burn_in:
                phi_sum += (nwz.double() + self.beta) / (nz.double() + n_words * self.beta)
                ndz_sum += ndz
            bar.set_postfix(ll=f"{self.log_likelihood_[-1]:.4f}", refresh=False)
        samples = self.iterations - self.burn_in
        theta = ndz_sum / samples + self.alpha
        theta /= theta.sum(1, keepdim=True)
        return (phi_sum / samples).cpu().numpy(), theta.cpu().numpy()

    # -- new documents ----------------------------------------------------------------------

    def infer(self, documents: Ragged, iterations: int = 50, burn_in: int = 25,
              seed: int | None = None) -> np.ndarray:
        """Topic mixtures of new documents by fold-in Gibbs sampling with ``phi_`` fixed.

        Each token's topic is drawn from ``P(z_i = z) ∝ φ[w, z] (N_zd^-i + α)`` (the counts
        of its own document only); ``θ_d = (N_zd + α) / (N_d + Zα)`` is averaged over the
        sweeps after ``burn_in``. Words ``>= W`` (unseen in training) are ignored; a document
        without known words gets the prior, uniform.

        Args:
            documents: one row of word ids per document (negative ids are refused).
            iterations: fold-in sweeps.
            burn_in: sweeps discarded before averaging, in ``[0, iterations)``.
            seed: seed of the draws; None: the model's ``seed``.

        Returns:
            ``[D', Z]`` float64 ``P(z | d)``, rows sum to 1.

        Raises:
            RuntimeError: the model is not fitted.
            ValueError: bad ``iterations``/``burn_in`` or a negative word id.
        """
        phi = self._fitted_phi()
        if int(iterations) != iterations or iterations < 1:
            raise ValueError(f"iterations must be a positive integer, got {iterations!r}")
        if int(burn_in) != burn_in or not 0 <= burn_in < iterations:
            raise ValueError(f"burn_in must be an integer in [0, iterations={iterations}), "
                             f"got {burn_in!r}")
        words = _word_ids(documents)
        if len(words) and words.min() < 0:
            raise ValueError(f"word id {words.min()} is negative")
        keep = words < phi.shape[1]
        rows = documents.row_ids[keep]
        n_docs, n_topics = len(documents), self.n_topics
        offsets = np.zeros(n_docs + 1, dtype=np.int64)
        np.cumsum(np.bincount(rows, minlength=n_docs), out=offsets[1:])
        words32 = words[keep].astype(np.int32)
        rng = np.random.default_rng(self.seed if seed is None else seed)
        z = rng.integers(0, n_topics, len(words32), dtype=np.int32)
        ndz = np.zeros((n_docs, n_topics), dtype=np.int32)
        np.add.at(ndz, (rows, z), 1)
        phi_wz = np.ascontiguousarray(phi.T, dtype=np.float64)
        ndz_sum = np.zeros((n_docs, n_topics))
        for iteration in range(iterations):
            gibbs.fold_in_sweep(words32, offsets, z, ndz, phi_wz, self.alpha,
                                rng.random(len(words32)))
            if iteration >= burn_in:
                ndz_sum += ndz
        theta = ndz_sum / (iterations - burn_in) + self.alpha
        return theta / theta.sum(1, keepdims=True)

    def perplexity(self, documents: Ragged, seed: int | None = None) -> float:
        """Held-out perplexity by document completion.

        Each document is split by token position: the tokens at even positions (0, 2, ...)
        are folded in (:meth:`infer`, default sweeps) to estimate ``θ_d``; the tokens at odd
        positions are scored::

            perplexity = exp(- Σ_d Σ_{odd i} log Σ_z φ[w_i, z] θ_d[z] / n_odd)

        Words ``>= W`` are ignored in both halves (as in :meth:`infer`).

        Args:
            documents: held-out documents, rows of word ids.
            seed: seed of the fold-in; None: the model's ``seed``.

        Returns:
            The perplexity (lower is better).

        Raises:
            RuntimeError: the model is not fitted.
            ValueError: no odd-position token of a known word to score.
        """
        phi = self._fitted_phi()
        words = _word_ids(documents)
        if len(words) and words.min() < 0:
            raise ValueError(f"word id {words.min()} is negative")
        rows = documents.row_ids
        position = np.arange(len(words)) - documents.offsets[rows]
        known = words < phi.shape[1]
        even = (position % 2 == 0) & known
        odd = (position % 2 == 1) & known
        if not odd.any():
            raise ValueError("no token at an odd position with a known word: nothing to score")
        observed = Ragged.from_groups(rows[even], words[even], len(documents))
        theta = self.infer(observed, seed=seed)
        probability = np.einsum("iz,zi->i", theta[rows[odd]], phi[:, words[odd]])
        return float(np.exp(-np.log(probability).mean()))

    def _fitted_phi(self) -> np.ndarray:
        phi = getattr(self, "phi_", None)
        if phi is None:
            raise RuntimeError("LDA is not fitted: call fit first")
        return phi

    # -- save / load ------------------------------------------------------------------------

    def save(self, path: str | Path) -> None:
        """Writes the folder ``path``: ``manifest.json`` and ``arrays.npz``.

        The manifest (:func:`~tagtorch.storage.save_array_model`) records the class, the
        settings and the arrays file's size and SHA-256; the arrays are ``phi_``, ``theta_``
        and ``log_likelihood_`` (no pickle).

        Raises:
            RuntimeError: the model is not fitted.
        """
        phi = self._fitted_phi()
        save_array_model(path, type(self), self.settings(),
                         {"phi": phi, "theta": self.theta_,
                          "log_likelihood": np.asarray(self.log_likelihood_, dtype=np.float64)},
                         n_words=int(phi.shape[1]), n_documents=int(self.theta_.shape[0]))

    @classmethod
    def load(cls, path: str | Path) -> Self:
        """Reads a model written by :meth:`save` (its folder), checking the file digests.

        Raises:
            UnreadableFileError: another class's folder, a missing, truncated or altered file,
                or settings or arrays that do not fit together.
        """
        model, arrays, manifest = load_array_model(path, cls)
        phi, theta = arrays.get("phi"), arrays.get("theta")
        if (phi is None or theta is None or "log_likelihood" not in arrays or phi.ndim != 2
                or theta.ndim != 2 or phi.shape[0] != model.n_topics
                or theta.shape[1] != model.n_topics or phi.dtype != np.float64
                or theta.dtype != np.float64):
            raise UnreadableFileError(
                f"{Path(path) / ARRAYS_FILE}: arrays {sorted(arrays)} do not fit "
                f"{model.n_topics} topics ({json.dumps(manifest['settings'])})")
        model.phi_, model.theta_ = phi, theta
        model.log_likelihood_ = [float(v) for v in arrays["log_likelihood"]]
        return model


def _word_ids(documents: Ragged) -> np.ndarray:
    """The flat int64 word ids of ``documents`` (ValueError if not a Ragged of integers)."""
    if not isinstance(documents, Ragged):
        raise ValueError(f"documents must be a Ragged of word ids, got "
                         f"{type(documents).__name__}")
    values = np.asarray(documents.values)
    if len(values) and not np.issubdtype(values.dtype, np.integer):
        raise ValueError(f"word ids must be integers, got dtype {values.dtype}")
    return values.astype(np.int64, copy=False)
