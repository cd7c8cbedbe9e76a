"""``apr`` and ``folkrank``: weight spreading over the user-resource-tag graph, all posts at once.

Hotho, Jäschke, Schmitz and Stumme (2006), "Information Retrieval in Folksonomies: Search and
Ranking" (ESWC), as TagRec runs it (github.com/learning-layers/TagRec,
``processing/FolkRankCalculator.java`` and ``processing/folkrank/``).

What TagRec does, step by step (the default here reproduces it, to the last bit of the sums):

- **Graph.** The *facts* are the training tag assignments ``(t, u, r)``, read post by post in
  TagRec's file order (its leave-last files: by user, then time). Ours: the training posts'
  order and a post's tags by code (the facts' order only changes sums at the last bit). Each
  dimension numbers its nodes in order of first appearance in the facts *in the file's order*
  (:attr:`~tagtorch.posts.data.Posts.source_order` where the posts know it): for tags that is
  TagRec's own tag index, which orders ties, so the lists equal TagRec's on its shuffled
  random splits too (``ml_random_tagged`` in ``tests/test_tagrec_oracle.py``). Every fact
  adds 2 to the *count* of each of its three nodes (a hyperedge read as two directed edges
  per node).
- **Iteration.** All weights start at ``1/|D|`` in each dimension ``D``. Each iteration spreads
  ``w / count`` of every node along each of its facts to the fact's two other nodes (the total
  weight is kept), adds the preference, and sets ``w ← α·w + β·spread + γ·p_D`` with α = 0,
  β = 0.7, γ = 0.3. A node's spread is summed fact by fact in the facts' order, for a tag the
  user's share before the resource's (and for a user the tag's before the resource's, for a
  resource the tag's before the user's); we keep that order, so exact ties stay exact ties.
- **Preference.** The preferred run gives the post's user the preference weight ``|U|`` and its
  resource ``|R|`` (TagRec passes its user and resource ids as graph node ids, which are the
  same for the users and resources of the training lines; a user or resource that is not in
  the graph gets none). The random surfer weight is ``p_D = 1 / (|D| + Σ preference weights in
  D)`` and the preferred node gets ``γ · weight / (|D| + Σ preference weights in D)`` more
  (added as ``(γ/β) · weight / (…)`` to its spread before β multiplies it, which we copy too).
  *Odd part:* the preference weights always count in the sum, so when the post's resource (or
  user) is not in the graph every node of that dimension still gets only ``1 / (2|R|)``: that
  dimension spreads half its random-surfer weight (``renormalize=True`` gives it ``1/|R|``).
- **Stop.** After 10 iterations or once ``Σ |w_new − w_old|`` over all nodes of the three
  dimensions is at most ε = 1e-5 (TagRec's ``10e-6``), for each post on its own.
- **Scores.** ``apr`` (adapted PageRank) ranks the tags by the preferred run; ``folkrank`` by
  the preferred run minus the run without preference (no preference weights, ``p_D = 1/|D|``;
  the same for every post, computed once).
- **Lists.** ``ItemWithWeight.getTopK`` walks the graph's tags in their index order and keeps a
  ``TreeSet`` ordered by weight, then the *higher* index: ties come out later-first. *Odd part:*
  it admits an item only while its weight is above the current 10th (strictly), and drops the
  last element (the lowest weight, the lowest index) when the set overflows. So of the tags
  tied at the 10th weight, the list keeps the highest-index ones among the first ten tags (by
  index) of at least that weight (eleven when tags ``0..10`` all have it): neither the lowest
  nor the highest indices overall.
  :meth:`FolkRank.tie_order` returns keys that reproduce that list (``top_k=10``; ``top_k=0``:
  plain later-first ties). Tags outside the training facts are never listed (no node).

Deviations: none in the computation or the lists, given the same training lines in the same
order (TagRec's own lists: ``tests/test_folkrank_tagrec.py``), but one defect of TagRec's that
the default does not copy. TagRec numbers its graph's users and resources by their first
*tagged* training line, yet prefers the node whose number is the user's and resource's id in
its reader, which numbers them by their first line of any kind: after a training line without
tags, every later user (resource) has its preference on the wrong node, and the last ones on
none. The default prefers the post's own user and resource; ``tagrec_preference_ids=True``
copies the defect, for those who must match TagRec's published figures (on the
``ml_random`` fixture, 11 tagless training lines of 1,464, it moves ``tagrec_mrr@10``
by about 0.03: ``docs/personalized_tags.md``). Not reproduced: a graph with fewer than 10 tags
pads TagRec's list with tag 0. Outside
this module: TagRec's ``BookmarkReader`` drops lines whose timestamp is not all digits (a
negative one), which changes its graph slightly (three Last.fm posts).

``spread="facts"`` divides a node's weight by its number of facts instead of twice that (each
fact sends the whole share to both other nodes), which doubles the spread weight in every
iteration, so the popularity part outweighs the preference: a variant for comparison only.

Two ways to compute the runs (``solver``), giving the same lists (issue 73; on every TagRec
fixture, and on the synthetic sets of 100k to 1M posts, post by post):

- ``per_post``: each post its own column of a ``[nodes, posts]`` matrix, spread by one sparse
  product per iteration (each row's entries stored in TagRec's summation order, one per fact
  and neighbour, duplicates kept), each post stopping on its own ε as TagRec's per-post loop
  does: TagRec's sums to the last bit. The cost is ``K`` products over the graph per post.
- ``by_tag`` (ours): a post's weights after ``K`` iterations are linear in its preference
  ``p = c_u e_u + c_r e_r``: a run without preference nodes (one per group of posts with the
  same norms) plus ``Σ_{j<K} M^j p`` (``M = β A D⁻¹``, the spreading). The graph is symmetric,
  so ``(Σ_j M^j)[t, v]`` for every graph tag ``t`` and every node ``v`` comes from ``K``
  products of ``M^T`` on the tags' unit vectors (:func:`tag_sums`): as many columns as tags,
  whatever the number of posts, for every user's and resource's preference at once. This is
  valid for a post that runs all ``K`` iterations; TagRec stops a post once its total change
  ``‖d_k‖₁`` is at most ε. :meth:`FolkRank._certified` proves ``‖d_k‖₁ > ε`` for every
  ``k < K`` by ``‖d_k‖₁ ≥ |⟨d_k, z⟩|`` for sign vectors ``z`` (the base run's change and 16
  reference posts' own changes): one product per ``z`` and ``k`` for all posts. A post not
  proved is run per post. The sums come in another order, so values that TagRec's sums make
  exactly equal may differ in the last bits: scores within :data:`TIE_TOLERANCE` of each other
  are tied (:func:`merge_near_ties`), in the best :data:`MERGED_DEPTH` of a list.
- ``auto`` (the default): ``by_tag`` where the graph has fewer tags than there are posts to
  score, else ``per_post``.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal

import numba
import numpy as np
import scipy.sparse as sp

from tagtorch.posts.base import PostRanker
from tagtorch.posts.data import PostData, Posts, post_places
from tagtorch.progress import progress

__all__ = ["SOLVERS", "FolkRank", "tag_sums", "tagrec_left_out"]

SOLVERS = ("auto", "per_post", "by_tag")
"""How :class:`FolkRank` computes its runs (class docstring)."""
CERTIFY_MARGIN = 1e-9
"""How far above ε a post's proved change must be (float error in the bound, far smaller)."""
TAG_BLOCK = 64
"""Tags per block of :func:`tag_sums` (two ``[nodes, TAG_BLOCK]`` arrays per thread)."""
MERGED_DEPTH = 100
"""How deep a list's near ties are merged (TagRec's lists hold 10 tags; the hybrid reads 50)."""
TIE_TOLERANCE = 1e-13
"""Scores of the tags' columns this close are one tie (their float error: at most 3e-15 on
the fixtures and the synthetic sets, of weights summing to at most 3)."""


