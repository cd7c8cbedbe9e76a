"""``folkrank_local`` and ``apr_local`` (ours): FolkRank and APR with the preference spread by push.

FolkRank and APR (Hotho, Jäschke, Schmitz and Stumme 2006, as TagRec runs them:
:mod:`tagtorch.posts.folkrank`) spread weight over the whole user-resource-tag graph for every
post. A post's weights after ``K`` iterations are a run without preference nodes, the same for
every post of the same norms, plus ``Σ_{j<K} M^j p``, the part its preference
``p = c_u e_u + c_r e_r`` adds (``FolkRank._decomposed``). The first is computed once, exactly;
this module computes the second by *local push* (Andersen, Chung and Lang 2006, "Local Graph
Partitioning using PageRank Vectors", FOCS), level by level so that it stops after ``K``
iterations as FolkRank does: level ``j`` holds the weight ``j`` steps from ``p``; a node's
weight is added to the estimate, and spread on to its neighbours only while it is at least
``push_epsilon`` times the node's degree. The work per post is then bounded by the weight
spread (about ``K / push_epsilon`` neighbour visits), not by the graph.

Two additions of ours make the push's error small where the lists need it:

- **Exact popular tags.** A push's error at a tag grows with the tag's degree, and the most
  used tags head most lists: the ``exact_tags`` tags of the highest degree get their exact
  part from the tags' columns (``FolkRank._tag_sum_parts``; ``K`` sparse products per 64 tags,
  for all posts at once).
- **The weight left unspread, given back by degree.** The weight a node keeps would have
  reached the tags in a known amount (every node sends half its spread to each other
  dimension: :func:`reaching_tags`), spread over them as the random walk's stationary
  distribution is, by degree. That amount is added to the tags in proportion to their degrees.

Error bound (stated, and tested against the exact runs): at a tag ``t`` of degree ``d_t``,
``|error| ≤ max(push_epsilon · d_t · (K − 1) · β / (1 − β), γ · β / (1 − β) · d_t / Σ d)``.
The weight left unspread at a node ``v`` (``r < push_epsilon · d_v``) sends at most ``β^i ·
push_epsilon · d_t`` to ``t`` in ``i`` steps, by the symmetry ``d_v · P^i(v, t) = d_t · P^i(t,
v)`` of the random walk, and what is given back is at most the preference's weight ``γ`` times
``β / (1 − β)``, shared by degree. :meth:`LocalFolkRank.error_bound` gives it per tag.

Deviations from the exact FolkRank, ours: the part of the preference is approximate (above);
every post runs ``K`` iterations (TagRec stops a post once its total change is at most ε; on
the synthetic sets of ``benchmarks/bench_scale.py`` no post stops before the tenth); tags whose
scores are within :data:`~tagtorch.posts.folkrank.TIE_TOLERANCE` of each other are tied.
"""

from __future__ import annotations

import numba
import numpy as np
import scipy.sparse as sp

from tagtorch.posts.folkrank import FolkRank

__all__ = ["LocalFolkRank", "pushed_tags", "reaching_tags"]


@numba.njit(nogil=True, cache=True)
def pushed_tags(indptr: np.ndarray, indices: np.ndarray, counts: np.ndarray,
                degree: np.ndarray, beta: float, epsilon: float, bounds: np.ndarray,
                reaching: np.ndarray, nodes: np.ndarray, coefficients: np.ndarray
                ) -> np.ndarray:
    """``[Q, n_tags]`` each post's ``Σ_{j<terms} M^j p`` at the tags, by level-wise push.

    ``M = β · A · diag(1 / degree)`` with ``A`` the summed graph (CSR), its tags, users and
    resources the nodes ``bounds[d]:bounds[d + 1]``; post ``q``'s ``p`` has
    ``coefficients[d, q]`` at ``nodes[d, q]`` (``-1``: none). A node's weight at a level below
    the last spreads on only while it is at least ``epsilon · degree``; the weight it keeps
    would have sent ``reaching[dimension, level]`` times itself to the tags, which are given
    it in proportion to their degrees (module docstring). ``terms = reaching.shape[1]``.
    """
    n, n_posts, terms = len(indptr) - 1, nodes.shape[1], reaching.shape[1]
    n_tags = bounds[1]
    out = np.zeros((n_posts, n_tags))
    tag_share = degree[:n_tags] / degree[:n_tags].sum()
    current, following = np.zeros(n), np.zeros(n)
    frontier, reached = np.empty(n, np.int64), np.empty(n, np.int64)
    for q in range(n_posts):
        count, kept = 0, 0.0
        for d in range(nodes.shape[0]):
            v = nodes[d, q]
            if v >= 0 and coefficients[d, q] > 0.0:
                if current[v] == 0.0:
                    frontier[count] = v
                    count += 1
                current[v] += coefficients[d, q]
        for level in range(terms):
            n_reached = 0
            for i in range(count):
                v = frontier[i]
                mass = current[v]
                current[v] = 0.0
                if v < n_tags:
                    out[q, v] += mass
                if level == terms - 1:
                    continue
                if mass < epsilon * degree[v]:
                    kept += mass * reaching[(v >= bounds[1]) + (v >= bounds[2]), level]
                    continue
                share = beta * mass / degree[v]
                for e in range(indptr[v], indptr[v + 1]):
                    w = indices[e]
                    if following[w] == 0.0:
                        reached[n_reached] = w
                        n_reached += 1
                    following[w] += share * counts[e]
            current, following = following, current
            frontier, reached = reached, frontier
            count = n_reached
        for t in range(n_tags):
            out[q, t] += kept * tag_share[t]
    return out


