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
seconds for the hybrid. The service (``POST /v1/tags`` with ``user`` and ``resource``) serves
it read-only: its journaled ``POST /v1/posts`` is the object-centric recommender's.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Self

import numpy as np

from tagtorch.data.folksonomy import Folksonomy
from tagtorch.data.ragged import Ragged
from tagtorch.data.splits import p_core
from tagtorch.data.text import TextProcessor
from tagtorch.posts.base import PostRanker
from tagtorch.posts.baselines import recommend
from tagtorch.posts.data import PostData, Posts, posts_from_assignments, posts_of
from tagtorch.serving.artifact import open_artifact, reading, write_artifact
from tagtorch.serving.requests import MAX_ID_CHARS, check_batch, check_id, check_k
from tagtorch.serving.tags import Recommendations
from tagtorch.storage import (
    UnreadableFileError,
    check_strings,
    model_folder,
    read_json,
    write_json,
)

VOCABULARY_FILE = "vocabulary.json"
MODEL_FOLDER = "model"

log = logging.getLogger(__name__)

__all__ = ["PostRecommender"]


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
        self.processor, self.model = processor, model
        self.users, self.resources = list(users), list(resources)
        self.tags, self.display = list(tags), list(display)
        self.info = dict(info or {})
        self._index()

    def _index(self) -> None:
        """The raw id -> code maps."""
        self.user_codes = {u: code for code, u in enumerate(self.users)}
        self.resource_codes = {r: code for code, r in enumerate(self.resources)}
        self.tag_codes = {t: code for code, t in enumerate(self.tags)}

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
        recommender = cls(processor, model, [str(u) for u in core.users],
                          [str(r) for r in core.objects], [str(t) for t in core.tags],
                          [shown[t] for t in core.tags.tolist()], info)
        recommender._fit(posts)
        log.info("fitted %s on %d posts of %s", type(model).__name__, len(posts), core.name)
        return recommender

    def _fit(self, posts: Posts) -> None:
        """Fits the model on ``posts``, the newcomers' codes reserved."""
        empty = posts.take(np.zeros(0, dtype=np.int64))
        self.model.fit(PostData(posts, empty, len(self.users) + 1, len(self.resources) + 1,
                                len(self.tags), None))

    def save(self, path: str | Path) -> Path:
        """Writes the artifact folder (module docstring); returns it."""
        folder = model_folder(path)
        write_json({"users": self.users, "resources": self.resources, "tags": self.tags,
                    "display": self.display}, folder / VOCABULARY_FILE)
        self.model.save(folder / MODEL_FOLDER)
        write_artifact(folder, type(self), self.processor, {}, [VOCABULARY_FILE, MODEL_FOLDER],
                       "model_class", self.model, self.info)
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
            return cls(opened.processor, model, users, resources, tags, display, opened.info)

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
        parsed = [self._parse(i, query) for i, query in enumerate(queries)]
        users, resources, times = (np.array([row[j] for row in parsed], dtype=np.int64)
                                   for j in range(3))
        posts = Posts(users, resources, times, Ragged.from_lists([[]] * len(parsed)))
        scores = self.model.score(posts)
        ranked = recommend(scores, min(k, max(len(self.tags), 1)))
        out = []
        for q, row in enumerate(ranked):
            listed = [int(t) for t in row if t >= 0]
            values = (scores[q, listed] if isinstance(scores, np.ndarray)
                      else np.asarray(scores[q, listed].todense()).ravel())
            out.append(Recommendations(
                [(self.display[t], float(v)) for t, v in zip(listed, values, strict=True)],
                None if listed else "the method has no tag for this user and resource"))
        return out

    def _parse(self, position: int, query: Mapping[str, Any]) -> tuple[int, int, int]:
        """``(user code, resource code, time)`` of one query (newcomers: the spare codes)."""
        user, resource, moment = self._checked_ids(f"query {position}", query)
        extra = sorted(set(query) - {"user", "resource", "time"})
        if extra:
            raise ValueError(f"query {position}: unknown fields {extra}; a query has 'user', "
                             f"'resource' and 'time'")
        return (self.user_codes.get(user, len(self.users)),
                self.resource_codes.get(resource, len(self.resources)), moment)

    @staticmethod
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

    def add_posts(self, posts: Sequence[Mapping[str, Any]]) -> int:
        """Learns from new posts ``{"user", "resource", "tags": [...], "time"}``; returns how many.

        New users, resources and tags get codes; the method is fitted again on every post.

        Raises:
            ValueError: a malformed post (nothing is added then).
        """
        if not posts:
            raise ValueError("no post to add")
        check_batch(len(posts), "posts")
        checked = [self._checked_post(i, post) for i, post in enumerate(posts)]
        rows = []
        for user, resource, moment, tags in checked:
            for name, names, codes in ((user, self.users, self.user_codes),
                                       (resource, self.resources, self.resource_codes)):
                if name not in codes:
                    codes[name] = len(names)
                    names.append(name)
            for tag, shown in tags:
                if tag not in self.tag_codes:
                    self.tag_codes[tag] = len(self.tags)
                    self.tags.append(tag)
                    self.display.append(shown)
            rows += [(self.user_codes[user], self.resource_codes[resource], moment,
                      self.tag_codes[tag]) for tag, _ in tags]
        assert self.model.data_ is not None  # fitted by fit() or load()
        old = self.model.data_.train
        rows_of = old.tags.row_ids
        new = np.array(rows, dtype=np.int64).reshape(-1, 4)
        self._fit(posts_from_assignments(
            np.r_[old.users[rows_of], new[:, 0]], np.r_[old.resources[rows_of], new[:, 1]],
            np.r_[old.tags.values, new[:, 3]], np.r_[old.times[rows_of], new[:, 2]]))
        return len(checked)

    def _checked_post(self, position: int, post: Mapping[str, Any]
                      ) -> tuple[str, str, int, list[tuple[str, str]]]:
        """``(user, resource, time, [(normalized tag, display)])`` of one new post."""
        if not isinstance(post, Mapping):
            raise ValueError(f"post {position}: expected a mapping, got {type(post).__name__}")
        user, resource, moment = self._checked_ids(f"post {position}", post)
        extra = sorted(set(post) - {"user", "resource", "time", "tags"})
        raw = post.get("tags")
        if extra or not isinstance(raw, list) or not raw or not all(
                isinstance(t, str) and 0 < len(t) <= MAX_ID_CHARS for t in raw):
            raise ValueError(f"post {position}: expected 'user', 'resource', 'time' and a "
                             f"non-empty list of tags (strings), got fields {sorted(post)}")
        tags = [(self.processor.normalize_tag(t), t) for t in raw]
        tags = [(t, shown) for t, shown in tags if t]
        if not tags:
            raise ValueError(f"post {position}: no tag is left after normalization")
        return user, resource, moment, tags