def first_appearance(codes: np.ndarray, n_codes: int) -> np.ndarray:
    """``[n_codes]`` each code's rank by first appearance in ``codes`` (``-1``: absent).

    Example:
        >>> first_appearance(np.array([4, 1, 4, 0]), 6).tolist()
        [2, 1, -1, -1, 0, -1]
    """
    unique, first = np.unique(codes, return_index=True)
    ranks = np.full(n_codes, -1, dtype=np.int64)
    ranks[unique[np.argsort(first)]] = np.arange(len(unique))
    return ranks


def fact_graph(facts: np.ndarray, n_nodes: int) -> sp.csr_matrix:
    """``[n, n]`` the facts' node-to-node graph, each row's entries in TagRec's summation order.

    Args:
        facts: ``[F, 3]`` the node ids of each fact (tag, user, resource), in the facts' order.
        n_nodes: the number of nodes.

    Returns:
        One entry of 1.0 per (fact, other node), duplicates kept: a row lists its node's facts
        in order, each with the other two nodes by dimension, so that ``graph @ x`` adds up
        ``x`` exactly as TagRec's loop does (scipy's CSR product sums a row in stored order).

    Example:
        >>> g = fact_graph(np.array([[0, 2, 3], [1, 2, 3], [0, 2, 4]]), 5)
        >>> g.indices[g.indptr[0]:g.indptr[1]].tolist(), g.indices[g.indptr[2]:g.indptr[3]].tolist()
        ([2, 3, 2, 4], [0, 3, 1, 3, 0, 4])
    """
    others = np.array([[1, 2], [0, 2], [0, 1]])
    rows = np.repeat(facts[:, :, None], 2, axis=2).ravel()  # order: fact, dim, other dim
    cols = facts[:, others].ravel()
    order = np.argsort(rows, kind="stable")
    indptr = np.r_[0, np.cumsum(np.bincount(rows, minlength=n_nodes))]
    return sp.csr_matrix((np.ones(len(rows)), cols[order], indptr), shape=(n_nodes, n_nodes))


