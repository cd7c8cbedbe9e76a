"""Topics of candidates and objects for xTReD: ``p(z | t)`` and ``p(z | o)`` on candidate sets.

Belém et al. (xTReD, Sections 4.2.2 and 5.2) describe an object ``o`` by its topics ``Z_o`` and
a tag ``t`` by ``p(z | t) = f(z, t) / f(t)`` on the training objects D (``f(z, t)``: D objects
of topic ``z`` tagged ``t``; ``f(t)``: D objects tagged ``t``; :mod:`tagtorch.data.categories`).
:class:`ObjectTopics` is the optional component of
:class:`~tagtorch.candidates.latre.LatreCandidates` (off by default) that attaches them to
every candidate set: ``tag_topics [B, L, Z]`` and ``object_topics [B, Z]``
(:class:`~tagtorch.candidates.candidate_set.CandidateSet`).

Where the topics come from (``source``):

- ``"categories"``: the objects' categories (MovieLens genres), object metadata read from
  :attr:`~tagtorch.data.terms.TermIndex.categories`, never from the gold tags;
- ``"lda"`` (ours, for data without categories: LastFM, where the paper used AllMusic styles):
  an LDA model of D's tag sets (:class:`~tagtorch.candidates.lda_tags.LdaTagSource`, one document
  per D object). A D object's topics are those whose fitted ``θ_d`` reaches ``threshold``; a V or T
  object's are those whose ``θ_o``, inferred by fold-in from its input tags I_o only, reaches
  it. ``p(z | t)`` is counted on D as above with these inferred topic sets
  (``tag_topics="counts"``, default) or read from the model as ``φ_{t|z} / Σ_z' φ_{t|z'}``
  (``tag_topics="phi"``: Bayes with a uniform topic prior; 0 for a tag absent from D);
- ``"auto"``: ``"categories"`` when the data has categories, else ``"lda"``.

``p(z | o)`` is uniform over ``Z_o`` (``object_mode="uniform"``) or proportional to
``Σ_{t ∈ I_o} p(z | t)`` within ``Z_o`` (``"tags"``). Text-only terms (never tags in D) get
``p(z | t) = 0``, as do tags absent from D.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, Self

import numpy as np
import torch

from tagtorch.candidates.lda_tags import LdaTagSource
from tagtorch.data.categories import topic_given_object, topic_given_tag
from tagtorch.data.ragged import Ragged
from tagtorch.data.splits import TagQueries
from tagtorch.data.terms import TermIndex

__all__ = ["ObjectTopics"]

SOURCES = ("auto", "categories", "lda")


def _above(theta: np.ndarray, threshold: float) -> Ragged:
    """Each row's topics ``z`` with ``θ_z >= threshold``, as a ragged array of codes."""
    rows, topics = np.nonzero(theta >= threshold)
    return Ragged.from_groups(rows, topics, len(theta))


