"""A fitted personalized tag recommender as one artifact: tags for a user's post of a resource.

:meth:`PostRecommender.fit` learns any post ranker of :mod:`tagtorch.posts` (TagRec's
baselines, FolkRank, LDA, the hybrid) on every post of a folksonomy's p-core, as the
evaluation does (:mod:`tagtorch.posts.data`) but without a test part. Each dimension gets one
more code than the data has, with no posts: the code of every user or resource a request
names that the recommender has not seen, so each method answers for newcomers as it does for a
user or resource without training posts (popularity of the resource's tags, say, or nothing).

:meth:`PostRecommender.save` writes one folder: ``manifest.json`` (tagtorch's version, the
configuration, the data's fingerprint, every file's size and SHA-256), ``vocabulary.json``
(raw user and resource ids, normalized tags and each tag's display string) and the model's
folder (its settings and training posts; :class:`~tagtorch.posts.base.PostRanker`). Nothing
is a pickle; the model class is imported only from ``tagtorch.posts.``.

:meth:`PostRecommender.add_posts` learns from new posts (new users, resources and tags get
codes) by fitting the method again on all posts: seconds for TagRec's baselines, tens of
seconds for the hybrid. As the object-centric recommender's, a batch is checked whole and
appended to the artifact's journal (``journal.jsonl``, fsync; :mod:`tagtorch.serving.journal`,
the resource in the post's ``object`` field) before it is applied; :meth:`load` replays the
journal and :meth:`compact` writes it into the data. A post already in the data changes nothing
when replayed (its tags join the post's set). The new state (vocabulary and refitted model)
replaces the old in one assignment, so recommendations made meanwhile see one or the other.
The service takes posts with ``POST /v1/posts`` (``python -m tagtorch.serve``'s write options).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Self

import numpy as np

from tagtorch.data.folksonomy import Folksonomy
from tagtorch.data.ragged import Ragged
from tagtorch.data.splits import p_core
from tagtorch.data.text import TextProcessor
from tagtorch.errors import UnreadableFileError
from tagtorch.metrics.functional import check_k
from tagtorch.posts.base import PostRanker, recommend
from tagtorch.posts.data import PostData, Posts, posts_from_assignments, posts_of
from tagtorch.serving.artifact import open_artifact, reading, write_artifact
from tagtorch.serving.journal import JOURNAL_FILE, Journal, compact_journal, encode_record, replay
from tagtorch.serving.requests import MAX_ID_CHARS, check_batch, check_id
from tagtorch.serving.tags import Recommendations
from tagtorch.storage import check_strings, model_folder, read_json, write_json

VOCABULARY_FILE = "vocabulary.json"
MODEL_FOLDER = "model"

log = logging.getLogger(__name__)

__all__ = ["PostRecommender", "Vocabulary"]


class PostRecommender:
    """A fitted personalized tag recommender (module docstring).

    Args:
        processor: the text pipeline that normalized the tags (new posts' tags go through it).
        model: the fitted post ranker; its codes have one more user and resource than
            ``users`` and ``resources`` (the newcomers' code).
        users: raw id of each user code.
        resources: raw id of each resource code.
        tags: normalized string of each tag code.
        display: the string shown for each tag.
        info: what the manifest records besides (configuration, data name, fingerprint).
    """

    def __init__(self, processor: TextProcessor, model: PostRanker, users: Sequence[str],
                 resources: Sequence[str], tags: Sequence[str], display: Sequence[str],
                 info: Mapping[str, Any] | None = None) -> None:
        if len(tags) != len(display):
            raise ValueError("one display string per tag expected")
        self.processor = processor
        self.info = dict(info or {})
        self.journal: Journal | None = None
        self._lock = threading.Lock()  # one writer at a time
        self._state = _State(Vocabulary(users, resources, tags, display), model)

    @property
    def model(self) -> PostRanker:
        """The fitted post ranker."""
        return self._state.model

    @property
    def vocabulary(self) -> Vocabulary:
        """The raw ids of the codes (users, resources) and the tags."""
        return self._state.vocabulary

    @property
    def users(self) -> list[str]:
        """Raw id of each user code."""
        return self._state.vocabulary.users

    @property
    def resources(self) -> list[str]:
        """Raw id of each resource code."""
        return self._state.vocabulary.resources

    @property
    def tags(self) -> list[str]:
        """Normalized string of each tag code."""
        return self._state.vocabulary.tags

    @property
    def display(self) -> list[str]:
        """The string shown for each tag."""
        return self._state.vocabulary.display

    @classmethod
    def fit(cls, folksonomy: Folksonomy, processor: TextProcessor, model: PostRanker, *,
            display: Sequence[str] | None = None, p: int = 1,
            info: Mapping[str, Any] | None = None) -> Self:
        """Fits a post ranker on every post of the p-core of a normalized folksonomy.

        Args:
            folksonomy: the folksonomy, tags normalized by ``processor``.
            processor: its text pipeline, applied to new posts' tags.
            model: an unfitted post ranker.
            display: the string shown for each tag of ``folksonomy`` (default: the tag).
            p: the p-core level (1: every post).
            info: extra manifest entries (configuration, ...).
        """
        core = p_core(folksonomy, p) if p > 1 else folksonomy
        posts = posts_of(core)
        shown = dict(zip(folksonomy.tags.tolist(),
                         display if display is not None else folksonomy.tags.tolist(),
                         strict=True))
        info = {**dict(info or {}), "data": folksonomy.name,
                "fingerprint": folksonomy.fingerprint(), "p": p, "posts": len(posts)}
        vocabulary = Vocabulary([str(u) for u in core.users], [str(r) for r in core.objects],
                                [str(t) for t in core.tags], [shown[t] for t in core.tags.tolist()])
        _fitted(model, vocabulary, posts)
        recommender = cls(processor, model, vocabulary.users, vocabulary.resources,
                          vocabulary.tags, vocabulary.display, info)
        log.info("fitted %s on %d posts of %s", type(model).__name__, len(posts), core.name)
        return recommender

    def save(self, path: str | Path) -> Path:
        """Writes the artifact folder (module docstring), new posts included; returns it."""
        with self._lock:
            return self._save(path)

    def _save(self, path: str | Path) -> Path:
        folder = model_folder(path)
        state = self._state
        vocabulary = state.vocabulary
        write_json({"users": vocabulary.users, "resources": vocabulary.resources,
                    "tags": vocabulary.tags, "display": vocabulary.display},
                   folder / VOCABULARY_FILE)
        state.model.save(folder / MODEL_FOLDER)
        (folder / JOURNAL_FILE).unlink(missing_ok=True)  # the posts are in the data now
        if self.journal is not None and self.journal.path == folder / JOURNAL_FILE:
            self.journal = Journal(self.journal.path)
        write_artifact(folder, type(self), self.processor, {}, [VOCABULARY_FILE, MODEL_FOLDER],
                       "model_class", state.model, self.info)
        return folder

    @classmethod
    def load(cls, path: str | Path) -> Self:
        """Reads an artifact folder; every file is checked against the manifest first.

        Raises:
            UnreadableFileError: naming the file, for a missing, altered or malformed one, or a
                model whose sizes are not the vocabulary's.
        """
        folder = Path(path)
        with reading(folder, "personalized tag recommender"):
            opened = open_artifact(folder, cls, "model_class", ("tagtorch.posts.",),
                                   (PostRanker,), (VOCABULARY_FILE, MODEL_FOLDER))
            where = folder / VOCABULARY_FILE
            names = read_json(where, ("users", "resources", "tags", "display"))
            users, resources, tags = (check_strings(where, key, names[key], distinct=True)
                                      for key in ("users", "resources", "tags"))
            display = check_strings(where, "display", names["display"], len(tags))
            model = opened.model_class.load(folder / MODEL_FOLDER)
            data = model.data_
            sizes = (len(users) + 1, len(resources) + 1, len(tags))
            if data is None or (data.n_users, data.n_resources, data.n_tags) != sizes:
                raise UnreadableFileError(f"{folder / MODEL_FOLDER}: the model's sizes are not "
                                          f"the vocabulary's (users + 1, resources + 1, tags "
                                          f"= {sizes})")
            recommender = cls(opened.processor, model, users, resources, tags, display,
                              opened.info)
        recommender.journal = Journal(folder / JOURNAL_FILE)
        # (a request's limit is not the journal's: 11 requests of 1,000 posts all come back)
        replayed = replay(recommender.journal, recommender.check_posts)
        if replayed:
            recommender.apply_posts(replayed)
            log.info("%s: %d journaled posts replayed", folder, len(replayed))
        return recommender

    def compact(self, rotate: bool = True) -> bool:
        """Writes the journaled posts into the folder's data (:func:`compact_journal`)."""
        return compact_journal(self.journal, self._lock, self._save, rotate)

    def recommend_tags(self, user: str, resource: str, k: int = 5,
                       time: int | None = None) -> Recommendations:
        """The ``k`` best tags for ``user``'s post of ``resource`` at ``time``.

        Args:
            user: the user's raw id (a newcomer is answered as one without posts).
            resource: the resource's raw id (likewise).
            k: how many tags to return.
            time: the post's Unix time (time-aware methods; default: now).

        Raises:
            ValueError: a bad ``k`` or time, or an id that is not a short non-empty string.
        """
        return self.recommend_tags_batch([{"user": user, "resource": resource, "time": time}],
                                         k)[0]

    def recommend_tags_batch(self, queries: Sequence[Mapping[str, Any]], k: int = 5
                             ) -> list[Recommendations]:
        """:meth:`recommend_tags` for many ``{"user", "resource", "time"}`` queries at once.

        Raises:
            ValueError: as :meth:`recommend_tags`, naming the query's position.
        """
        check_k(k)
        check_batch(len(queries))
        state = self._state  # one consistent state, whatever posts arrive meanwhile
        parsed = [state.vocabulary.codes(i, query) for i, query in enumerate(queries)]
        users, resources, times = (np.array([row[j] for row in parsed], dtype=np.int64)
                                   for j in range(3))
        posts = Posts(users, resources, times, Ragged.from_lists([[]] * len(parsed)))
        scores = state.model.score(posts)
        ranked = recommend(scores, min(k, max(len(state.vocabulary.tags), 1)),
                           state.model.tie_order(posts))
        out = []
        for q, row in enumerate(ranked):
            listed = [int(t) for t in row if t >= 0]
            values = (scores[q, listed] if isinstance(scores, np.ndarray)
                      else np.asarray(scores[q, listed].todense()).ravel())
            out.append(Recommendations(
                [(state.vocabulary.display[t], float(v))
                 for t, v in zip(listed, values, strict=True)],
                None if listed else "the method has no tag for this user and resource"))
        return out

    def add_posts(self, posts: Sequence[Mapping[str, Any]]) -> int:
        """Learns from new posts ``{"user", "resource", "tags": [...], "time"}``; returns how many.

        The batch is checked whole and journaled (when the recommender has a journal) before
        new users, resources and tags get codes and the method is fitted again on every post.

        Raises:
            ValueError: a malformed post (nothing is added then), naming its position.
            JournalWriteError: the journal could not store the batch (nothing is added).
        """
        checked, record = self.check_posts(posts)
        with self._lock:
            self.journal_record(record)
            self._state = self._state.with_posts(checked, self.processor)
        return len(checked)

    def check_posts(self, posts: Sequence[Mapping[str, Any]]
                    ) -> tuple[list[dict[str, Any]], bytes]:
        """The posts checked, their times filled in, and their journal record.

        A post names its resource ``resource`` (the API) or ``object`` (the service's posts
        and the journal).

        Raises:
            ValueError: a malformed post, naming its position.
        """
        if isinstance(posts, Mapping | str) or not isinstance(posts, Sequence) or not posts:
            raise ValueError("posts must be a non-empty list of posts")
        check_batch(len(posts), "posts")
        checked = [_checked_post(i, post) for i, post in enumerate(posts)]
        if any(not any(map(self.processor.normalize_tag, post["tags"])) for post in checked):
            raise ValueError("a post has no tag left after normalization")
        return checked, encode_record([{"user": p["user"], "object": p["resource"],
                                        "tags": p["tags"], "time": p["time"]}
                                       for p in checked])

    def journal_record(self, record: bytes) -> None:
        """Appends a record of checked posts to the journal (no journal: nothing to do)."""
        if self.journal is not None:
            self.journal.append(record)

    def apply_posts(self, posts: Sequence[Mapping[str, Any]]) -> None:
        """Applies checked, journaled posts: the vocabulary grows, the method is refitted."""
        with self._lock:
            self._state = self._state.with_posts(posts, self.processor)

    def new_tags(self, posts: Sequence[Mapping[str, Any]]) -> set[str]:
        """The normalized tags of ``posts`` that the vocabulary does not hold yet."""
        codes = self._state.vocabulary.tag_codes
        return {key for post in posts for key in map(self.processor.normalize_tag, post["tags"])
                if key and key not in codes}


def _fitted(model: PostRanker, vocabulary: Vocabulary, posts: Posts) -> PostRanker:
    """``model`` fitted on ``posts``, one spare code each for new users and resources."""
    empty = posts.take(np.zeros(0, dtype=np.int64))
    return model.fit(PostData(posts, empty, len(vocabulary.users) + 1,
                              len(vocabulary.resources) + 1, len(vocabulary.tags), None))


def _checked_ids(where: str, query: Mapping[str, Any]) -> tuple[str, str, int]:
    """``(user, resource, time)`` of a query or post, checked (time default: now)."""
    if not isinstance(query, Mapping):
        raise ValueError(f"{where}: expected a mapping with 'user' and 'resource', got "
                         f"{type(query).__name__}")
    user = check_id(where, "user", query.get("user"))
    resource = check_id(where, "resource", query.get("resource"))
    moment = query.get("time")
    if moment is None:
        moment = int(time.time())
    if isinstance(moment, bool) or not isinstance(moment, int) or not 0 <= moment < 2**62:
        raise ValueError(f"{where}: time must be Unix seconds (an integer >= 0), got "
                         f"{moment!r:.80}")
    return user, resource, moment


def _checked_post(position: int, post: Mapping[str, Any]) -> dict[str, Any]:
    """``{"user", "resource", "time", "tags"}`` of one new post (``object``: the resource)."""
    if not isinstance(post, Mapping):
        raise ValueError(f"post {position}: expected a mapping, got {type(post).__name__}")
    named = dict(post)
    if "object" in named:  # the service's and the journal's name of the resource
        if "resource" in named:
            raise ValueError(f"post {position}: both 'object' and 'resource' given; a post to a "
                             f"personalized tag recommender names its resource once, in "
                             f"'object'")
        named["resource"] = named.pop("object")
    user, resource, moment = _checked_ids(f"post {position}", named)
    extra = sorted(set(named) - {"user", "resource", "time", "tags"})
    if extra:
        raise ValueError(f"post {position}: {', '.join(map(repr, extra))} not taken: a post to "
                         f"a personalized tag recommender has 'user', 'object' (its resource), "
                         f"'tags' and 'time', and no texts")
    raw = named.get("tags")
    if not isinstance(raw, list) or not raw or not all(
            isinstance(t, str) and 0 < len(t) <= MAX_ID_CHARS for t in raw):
        raise ValueError(f"post {position}: tags must be a non-empty list of strings of 1 to "
                         f"{MAX_ID_CHARS} characters")
    return {"user": user, "resource": resource, "time": moment, "tags": list(raw)}


class Vocabulary:
    """The raw ids of user and resource codes, the normalized tags and their display strings."""

    def __init__(self, users: Sequence[str], resources: Sequence[str], tags: Sequence[str],
                 display: Sequence[str]) -> None:
        self.users, self.resources = list(users), list(resources)
        self.tags, self.display = list(tags), list(display)
        self.user_codes = {u: code for code, u in enumerate(self.users)}
        self.resource_codes = {r: code for code, r in enumerate(self.resources)}
        self.tag_codes = {t: code for code, t in enumerate(self.tags)}

    def codes(self, position: int, query: Mapping[str, Any]) -> tuple[int, int, int]:
        """``(user code, resource code, time)`` of one query (newcomers: the spare codes)."""
        user, resource, moment = _checked_ids(f"query {position}", query)
        extra = sorted(set(query) - {"user", "resource", "time"})
        if extra:
            raise ValueError(f"query {position}: unknown fields {extra}; a query has 'user', "
                             f"'resource' and 'time'")
        return (self.user_codes.get(user, len(self.users)),
                self.resource_codes.get(resource, len(self.resources)), moment)


class _State:
    """What recommendations read: a vocabulary and the model fitted with its codes."""

    def __init__(self, vocabulary: Vocabulary, model: PostRanker) -> None:
        self.vocabulary, self.model = vocabulary, model

    def with_posts(self, posts: Sequence[Mapping[str, Any]], processor: TextProcessor
                   ) -> _State:
        """A new state: checked posts' users, resources and tags coded, a new model fitted."""
        old = self.vocabulary
        vocabulary = Vocabulary(old.users, old.resources, old.tags, old.display)
        rows = []
        for post in posts:
            for name, names, codes in ((post["user"], vocabulary.users, vocabulary.user_codes),
                                       (post["resource"], vocabulary.resources,
                                        vocabulary.resource_codes)):
                if name not in codes:
                    codes[name] = len(names)
                    names.append(name)
            for raw in post["tags"]:
                tag = processor.normalize_tag(raw)
                if tag and tag not in vocabulary.tag_codes:
                    vocabulary.tag_codes[tag] = len(vocabulary.tags)
                    vocabulary.tags.append(tag)
                    vocabulary.display.append(raw)
                if tag:
                    rows.append((vocabulary.user_codes[post["user"]],
                                 vocabulary.resource_codes[post["resource"]], post["time"],
                                 vocabulary.tag_codes[tag]))
        assert self.model.data_ is not None  # fitted by fit() or load()
        train = self.model.data_.train
        at = train.tags.row_ids
        new = np.array(rows, dtype=np.int64).reshape(-1, 4)
        order = None
        if train.source_order is not None:  # the new posts come after every line of the file
            start = int(train.source_order.max(initial=-1)) + 1
            order = np.r_[train.source_order, start + np.arange(len(new))]
        posts_now = posts_from_assignments(
            np.r_[train.users[at], new[:, 0]], np.r_[train.resources[at], new[:, 1]],
            np.r_[train.tags.values, new[:, 3]], np.r_[train.times[at], new[:, 2]], order)
        model = type(self.model)(**self.model.settings())
        return _State(vocabulary, _fitted(model, vocabulary, posts_now))