def tagrec_left_out(weights: np.ndarray, k: int) -> np.ndarray:
    """``[Q, T]`` the tags tied at the ``k``-th weight that ``getTopK``'s list leaves out.

    ``weights`` holds the graph's tags in TagRec's index order. Ranking by weight, then the
    higher index, with these tags after the others of their weight, gives TagRec's
    ``ItemWithWeight.getTopK`` list of ``k`` (module docstring): of the tied tags, only those
    among the first ``k`` tags (by index) of at least that weight (``k + 1`` when tags ``0..k``
    all have it) may stay.

    Example:
        >>> tagrec_left_out(np.array([[5.0, 3, 3, 3]]), 2).tolist()  # getTopK keeps 0 and 2
        [[False, False, False, True]]
    """
    if weights.shape[1] <= k:
        return np.zeros(weights.shape, dtype=bool)
    kth = -np.partition(-weights, k - 1, axis=1)[:, k - 1:k]  # [Q, 1] the k-th weight
    at_least = weights >= kth
    rank = np.cumsum(at_least, axis=1)  # how many so far, among those of at least that weight
    window = k + at_least[:, :k + 1].all(1, keepdims=True)  # admitted before the set is full
    return (weights == kth) & (rank > window)


def merge_near_ties(scores: np.ndarray, tolerance: float, rows: np.ndarray, depth: int
                    ) -> np.ndarray:
    """``scores`` (in place) with the near ties among each of ``rows``' best merged.

    In a row where ``rows`` is True, the scores at least the ``depth``-th best less
    ``tolerance`` are sorted, and each run of values within ``tolerance`` of the next is set to
    the run's highest: a list of up to ``depth`` tags then orders them as ties. Scores further
    down never reach such a list and are left as they are.

    Example:
        >>> merged = merge_near_ties(np.array([[3.0, 1.0, 3.0 - 1e-15, 2.0]]), 1e-13,
        ...                          np.array([True]), 2)
        >>> merged.tolist()
        [[3.0, 1.0, 3.0, 2.0]]
    """
    picked = np.flatnonzero(rows)
    if not len(picked) or scores.shape[1] == 0:
        return scores
    part = scores[picked]
    k = min(depth, part.shape[1])
    kth = -np.partition(-part, k - 1, axis=1)[:, k - 1]
    row, col = np.nonzero(part >= (kth - tolerance)[:, None])
    values = part[row, col]
    order = np.lexsort((-values, row))
    row, col, values = row[order], col[order], values[order]
    starts = np.ones(len(values), dtype=bool)
    starts[1:] = (row[1:] != row[:-1]) | (values[:-1] - values[1:] > tolerance)
    leader = np.maximum.accumulate(np.where(starts, np.arange(len(values)), 0))
    part[row, col] = values[leader]
    scores[picked] = part
    return scores


