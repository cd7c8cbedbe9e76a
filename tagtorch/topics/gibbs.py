"""The kernels of LDA's collapsed Gibbs samplers: sequential (numba) and batched (torch).

Both sample the topic of one token from the collapsed conditional of Griffiths and Steyvers
(2004), the sampler of Harvey, Ruthven and Carman (Section 3)::

    P(z_i = z | z_-i, w) ∝ (N_wz + β) / (N_z + Wβ) · (N_zd + α)

with every count taken without the token ``i`` itself (``-i``). The counts are int32 arrays:
``nwz [W, Z]`` (word-major, so one token reads one contiguous row), ``ndz [D, Z]`` and
``nz [Z]``; tokens are stored flat, ordered by document (``offsets [D + 1]``).

- :func:`exact_sweep` is the sequential sampler: every token sees the counts updated by every
  token before it. It keeps ``inv_den[z] = 1 / (N_z + Wβ)`` and updates it for the two topics a
  token moves between; the conditional's ``Z`` products form one vectorizable loop, and the
  draw searches blocks of 16 topics' sums, then inside the block (cumulative search on the
  uniform of the token, pre-drawn in float64 by the caller: same uniforms, same result).
- :func:`batched_sweep` is an approximation, in the spirit of AD-LDA (Newman, Asuncion, Smyth
  and Welling, "Distributed Algorithms for Topic Models", JMLR 2009): the tokens are taken in
  blocks of ``block_tokens``; all the tokens of a block draw their topics in parallel from the
  counts as they stand at the start of the block (each without its own assignment), then the
  counts are updated for the whole block at once. Tokens of one block do not see each other's
  moves; with one token per block it is the exact sampler. The conditionals are computed in
  float32 (their cumulative sum and the draw by ``searchsorted`` too), on any torch device.

The log-likelihood is the joint ``log P(w, z)`` of the collapsed model (Dirichlet-multinomial
for the topic-word and the document-topic parts, as tomotopy's ``ll_per_word`` computes it)::

    Z (lnΓ(Wβ) - W lnΓ(β)) + Σ_z [Σ_w lnΓ(N_wz + β) - lnΓ(N_z + Wβ)]
    + D (lnΓ(Zα) - Z lnΓ(α)) + Σ_d [Σ_z lnΓ(N_zd + α) - lnΓ(N_d + Zα)]

summed over the non-zero counts only (a zero count adds ``lnΓ(β) - lnΓ(β) = 0``).
"""

from __future__ import annotations

import math

import numba
import numpy as np
import torch
from torch import Tensor

__all__ = ["accumulate_phi", "batched_sweep", "exact_sweep", "fold_in_sweep", "log_likelihood",
           "torch_log_likelihood"]

_BLOCK = 16  # topics per block of the two-level search of the sequential sampler


@numba.njit(fastmath=True, nogil=True, cache=True)
def exact_sweep(words: np.ndarray, offsets: np.ndarray, z: np.ndarray, nwz: np.ndarray,
                ndz: np.ndarray, nz: np.ndarray, inv_den: np.ndarray, alpha: float,
                beta: float, uniforms: np.ndarray) -> None:  # pragma: no cover - compiled
    """One sequential collapsed Gibbs sweep over every token, in place.

    Args:
        words: ``[N]`` int32 word id of each token, ordered by document.
        offsets: ``[D + 1]`` int64, document ``d`` holds tokens ``offsets[d]:offsets[d + 1]``.
        z: ``[N]`` int32 topic of each token (updated).
        nwz: ``[W, Z]`` int32 word-topic counts (updated).
        ndz: ``[D, Z]`` int32 document-topic counts (updated).
        nz: ``[Z]`` int32 topic counts (updated).
        inv_den: ``[Z]`` float64 ``1 / (nz + Wβ)`` (kept up to date).
        alpha: document-topic prior α.
        beta: topic-word prior β.
        uniforms: ``[N]`` float64 uniforms in ``[0, 1)``, one per token.
    """
    n_topics = nz.shape[0]
    wbeta = nwz.shape[0] * beta
    n_blocks = (n_topics + _BLOCK - 1) // _BLOCK
    p = np.empty(n_topics, dtype=np.float64)
    block = np.empty(n_blocks, dtype=np.float64)
    for d in range(len(offsets) - 1):
        for i in range(offsets[d], offsets[d + 1]):
            w = words[i]
            t = z[i]
            nwz[w, t] -= 1
            ndz[d, t] -= 1
            nz[t] -= 1
            inv_den[t] = 1.0 / (nz[t] + wbeta)
            for k in range(n_topics):
                p[k] = (nwz[w, k] + beta) * inv_den[k] * (ndz[d, k] + alpha)
            total = 0.0
            for b in range(n_blocks):
                s = 0.0
                for k in range(b * _BLOCK, min(n_topics, b * _BLOCK + _BLOCK)):
                    s += p[k]
                block[b] = s
                total += s
            u = uniforms[i] * total
            b = 0
            while b < n_blocks - 1 and u >= block[b]:
                u -= block[b]
                b += 1
            t = b * _BLOCK
            last = min(n_topics, b * _BLOCK + _BLOCK) - 1
            while t < last and u >= p[t]:
                u -= p[t]
                t += 1
            z[i] = t
            nwz[w, t] += 1
            ndz[d, t] += 1
            nz[t] += 1
            inv_den[t] = 1.0 / (nz[t] + wbeta)


