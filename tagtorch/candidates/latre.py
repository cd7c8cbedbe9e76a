"""The 13 relevance features of Canuto et al. (JIDM 2013), Table I, computed in batches.

Notation. D is the fold's training portion: each training object d has its tag set I_d and, for
every text field i (title, description, ...), a list of terms F_d^i (normalized, with repeats).
A target object o (in V or T) has its input tags I_o and its text fields F_o^i. Terms and tags
share one vocabulary (:class:`~tagtorch.data.terms.TermIndex`): a text term equal to a tag
string has the tag's code. All statistics come from D only; a gold tag Y_o is never read.

Rules (LATRE, Menezes et al. 2010, lazily: only antecedents X ⊆ I_o are ever formed):

- ``supp(X)`` = number of D objects whose tag set contains every tag of X.
- A rule ``X -> c`` (c a tag, c ∉ X, 1 ≤ |X| ≤ ℓ) exists when
  ``supp(X ∪ {c}) >= min_support`` and ``θ(X -> c) = supp(X ∪ {c}) / supp(X) >= min_confidence``.
- Defaults: ℓ = 3 (the paper), ``min_support = 1``, ``min_confidence = 0`` (every co-occurrence
  is a rule; Belém et al. 2011 keep all rules and let the metrics weigh them).

Per-term statistics of D:

- ``f_tag(c)``: D objects with c among their tags; ``f_text(c)``: D objects with c in any text
  field; ``f_both(c)``: D objects with c both as a tag and in a text field.
- ``Stab(c, k) = k / (k + |k - ln f_tag(c)|)`` (Sigurbjörnsson and van Zwol 2008; ``ln`` is the
  natural logarithm), and ``Stab(c, k) = 0`` when ``f_tag(c) = 0`` (the limit of the formula).
- ``Rank(c, x, k_r) = k_r / (k_r + p(c, x))`` where ``p(c, x)`` is the 1-based position of c
  among the consequents of the one-tag rules ``x -> ·``, sorted by confidence descending, ties
  by term code ascending.
- ``TS(t, d)`` = number of text fields of d that contain t. ``FIS(F_d^i)`` = mean of
  ``TS(t, d)`` over the *distinct* terms t of F_d^i. ``AFS(F^i)`` = mean of ``FIS(F_d^i)`` over
  the D objects whose field i is not empty (0 if there is none).

The features of a candidate c for a target object o, in this order (:data:`FEATURE_NAMES`):

1. ``sum_1`` = Σ θ(x -> c) over rules with one-tag antecedents x ∈ I_o (Sum, ℓ = 1).
2. ``sum_l`` = Σ θ(X -> c) over rules with X ⊆ I_o, |X| ≤ ℓ (Sum with the configured ℓ).
3. ``sum_plus`` = Σ_{x ∈ I_o, x -> c a rule} θ(x -> c) · Stab(x, k_x) · Stab(c, k_c) ·
   Rank(c, x, k_r) (Sum+).
4. ``vote`` = number of x ∈ I_o such that x -> c is a rule (Vote).
5. ``vote_plus`` = Σ_{x ∈ I_o, x -> c a rule} Stab(x, k_x) · Stab(c, k_c) · Rank(c, x, k_r).
6. ``ts`` = number of text fields of o containing c (Term Spread).
7. ``tf`` = Σ_i tf(c, F_o^i), occurrences of c in o's text fields (Term Frequency).
8. ``wts`` = Σ_i AFS(F^i) · [c ∈ F_o^i] (weighted TS).
9. ``wtf`` = Σ_i AFS(F^i) · tf(c, F_o^i) (weighted TF).
10. ``iff`` = ln((|D| + 1) / (f_tag(c) + 1)) (Inverse Feature Frequency).
11. ``stab`` = Stab(c, k_s) (Stability).
12. ``entropy`` = -Σ_{c -> i a rule} θ(c -> i) ln θ(c -> i), over one-tag rules with antecedent c
    (0 when c has none).
13. ``pred`` = f_both(c) / f_text(c), 0 when f_text(c) = 0 (Predictability).

Tuning parameters and their defaults: k_x = 9 and k_s = 9 (the stability constant k_s of
Sigurbjörnsson and van Zwol 2008), k_c = 11 (their descriptiveness constant k_d), k_r = 4 (their
rank constant k_r); Canuto et al. do not restate the values they used.

Candidates C_o are the consequents of all rules with X ⊆ I_o, |X| ≤ ℓ, plus every term of o's
text fields, minus I_o. A candidate's label is 1 when it is in Y_o.

Bounds on heavily tagged objects (ours; the paper's objects have a few dozen tags). Lazy rules
are combinatorial: an object with m input tags has C(m, 2) + C(m, 3) antecedents of size 2..3
(20 billion for m = 5,000), and a D object with m tags adds m² one-tag rule pairs. Two documented
caps keep the work and memory per object bounded whatever m is; objects under both caps get
exactly the uncapped results, and a warning says how many objects were capped:

- ``max_antecedent_tags`` (default 64): antecedents of size 2..ℓ are formed only from the
  object's ``max_antecedent_tags`` input tags most frequent in D (ties by term code): they carry
  the most rule support, and a tag absent from D forms no rule at all. One-tag rules (``sum_1``,
  ``sum_plus``, ``vote``, ``vote_plus`` and the ℓ = 1 part of ``sum_l``) and the exclusion of
  I_o from the candidates still use every input tag. HetRec objects have up to 164 (Last.fm) and 40
  (MovieLens) input tags: at most a few Last.fm objects per fold are capped.
- ``max_train_tags`` (default 1,000): a D object with more tags is mined (supports, rules and
  every statistic of D) as if it had only its ``max_train_tags`` tags most frequent in D (ties
  by term code). No HetRec object has more than 329 tags.

``None`` turns either cap off (the paper's unbounded rules).
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, Self

import numpy as np
import torch

from tagtorch.candidates.candidate_set import CandidateSet
from tagtorch.candidates.diversity_topics import ObjectTopics
from tagtorch.candidates.embeddings import EmbeddingTags
from tagtorch.candidates.feature_kernel import assemble, stack_fields, text_terms
from tagtorch.candidates.generator import check_rule_settings
from tagtorch.candidates.lda_tags import LdaTagSource
from tagtorch.candidates.neighbours import NeighbourTags
from tagtorch.candidates.rules import RuleIndex
from tagtorch.candidates.sources import RRF_K, SourceBatch, TagSource
from tagtorch.candidates.sparse import Lookup, csr, ragged_csr, triplets
from tagtorch.data.ragged import Ragged
from tagtorch.data.splits import TagQueries
from tagtorch.data.terms import TermIndex
from tagtorch.devices import resolve_device
from tagtorch.engines import array_bytes
from tagtorch.metrics.diversity import jaccard_from_counts
from tagtorch.progress import progress
from tagtorch.settings import SignatureSettings

log = logging.getLogger(__name__)

FEATURE_NAMES = ("sum_1", "sum_l", "sum_plus", "vote", "vote_plus", "ts", "tf", "wts", "wtf",
                 "iff", "stab", "entropy", "pred")
SUM_L, TS = FEATURE_NAMES.index("sum_l"), FEATURE_NAMES.index("ts")  # the rules' score; text


def stability(f_tag: torch.Tensor, k: float) -> torch.Tensor:
    """``Stab(c, k) = k / (k + |k - ln f_tag(c)|)``, 0 where ``f_tag(c) = 0``.

    Example:
        >>> stability(torch.tensor([0.0, 1.0, float(np.e) ** 2]), k=2.0).tolist()
        [0.0, 0.5, 1.0]
    """
    value = k / (k + (k - torch.log(f_tag.clamp(min=1))).abs())
    return torch.where(f_tag > 0, value, torch.zeros_like(value))


def most_frequent_per_row(tags: Ragged, frequency: np.ndarray, limit: int | None
                          ) -> tuple[Ragged, int]:
    """Keeps each row's ``limit`` values with the highest ``frequency`` (ties: lower value first).

    Rows with at most ``limit`` values are returned unchanged; the kept values of a longer row
    keep their order in the row.

    Args:
        tags: ragged ``[n]`` rows of term codes.
        frequency: ``[n_terms]`` frequency of each code (for example ``f_tag`` in D).
        limit: the most values a row keeps; None keeps every row whole.

    Returns:
        ``(capped rows, number of rows that were longer than limit)``.

    Example:
        >>> rows, n_capped = most_frequent_per_row(Ragged.from_lists([[0, 1, 2], [3]]),
        ...                                        np.array([5, 1, 5, 0]), limit=2)
        >>> [r.tolist() for r in rows], n_capped
        ([[0, 2], [3]], 1)
    """
    lengths = tags.lengths
    if limit is None:
        return tags, 0
    n_capped = int((lengths > limit).sum())
    if n_capped == 0:
        return tags, 0
    row = tags.row_ids
    values = tags.values.astype(np.int64)
    order = np.lexsort((values, -np.asarray(frequency)[values], row))  # by row, then best first
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order)) - np.repeat(tags.offsets[:-1], lengths)
    keep = rank < limit
    return Ragged.from_groups(row[keep], tags.values[keep], len(tags)), n_capped


class LatreCandidates(SignatureSettings):
    """LATRE candidates and the 13 features of Table I, computed in batches.

    Rules with antecedents up to size ℓ are derived lazily, only for the antecedents that occur
    in the target objects' input tags, by the compiled kernels of
    :mod:`tagtorch.candidates.rules` over an index of D built once by :meth:`fit` (postings,
    tag lists, one-tag rules). A batch is split over ``torch.get_num_threads()`` threads; one
    object (serving) runs the same kernel and builds nothing sized by D. The candidates and
    their 13 features are then assembled by the compiled kernels of
    :mod:`tagtorch.candidates.feature_kernel`, again one path for batches and single objects.
    Both run on the CPU whatever ``device`` is; the sources' features, the fusion and the
    statistics of D are computed on ``device``. The definitions are in the module docstring.
    The sources beyond rules and text terms (ours: ``topics``, ``neighbours``,
    ``profile_neighbours``, ``embeddings``) share one interface,
    :class:`~tagtorch.candidates.sources.TagSource`, and one fusion and budget step.

    Args:
        max_antecedent: ℓ, the largest antecedent size (the paper: 3).
        min_support: minimum ``supp(X ∪ {c})`` of a rule.
        min_confidence: minimum confidence of a rule.
        max_rule_candidates: keep the best rule consequents by ``sum_l`` per object (ties by
            term code); text terms are always kept. None keeps all (the paper); the default
            bounds the lists of objects with very popular input tags (thousands of consequents).
        text_candidates: add the terms of the object's text fields to the candidates.
        k_x: stability constant of the antecedent in Sum+ and Vote+.
        k_c: stability constant of the candidate in Sum+ and Vote+.
        k_r: rank constant of Sum+ and Vote+.
        k_s: stability constant of the ``stab`` feature.
        chunk_size: target objects processed together (bounds memory).
        max_antecedent_tags: antecedents of size ≥ 2 only from this many of an object's input
            tags, the most frequent in D (see the module docstring); None: from all of them.
        max_train_tags: a D object with more tags is mined as if it had only this many, the
            most frequent in D; None: no cap.
        device: ``"auto"`` (CUDA when present), ``"cpu"`` or ``"cuda"``.
        topics: settings of :class:`~tagtorch.candidates.lda_tags.LdaTagSource` (ours, off by
            default): an LDA model of D's tag sets adds its best tags as candidates
            (``n_candidates``) and ``P(t | o)`` as a 14th feature ``p_lda`` (``feature``).
        diversity: settings of :class:`~tagtorch.candidates.diversity_topics.ObjectTopics` (off by
            default; the features and candidates are the same either way): every candidate set
            also carries ``tag_topics`` ``p(z | t)`` and ``object_topics`` ``p(z | o)``, the
            topics of the xTReD diversifier and the diversity metrics.
        distances: every candidate set also carries ``tag_distance [B, L, L]`` (float16), the
            Jaccard distance of each pair of candidates' sets of D objects (Belém et al.,
            Section 4.1), from the co-occurrence counts mined on D (so through the
            ``max_train_tags`` cap), for GP_rnd (:mod:`tagtorch.rankers.gp_rnd`). Off by
            default: it is ``L`` times larger than the features.
        neighbours: settings of :class:`~tagtorch.candidates.neighbours.NeighbourTags` (ours,
            off by default): the tags of the D objects most similar to I_o join the candidates
            (``n_candidates``), and their normalized vote ``knn`` becomes a feature after
            ``p_lda`` (``feature``).
        max_candidates: a budget of candidates per object over every source (ours; None: no
            budget, the paper's lists): beyond it, an object keeps its text terms, then the
            candidates of highest reciprocal-rank fusion ``Σ_s 1 / (RRF_K + rank_s)`` over the
            sources that score them (the rules by ``sum_l``, LDA by ``p_lda`` when topics are
            on, each neighbour and embedding source by its score; ranks from 0 within the
            object, ties by tag code).
        profile_neighbours: the same with the similarity of the objects' profiles
            (``space="profiles"``, e.g. Last.fm's listeners; ours, off by default); feature
            ``knn_profile``, after ``knn``.
        embeddings: settings of :class:`~tagtorch.candidates.embeddings.EmbeddingTags` (ours,
            off by default): the tags nearest to I_o in a PPMI-SVD space of D's tags join the
            candidates (``n_candidates``); feature ``emb``, after the neighbours' features.
        fields: the text fields read (candidates, text features, AFS); None: every field of
            the data. E.g. ``[title]`` keeps the paper's MovieLens text when the run loads the
            movies' metadata fields for another candidate set.
        source_features: the extended feature set (ours, ``candidates=extended``): after every
            other feature, for each scoring source ``s`` (``rules`` by ``sum_l``, ``lda`` by
            ``p_lda``, then each of ``knn``, ``knn_profile``, ``emb`` that is on), the
            reciprocal rank ``rr_s = 1 / (1 + rank_s)`` of the candidate within the object's
            candidates by that source's score (0 where the score is 0), then ``agreement``,
            the number of sources (the text terms included) that score the candidate, and
            ``rrf``, the reciprocal-rank fusion ``Σ_s 1 / (RRF_K + rank_s)`` that orders the
            ``max_candidates`` budget. Ranks are taken before the budget cuts, so a kept
            candidate's features do not depend on the budget.
        rule_cache: for serving (ours): the rule features of this many one-object calls are
            kept (least recently used out first), keyed by the object's input tags and its
            text and topic candidates, so that a repeated request skips rule mining. 0: off.
        input_tags: every candidate set also carries each object's input tags ``I_o``
            (``CandidateSet.input_tags``), at most this many, the most frequent in D (ties by
            code), for rankers that read them (ours: :mod:`tagtorch.rankers.tag_context`);
            0: not carried. The candidates and features are the same either way.
    """

    max_antecedent: int
    min_support: int
    min_confidence: float
    max_rule_candidates: int | None
    text_candidates: bool
    chunk_size: int
    max_antecedent_tags: int | None
    max_train_tags: int | None
    topics: Mapping[str, Any] | None
    diversity: Mapping[str, Any] | None
    distances: bool
    neighbours: Mapping[str, Any] | None
    profile_neighbours: Mapping[str, Any] | None
    max_candidates: int | None
    embeddings: Mapping[str, Any] | None
    fields: Sequence[str] | None
    source_features: bool
    rule_cache: int
    input_tags: int

    feature_names: tuple[str, ...] = FEATURE_NAMES
    _cap_reported: bool = False  # the max_antecedent_tags warning was given

    def __init__(
        self,
        max_antecedent: int = 3,
        min_support: int = 1,
        min_confidence: float = 0.0,
        max_rule_candidates: int | None = 200,
        text_candidates: bool = True,
        k_x: float = 9.0,
        k_c: float = 11.0,
        k_r: float = 4.0,
        k_s: float = 9.0,
        chunk_size: int = 256,
        max_antecedent_tags: int | None = 64,
        max_train_tags: int | None = 1000,
        device: str = "auto",
        topics: Mapping[str, Any] | None = None,
        diversity: Mapping[str, Any] | None = None,
        distances: bool = False,
        neighbours: Mapping[str, Any] | None = None,
        profile_neighbours: Mapping[str, Any] | None = None,
        max_candidates: int | None = None,
        embeddings: Mapping[str, Any] | None = None,
        fields: Sequence[str] | None = None,
        source_features: bool = False,
        rule_cache: int = 0,
        input_tags: int = 32,
    ) -> None:
        check_rule_settings(max_antecedent, min_support, min_confidence)
        if isinstance(input_tags, bool) or not isinstance(input_tags, int) or input_tags < 0:
            raise ValueError(f"input_tags must be an integer >= 0, got {input_tags!r}")
        for name, cap in (("max_antecedent_tags", max_antecedent_tags),
                          ("max_train_tags", max_train_tags)):
            if cap is not None and (isinstance(cap, bool) or not isinstance(cap, int)
                                    or cap < 1):
                raise ValueError(f"{name} must be an integer >= 1 or None, got {cap!r}")
        if max_candidates is not None and max_candidates < 1:
            raise ValueError(f"max_candidates must be >= 1 or None, got {max_candidates}")
        self.k_x, self.k_c, self.k_r, self.k_s = k_x, k_c, k_r, k_s
        self.device = resolve_device(device)
        self.stage_seconds: dict[str, float] = defaultdict(float)
        self.object_topics = None if diversity is None else ObjectTopics(**dict(diversity))
        # the sources beyond rules and text, in the order of their features and ranks
        self.sources: list[TagSource] = [LdaTagSource(**dict(topics))] if topics is not None else []
        self.sources += [NeighbourTags(**{**dict(settings), "space": space})
                         for space, settings in (("tags", neighbours),
                                                 ("profiles", profile_neighbours))
                         if settings is not None]
        if embeddings is not None:
            self.sources.append(EmbeddingTags(**dict(embeddings)))
        self.feature_names = (*FEATURE_NAMES, *(
            source.feature_name for source in self.sources if source.feature))
        if source_features:
            self.feature_names = (*self.feature_names,
                                  *(f"rr_{name}" for name in self.scoring_sources),
                                  "agreement", "rrf")

    @property
    def scoring_sources(self) -> tuple[str, ...]:
        """The sources that score candidates, in the order of the fusion and ``rr_*``."""
        return ("rules", *(source.name for source in self.sources))

    @property
    def topic_tags(self) -> LdaTagSource | None:
        """The LDA source (``topics``), if on."""
        return next((s for s in self.sources if isinstance(s, LdaTagSource)), None)

    def __sizeof__(self) -> int:
        """Bytes of the mined statistics too (:func:`tagtorch.engines.array_bytes`)."""
        return object.__sizeof__(self) + array_bytes(vars(self))

    # ------------------------------------------------------------------------------- fit
    def fit(self, train_objects: np.ndarray, train_tags: Ragged, terms: TermIndex) -> Self:
        """Mines D: incidence, one-tag rules, per-term statistics and AFS of each text field.

        Args:
            train_objects: ``[n_D]`` object codes of D.
            train_tags: ragged ``[n_D]`` tag codes of D's objects.
            terms: the text fields of all objects as term codes.
        """
        dev, n = self.device, terms.n_terms
        full_frequency = np.bincount(train_tags.values.astype(np.int64), minlength=n)
        train_tags, n_capped = most_frequent_per_row(train_tags, full_frequency,
                                                     self.max_train_tags)
        if n_capped:
            log.warning("candidates.max_train_tags: %d of %d D objects have more than %d tags; "
                        "rules and statistics of D use only their %d most frequent tags",
                        n_capped, len(train_objects), self.max_train_tags, self.max_train_tags)
        missing = sorted(set(self.fields or ()) - set(terms.fields))
        if missing:
            raise ValueError(f"candidates.fields: no text fields {missing}; the data has "
                             f"{sorted(terms.fields)}")
        self.terms = terms
        self.text_fields = {name: field for name, field in terms.fields.items()
                            if self.fields is None or name in self.fields}
        self.n_train = len(train_objects)
        cols = torch.as_tensor(train_tags.values, dtype=torch.long, device=dev)
        f_tag = torch.bincount(cols, minlength=n).float()
        self.tag_frequency = f_tag
        self.tag_counts = np.bincount(train_tags.values.astype(np.int64), minlength=n)  # f_tag
        self.rules = RuleIndex(self.max_antecedent, self.min_support, self.min_confidence,
                               cache_size=self.rule_cache).fit(
            train_tags, n, stability(f_tag, self.k_x).double().cpu().numpy(),
            stability(f_tag, self.k_c).double().cpu().numpy(), self.k_r,
            threads=torch.get_num_threads())
        entropy = torch.as_tensor(self.rules.entropy, dtype=torch.float32, device=dev)
        if self.distances:
            x, c, support = self.rules.pairs(threads=torch.get_num_threads())
            self.pair_support = Lookup(torch.as_tensor(x * n + c, device=dev),
                                       torch.as_tensor(support, dtype=torch.float32,
                                                       device=dev), n)

        iff = torch.log((self.n_train + 1) / (f_tag + 1))
        f_text, f_both, afs = self._text_statistics(train_objects, train_tags, terms)
        self.afs = afs.cpu().numpy()
        pred = torch.where(f_text > 0, f_both / f_text.clamp(min=1), torch.zeros_like(f_text))
        self.term_features = torch.stack([iff, stability(f_tag, self.k_s), entropy, pred],
                                         -1).cpu().numpy()  # read by the compiled assembly
        for source in self.sources:
            source.fit(train_objects, train_tags, terms)
        if self.object_topics is not None:
            self.object_topics.fit(train_objects, train_tags, terms)
        return self

    def _text_statistics(
        self, train_objects: np.ndarray, train_tags: Ragged, terms: TermIndex
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``f_text``, ``f_both`` per term and ``AFS`` per text field, over D."""
        dev, n = self.device, terms.n_terms
        presence = [ragged_csr(ragged.take(train_objects), n, dev) for ragged in
                    self.text_fields.values()]
        presence = [torch.sparse_csr_tensor(m.crow_indices(), m.col_indices(),
                                            torch.ones_like(m.values()), m.shape,
                                            check_invariants=False)
                    for m in presence]
        if not presence:
            zeros = torch.zeros(n, device=dev)
            return zeros, zeros, torch.zeros(0, device=dev)
        parts = [triplets(m) for m in presence]
        spread = csr(torch.cat([p[0] for p in parts]), torch.cat([p[1] for p in parts]),
                     torch.cat([p[2] for p in parts]), (self.n_train, n))  # TS(t, d)
        rows, cols, _ = triplets(spread)
        f_text = torch.bincount(cols, minlength=n).float()
        is_tag = Lookup.from_ragged(train_tags, n, dev)(rows, cols) > 0
        f_both = torch.bincount(cols[is_tag], minlength=n).float()
        ts = Lookup.from_csr(spread)
        afs = []
        for rows_i, cols_i, _ in parts:
            total = torch.zeros(self.n_train, device=dev).index_add_(0, rows_i, ts(rows_i, cols_i))
            count = torch.bincount(rows_i, minlength=self.n_train).float()
            fis = total[count > 0] / count[count > 0]
            afs.append(fis.mean() if len(fis) else torch.zeros((), device=dev))
        return f_text, f_both, torch.stack(afs)

    # ------------------------------------------------------------------------- candidates
    def __call__(self, queries: TagQueries,
                 texts: Mapping[str, Ragged] | None = None) -> CandidateSet:
        """Candidates, the 13 features and labels for V or T objects (in chunks).

        Stage times accumulate in :attr:`stage_seconds` under ``"rules"`` (lazy rule
        generation: Sum with ℓ = 1 and ℓ) and ``"features"`` (the other metrics).

        Args:
            queries: the objects, their input tags and gold tags (labels only).
            texts: the objects' text fields as term codes (field name -> ragged rows aligned
                with ``queries``), for objects the fitted :class:`TermIndex` does not hold
                (serving new objects); a field left out is empty. None: the objects' texts
                are read from the :class:`TermIndex` by their codes.
        """
        if not hasattr(self, "rules"):
            raise RuntimeError("call fit() before generating candidates")
        if self.max_antecedent > 1 and self.max_antecedent_tags is not None:
            n_capped = int((queries.input_tags.lengths > self.max_antecedent_tags).sum())
            if n_capped:  # a warning once per generator, later calls at debug level
                log.log(logging.DEBUG if self._cap_reported else logging.WARNING,
                        "candidates.max_antecedent_tags: %d of %d objects have more than %d "
                        "input tags; their rules with 2..%d antecedent tags use only their "
                        "%d input tags most frequent in D", n_capped, len(queries),
                        self.max_antecedent_tags, self.max_antecedent, self.max_antecedent_tags)
                self._cap_reported = True
        pieces = []
        object_topics = None
        if self.object_topics is not None:
            object_topics = torch.zeros(len(queries), self.object_topics.n_topics)
        starts = range(0, len(queries), self.chunk_size)
        for first in (progress(starts, "candidates", unit="chunk") if len(starts) > 1
                      else starts):
            rows = np.arange(first, min(first + self.chunk_size, len(queries)))
            chunk = queries.take(rows)
            chunk_texts = None if texts is None else {
                name: (texts[name].take(rows) if name in texts
                       else Ragged.from_lists([[]] * len(rows)))
                for name in self.text_fields}
            chunk_rows, cols, features, labels = self._chunk(chunk, chunk_texts)
            tag_topics = None
            if self.object_topics is not None and object_topics is not None:
                start = time.perf_counter()
                tag_topics = self.object_topics.candidates(cols)
                object_topics[rows] = torch.as_tensor(  # fold-in seeded per chunk
                    self.object_topics.objects(chunk), dtype=torch.float32)
                self._tick("features", start)
            pieces.append((chunk_rows + first, cols, features, labels, tag_topics))
        candidates = CandidateSet.from_chunks(
            objects=torch.as_tensor(queries.objects, dtype=torch.long), chunks=pieces,
            n_relevant=torch.as_tensor(queries.gold_tags.lengths, dtype=torch.long),
            feature_names=self.feature_names, object_topics=object_topics,
            input_tags=self._input_tags(queries.input_tags),
        )
        if not self.distances:
            return candidates
        start = time.perf_counter()
        distance = self.tag_distance(candidates.tags, candidates.mask)
        self._tick("features", start)
        return replace(candidates, tag_distance=distance)

    def _input_tags(self, inputs: Ragged) -> torch.Tensor | None:
        """``[B, M]`` input tags of the queries (``-1`` padding), or None when ``input_tags=0``.

        Each object keeps its ``input_tags`` tags most frequent in D, in ascending code order.
        """
        if not self.input_tags:
            return None
        kept, _ = most_frequent_per_row(inputs, self.tag_counts, self.input_tags)
        values, _ = kept.padded(np.arange(len(kept)), fill=-1)
        return torch.as_tensor(values, dtype=torch.long)

    def tag_distance(self, tags: torch.Tensor, mask: torch.Tensor,
                     max_pairs: int = 1 << 22) -> torch.Tensor:
        """``[B, L, L]`` float16 Jaccard distances between each list's candidates (on the CPU).

        ``|O_c & O_c'|`` is the support of the pair in D and ``|O_c|`` the tag's frequency in D
        (:func:`~tagtorch.metrics.diversity.jaccard_from_counts`); padding is at distance 1.

        Args:
            tags: ``[B, L]`` candidate codes (-1 at padding).
            mask: ``[B, L]`` bool, True at real candidates.
            max_pairs: candidate pairs looked up at once (bounds memory).
        """
        if not hasattr(self, "pair_support"):
            raise RuntimeError("call fit() with distances=True before computing distances")
        b, length = tags.shape
        out = torch.ones(b, length, length, dtype=torch.float16)
        step = max(1, max_pairs // max(length * length, 1))
        for lo in range(0, b, step):
            codes = tags[lo:lo + step].to(self.device).clamp(min=0)
            real = mask[lo:lo + step].to(self.device)
            left = codes.unsqueeze(2).expand(-1, -1, length)
            right = codes.unsqueeze(1).expand(-1, length, -1)
            inter = self.pair_support(left.reshape(-1), right.reshape(-1)).view(left.shape)
            size = self.tag_frequency[codes]
            distance = jaccard_from_counts(inter, size.unsqueeze(2), size.unsqueeze(1))
            both = real.unsqueeze(2) & real.unsqueeze(1)
            out[lo:lo + step] = torch.where(both, distance, torch.ones_like(distance)).half().cpu()
        return out

    def _tick(self, stage: str, start: float) -> float:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        now = time.perf_counter()
        self.stage_seconds[stage] += now - start
        return now

    def _other_terms(self, queries: TagQueries, text: tuple[np.ndarray, np.ndarray],
                     known: bool) -> tuple[Ragged, list[SourceBatch]]:
        """The candidate terms beyond the rules, by object, and each source's batch.

        They are the text candidates ``text`` (``(rows, terms)``, from
        :func:`~tagtorch.candidates.feature_kernel.text_terms`; left out unless
        ``text_candidates``), then each source's proposals (``known``: the objects are in the
        index).
        """
        n = self.terms.n_terms
        rows, codes = text if self.text_candidates else (text[0][:0], text[1][:0])
        batches = [source.batch(queries, known, self.device) for source in self.sources]
        if batches:
            keys = torch.cat([batch.keys() for batch in batches]).cpu().numpy()
            rows, codes = np.concatenate([rows, keys // n]), np.concatenate([codes, keys % n])
        return Ragged.from_groups(rows, codes, len(queries)), batches

    def _fuse(self, rows: torch.Tensor, cols: torch.Tensor, features: torch.Tensor,
              labels: torch.Tensor, ranked: list[torch.Tensor], is_text: torch.Tensor
              ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """The per-source features (``rr_*``, agreement, ``rrf``) and the budget.

        ``ranked``: each scoring source's scores of the candidates; ``is_text``: the text
        terms, kept first within the budget.
        """
        ranks = [_row_ranks(rows, score).double() for score in ranked]
        # float64: no rounding reorders near-equal sums
        fused = sum((torch.where(score > 0, 1.0 / (RRF_K + rank), 0.0)
                     for score, rank in zip(ranked, ranks, strict=True)),
                    torch.zeros(len(rows), dtype=torch.float64, device=rows.device))
        if self.source_features:
            scored = [score > 0 for score in ranked]
            features = torch.cat([features, *(
                torch.where(on, 1.0 / (1.0 + rank), 0.0).float()[:, None]
                for on, rank in zip(scored, ranks, strict=True)),
                (sum(on.float() for on in scored) + is_text.float())[:, None],
                fused.float()[:, None]], -1)
        if self.max_candidates is not None:
            chosen = _row_ranks(rows, fused + is_text.double()) < self.max_candidates
            rows, cols, features, labels = (rows[chosen], cols[chosen], features[chosen],
                                            labels[chosen])
        return rows, cols, features, labels

    def _with_sources(self, rows: torch.Tensor, cols: torch.Tensor, features: torch.Tensor,
                      labels: torch.Tensor, batches: list[SourceBatch]
                      ) -> tuple[torch.Tensor, ...]:
        """The sources' features after the 13, then the fusion and budget, on ``device``."""
        rows, cols, features, labels = (t.to(self.device) for t in (rows, cols, features, labels))
        ranked = [features[:, SUM_L]]  # the sources' scores (scoring_sources): the rules' first
        for source, batch in zip(self.sources, batches, strict=True):
            value = batch.scores(rows, cols)
            ranked.append(value)
            if source.feature:
                features = torch.cat([features, value[:, None]], -1)
        if self.source_features or self.max_candidates is not None:
            rows, cols, features, labels = self._fuse(rows, cols, features, labels, ranked,
                                                      is_text=features[:, TS] > 0)
        return rows.cpu(), cols.cpu(), features.float().cpu(), labels.cpu()

    def _chunk(self, queries: TagQueries, texts: Mapping[str, Ragged] | None = None
               ) -> tuple[torch.Tensor, ...]:
        """Flat ``(rows, terms, features [n, F], labels)`` of one chunk, on the CPU.

        The 13 features come from the compiled kernels of
        :mod:`~tagtorch.candidates.feature_kernel` (one path for batches and single objects);
        the sources beyond rules and text, if any, add theirs on ``device``. ``texts``: the
        chunk's text fields (see :meth:`__call__`); None reads the TermIndex.
        """
        start = time.perf_counter()
        inputs = queries.input_tags
        field_ptr, field_terms = stack_fields(
            list(texts.values()) if texts is not None
            else [r.take(queries.objects) for r in self.text_fields.values()], len(queries))
        others, batches = self._other_terms(
            queries, text_terms(inputs.offsets, inputs.values, field_ptr, field_terms),
            known=texts is None)
        antecedents, _ = most_frequent_per_row(inputs, self.tag_counts, self.max_antecedent_tags)
        start = self._tick("features", start)
        rule_rows, rule_cols, rule_values = self.rules.mine(
            inputs, antecedents, others, self.max_rule_candidates,
            threads=torch.get_num_threads())
        start = self._tick("rules", start)
        gold = queries.gold_tags
        flat = assemble(np.searchsorted(rule_rows, np.arange(len(queries) + 1)), rule_cols,
                        rule_values, others.offsets, others.values, field_ptr, field_terms,
                        self.afs, gold.offsets, gold.values, self.term_features)
        rows, cols, features, labels = (torch.from_numpy(a) for a in flat)
        if self.sources or self.source_features or self.max_candidates is not None:
            rows, cols, features, labels = self._with_sources(rows, cols, features, labels,
                                                              batches)
        self._tick("features", start)
        return rows, cols, features, labels


def _row_ranks(rows: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    """Rank (0 = highest value) of each entry within its row; ties keep the entries' order.

    ``rows`` is non-decreasing (entries grouped by row).

    Example:
        >>> _row_ranks(torch.tensor([0, 0, 0, 1]), torch.tensor([0.2, 0.9, 0.2, 5.0])).tolist()
        [1, 0, 2, 0]
    """
    order = torch.argsort(-values, stable=True)
    order = order[torch.argsort(rows[order], stable=True)]
    rank = torch.empty_like(order)
    first = torch.searchsorted(rows, rows[order])  # the row's first position
    rank[order] = torch.arange(len(order), device=rows.device) - first
    return rank