class ObjectTopics:
    """``p(z | t)`` of candidates and ``p(z | o)`` of objects from D (module docstring).

    Args:
        source: ``"auto"``, ``"categories"`` or ``"lda"``.
        threshold: with LDA topics, the least ``θ_z`` of a topic in ``Z_o``.
        object_mode: ``p(z | o)``: ``"uniform"`` over ``Z_o`` or ``"tags"`` (input-tag evidence).
        tag_topics: with LDA topics, ``p(z | t)`` by ``"counts"`` on D or from ``"phi"``.
        lda: with LDA topics, the topic model's settings (:class:`tagtorch.topics.LDA`;
            e.g. ``n_topics``, ``iterations``, ``seed``).
        infer_iterations: with LDA topics, fold-in sweeps per object.
        infer_burn_in: with LDA topics, fold-in sweeps discarded before averaging.
    """

    def __init__(self, source: str = "auto", threshold: float = 0.1,
                 object_mode: Literal["uniform", "tags"] = "uniform", tag_topics: str = "counts",
                 lda: Mapping[str, Any] | None = None, infer_iterations: int = 50,
                 infer_burn_in: int = 25) -> None:
        if source not in SOURCES:
            raise ValueError(f"source must be one of {SOURCES}, got {source!r}")
        if not 0.0 < threshold <= 1.0:
            raise ValueError(f"threshold must be in (0, 1], got {threshold!r}")
        if object_mode not in ("uniform", "tags"):
            raise ValueError(f"object_mode must be 'uniform' or 'tags', got {object_mode!r}")
        if tag_topics not in ("counts", "phi"):
            raise ValueError(f"tag_topics must be 'counts' or 'phi', got {tag_topics!r}")
        self.source = source
        self.threshold = threshold
        self.object_mode = object_mode
        self.tag_topics = tag_topics
        self.lda = dict(lda or {})
        self.infer_iterations = infer_iterations
        self.infer_burn_in = infer_burn_in
        self.topic_model: LdaTagSource | None = None
        self.table_: np.ndarray | None = None
        self.terms: TermIndex | None = None

    @property
    def n_topics(self) -> int:
        """``Z``, the number of topics (after :meth:`fit`)."""
        if self.table_ is None:
            raise RuntimeError("call fit() first")
        return int(self.table_.shape[1])

    def fit(self, train_objects: np.ndarray, train_tags: Ragged, terms: TermIndex) -> Self:
        """Topics of D's objects and ``p(z | t)`` of every code (``[n_terms, Z]``)."""
        source = self.source
        if source == "auto":
            source = "categories" if terms.categories is not None else "lda"
        if source == "categories" and terms.categories is None:
            raise ValueError("candidates.diversity.source='categories' but the data has no "
                             "object categories (use 'lda' or 'auto')")
        self.source_ = source
        self.terms = terms
        n = terms.n_terms
        if source == "categories":
            assert terms.categories is not None
            train_topics = terms.categories.take(np.asarray(train_objects))
            self.table_ = topic_given_tag(train_tags, train_topics, n, terms.n_categories)
            return self
        self.topic_model = LdaTagSource(lda=self.lda, n_candidates=0, feature=False,
                                     infer_iterations=self.infer_iterations,
                                     infer_burn_in=self.infer_burn_in)
        self.topic_model.fit(np.asarray(train_objects), train_tags, terms)
        model = self.topic_model.model_
        assert model is not None
        if self.tag_topics == "counts":
            self.table_ = topic_given_tag(train_tags, _above(model.theta_, self.threshold), n,
                                          model.phi_.shape[0])
        else:
            phi = np.asarray(model.phi_, dtype=np.float64).T  # [W, Z]
            total = phi.sum(1, keepdims=True)
            table = np.divide(phi, total, out=np.zeros_like(phi), where=total > 0)
            seen = np.bincount(np.asarray(train_tags.values, dtype=np.int64), minlength=n) > 0
            self.table_ = table * seen[:, None]
        return self

    def objects(self, queries: TagQueries) -> np.ndarray:
        """``p(z | o)`` of the query objects, ``[b, Z]`` float64 (0 outside ``Z_o``)."""
        if self.table_ is None or self.terms is None:
            raise RuntimeError("call fit() first")
        if self.source_ == "categories":
            assert self.terms.categories is not None
            topics = self.terms.categories.take(np.asarray(queries.objects))
        else:
            assert self.topic_model is not None
            first = int(queries.objects[0]) if len(queries) else 0
            theta = self.topic_model.mixtures(queries.input_tags, first, torch.device("cpu"))
            topics = _above(theta.double().numpy(), self.threshold)
        return topic_given_object(topics, self.n_topics, self.object_mode,
                                  queries.input_tags, self.table_)

    def candidates(self, tags: torch.Tensor) -> torch.Tensor:
        """``p(z | t)`` of candidate codes ``tags [N]``: ``[N, Z]`` float32 on their device."""
        if self.table_ is None:
            raise RuntimeError("call fit() first")
        table = torch.as_tensor(self.table_, dtype=torch.float32, device=tags.device)
        return table[tags]