@numba.njit(nogil=True, cache=True)
def tag_sums(indptr: np.ndarray, indices: np.ndarray, counts: np.ndarray, scale: np.ndarray,
             tags: np.ndarray, terms: int, rows: np.ndarray) -> np.ndarray:
    """``[len(rows), len(tags)]`` ``Σ_{j<terms} (M^T)^j e_t`` at ``rows`` for the nodes ``tags``.

    ``M^T = diag(scale) · A`` with ``A`` the summed graph (``indptr, indices, counts``, CSR),
    ``scale = β / degree``: ``(M^T)^j e_t`` at ``v`` is ``(M^j e_v)`` at ``t``, the weight a
    preference on ``v`` sends to tag ``t`` in ``j`` iterations (``FolkRank._by_tag``).
    """
    n, width = len(indptr) - 1, len(tags)
    y = np.zeros((n, width))
    new = np.empty((n, width))
    for c in range(width):
        y[tags[c], c] = 1.0
    for _ in range(terms - 1):
        for i in range(n):
            row = new[i]
            row[:] = 0.0
            for p in range(indptr[i], indptr[i + 1]):
                a = counts[p]
                source = y[indices[p]]
                for c in range(width):
                    row[c] += a * source[c]
            s = scale[i]
            for c in range(width):
                row[c] *= s
        for c in range(width):
            new[tags[c], c] += 1.0
        y, new = new, y
    out = np.empty((len(rows), width))
    for q in range(len(rows)):
        out[q] = y[rows[q]]
    return out


