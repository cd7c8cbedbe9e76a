"""Fitted recommenders as artifacts of every kind, and the loader that opens any of them."""

from __future__ import annotations

from pathlib import Path
from typing import TypeAlias

from tagtorch.errors import UnreadableFileError
from tagtorch.serving.items import ItemRecommendations, ItemRecommender
from tagtorch.serving.journal import check_no_compaction_left
from tagtorch.serving.posts import PostRecommender
from tagtorch.serving.resources import ResourceRecommendations, ResourceRecommender
from tagtorch.serving.tags import Recommendations, TagRecommender
from tagtorch.storage import MANIFEST_FILE, class_name, read_json

__all__ = ["AnyRecommender", "ItemRecommendations", "ItemRecommender", "PostRecommender",
           "Recommendations", "Recommender", "ResourceRecommendations", "ResourceRecommender",
           "TagRecommender"]

AnyRecommender: TypeAlias = (TagRecommender | ItemRecommender | PostRecommender
                             | ResourceRecommender)
"""Whichever kind of recommender an artifact holds."""


class Recommender:
    """Opens an artifact of ``task=fit``, whichever kind it is: ``Recommender.load(path)``.

    A tag recommender (:class:`TagRecommender`) answers ``recommend_tags`` for an object, a
    personalized one (:class:`PostRecommender`) ``recommend_tags`` for a user's post of a
    resource, an item recommender (:class:`ItemRecommender`) ``recommend_items``, a resource
    recommender (:class:`ResourceRecommender`) ``recommend_resources`` for a tag query.
    """

    kinds: tuple[type[TagRecommender] | type[ItemRecommender] | type[PostRecommender]
                 | type[ResourceRecommender], ...] = (
        TagRecommender, ItemRecommender, PostRecommender, ResourceRecommender)

    @classmethod
    def load(cls, path: str | Path) -> AnyRecommender:
        """Reads the artifact folder ``path`` with the class its manifest names.

        Raises:
            UnreadableFileError: no manifest, or one naming neither kind of recommender (the
                chosen class then checks every file, :func:`tagtorch.storage.read_manifest`),
                or a compaction a crash cut short (its manifest may be missing meanwhile:
                :func:`~tagtorch.serving.journal.check_no_compaction_left`).
        """
        check_no_compaction_left(Path(path))
        manifest_path = Path(path) / MANIFEST_FILE
        if not manifest_path.is_file():
            raise UnreadableFileError(f"{manifest_path}: no such file; {path} is not a "
                                      f"recommender folder written by task=fit")
        manifest = read_json(manifest_path)
        named = manifest.get("class") if isinstance(manifest, dict) else None
        for kind in cls.kinds:
            if named == class_name(kind):
                return kind.load(path)
        raise UnreadableFileError(f"{manifest_path}: holds a {named!r}, not a recommender "
                                  f"written by task=fit")
