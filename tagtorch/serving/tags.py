"""A fitted tag recommender as one artifact: recommend tags for new objects.

:meth:`TagRecommender.fit` learns a whole recommender on a folksonomy:

- D and V: the objects with at least ``min_tags`` tags are shuffled (seeded) and
  ``val_fraction`` of them become V, whose tags are split into input and gold tags as in the
  protocol (``input_fraction``); every other object, the rest of the eligible ones and those
  with fewer tags, is D. Unlike the evaluation protocol there is no T: every object serves.
- The candidate generator (LATRE rules and the 13 features, :mod:`tagtorch.candidates`) mines
  D, and the ranker learns on V's candidate lists.

:meth:`TagRecommender.save` writes one folder: ``manifest.json`` (tagtorch's version, the
configuration, the data's fingerprint, the size and SHA-256 of every file), ``data.npz`` (D's
tag sets, the text fields of every object as term codes), ``vocabulary.json`` (the terms and
each tag's display string) and the ranker's own folder. Nothing in it is a pickle. The
statistics of D (the rule index, the per-term and per-field statistics) are mined again from
``data.npz`` when the folder is loaded: they are a function of D and its texts, they take
seconds, and served posts (which change D) must reach them anyway.

:meth:`TagRecommender.recommend_tags` takes an object's raw text fields and tags. It normalizes
them with the artifact's text pipeline; words and tags the vocabulary does not hold are left
out and reported. An object with no candidate gets an empty list with the reason, never an
exception.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self

import numpy as np
import torch

from tagtorch.candidates.latre import LatreCandidates
from tagtorch.data.folksonomy import Folksonomy
from tagtorch.data.ragged import Ragged
from tagtorch.data.splits import TagQueries, split_input_gold
from tagtorch.data.terms import TermIndex
from tagtorch.data.text import TextProcessor
from tagtorch.metrics.functional import check_k
from tagtorch.rankers.base import BaseRanker, fit_ranker
from tagtorch.serving.artifact import open_artifact, reading, write_artifact
from tagtorch.serving.journal import (
    JOURNAL_FILE,
    Journal,
    compact_journal,
    encode_record,
    replay,
)
from tagtorch.serving.schema import MAX_TAGS, MAX_TEXT_CHARS
from tagtorch.storage import (
    check_codes,
    check_count,
    check_ragged,
    check_strings,
    load_arrays,
    model_folder,
    read_json,
    save_arrays,
    write_json,
)

DATA_FILE = "data.npz"
VOCABULARY_FILE = "vocabulary.json"
RANKER_FOLDER = "ranker"

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class _Data:
    """What a recommendation reads, replaced whole when posts arrive (never changed in place)."""

    terms: TermIndex
    train_tags: Ragged
    train_objects: np.ndarray
    display: list[str]
    object_ids: list[str]
    generator: LatreCandidates
    term_codes: dict[str, int]
    object_codes: dict[str, int]


@dataclass
class Recommendations:
    """Tags recommended for one object, best first, and why the list may be short.

    Attributes:
        tags: ``[(tag, score)]``, at most ``k``, scores descending.
        reason: why the list is empty (None when it is not).
        unknown_tags: input tags the recommender has never seen (left out).
        unknown_words: text words the vocabulary does not hold (left out).
    """

    tags: list[tuple[str, float]]
    reason: str | None = None
    unknown_tags: list[str] = field(default_factory=list)
    unknown_words: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """Plain JSON-able form."""
        return {"tags": [{"tag": tag, "score": score} for tag, score in self.tags],
                "reason": self.reason, "unknown_tags": self.unknown_tags,
                "unknown_words": self.unknown_words}


class TagRecommender:
    """A fitted tag recommender: text pipeline, vocabulary, D, candidate generator and ranker.

    Build one with :meth:`fit` or :meth:`load`; ask it with :meth:`recommend_tags`.

    Args:
        processor: the text pipeline (lowercasing, stopwords, stemming) of the training data.
        terms: the vocabulary and every training object's text fields as term codes.
        train_tags: ragged ``[n_objects]`` tag codes of every object (D's objects are those
            listed in ``train_objects``).
        train_objects: ``[n_D]`` the object codes of D.
        display: ``[n_tags]`` the string shown for each tag (its most used raw form).
        candidates: the candidate generator's settings (:class:`LatreCandidates`).
        ranker: the fitted ranker.
        info: what the manifest records besides (configuration, data name, fingerprint).
    """

    def __init__(self, processor: TextProcessor, terms: TermIndex, train_tags: Ragged,
                 train_objects: np.ndarray, display: Sequence[str],
                 candidates: Mapping[str, Any], ranker: BaseRanker,
                 info: Mapping[str, Any] | None = None,
                 object_ids: Sequence[str] | None = None) -> None:
        self.processor, self.ranker = processor, ranker
        self.candidate_settings = {k: v for k, v in dict(candidates).items()
                                   if not k.startswith("_")}
        self.info = dict(info or {})
        self.journal: Journal | None = None
        self._rule_cache = int(self.candidate_settings.get("rule_cache", 0))
        self._lock = threading.Lock()
        ids = [str(o) for o in range(len(train_tags))] if object_ids is None else object_ids
        self._data = self._mine(terms, train_tags, np.asarray(train_objects), list(display),
                                [str(o) for o in ids])

    def _mine(self, terms: TermIndex, train_tags: Ragged, train_objects: np.ndarray,
              display: list[str], object_ids: list[str]) -> _Data:
        """The state a recommendation reads, with the generator fitted on D."""
        generator = LatreCandidates(**self.candidate_settings)
        if generator.object_topics is not None:
            raise ValueError("candidates with a diversity component need the categories of "
                             "new objects, which recommend_tags does not take")
        if any(getattr(source, "space", None) == "profiles" for source in generator.sources):
            raise ValueError("candidates.profile_neighbours compare the objects' profiles "
                             "(e.g. Last.fm's listeners), which new objects do not have and "
                             "recommend_tags does not take; serve a set without them")
        generator.fit(train_objects, train_tags.take(train_objects), terms)
        generator.rules.cache_size = self._rule_cache
        return _Data(terms, train_tags, train_objects, display, object_ids, generator,
                     {str(term): code for code, term in enumerate(terms.vocabulary)},
                     {o: code for code, o in enumerate(object_ids)})

    @property
    def rule_cache(self) -> int:
        """One-object rule results kept for repeated requests (0: off), kept across posts."""
        return self._rule_cache

    @rule_cache.setter
    def rule_cache(self, size: int) -> None:
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise ValueError(f"rule_cache must be an integer >= 0, got {size!r}")
        self._rule_cache = self._data.generator.rules.cache_size = size
        self._data.generator.rules.clear_cache()

    @property
    def terms(self) -> TermIndex:
        """The vocabulary and every object's text fields as term codes."""
        return self._data.terms

    @property
    def generator(self) -> LatreCandidates:
        """The candidate generator, fitted on D."""
        return self._data.generator

    @property
    def display(self) -> list[str]:
        """The string shown for each tag."""
        return self._data.display

    @property
    def train_tags(self) -> Ragged:
        """Every object's tag codes."""
        return self._data.train_tags

    @property
    def train_objects(self) -> np.ndarray:
        """The object codes of D."""
        return self._data.train_objects

    # --------------------------------------------------------------------------- fitting
    @classmethod
    def fit(cls, folksonomy: Folksonomy, processor: TextProcessor,
            candidates: LatreCandidates, ranker: BaseRanker, *,
            display: Sequence[str] | None = None, val_fraction: float = 0.2,
            input_fraction: float = 0.5, min_tags: int = 2, seed: int = 0,
            info: Mapping[str, Any] | None = None) -> Self:
        """Fits a recommender on a normalized folksonomy (D/V split described in the module).

        Args:
            folksonomy: the folksonomy, already normalized by ``processor``.
            processor: its text pipeline, applied to the texts and tags of new objects.
            candidates: an unfitted :class:`LatreCandidates` (its settings are fitted on D and
                saved with the recommender).
            ranker: an unfitted ranker; it learns on V's candidate lists.
            display: the string shown for each tag (default: the normalized tag).
            val_fraction: share of the eligible objects in V.
            input_fraction: share of a V object's tags given as input.
            min_tags: fewest tags of a V object.
            seed: seed of the split.
            info: extra manifest entries (configuration, ...).
        """
        if not 0.0 < val_fraction < 1.0:
            raise ValueError(f"val_fraction must be in (0, 1), got {val_fraction}")
        rng = np.random.default_rng(seed)
        object_tags = folksonomy.object_tags()
        eligible = rng.permutation(np.flatnonzero(object_tags.lengths >= max(min_tags, 2)))
        n_val = round(val_fraction * len(eligible))
        if n_val == 0 or n_val == len(eligible):
            raise ValueError(f"{len(eligible)} objects with >= {min_tags} tags cannot be split "
                             f"into D and V with val_fraction={val_fraction}")
        val_objects = np.sort(eligible[:n_val])
        in_val = np.zeros(folksonomy.n_objects, dtype=bool)
        in_val[val_objects] = True
        train_objects = np.flatnonzero(~in_val & (object_tags.lengths > 0))
        input_tags, gold_tags = split_input_gold(object_tags.take(val_objects), input_fraction,
                                                 rng)
        terms = TermIndex.from_folksonomy(folksonomy)
        display = list(folksonomy.tags) if display is None else list(display)
        info = {**dict(info or {}), "data": folksonomy.name,
                "fingerprint": folksonomy.fingerprint(), "d_objects": len(train_objects),
                "v_objects": len(val_objects), "seed": seed}
        recommender = cls(processor, terms, object_tags, train_objects, display,
                          candidates.settings(), ranker, info,
                          object_ids=[str(o) for o in folksonomy.objects])
        val = recommender.generator(TagQueries(val_objects, input_tags, gold_tags))
        fit_ranker(ranker, val, object_tags.take(train_objects))
        return recommender

    # ---------------------------------------------------------------------------- saving
    def save(self, path: str | Path) -> Path:
        """Writes the artifact folder (module docstring), posts included; returns it."""
        with self._lock:
            return self._save(path)

    def _save(self, path: str | Path) -> Path:
        folder = model_folder(path)
        arrays = {"tag_offsets": self.train_tags.offsets, "tag_values": self.train_tags.values,
                  "train_objects": self.train_objects}
        for i, ragged in enumerate(self.terms.fields.values()):
            arrays[f"field{i}_offsets"], arrays[f"field{i}_values"] = ragged.offsets, ragged.values
        save_arrays(arrays, folder / DATA_FILE)
        write_json({"vocabulary": [str(t) for t in self.terms.vocabulary],
                    "n_tags": self.terms.n_tags, "fields": list(self.terms.fields),
                    "display": self.display, "objects": self._data.object_ids},
                   folder / VOCABULARY_FILE)
        self.ranker.save(folder / RANKER_FOLDER)
        (folder / JOURNAL_FILE).unlink(missing_ok=True)  # the posts are in the data now
        if self.journal is not None and self.journal.path == folder / JOURNAL_FILE:
            self.journal = Journal(self.journal.path)
        write_artifact(folder, type(self), self.processor,
                       {"candidates": self.candidate_settings},
                       [DATA_FILE, VOCABULARY_FILE, RANKER_FOLDER], "ranker_class", self.ranker,
                       self.info)
        return folder

    @classmethod
    def load(cls, path: str | Path) -> Self:
        """Reads an artifact folder; every file is checked against the manifest first.

        Raises:
            UnreadableFileError: naming the file, for a missing, altered or malformed one.
        """
        folder = Path(path)
        with reading(folder, "tag recommender"):
            opened = open_artifact(folder, cls, "ranker_class", ("tagtorch.rankers.",),
                                   (BaseRanker,), (DATA_FILE, VOCABULARY_FILE, RANKER_FOLDER))
            where = folder / VOCABULARY_FILE
            vocabulary = read_json(where, ("vocabulary", "n_tags", "fields", "display",
                                           "objects"))
            words = check_strings(where, "vocabulary", vocabulary["vocabulary"], distinct=True)
            n_tags = check_count(where, "n_tags", vocabulary["n_tags"], len(words))
            names = check_strings(where, "fields", vocabulary["fields"], distinct=True)
            check_strings(where, "display", vocabulary["display"], n_tags)
            n_objects = len(check_strings(where, "objects", vocabulary["objects"]))
            keys = ["tag_offsets", "tag_values", "train_objects"] + [
                f"field{i}_{part}" for i in range(len(names)) for part in ("offsets", "values")]
            where = folder / DATA_FILE
            arrays = load_arrays(where, keys)  # each array's size bounded by the file's
            fields = {name: Ragged(*check_ragged(where, f"field{i}", arrays[f"field{i}_offsets"],
                                                 arrays[f"field{i}_values"], n_objects,
                                                 len(words)))
                      for i, name in enumerate(names)}
            terms = TermIndex(n_tags=n_tags, vocabulary=np.asarray(words, dtype=object),
                              fields=fields)
            train_tags = Ragged(*check_ragged(where, "tag", arrays["tag_offsets"],
                                              arrays["tag_values"], n_objects, n_tags))
            arrays["train_objects"] = check_codes(where, "train_objects",
                                                  arrays["train_objects"], n_objects)
            recommender = cls(opened.processor, terms, train_tags, arrays["train_objects"],
                              vocabulary["display"], opened.settings["candidates"],
                              opened.model_class.load(folder / RANKER_FOLDER), opened.info,
                              object_ids=vocabulary["objects"])
        recommender.journal = Journal(folder / JOURNAL_FILE)
        replayed = replay(recommender.journal, recommender.check_posts)
        if replayed:
            recommender._apply(replayed)
            log.info("%s: %d journaled posts replayed", folder, len(replayed))
        return recommender

    def compact(self, rotate: bool = True) -> bool:
        """Writes the journaled posts into the folder's data (:func:`compact_journal`)."""
        return compact_journal(self.journal, self._lock, self._save, rotate)

    # ------------------------------------------------------------------------ learning
    def add_posts(self, posts: Sequence[Mapping[str, Any]]) -> int:
        """Adds tag assignments: D absorbs them before the next recommendation.

        Each post is ``{"user": str, "object": str, "tags": [str], field: text, ...}``: the
        object (a known id, or a new one) gets the tags, and a new object's text fields are
        kept. The batch is checked whole, then appended to the journal as one record
        (``journal.jsonl`` in the artifact folder, flushed to disk with fsync,
        :mod:`tagtorch.serving.journal`) before it is applied, so an acknowledged post
        survives a kill and a refused batch leaves no trace; :meth:`load` replays the
        journal. The ranker is not refitted: LATRE's rules are mined lazily from D, whose
        statistics are mined again here (:meth:`apply_posts`).

        Returns:
            The number of posts added.

        Raises:
            ValueError: a malformed post (nothing is added then), naming its position.
            JournalWriteError: the journal could not store the batch (nothing is added).
        """
        checked, record = self.check_posts(posts)
        with self._lock:
            self.journal_record(record)
            self._apply(checked)
        return len(checked)

    def check_posts(self, posts: Sequence[Mapping[str, Any]]
                    ) -> tuple[list[dict[str, Any]], bytes]:
        """The posts checked against the schema and the text fields, and their journal record.

        Returns:
            ``(posts in plain form, their record)`` (:func:`~tagtorch.serving.journal
            .encode_record`).

        Raises:
            ValueError: a malformed post, naming its position.
        """
        if isinstance(posts, Mapping | str) or not isinstance(posts, Sequence):
            raise ValueError(f"posts must be a list of posts, got {type(posts).__name__}")
        checked = [self._check_post(i, post) for i, post in enumerate(posts)]
        return checked, encode_record(checked)  # the schema of the endpoint and the journal

    def journal_record(self, record: bytes) -> None:
        """Appends a record of checked posts to the journal (no journal: nothing to do).

        Raises:
            JournalWriteError: the record is not stored.
        """
        if self.journal is not None:
            self.journal.append(record)

    def apply_posts(self, posts: Sequence[Mapping[str, Any]]) -> None:
        """Applies checked, journaled posts: D, the vocabulary and the texts mined again."""
        with self._lock:
            self._apply(posts)

    def new_tags(self, posts: Sequence[Mapping[str, Any]]) -> set[str]:
        """The normalized tags of ``posts`` that the vocabulary does not hold yet."""
        codes, n_tags = self._data.term_codes, self._data.terms.n_tags
        return {key for post in posts for key in map(self.processor.normalize_tag, post["tags"])
                if codes.get(key, n_tags) >= n_tags}

    def _check_post(self, position: int, post: Mapping[str, Any]) -> dict[str, Any]:
        where = f"post {position}"
        if not isinstance(post, Mapping):
            raise ValueError(f"{where}: expected a mapping, got {type(post).__name__}")
        for name in ("user", "object"):
            if not isinstance(post.get(name), str) or not post[name]:
                raise ValueError(f"{where}: {name!r} must be a non-empty string")
        self._parse(self._data, position, {k: v for k, v in post.items()
                                           if k not in ("user", "object")})
        if not post.get("tags"):
            raise ValueError(f"{where}: no tags to add")
        return {k: (list(v) if k == "tags" else v) for k, v in post.items()}

    def _apply(self, posts: Sequence[Mapping[str, Any]]) -> None:
        """D, the vocabulary and the texts with the posts in; the generator mined again."""
        data = self._data
        object_ids = list(data.object_ids)
        object_codes = dict(data.object_codes)
        rows: dict[int, list[int]] = {}
        texts: dict[int, dict[str, str]] = {}
        new_tags: dict[str, tuple[int, str]] = {}  # normalized -> (rank, raw): tags not yet known
        for post in posts:
            code = object_codes.get(post["object"])
            if code is None:
                code = object_codes[post["object"]] = len(object_ids)
                object_ids.append(post["object"])
                texts[code] = {name: str(post.get(name) or "") for name in data.terms.fields}
            rows.setdefault(code, list(data.train_tags[code]) if code < len(data.train_tags)
                            else [])
            for tag in post["tags"]:
                key = self.processor.normalize_tag(tag)
                known = data.term_codes.get(key)
                if known is not None and known < data.terms.n_tags:
                    rows[code].append(known)
                else:
                    rank, _ = new_tags.setdefault(key, (len(new_tags), tag))
                    rows[code].append(-1 - rank)  # given its code once all are known
        terms, display, remap = _with_new_tags(data.terms, data.display,
                                               {key: raw for key, (_, raw) in new_tags.items()})
        codes = {str(term): code for code, term in enumerate(terms.vocabulary)}
        n_old, n_objects = data.terms.n_tags, len(object_ids)
        fields = {}
        for name, ragged in data.terms.fields.items():
            added: list[list[int]] = [[] for _ in range(n_objects - len(ragged))]
            for code, text in texts.items():
                added[code - len(ragged)] = [codes[term] for term in
                                             self.processor.terms(text[name]) if term in codes]
            fields[name] = _concat(Ragged(ragged.offsets, remap[ragged.values]),
                                   Ragged.from_lists(added))
        terms = TermIndex(n_tags=terms.n_tags, vocabulary=terms.vocabulary, fields=fields)
        old = data.train_tags
        kept = ~np.isin(old.row_ids, list(rows))
        changed = {code: sorted({v if v >= 0 else n_old - 1 - v for v in values})
                   for code, values in rows.items()}
        groups = np.concatenate([old.row_ids[kept], np.repeat(
            np.fromiter(changed, dtype=np.int64, count=len(changed)),
            [len(v) for v in changed.values()]).astype(np.int64)])
        values = np.concatenate([old.values[kept].astype(np.int64), np.asarray(
            [v for row in changed.values() for v in row], dtype=np.int64)])
        train_tags = Ragged.from_groups(groups, values, n_objects)
        in_d = np.zeros(n_objects, dtype=bool)
        in_d[data.train_objects] = True
        in_d[list(rows)] = True
        self._data = self._mine(terms, train_tags, np.flatnonzero(in_d), display, object_ids)

    # ------------------------------------------------------------------------ recommending
    @property
    def text_fields(self) -> list[str]:
        """The text fields an object may have (those of the training data)."""
        return list(self.terms.fields)

    def recommend_tags(self, tags: Iterable[str] = (), k: int = 5, **texts: str | None
                       ) -> Recommendations:
        """The ``k`` best tags for one object from its tags and text fields.

        Args:
            tags: tags the object already has (raw strings; normalized here).
            k: how many tags to return.
            **texts: text fields by name (e.g. ``title=...``), raw strings.

        Raises:
            ValueError: a bad ``k``, an unknown field, or input over the size limits.
        """
        given = tags if isinstance(tags, str) else list(tags)  # a string is refused below
        return self.recommend_tags_batch([{"tags": given, **texts}], k=k)[0]

    def recommend_tags_batch(self, objects: Sequence[Mapping[str, Any]], k: int = 5
                             ) -> list[Recommendations]:
        """:meth:`recommend_tags` for many objects at once (``{"tags": [...], field: text}``).

        Raises:
            ValueError: as :meth:`recommend_tags`, naming the object's position.
        """
        check_k(k)
        data = self._data  # one consistent state, whatever posts arrive meanwhile
        parsed = [self._parse(data, i, obj) for i, obj in enumerate(objects)]
        out = [Recommendations([], None, unknown_tags, unknown_words)
               for _, _, unknown_tags, unknown_words in parsed]
        if not parsed:
            return out
        queries = TagQueries(np.zeros(len(parsed), dtype=np.int64),
                             Ragged.from_lists([codes for codes, *_ in parsed]),
                             Ragged.from_lists([[]] * len(parsed)))
        texts = {name: Ragged.from_lists([fields[name] for _, fields, *_ in parsed])
                 for name in self.text_fields}
        lists = data.generator(queries, texts)
        if lists.mask.shape[1]:
            scores = self.ranker.score(lists).float().cpu()
            scores = torch.where(lists.mask, scores, torch.full_like(scores, -torch.inf))
            # ties by candidate order (term code), as the protocol's metrics rank them
            ordered = torch.sort(scores, dim=1, descending=True, stable=True)
            top_values = ordered.values[:, :k]
            top_indices = ordered.indices[:, :k]
        for row, result in enumerate(out):
            n = int(lists.mask[row].sum())
            if n == 0:
                result.reason = ("no candidate tag: none of the object's known tags co-occurs "
                                 "with another tag in the training data, and its text has no "
                                 "known word")
                continue
            for value, column in zip(top_values[row].tolist(), top_indices[row].tolist(),
                                     strict=True):
                if lists.mask[row, column]:
                    code = int(lists.tags[row, column])
                    shown = (data.display[code] if code < len(data.display)
                             else str(data.terms.vocabulary[code]))  # a text-only term
                    result.tags.append((shown, float(value)))
        return out

    def _parse(self, data: _Data, position: int, obj: Mapping[str, Any]
               ) -> tuple[list[int], dict[str, list[int]], list[str], list[str]]:
        """``(tag codes, field -> term codes, unknown tags, unknown words)`` of one object."""
        where = f"object {position}"
        if not isinstance(obj, Mapping):
            raise ValueError(f"{where}: expected a mapping of tags and text fields, got "
                             f"{type(obj).__name__}")
        unknown_fields = sorted(set(obj) - {"tags", *self.text_fields})
        if unknown_fields:
            raise ValueError(f"{where}: unknown fields {unknown_fields}; this recommender "
                             f"knows the text fields {self.text_fields} and 'tags'")
        raw_tags = obj.get("tags") or []
        if isinstance(raw_tags, str) or not isinstance(raw_tags, Sequence):
            raise ValueError(f"{where}: tags must be a list of strings, got {raw_tags!r}")
        if len(raw_tags) > MAX_TAGS:
            raise ValueError(f"{where}: {len(raw_tags)} tags, more than the {MAX_TAGS} accepted")
        codes, unknown_tags = [], []
        for tag in raw_tags:
            if not isinstance(tag, str):
                raise ValueError(f"{where}: tags must be strings, got {tag!r}")
            code = data.term_codes.get(self.processor.normalize_tag(tag))
            if code is None or code >= data.terms.n_tags:
                unknown_tags.append(tag)
            elif code not in codes:
                codes.append(code)
        fields: dict[str, list[int]] = {}
        unknown_words: list[str] = []
        for name in self.text_fields:
            text = obj.get(name) or ""
            if not isinstance(text, str):
                raise ValueError(f"{where}: field {name!r} must be a string, got "
                                 f"{type(text).__name__}")
            if len(text) > MAX_TEXT_CHARS:
                raise ValueError(f"{where}: field {name!r} has {len(text):,} characters, more "
                                 f"than the {MAX_TEXT_CHARS:,} accepted")
            fields[name] = []
            for term in self.processor.terms(text):
                code = data.term_codes.get(term)
                if code is None:
                    unknown_words.append(term)
                else:
                    fields[name].append(code)
        return sorted(codes), fields, unknown_tags, sorted(set(unknown_words))