@numba.njit(fastmath=True, nogil=True, cache=True)
def fold_in_sweep(words: np.ndarray, offsets: np.ndarray, z: np.ndarray, ndz: np.ndarray,
                  phi_wz: np.ndarray, alpha: float,
                  uniforms: np.ndarray) -> None:  # pragma: no cover - compiled
    """One fold-in Gibbs sweep: ``P(z_i = z) ∝ φ[w, z] (N_zd^-i + α)`` with ``φ`` fixed.

    Args:
        words: ``[N]`` int32 word ids (all ``< W``), ordered by document.
        offsets: ``[D + 1]`` int64 document bounds.
        z: ``[N]`` int32 topics (updated).
        ndz: ``[D, Z]`` int32 document-topic counts (updated).
        phi_wz: ``[W, Z]`` float64 ``P(w | z)``, word-major.
        alpha: document-topic prior α.
        uniforms: ``[N]`` float64 uniforms in ``[0, 1)``.
    """
    n_topics = ndz.shape[1]
    p = np.empty(n_topics, dtype=np.float64)
    for d in range(len(offsets) - 1):
        for i in range(offsets[d], offsets[d + 1]):
            w = words[i]
            t = z[i]
            ndz[d, t] -= 1
            total = 0.0
            for k in range(n_topics):
                p[k] = phi_wz[w, k] * (ndz[d, k] + alpha)
                total += p[k]
            u = uniforms[i] * total
            t = 0
            while t < n_topics - 1 and u >= p[t]:
                u -= p[t]
                t += 1
            z[i] = t
            ndz[d, t] += 1


@numba.njit(nogil=True, cache=True)
def _lgamma_table(prior: float) -> np.ndarray:  # pragma: no cover - compiled
    """``[4096]``: ``lnΓ(c + prior) - lnΓ(prior)`` for the counts ``c`` (entry 0: ``lnΓ(prior)``).

    Most counts are small: the table spares most of the ``lnΓ`` calls of the likelihood.
    """
    table = np.empty(4096, dtype=np.float64)
    base = math.lgamma(prior)
    table[0] = base
    for c in range(1, len(table)):
        table[c] = math.lgamma(c + prior) - base
    return table


@numba.njit(nogil=True, cache=True)
def log_likelihood(nwz: np.ndarray, ndz: np.ndarray, nz: np.ndarray, alpha: float,
                   beta: float) -> float:  # pragma: no cover - compiled
    """The joint ``log P(w, z)`` of the collapsed model from the counts (module docstring).

    Args:
        nwz: ``[W, Z]`` word-topic counts.
        ndz: ``[D, Z]`` document-topic counts.
        nz: ``[Z]`` topic counts.
        alpha: document-topic prior α.
        beta: topic-word prior β.

    Returns:
        The log-likelihood (not divided by the number of tokens).
    """
    n_words, n_topics = nwz.shape
    table_beta = _lgamma_table(beta)
    table_alpha = _lgamma_table(alpha)
    size = len(table_beta)
    ll = n_topics * math.lgamma(n_words * beta)
    for w in range(n_words):
        for k in range(n_topics):
            c = nwz[w, k]
            if c:
                ll += table_beta[c] if c < size else math.lgamma(c + beta) - table_beta[0]
    for k in range(n_topics):
        ll -= math.lgamma(nz[k] + n_words * beta)
    lg_zalpha = math.lgamma(n_topics * alpha)
    for d in range(ndz.shape[0]):
        n_d = 0
        for k in range(n_topics):
            c = ndz[d, k]
            if c:
                n_d += c
                ll += table_alpha[c] if c < size else math.lgamma(c + alpha) - table_alpha[0]
        ll += lg_zalpha - math.lgamma(n_d + n_topics * alpha)
    return ll