class FolkRank(PostRanker):
    """``folkrank`` (``adapted=False``) and ``apr`` (``adapted=True``), module docstring.

    Args:
        adapted: rank by the preferred run alone (APR) instead of FolkRank's difference.
        damping: β, the share of spread weight (TagRec: 0.7; γ = 1 − β in decimals, α = 0).
        max_iterations: at most this many iterations (TagRec: 10).
        epsilon: stop once a post's total change is at most this (TagRec: 1e-5).
        chunk: posts per batch of columns (bounds memory: ``nodes × chunk`` doubles).
        spread: ``"edges"`` (TagRec: a node's weight over twice its facts, the total kept) or
            ``"facts"`` (over its facts: the spread weight doubles each iteration).
        renormalize: a dimension whose preferred node is not in the graph keeps the random
            surfer ``1/|D|`` (TagRec: ``1/(2|D|)``, module docstring).
        top_k: the length of TagRec's lists whose boundary ties :meth:`tie_order` reproduces
            (TagRec: 10; 0: every tie later-first).
        n_jobs: threads scoring batches of posts or blocks of tags (``-1``: one per core).
        tagrec_preference_ids: prefer the nodes numbered as TagRec's reader numbers the post's
            user and resource (TagRec's defect, module docstring; the same nodes unless a
            training post has no tags).
        solver: ``auto``, ``per_post`` or ``by_tag`` (module docstring).
        references: posts whose own changes give :meth:`_certified` its sign vectors.
    """

    adapted: bool
    damping: float
    max_iterations: int
    epsilon: float
    chunk: int
    spread: str
    renormalize: bool
    top_k: int
    n_jobs: int
    tagrec_preference_ids: bool
    solver: str
    references: int

    def __init__(self, adapted: bool = False, damping: float = 0.7, max_iterations: int = 10,
                 epsilon: float = 1e-5, chunk: int = 512, spread: str = "edges",
                 renormalize: bool = False, top_k: int = 10, n_jobs: int = -1,
                 tagrec_preference_ids: bool = False, solver: str = "auto",
                 references: int = 16) -> None:
        if not 0.0 < damping < 1.0:
            raise ValueError(f"damping must be in (0, 1), got {damping}")
        if spread not in ("facts", "edges"):
            raise ValueError(f"spread must be 'facts' or 'edges', got {spread!r}")
        if n_jobs == 0 or n_jobs < -1:
            raise ValueError(f"n_jobs must be -1 or >= 1, got {n_jobs}")
        if top_k < 0:
            raise ValueError(f"top_k must be >= 0, got {top_k}")
        if solver not in SOLVERS:
            raise ValueError(f"solver must be one of {SOLVERS}, got {solver!r}")
        if references < 0:
            raise ValueError(f"references must be >= 0, got {references}")
        self.adapted, self.damping, self.renormalize = adapted, damping, renormalize
        self.max_iterations, self.epsilon, self.chunk = max_iterations, epsilon, chunk
        self.top_k, self.n_jobs = top_k, n_jobs
        self.tagrec_preference_ids = tagrec_preference_ids
        self.solver, self.references = solver, references

    def _fit(self, data: PostData) -> None:
        """The graph of the training facts and the run without preference."""
        # γ as TagRec's decimal literals give it (0.3, not the double 1 − 0.7 = 0.30000000000000004)
        self.gamma_ = float(Decimal(1) - Decimal(repr(float(self.damping))))
        train = data.train
        posts = train.tags.row_ids
        codes = (train.tags.values, train.users[posts], train.resources[posts])
        lines = (np.arange(len(posts)) if train.source_order is None  # TagRec's file order
                 else np.argsort(train.source_order, kind="stable"))
        ranks = [first_appearance(c[lines], n) for c, n in
                 zip(codes, (data.n_tags, data.n_users, data.n_resources), strict=True)]
        self.sizes_ = np.array([int(r.max(initial=-1)) + 1 for r in ranks])
        self.start_ = np.repeat(1.0 / self.sizes_, self.sizes_)  # 1/|D| in every dimension
        starts = np.r_[0, np.cumsum(self.sizes_)]
        self.node_of_ = [np.where(r >= 0, r + starts[d], -1) for d, r in enumerate(ranks)]
        self.preferred_ = (self._reader_nodes(data, starts) if self.tagrec_preference_ids
                           else self.node_of_[1:])
        facts = np.stack([self.node_of_[d][c] for d, c in enumerate(codes)], axis=1)
        n = int(starts[-1])
        self.graph_ = fact_graph(facts, n)
        self._summed: sp.csr_matrix | None = None  # the summed graph, made on first use
        self.degree_ = np.bincount(facts.ravel(), minlength=n).astype(np.float64)
        self.degree_ *= 2.0 if self.spread == "edges" else 1.0
        self.tag_codes_ = np.argsort(ranks[0])[data.n_tags - self.sizes_[0]:]  # by node
        self.n_tags_ = data.n_tags
        self._left_out: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        none = np.full(0, -1)
        self.baseline_ = self._spread(none, none, 1)[:self.sizes_[0], 0]

    def _reader_nodes(self, data: PostData, starts: np.ndarray) -> list[np.ndarray]:
        """The user and resource nodes TagRec prefers: its reader's ids read as node ids.

        TagRec's reader numbers users and resources by their first line in the file (training
        lines first, tagless ones included); an id past the graph's nodes prefers none.
        """
        lines = np.argsort(post_places(data.train), kind="stable")
        nodes = []
        for d, (codes, n) in enumerate(((data.train.users, data.n_users),
                                        (data.train.resources, data.n_resources)), start=1):
            rank = first_appearance(codes[lines], n)
            nodes.append(np.where((rank >= 0) & (rank < self.sizes_[d]), rank + starts[d], -1))
        return nodes

    def _norms(self, users: np.ndarray, resources: np.ndarray, n_posts: int) -> np.ndarray:
        """``[3, n_posts]`` each dimension's ``|D| + Σ preference weights`` (TagRec's norm).

        Empty ``users`` and ``resources``: the run without preference (``|D|``).
        """
        norm = np.repeat(self.sizes_[:, None], n_posts, 1).astype(np.float64)
        if len(users) or len(resources):
            for d, nodes in ((1, users), (2, resources)):
                norm[d] += self.sizes_[d] * ((nodes >= 0) if self.renormalize else 1.0)
        return norm

    def _spread(self, users: np.ndarray, resources: np.ndarray, n_posts: int,
                norm: np.ndarray | None = None, deltas: list[np.ndarray] | None = None
                ) -> np.ndarray:
        """``[nodes, n_posts]`` the final weights with each post's user and resource preferred.

        ``users`` and ``resources`` hold node ids, ``-1`` where not in the graph (no
        preference node, but the preference weight still counts in the norm); empty arrays:
        the run without preference for all ``n_posts`` columns. ``norm``: ``[3, n_posts]``
        norms instead of :meth:`_norms`'. ``deltas``: gets each iteration's ``new − old``, and
        every post runs ``max_iterations`` (no ε stop).
        """
        beta, gamma = self.damping, self.gamma_
        bounds = np.r_[0, np.cumsum(self.sizes_)]
        norm = self._norms(users, resources, n_posts) if norm is None else norm
        surfer = gamma * (1.0 / norm)  # γ · p_D, [3, n_posts]
        extra = [(gamma / beta) * (self.sizes_[d] / norm[d]) for d in (1, 2)]  # added before β
        nodes = [users, resources]
        weights = np.repeat(self.start_[:, None], n_posts, 1)
        degree = self.degree_[:, None]
        active = np.arange(n_posts)
        for _ in range(self.max_iterations):
            every = len(active) == n_posts
            current = weights if every else weights[:, active]
            new = self.graph_ @ (current / degree)
            for preferred_nodes, add in zip(nodes, extra, strict=True):
                if len(preferred_nodes):
                    known = np.flatnonzero(preferred_nodes[active] >= 0)
                    new[preferred_nodes[active[known]], known] += add[active[known]]
            new *= beta
            for d in range(3):  # each dimension's nodes a block of rows
                new[bounds[d]:bounds[d + 1]] += surfer[d, active]
            if deltas is not None:
                deltas.append(new - current)
            current -= new  # the old weights are no longer needed (a copy, or replaced)
            delta = np.abs(current, out=current).sum(0)  # row by row: TagRec's order
            if every:
                weights = new
            else:
                weights[:, active] = new
            active = active[(delta > self.epsilon) | (deltas is not None)]
            if not len(active):
                break
        return weights

    def _tag_weights(self, posts: Posts) -> tuple[np.ndarray, np.ndarray]:
        """``[Q, T]`` the graph's tags' scores (node order) and ``(posts, tags)`` left out.

        The second array lists :func:`tagrec_left_out` (``[2, n]``, empty when ``top_k`` is 0).
        """
        users = self.preferred_[0][posts.users]
        resources = self.preferred_[1][posts.resources]
        out, merged = self._preferred_tags(users, resources)
        baseline = 0.0 if self.adapted else self.baseline_
        out -= baseline
        if merged is not None:
            for start in range(0, len(posts), self.chunk):
                part = slice(start, start + self.chunk)
                merge_near_ties(out[part], TIE_TOLERANCE, merged[part], MERGED_DEPTH)
            rest = np.flatnonzero(~merged)
            if len(rest):  # not proved to run every iteration: each its own run
                out[rest] = self._per_post(users[rest], resources[rest]) - baseline
        if not self.top_k:
            return out, np.zeros((2, 0), dtype=np.int64)
        parts = [np.zeros((2, 0), dtype=np.int64)]
        for start in range(0, len(posts), self.chunk):
            rows, cols = np.nonzero(tagrec_left_out(out[start:start + self.chunk], self.top_k))
            parts.append(np.stack([rows + start, cols]))
        return out, np.concatenate(parts, axis=1)

    def _preferred_tags(self, users: np.ndarray, resources: np.ndarray
                        ) -> tuple[np.ndarray, np.ndarray | None]:
        """``[Q, T]`` the preferred run's tag weights, and ``[Q]`` the rows of merged near ties.

        The second is None where no row's near ties are merged; its False rows are run again
        per post.
        """
        if self._solver_for(len(users)) == "by_tag":
            return self._by_tag(users, resources)
        return self._per_post(users, resources), None

    def _solver_for(self, n_posts: int) -> str:
        """``per_post`` or ``by_tag`` for ``n_posts`` posts (``auto``: the fewer columns)."""
        if self.solver != "auto":
            return self.solver
        return "by_tag" if self.sizes_[0] < n_posts else "per_post"

    def _threads(self, n_items: int) -> int:
        """The threads for ``n_items`` independent items (``n_jobs``, at most one per item)."""
        jobs = (os.cpu_count() or 1) if self.n_jobs == -1 else self.n_jobs
        return max(1, min(jobs, n_items))

    def _per_post(self, users: np.ndarray, resources: np.ndarray) -> np.ndarray:
        """``[Q, T]`` the preferred run's tag weights, each post its own column (TagRec's sums).

        Batches of ``chunk`` posts run in ``n_jobs`` threads (the sparse products and array
        operations release the GIL).
        """
        out = np.empty((len(users), int(self.sizes_[0])))
        size = max(1, min(self.chunk, -(-len(users) // self._threads(len(users)))))

        def run(start: int) -> None:
            part = slice(start, start + size)
            count = len(users[part])
            out[part] = self._spread(users[part], resources[part], count)[:self.sizes_[0]].T

        self._in_threads(run, range(0, len(users), size), "per post", "batch")
        return out

    def _by_tag(self, users: np.ndarray, resources: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray]:
        """``[Q, T]`` the preferred run's tag weights by the tags' columns, and ``[Q]`` certified.

        :func:`tag_sums` gives ``(Σ_j M^j)[t, v]`` for every graph tag ``t`` at the posts' user
        and resource nodes ``v`` (:meth:`_decomposed`). Valid for the posts that run all ``K``
        iterations, which :meth:`_certified` proves (the others are False).
        """
        return self._decomposed(users, resources, self._tag_sum_parts, certify=True)

    def _decomposed(self, users: np.ndarray, resources: np.ndarray,
                    parts: Callable[[np.ndarray, np.ndarray, sp.csr_matrix, np.ndarray],
                                    np.ndarray],
                    certify: bool) -> tuple[np.ndarray, np.ndarray]:
        """``[Q, T]`` the preferred run's tag weights as a base run plus the preference's part.

        A post's weights after ``K`` iterations are a run without preference nodes (its norms,
        one per group of posts with the same norms) plus ``Σ_{j<K} M^j p`` for its preference
        ``p = c_u e_u + c_r e_r`` (module docstring), whose tag entries ``parts(nodes
        [2, Q], coefficients [2, Q], summed graph, β / degree)`` gives. Also ``[Q]``: the posts
        :meth:`_certified` proves to run every iteration (``certify``; else all True).
        """
        norm = self._norms(users, resources, len(users))
        beta = self.damping
        coefficients = np.stack([np.where(nodes >= 0, beta * ((self.gamma_ / beta) * (
            self.sizes_[d] / norm[d])), 0.0) for d, nodes in ((1, users), (2, resources))])
        nodes = np.stack([users, resources])
        summed, scale = self._summed_graph()
        out = parts(nodes, coefficients, summed, scale)
        certified = np.full(len(users), not certify)
        groups, group_of = np.unique(norm.T, axis=0, return_inverse=True)
        for g, group_norm in enumerate(groups):
            posts = np.flatnonzero(group_of.ravel() == g)
            deltas: list[np.ndarray] = []  # also: every iteration runs (no ε stop)
            base = self._spread(np.full(1, -1), np.full(1, -1), 1, group_norm[:, None], deltas)
            out[posts] += base[:self.sizes_[0], 0]
            if certify:
                certified[posts] = self._certified(nodes[:, posts], coefficients[:, posts],
                                                   [d[:, 0] for d in deltas], summed, scale)
        return out, certified

    def _tag_sum_parts(self, nodes: np.ndarray, coefficients: np.ndarray,
                       summed: sp.csr_matrix, scale: np.ndarray,
                       tags: np.ndarray | None = None, out: np.ndarray | None = None
                       ) -> np.ndarray:
        """``[Q, T]`` each post's ``Σ_{j<K} M^j p`` at the tags, by :func:`tag_sums`.

        Blocks of tags run in threads; a block's sums at the posts' nodes are dropped once used.

        ``tags``: only these graph tags, written into their columns of ``out``.
        """
        rows, where = np.unique(np.where(nodes >= 0, nodes, nodes.max(initial=0)),
                                return_inverse=True)
        where = where.reshape(nodes.shape)
        tags = np.arange(int(self.sizes_[0])) if tags is None else tags
        out = np.empty((nodes.shape[1], int(self.sizes_[0]))) if out is None else out

        def run(start: int) -> None:
            block = tags[start:start + TAG_BLOCK]
            sums = tag_sums(summed.indptr, summed.indices, summed.data, scale, block,
                            self.max_iterations, rows)  # [rows, block]
            out[:, block] = coefficients[0, :, None] * sums[where[0]]
            out[:, block] += coefficients[1, :, None] * sums[where[1]]

        self._in_threads(run, range(0, len(tags), TAG_BLOCK), "by tag", "block")
        return out

    def _summed_graph(self) -> tuple[sp.csr_matrix, np.ndarray]:
        """The graph with its duplicate entries summed, and ``β / degree`` (``M^T``'s rows).

        Made once per fit, on the first call (the per-post solver never needs it).
        """
        if self._summed is None:
            self._summed = self.graph_.copy()
            self._summed.sum_duplicates()
        return self._summed, self.damping / self.degree_

    def _certified(self, nodes: np.ndarray, coefficients: np.ndarray,
                   base_deltas: list[np.ndarray], summed: sp.csr_matrix, scale: np.ndarray
                   ) -> np.ndarray:
        """``[Q]`` the posts whose change exceeds ε in every iteration before the last.

        A post's change in iteration ``k`` is ``d_k = D_k + M^{k-1} p`` (``D_k`` the base
        run's, ``p`` its preference), and ``‖d_k‖₁ ≥ |⟨d_k, z⟩|`` for every ``z`` in
        ``[-1, 1]``: with ``z`` the signs of ``D_k`` and of ``references`` posts' own
        changes, ``⟨M^{k-1} p, z⟩`` is ``p``'s entries of ``(M^T)^{k-1} z`` (one product per
        ``z`` and ``k`` for all posts). A post not proved to run every iteration is left to
        the per-post solver (it may stop early, as TagRec's loop would stop it).
        """
        count = min(self.references, nodes.shape[1])
        picks = np.linspace(0, nodes.shape[1] - 1, count).astype(np.int64)
        own: list[np.ndarray] = []
        if count:
            self._spread(nodes[0, picks], nodes[1, picks], count, deltas=own)
        certified = np.ones(nodes.shape[1], dtype=bool)
        for k, base in enumerate(base_deltas[:-1], start=1):
            z = np.sign(np.column_stack([base, *([own[k - 1]] if own else [])]))
            dot = base @ z  # [Z]
            for _ in range(k - 1):
                z = scale[:, None] * (summed @ z)
            bound = np.abs(dot + sum(coefficients[d, :, None] * z[np.maximum(nodes[d], 0)]
                                     for d in range(2)))
            certified &= bound.max(1) > self.epsilon + CERTIFY_MARGIN
        return certified

    def _in_threads(self, run: Callable[[int], None], starts: range, solver: str,
                    unit: str) -> None:
        """``run(start)`` for every start in ``n_jobs`` threads, with a bar of ``unit``s."""
        with ThreadPoolExecutor(self._threads(len(starts))) as pool:
            for _ in progress(pool.map(run, starts), f"{'APR' if self.adapted else 'FolkRank'}"
                              f" ({solver})", unit=unit, total=len(starts),
                              enabled=len(starts) > 1):
                pass

    def score(self, posts: Posts) -> np.ndarray:
        """``[Q, W]`` dense scores; ``-inf`` for tags not in the graph.

        Keeps which tied tags TagRec's lists leave out, for :meth:`tie_order` of the same posts.
        """
        weights, left_out = self._tag_weights(posts)
        self._left_out = (posts.users.copy(), posts.resources.copy(), left_out)
        out = np.full((len(posts), self.n_tags_), -np.inf)
        out[:, self.tag_codes_] = weights
        return out

    def tie_order(self, posts: Posts) -> np.ndarray:
        """``[Q, W]`` keys that make the ``top_k`` best tags TagRec's list (module docstring).

        The key is TagRec's tag index (equal scores: the later-seen tag first), less the number
        of graph tags for the tags tied at the ``top_k``-th score that ``getTopK`` leaves out
        (kept by :meth:`score` for the same posts, else computed again).
        """
        kept = self._left_out
        if (kept is None or not np.array_equal(kept[0], posts.users)
                or not np.array_equal(kept[1], posts.resources)):
            kept = (posts.users, posts.resources, self._tag_weights(posts)[1])
        n_graph = int(self.sizes_[0])
        keys = np.zeros((len(posts), self.n_tags_))
        keys[:, self.tag_codes_] = np.arange(n_graph)
        rows, cols = kept[2]
        keys[rows, self.tag_codes_[cols]] -= n_graph
        return keys