def display_names(raw: Folksonomy, processor: TextProcessor, normalized: Folksonomy
                  ) -> list[str]:
    """Each normalized tag's most used raw spelling (ties: the first in the raw tag order).

    Args:
        raw: the folksonomy before text processing.
        processor: the pipeline that turned ``raw`` into ``normalized``.
        normalized: the processed folksonomy, whose tag order the result follows.
    """
    uses = np.bincount(np.asarray(raw.assignments["tag"]), minlength=raw.n_tags)
    best: dict[str, tuple[int, str]] = {}
    for code, tag in enumerate(raw.tags):
        key = processor.normalize_tag(str(tag))
        if key not in best or uses[code] > best[key][0]:
            best[key] = (int(uses[code]), str(tag))
    return [best.get(str(tag), (0, str(tag)))[1] for tag in normalized.tags]


def _concat(first: Ragged, second: Ragged) -> Ragged:
    """The rows of ``first`` then those of ``second``."""
    offsets = np.concatenate([first.offsets, first.offsets[-1] + second.offsets[1:]])
    return Ragged(offsets, np.concatenate([first.values.astype(np.int64),
                                           second.values.astype(np.int64)]))


def _with_new_tags(terms: TermIndex, display: list[str], new_tags: Mapping[str, str]
                   ) -> tuple[TermIndex, list[str], np.ndarray]:
    """The vocabulary with ``new_tags`` (normalized -> raw) appended to the tags.

    Tags come first in the code space, so the text-only terms move up; a text-only term equal
    to a new tag becomes that tag. Returns ``(terms without fields, display, remap)`` where
    ``remap[old code]`` is a term's new code.
    """
    n_tags, vocabulary = terms.n_tags, [str(t) for t in terms.vocabulary]
    added = list(new_tags)
    position = {tag: n_tags + i for i, tag in enumerate(added)}
    remap = np.arange(len(vocabulary), dtype=np.int64)
    rest: list[str] = []
    for code in range(n_tags, len(vocabulary)):
        term = vocabulary[code]
        if term in position:
            remap[code] = position[term]
        else:
            remap[code] = n_tags + len(added) + len(rest)
            rest.append(term)
    merged = np.asarray([*vocabulary[:n_tags], *added, *rest], dtype=object)
    return (TermIndex(n_tags=n_tags + len(added), vocabulary=merged, fields={}),
            [*display, *new_tags.values()], remap)