@numba.njit(nogil=True, cache=True)
def accumulate_phi(phi_sum: np.ndarray, nwz: np.ndarray, inv_den: np.ndarray,
                   beta: float) -> None:  # pragma: no cover - compiled
    """Adds this sample's ``φ = (N_wz + β) / (N_z + Wβ)`` to ``phi_sum [W, Z]`` (word-major)."""
    for w in range(nwz.shape[0]):
        for k in range(nwz.shape[1]):
            phi_sum[w, k] += (nwz[w, k] + beta) * inv_den[k]


def torch_log_likelihood(nwz: Tensor, ndz: Tensor, nz: Tensor, alpha: float,
                         beta: float) -> float:
    """:func:`log_likelihood` in torch (float64), on the counts' device."""
    n_words, n_topics = nwz.shape
    n_docs = ndz.shape[0]

    def lg(x: float) -> float:
        return math.lgamma(x)

    c = nwz[nwz > 0].double()
    ll = n_topics * lg(n_words * beta) + float((torch.lgamma(c + beta) - lg(beta)).sum())
    ll -= float(torch.lgamma(nz.double() + n_words * beta).sum())
    c = ndz[ndz > 0].double()
    ll += float((torch.lgamma(c + alpha) - lg(alpha)).sum())
    n_d = ndz.sum(1, dtype=torch.float64)
    ll += n_docs * lg(n_topics * alpha) - float(torch.lgamma(n_d + n_topics * alpha).sum())
    return ll


def batched_sweep(words: Tensor, docs: Tensor, z: Tensor, nwz: Tensor, ndz: Tensor, nz: Tensor,
                  alpha: float, beta: float, block_tokens: int, generator: torch.Generator,
                  chunk_tokens: int) -> None:
    """One batched (approximate) Gibbs sweep, in place, on the tensors' device.

    The tokens are taken in blocks of ``block_tokens``; every token of a block draws its topic
    from the counts as they stand at the start of the block, minus its own assignment; then the
    block's moves are added to the counts (module docstring). Inside a block the conditionals
    are computed ``chunk_tokens`` tokens at a time, only to bound the memory (``[chunk, Z]``
    floats): the counts do not change between the chunks of a block.

    Args:
        words: ``[N]`` int64 word ids, ordered by document.
        docs: ``[N]`` int64 document of each token.
        z: ``[N]`` int64 topics (updated).
        nwz: ``[W, Z]`` int32 word-topic counts (updated).
        ndz: ``[D, Z]`` int32 document-topic counts (updated).
        nz: ``[Z]`` int32 topic counts (updated).
        alpha: document-topic prior α.
        beta: topic-word prior β.
        block_tokens: tokens per block.
        generator: the seeded generator of the uniforms (on the tensors' device).
        chunk_tokens: tokens whose conditionals are computed at once.
    """
    n_tokens = words.numel()
    n_words, n_topics = nwz.shape
    device = words.device
    for start in range(0, n_tokens, block_tokens):
        stop = min(n_tokens, start + block_tokens)
        den = nz.float() + n_words * beta  # the counts at the start of the block
        # (N_wz + β) / (N_z + Wβ) of every word, once per block when the block has more tokens
        # than there are words; else per chunk, for the chunk's tokens only
        word_term = (nwz.float() + beta) / den if stop - start >= n_words else None
        new = torch.empty(stop - start, dtype=torch.int64, device=device)
        for lo in range(start, stop, chunk_tokens):
            hi = min(stop, lo + chunk_tokens)
            w, d, old = words[lo:hi], docs[lo:hi], z[lo:hi]
            p = word_term[w] if word_term is not None else (nwz[w].float() + beta) / den
            p.mul_(ndz[d].float().add_(alpha))
            # each token without its own assignment: its own topic's term recomputed
            rows = torch.arange(hi - lo, device=device)
            p[rows, old] = ((nwz[w, old].float() - 1 + beta) * (ndz[d, old].float() - 1 + alpha)
                            / (den[old] - 1))
            cum = p.cumsum_(1)
            u = torch.rand(hi - lo, 1, generator=generator, device=device) * cum[:, -1:]
            drawn = torch.searchsorted(cum, u, right=True).squeeze(1)
            new[lo - start:hi - start] = drawn.clamp_(max=n_topics - 1)
        old = z[start:stop]
        moved = old != new
        w, d = words[start:stop][moved], docs[start:stop][moved]
        before, after = old[moved], new[moved]
        ones = torch.ones(len(before), dtype=nwz.dtype, device=device)
        flat = nwz.view(-1)
        flat.index_add_(0, w * n_topics + before, ones, alpha=-1)
        flat.index_add_(0, w * n_topics + after, ones)
        flat = ndz.view(-1)
        flat.index_add_(0, d * n_topics + before, ones, alpha=-1)
        flat.index_add_(0, d * n_topics + after, ones)
        nz.index_add_(0, before, ones, alpha=-1)
        nz.index_add_(0, after, ones)
        z[start:stop] = new
