"""``apr`` and ``folkrank``: weight spreading over the user-resource-tag graph, all posts at once.

Hotho, Jäschke, Schmitz and Stumme (2006), "Information Retrieval in Folksonomies: Search and
Ranking" (ESWC), as TagRec runs it (github.com/learning-layers/TagRec,
``processing/FolkRankCalculator.java`` and ``processing/folkrank/``). The graph's nodes are the
tags, users and resources of the training assignments (the *facts* ``(t, u, r)``); a node's
degree is its number of facts. From weights ``1/|D|`` in each dimension ``D``, each iteration
spreads ``w / degree`` along every fact to the fact's nodes of the other two dimensions and sets

    ``w ← α · w + β · spread + γ · p_D``, α = 0, β = 0.7, γ = 0.3,

where ``p_D = 1 / (|D| + Σ preference weights in D)`` is every node's random-surfer weight and
the preferred nodes also get ``γ · preference / (|D| + Σ preference weights in D)`` (the user
``u`` with weight ``|U|`` and the resource ``r`` with weight ``|R|``, when they are in the
graph). It stops after 10 iterations or once ``Σ |w_new − w_old|`` over all nodes is at most
ε = 1e-5 (TagRec's ``10e-6``). ``apr`` (adapted PageRank) ranks the tags by the preferred run;
``folkrank`` by the preferred run minus the run without preference (the same for every post,
computed once).

TagRec divides a node's weight by its number of facts and sends that share along each fact to
*both* other nodes, so the spread weight doubles in every iteration and, after 10 of them,
outweighs the preference about 2^10-fold: its APR ranks tags almost by popularity (FolkRank's
difference removes that part). ``spread="edges"`` (ours, after Hotho et al.'s graph, where a fact
gives each node two edges) divides by twice the facts instead, which keeps the total weight
constant; the default ``"facts"`` is TagRec's.

We run the iterations for all test posts together: the columns of a ``[nodes, posts]`` matrix,
each spread by one sparse product, each post stopping on its own ε as TagRec's per-post loop
does. Deviations: ties are broken by the lower tag code (TagRec's ``ItemWithWeight`` puts the
higher one first); tags absent from the training facts are never recommended (TagRec's graph
has no node for them).
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import scipy.sparse as sp

from tagtorch.posts.base import PostRanker
from tagtorch.posts.data import PostData, Posts

__all__ = ["FolkRank"]


class FolkRank(PostRanker):
    """``folkrank`` (``adapted=False``) and ``apr`` (``adapted=True``), module docstring.

    Args:
        adapted: rank by the preferred run alone (APR) instead of FolkRank's difference.
        damping: β, the share of spread weight (TagRec: 0.7; γ = 1 − β, α = 0).
        max_iterations: at most this many iterations (TagRec: 10).
        epsilon: stop once a post's total change is at most this (TagRec: 1e-5).
        chunk: posts per batch of columns (bounds memory: ``nodes × chunk`` doubles).
        spread: ``"facts"`` (TagRec) or ``"edges"`` (ours: mass-preserving, module docstring).
        n_jobs: threads scoring batches of posts (``-1``: one per core).
    """

    spread: str

    def __init__(self, adapted: bool = False, damping: float = 0.7, max_iterations: int = 10,
                 epsilon: float = 1e-5, chunk: int = 512, spread: str = "facts",
                 n_jobs: int = -1) -> None:
        if not 0.0 < damping < 1.0:
            raise ValueError(f"damping must be in (0, 1), got {damping}")
        if spread not in ("facts", "edges"):
            raise ValueError(f"spread must be 'facts' or 'edges', got {spread!r}")
        self.adapted, self.damping = adapted, damping
        if n_jobs == 0 or n_jobs < -1:
            raise ValueError(f"n_jobs must be -1 or >= 1, got {n_jobs}")
        self.max_iterations, self.epsilon, self.chunk = max_iterations, epsilon, chunk
        self.n_jobs = n_jobs

    def _fit(self, data: PostData) -> None:
        """The graph of the training facts and the run without preference."""
        train = data.train
        posts = train.tags.row_ids
        tag, user, resource = (train.tags.values, train.users[posts], train.resources[posts])
        # node ids: tags, then users, then resources, each dimension compacted to its facts
        dims = [np.unique(tag), np.unique(user), np.unique(resource)]
        self.sizes_ = np.array([len(d) for d in dims])
        starts = np.r_[0, np.cumsum(self.sizes_)]
        self.node_of_ = [np.full(n, -1, dtype=np.int64) for n in
                         (data.n_tags, data.n_users, data.n_resources)]
        for d, nodes in enumerate(dims):
            self.node_of_[d][nodes] = starts[d] + np.arange(len(nodes))
        facts = [self.node_of_[d][codes] for d, codes in enumerate((tag, user, resource))]
        n = int(starts[-1])
        pairs = [(a, b) for a in range(3) for b in range(3) if a != b]
        self.graph_ = sp.csr_matrix((np.ones(len(tag) * len(pairs)),
                                     (np.concatenate([facts[a] for a, _ in pairs]),
                                      np.concatenate([facts[b] for _, b in pairs]))),
                                    shape=(n, n))
        self.degree_ = np.bincount(np.concatenate(facts), minlength=n).astype(np.float64)
        self.degree_ *= 2.0 if self.spread == "edges" else 1.0
        self.dim_ = np.repeat(np.arange(3), self.sizes_)  # each node's dimension
        self.tag_codes_ = dims[0]
        self.n_tags_ = data.n_tags
        self.baseline_ = self._spread(np.full(0, -1), np.full(0, -1), 1)[:self.sizes_[0], 0]

    def _spread(self, users: np.ndarray, resources: np.ndarray, n_posts: int) -> np.ndarray:
        """``[nodes, n_posts]`` the final weights with each post's user and resource preferred.

        ``users`` and ``resources`` hold node ids, ``-1`` where not in the graph (no
        preference); empty arrays: no preference for any of the ``n_posts`` columns.
        """
        beta, gamma = self.damping, 1.0 - self.damping
        bounds = np.r_[0, np.cumsum(self.sizes_)]
        norm = np.repeat(self.sizes_[:, None], n_posts, 1).astype(np.float64)  # [3, n_posts]
        for d, nodes in ((1, users), (2, resources)):
            norm[d, :len(nodes)] += np.where(nodes >= 0, self.sizes_[d], 0)
        preferred = [(nodes, gamma * self.sizes_[d] / norm[d, :len(nodes)])
                     for d, nodes in ((1, users), (2, resources))]
        weights = np.repeat((1.0 / self.sizes_)[self.dim_][:, None], n_posts, 1)
        degree = self.degree_[:, None]
        active = np.arange(n_posts)
        for _ in range(self.max_iterations):
            every = len(active) == n_posts  # TagRec's spread: always (its mass doubles)
            current = weights if every else weights[:, active]
            new = self.graph_ @ (current / degree)
            new *= beta
            for d in range(3):  # γ · p_D, each dimension's nodes a block of rows
                new[bounds[d]:bounds[d + 1]] += gamma / norm[d, active]
            for nodes, extra in preferred:
                known = np.flatnonzero(nodes[active] >= 0) if len(nodes) else nodes
                new[nodes[active[known]], known] += extra[active[known]]
            delta = np.abs(new - current).sum(0)
            if every:
                weights = new
            else:
                weights[:, active] = new
            active = active[delta > self.epsilon]
            if not len(active):
                break
        return weights

    def score(self, posts: Posts) -> np.ndarray:
        """``[Q, W]`` dense scores; ``-inf`` for tags not in the graph.

        Batches of ``chunk`` posts run in ``n_jobs`` threads (the sparse products and array
        operations release the GIL).
        """
        out = np.full((len(posts), self.n_tags_), -np.inf)
        jobs = os.cpu_count() or 1 if self.n_jobs == -1 else self.n_jobs
        size = max(1, min(self.chunk, -(-len(posts) // jobs)))

        def run(start: int) -> None:
            part = slice(start, start + size)
            users = self.node_of_[1][posts.users[part]]
            resources = self.node_of_[2][posts.resources[part]]
            tags = self._spread(users, resources, len(users))[:self.sizes_[0]].T
            out[part, self.tag_codes_] = tags if self.adapted else tags - self.baseline_

        with ThreadPoolExecutor(jobs) as pool:
            list(pool.map(run, range(0, len(posts), size)))
        return out
