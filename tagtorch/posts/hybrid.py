"""``hybrid`` (ours): a learned ranker over TagRec's baselines, for personalized tag recommendation.

Not from a paper: it combines the baselines of TagRec (Kowald et al.) in the way the
object-centric study of tagtorch combines LATRE's features (Canuto et al. 2013): generate
candidates, describe each (post, tag) pair by features, and let a learning-to-rank model
(λ-MART, RF or LambdaRank through the tag ranker contract, :mod:`tagtorch.rankers`) order them.

- Candidates: the union of the top ``depth`` tags of every base method (``mp_ur``, ``bll_c``,
  ``bll``, ``girptm``, ``folkrank``, ``cf``, ``mp``, ``apr``, and TagRec's cognitive
  algorithms BLLac+MPr and 3Layers, ``bll_c_ac`` and ``three_layers``) and of two
  co-occurrence sources.
- Co-occurrence (after LATRE's association rules, Menezes et al. 2010, with one-tag
  antecedents): ``Σ_t' conf(t' → t)`` over the resource's training tags and over the tags of
  the user's latest training post, ``conf(t' → t)`` = posts with both / posts with ``t'``.
  LATRE's lazy multi-tag rules are not mined here (a deviation from the issue's wording).
- Features per (post, tag): every source's score and its rank in the source's list
  (``depth + 1`` when absent), the user's and the resource's counts of the tag, the days since
  the user last used it (log; −1 never), the tag's training count (log), the user's and the
  resource's numbers of posts (log).
- Learning: a validation split carved from the training posts as the test split is (each
  user's last training post, users with two or more); the base methods are fitted on the rest,
  the ranker learns the validation posts' gold tags among their candidates; for the test posts
  the base methods are fitted again on all training posts.
- Choosing (``selection``): a share of the validation posts, drawn with the seed, is kept from
  the ranker; on it the ranker's ``mrr@10`` is compared with every source's, and where a source
  is better the hybrid *is* that source (``choice_``; on cold-start data, where new users and
  resources leave little to learn, APR's or MP's popularity can be the best there is). The
  ranker is then learned again on all validation posts. Everything is chosen on training posts.
- Rounds (``rounds``, ours): the ranker learns from more than one validation carve. Round
  ``r`` carves validation posts from what the earlier rounds left (with ``leave_last``: each
  user's ``r``-th last training post), fits the sources on the posts before them and adds their
  candidates to the ranker's training lists: ``rounds`` times the lists of one carve, each
  described as the test posts are, by sources that never saw it. Rounds stop early once the
  lists hold ``max_learned_posts`` posts (ours, for scale: at a million posts one carve already
  holds 30,000 lists, and each round fits every source again; HetRec's and TagRec's sets stay
  below it with all 12 rounds).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, cast

import numpy as np
import scipy.sparse as sp
import torch
from sklearn.preprocessing import normalize

from tagtorch.candidates.candidate_set import CandidateSet
from tagtorch.candidates.neighbours import incidence
from tagtorch.errors import DataCheckError
from tagtorch.posts.base import PostRanker, PostScores, recommend, value_at
from tagtorch.posts.baselines import (
    BaseLevelLearning,
    MostPopular,
    MostPopularUserResource,
    counts_by,
)
from tagtorch.posts.cf import UserCF
from tagtorch.posts.data import PostData, Posts, last_posts, user_tag_reduce, validation_posts
from tagtorch.posts.folkrank import FolkRank
from tagtorch.posts.girp import Girp
from tagtorch.posts.local_folkrank import LocalFolkRank
from tagtorch.posts.metrics import post_metrics
from tagtorch.posts.three_layers import ThreeLayers
from tagtorch.progress import batch_ranges
from tagtorch.rankers.base import RANKER_MODULES, BaseRanker, Ranker
from tagtorch.settings import build_trusted, trusted_config
from tagtorch.storage import plain_json

__all__ = ["Hybrid"]

SECONDS_PER_DAY = 86_400.0

CANDIDATE_CHUNK = 8192
"""The fewest posts whose candidates are built at once (:meth:`Hybrid._candidates`)."""

OWN_FOLDERS = ("log_dir", "checkpoint_dir")
"""The ranker settings naming folders it writes, dropped by :meth:`Hybrid._build_ranker`."""


def _base_methods(local_graph: bool = False) -> dict[str, PostRanker]:
    """The baselines whose scores are candidates and features.

    ``local_graph``: FolkRank and APR by local push
    (:class:`~tagtorch.posts.local_folkrank.LocalFolkRank`).
    """
    graph = LocalFolkRank if local_graph else FolkRank
    return {"mp_ur": MostPopularUserResource(), "bll_c": BaseLevelLearning(beta=0.5),
            "bll": BaseLevelLearning(), "girptm": Girp(), "folkrank": graph(),
            "cf": UserCF(), "mp": MostPopular(), "apr": graph(adapted=True),
            "bll_c_ac": BaseLevelLearning(beta=0.5, associative=True),
            "three_layers": ThreeLayers()}


class Hybrid(PostRanker):
    """``hybrid_lambdamart``, ``hybrid_rf``, ``hybrid_lambdarank`` (module docstring; ours).

    Args:
        ranker: the config of a tag ranker (``_target_`` and its settings), built by
            :func:`~tagtorch.settings.build_trusted` (a class of ``tagtorch.rankers``, nothing
            nested built but its factories: a saved hybrid's manifest is read back into it).
        depth: how many of each source's best tags become candidates.
        seed: the ranker's seed (set where its config has one).
        validation: how the validation posts are carved from the training posts:
            ``leave_last`` (each user's last one, as the test split; the default) or
            ``global_time`` / ``random`` (a ``validation_fraction`` share: data where users
            have one post each, e.g. TagRec's samples).
        validation_fraction: that share.
        selection: the share of the validation posts kept back to choose between the ranker
            and the sources (0: always the ranker).
        rounds: validation carves the ranker learns from (module docstring; 1: one carve).
        max_learned_posts: no further round once the ranker's lists hold this many posts
            (None: every round).
        local_graph: FolkRank's and APR's sources by local push (ours, for large graphs:
            :mod:`tagtorch.posts.local_folkrank`) instead of their exact runs.
    """

    config_settings = frozenset({"ranker"})

    feature_names_: tuple[str, ...]
    saved_categories_: sp.csr_matrix | None = None
    """The categories a saved hybrid was loaded with, for its 3Layers source."""
    choice_: str = "ranker"
    """What ranks the test posts: ``"ranker"`` or the name of the source chosen instead."""

    def __init__(self, ranker: Mapping[str, Any], depth: int = 50, seed: int = 0,
                 validation: str = "leave_last", validation_fraction: float = 0.2,
                 selection: float = 0.3, rounds: int = 1, max_learned_posts: int | None = None,
                 local_graph: bool = False) -> None:
        if rounds < 1:
            raise ValueError(f"rounds must be at least 1, got {rounds}")
        if max_learned_posts is not None and max_learned_posts < 1:
            raise ValueError(f"max_learned_posts must be at least 1 or None, got "
                             f"{max_learned_posts}")
        if depth < 1:
            raise ValueError(f"depth must be at least 1, got {depth}")
        if not 0.0 <= selection < 1.0:
            raise ValueError(f"selection must be in [0, 1), got {selection}")
        self.ranker, self.depth, self.seed = plain_json(ranker), depth, seed
        trusted_config(ranker, RANKER_MODULES, (BaseRanker,), "ranker")  # refused now, not late
        self.validation, self.validation_fraction = validation, validation_fraction
        self.selection, self.rounds, self.local_graph = selection, rounds, local_graph
        self.max_learned_posts = max_learned_posts

    def _fit(self, data: PostData) -> None:
        """Fits the ranker on the validation posts, then the sources on all training posts."""
        inner = self._carve(data, self.seed)
        self._fit_sources(inner)
        first = self._candidates(inner.test, with_labels=True)  # before the sources move
        self.choice_ = "ranker"  # so that _choose scores the ranker, on a refit too
        if self.selection > 0:
            self.choice_ = self._choose(inner.test, first)
        if self.choice_ == "ranker":
            self.model_ = self._learn([first, *self._earlier_rounds(inner, len(first))])
        self._fit_sources(data)

    def _carve(self, data: PostData, seed: int) -> PostData:
        """``data.train`` split into posts to fit the sources on and validation posts."""
        train = data.train
        val = validation_posts(train, data.n_users, self.validation,
                               self.validation_fraction, seed)
        return PostData(train.take(np.flatnonzero(~val)), train.take(np.flatnonzero(val)),
                        data.n_users, data.n_resources, data.n_tags, data.folksonomy)

    def _earlier_rounds(self, inner: PostData, learned: int) -> list[CandidateSet]:
        """The labelled candidates of rounds 2..``rounds`` (module docstring).

        Each is carved from what the round before left; fewer where too few are left to carve,
        or once the lists (``learned`` posts in the first round's) hold ``max_learned_posts``.
        """
        parts: list[CandidateSet] = []
        for round_ in range(1, self.rounds):
            if self.max_learned_posts is not None and learned >= self.max_learned_posts:
                break
            try:
                inner = self._carve(PostData(inner.train, inner.train, inner.n_users,
                                             inner.n_resources, inner.n_tags,
                                             inner.folksonomy), self.seed + round_)
            except DataCheckError:
                break
            self._fit_sources(inner)
            parts.append(self._candidates(inner.test, with_labels=True))
            learned += len(parts[-1])
        return parts

    def _learn(self, lists: Sequence[CandidateSet]) -> Ranker:
        """The ranker learned on labelled candidate lists, one part per carve.

        Each part is described by the sources fitted without its posts.
        """
        model = self._build_ranker()
        model.fit(CandidateSet.concat(list(lists)) if len(lists) > 1 else lists[0])
        return model

    def _build_ranker(self) -> BaseRanker:
        """A new ranker of the ``ranker`` config (a tagtorch tag ranker; its seed set).

        Its own folders (``log_dir``, ``checkpoint_dir``) are dropped: loading a saved hybrid
        refits its ranker, and a saved folder must not choose where files are written (the
        ranker keeps its best epoch in a temporary folder and writes no log).
        """
        node = {**self.ranker, **{key: None for key in OWN_FOLDERS if key in self.ranker}}
        if "seed" in node:
            node["seed"] = self.seed
        return cast(BaseRanker, build_trusted(node, RANKER_MODULES, (BaseRanker,), "ranker"))

    def _choose(self, val: Posts, candidates: CandidateSet) -> str:
        """``"ranker"`` or the source with the best ``mrr@10`` on the held selection posts.

        ``candidates``: the validation posts' (labelled); the ranker learns on the rest's.
        """
        held = np.random.default_rng(self.seed).random(len(val)) < self.selection
        if held.all() or not held.any():
            return "ranker"
        select = val.take(np.flatnonzero(held))
        self.model_ = self._learn([candidates[torch.as_tensor(~held)]])
        ranker_top = recommend(self._scores_of(candidates[torch.as_tensor(held)], len(select)),
                               10)
        found = {"ranker": ranker_top,
                 **{name: source.top_tags(select, 10) for name, source in self.sources_.items()}}
        hits = {name: float(post_metrics(ranked, select.tags, [10])["mrr@10"].mean())
                for name, ranked in found.items()}
        return max(hits, key=lambda name: (hits[name], name == "ranker"))

    def _fit_sources(self, data: PostData) -> None:
        """The base methods, the co-occurrence rules and the statistics of ``data.train``."""
        train = data.train
        methods = _base_methods(self.local_graph)
        cast(ThreeLayers, methods["three_layers"]).saved_categories_ = self.saved_categories_
        self.sources_ = {name: method.fit(data) for name, method in methods.items()}
        tags = incidence(train.tags, data.n_tags)
        self.confidence_ = normalize((tags.T @ tags).tocsr(), norm="max")  # conf(t' → t)
        self.user_counts_ = counts_by(train.users, data.n_users, tags)
        self.resource_counts_ = counts_by(train.resources, data.n_resources, tags)
        latest = np.flatnonzero(last_posts(train))
        self.latest_tags_ = counts_by(train.users[latest], data.n_users, tags[latest])
        users, used, latest_time = user_tag_reduce(train, data.n_tags,
                                                   train.times.astype(np.float64), np.maximum)
        self.last_use_ = sp.csr_matrix((latest_time, (users, used)),
                                       shape=(data.n_users, data.n_tags))
        self.tag_counts_ = np.asarray(tags.sum(0)).ravel()
        self.user_posts_ = np.bincount(train.users, minlength=data.n_users)
        self.resource_posts_ = np.bincount(train.resources, minlength=data.n_resources)
        self.n_tags_ = data.n_tags

    def _saved_arrays(self) -> dict[str, np.ndarray]:
        """The 3Layers source's categories (the posts alone do not hold them)."""
        return self.sources_["three_layers"]._saved_arrays()

    def _restore(self, arrays: Mapping[str, np.ndarray], file: Path, n_resources: int) -> None:
        """Reads the 3Layers source's categories back."""
        source = ThreeLayers()
        source._restore(arrays, file, n_resources)
        self.saved_categories_ = source.saved_categories_

    def _source_scores(self, posts: Posts) -> dict[str, PostScores]:
        """Every source's ``[Q, W]`` scores of ``posts``."""
        scores = {name: method.score(posts) for name, method in self.sources_.items()}
        resource_tags = (self.resource_counts_[posts.resources] > 0).astype(np.float64)
        scores["rules_r"] = (resource_tags @ self.confidence_).tocsr()
        scores["rules_u"] = ((self.latest_tags_[posts.users] > 0).astype(np.float64)
                             @ self.confidence_).tocsr()
        return scores

    def _candidates(self, posts: Posts, with_labels: bool = False) -> CandidateSet:
        """The posts' candidates and features as a padded ``[Q, L, F]`` batch.

        Built in chunks of posts (memory: every source's ``[chunk, W]`` scores at a time), of at
        least :data:`CANDIDATE_CHUNK` and twice the tags (so that FolkRank's ``auto`` solver
        keeps the tags' columns).
        """
        size = max(CANDIDATE_CHUNK, 2 * self.n_tags_)
        chunks = list(batch_ranges(len(posts), size, "hybrid candidates", unit="post")) or [(0, 0)]
        parts = [self._candidate_rows(posts.take(np.arange(start, stop)), with_labels)
                 for start, stop in chunks]
        rows = np.concatenate([part[0] + start for part, (start, _) in zip(parts, chunks,
                                                                             strict=True)])
        cols, features, labels = (np.concatenate([part[i] for part in parts]) for i in (1, 2, 3))
        return _padded(rows, cols, features, labels, len(posts), parts[0][4],
                       posts.tags.lengths if with_labels else np.zeros(len(posts), np.int64))

    def _candidate_rows(self, posts: Posts, with_labels: bool
                        ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray,
                                   tuple[str, ...]]:
        """``(rows, tags, [n, F] features, labels, feature names)`` of the posts' candidates."""
        scores = self._source_scores(posts)
        places = {name: _places(recommend(s, self.depth), self.n_tags_)
                  for name, s in scores.items()}
        pattern = sum(places.values(), sp.csr_matrix((len(posts), self.n_tags_))).tocsr()
        pattern.sort_indices()
        rows = np.repeat(np.arange(len(posts)), np.diff(pattern.indptr))
        cols = pattern.indices
        columns = {}
        for name, place in places.items():
            columns[name] = value_at(scores[name], rows, cols)
            found = value_at(place, rows, cols)
            columns[f"{name}_rank"] = np.where(found > 0, found, self.depth + 1.0)
        columns.update(self._statistics(posts, rows, cols))
        names = tuple(columns)
        features = np.stack([columns[n] for n in names], 1).astype(np.float32)
        gold = incidence(posts.tags, self.n_tags_) if with_labels else None
        labels = value_at(gold, rows, cols) if gold is not None else np.zeros(len(rows))
        return rows, cols, features, labels, names

    def _statistics(self, posts: Posts, rows: np.ndarray, cols: np.ndarray
                    ) -> dict[str, np.ndarray]:
        """The user's, resource's and tag's statistics of each (post, tag) pair."""
        users, resources = posts.users[rows], posts.resources[rows]
        last = value_at(self.last_use_, users, cols)
        used = value_at(self.user_counts_, users, cols)
        age = np.where(used > 0, np.log1p(np.maximum(posts.times[rows] - last, 0.0)
                                          / SECONDS_PER_DAY), -1.0)
        return {"user_count": used,
                "resource_count": value_at(self.resource_counts_, resources, cols),
                "days_since_use": age, "tag_count": np.log1p(self.tag_counts_[cols]),
                "user_posts": np.log1p(self.user_posts_[users]),
                "resource_posts": np.log1p(self.resource_posts_[resources])}

    def score(self, posts: Posts) -> PostScores:
        """``[Q, W]`` the chosen source's scores, or the ranker's (:meth:`_ranker_scores`)."""
        if self.choice_ != "ranker":
            return self.sources_[self.choice_].score(posts)
        return self._ranker_scores(posts)

    def tie_order(self, posts: Posts) -> PostScores | None:
        """The chosen source's order of equal scores (the ranker's: the lower code)."""
        if self.choice_ != "ranker":
            return self.sources_[self.choice_].tie_order(posts)
        return None

    def _ranker_scores(self, posts: Posts) -> sp.csr_matrix:
        """``[Q, W]`` the ranker's scores of each post's candidates, stored (sparse).

        Sparse, not dense with ``-inf`` elsewhere: ``Q x W`` doubles are gigabytes at a million
        posts, the candidates ``Q x`` a few hundred.
        """
        return self._scores_of(self._candidates(posts), len(posts))

    def _scores_of(self, batch: CandidateSet, n_posts: int) -> sp.csr_matrix:
        """:meth:`_ranker_scores` of the posts' candidates ``batch``."""
        scores = self.model_.score(batch).double().numpy()
        mask = batch.mask.numpy()
        rows = np.nonzero(mask)[0]
        return sp.csr_matrix((scores[mask], (rows, batch.tags.numpy()[mask])),
                             shape=(n_posts, self.n_tags_))


def _places(ranked: np.ndarray, n_tags: int) -> sp.csr_matrix:
    """``[Q, W]`` each listed tag's 1-based place in ``ranked`` (``[Q, k]``, ``-1`` padded)."""
    rows, place = np.nonzero(ranked >= 0)
    return sp.csr_matrix((place + 1.0, (rows, ranked[rows, place])), shape=(len(ranked), n_tags))


def _padded(rows: np.ndarray, cols: np.ndarray, features: np.ndarray, labels: np.ndarray,
            n_posts: int, names: tuple[str, ...], n_relevant: np.ndarray) -> CandidateSet:
    """A padded :class:`CandidateSet` of (row, tag) pairs sorted by row."""
    counts = np.bincount(rows, minlength=n_posts)
    width = max(int(counts.max(initial=0)), 1)
    position = np.arange(len(rows)) - np.repeat(np.cumsum(counts) - counts, counts)
    tags = np.full((n_posts, width), -1, dtype=np.int64)
    tags[rows, position] = cols
    padded = np.zeros((n_posts, width, len(names)), dtype=np.float32)
    padded[rows, position] = features
    label = np.zeros((n_posts, width), dtype=np.float32)
    label[rows, position] = labels
    return CandidateSet(objects=torch.arange(n_posts), tags=torch.from_numpy(tags),
                        features=torch.from_numpy(padded), labels=torch.from_numpy(label),
                        mask=torch.from_numpy(tags >= 0),
                        n_relevant=torch.from_numpy(n_relevant.astype(np.int64)),
                        feature_names=names)