def reaching_tags(beta: float, terms: int) -> np.ndarray:
    """``[3, terms]`` the weight one unit kept at level ``j`` sends to the tags afterwards.

    Rows: a unit at a tag, a user, a resource; ``Σ_{i=1}^{terms-1-j} β^i (P^i)[tags, d]``, as
    every node sends half of its spread to each other dimension (``P``).

    Example:
        >>> reaching_tags(0.5, 3).round(4).tolist()
        [[0.125, 0.0, 0.0], [0.3125, 0.25, 0.0], [0.3125, 0.25, 0.0]]
    """
    spread = np.full((3, 3), 0.5) - 0.5 * np.eye(3)
    out = np.zeros((3, terms))
    step = np.eye(3)
    for i in range(1, terms):
        step = beta * spread @ step
        for j in range(terms - i):  # levels j with i steps left
            out[:, j] += step[0]
    return out


class LocalFolkRank(FolkRank):
    """``folkrank_local`` (``adapted=False``) and ``apr_local`` (``adapted=True``), ours.

    Module docstring; the settings are :class:`~tagtorch.posts.folkrank.FolkRank`'s (its
    ``epsilon`` stop and ``solver`` do not apply: every post runs ``max_iterations``) and:

    Args:
        push_epsilon: a node's weight spreads on while at least this times its degree (the
            error bound and the work per post are proportional to it and its inverse).
        exact_tags: this many tags of the highest degree get their exact part.
    """

    def __init__(self, adapted: bool = False, damping: float = 0.7, max_iterations: int = 10,
                 push_epsilon: float = 1e-6, chunk: int = 512, renormalize: bool = False,
                 top_k: int = 10, n_jobs: int = -1, tagrec_preference_ids: bool = False,
                 exact_tags: int = 512) -> None:
        if not push_epsilon > 0.0:
            raise ValueError(f"push_epsilon must be > 0, got {push_epsilon}")
        super().__init__(adapted=adapted, damping=damping, max_iterations=max_iterations,
                         chunk=chunk, renormalize=renormalize, top_k=top_k, n_jobs=n_jobs,
                         tagrec_preference_ids=tagrec_preference_ids)
        if exact_tags < 0:
            raise ValueError(f"exact_tags must be >= 0, got {exact_tags}")
        self.push_epsilon, self.exact_tags = push_epsilon, exact_tags

    def _preferred_tags(self, users: np.ndarray, resources: np.ndarray
                        ) -> tuple[np.ndarray, np.ndarray | None]:
        """``[Q, T]`` the base run plus the pushed preference; every row's near ties merged."""
        out, merged = self._decomposed(users, resources, self._pushed_parts, certify=False)
        return out, merged

    def error_bound(self) -> np.ndarray:
        """``[T]`` how far each graph tag's score may be from the exact one (module docstring).

        ``max(ε · d_t · (K − 1) · β / (1 − β), γ · β / (1 − β) · d_t / Σ d)``: the weight left
        unspread, and the share of it given back by degree.
        """
        terms, beta = self.max_iterations, self.damping
        degree = self.degree_[:self.sizes_[0]]
        kept = self.push_epsilon * degree * (terms - 1) * beta / (1.0 - beta)
        given = self.gamma_ * beta / (1.0 - beta) * degree / degree.sum()
        return np.maximum(kept, given)

    def _pushed_parts(self, nodes: np.ndarray, coefficients: np.ndarray,
                      summed: sp.csr_matrix, scale: np.ndarray) -> np.ndarray:
        """``[Q, T]`` each post's ``Σ_{j<K} M^j p`` at the tags by :func:`pushed_tags`."""
        n_posts = nodes.shape[1]
        out = np.empty((n_posts, int(self.sizes_[0])))
        size = max(1, min(self.chunk, -(-n_posts // self._threads(n_posts))))
        bounds = np.cumsum(np.r_[0, self.sizes_])
        reaching = reaching_tags(self.damping, self.max_iterations)

        def run(start: int) -> None:
            part = slice(start, start + size)
            out[part] = pushed_tags(summed.indptr, summed.indices, summed.data, self.degree_,
                                    self.damping, self.push_epsilon, bounds, reaching,
                                    np.ascontiguousarray(nodes[:, part]),
                                    np.ascontiguousarray(coefficients[:, part]))

        self._in_threads(run, range(0, n_posts, size), "local push", "batch")
        exact = np.argsort(-self.degree_[:self.sizes_[0]], kind="stable")[:self.exact_tags]
        return self._tag_sum_parts(nodes, coefficients, summed, scale, exact, out)
