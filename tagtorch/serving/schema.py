r"""The request and response schemas of the service, and of the journal's posts.

One schema serves the endpoint and the journal: ``POST /v1/posts`` validates its body with
:class:`PostBatch`, and every journal line is read back through the same model
(:mod:`tagtorch.serving.journal`), so a line the endpoint would refuse never reaches the data.

Strings are refused when they hold a lone surrogate (JSON allows ``"\ud800"``, UTF-8 cannot
store it); text fields by name (``texts``) have names of letters, digits and ``_``, never a
name the request itself uses (``tags``, ``k``, ``user``, ``object``), and at most
:data:`MAX_TEXT_FIELDS` of them.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator

from tagtorch.serving.requests import MAX_ID_CHARS, MAX_QUERY_TAGS

__all__ = ["MAX_K", "MAX_POSTS", "MAX_TAGS", "MAX_TEXT_CHARS", "MAX_TEXT_FIELDS", "ItemRequest",
           "ItemResponse", "Post", "PostBatch", "ResourceRequest", "ResourceResponse",
           "ScoredItem", "ScoredResource", "ScoredTag", "TagRequest", "TagResponse"]

MAX_TEXT_CHARS = 100_000
"""Longest text field accepted per object (characters)."""
MAX_TAGS = 10_000
"""Most input tags accepted per object."""
MAX_K = 1000
"""Most tags or items one request may ask for."""
MAX_POSTS = 1000
"""Most posts in one request (one journal record)."""
MAX_TEXT_FIELDS = 16
"""Most text fields by name in one request."""
RESERVED_NAMES = frozenset({"tags", "k", "user", "object"})
"""Names a text field may not have: the request's own keys."""
_FIELD_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")


def no_surrogates(text: str) -> str:
    """``text`` unchanged; a lone surrogate (not storable as UTF-8) is refused.

    Example:
        >>> no_surrogates("café")
        'café'
    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("holds a lone surrogate (not valid Unicode text)") from None
    return text


Text = Annotated[str, AfterValidator(no_surrogates)]
Name = Annotated[Text, Field(min_length=1, max_length=MAX_ID_CHARS)]
LongText = Annotated[Text, Field(max_length=MAX_TEXT_CHARS)]


def checked_fields(texts: dict[str, str]) -> dict[str, str]:
    """``texts`` unchanged when every name is a plain field name and none is reserved."""
    if len(texts) > MAX_TEXT_FIELDS:
        raise ValueError(f"{len(texts)} text fields, more than the {MAX_TEXT_FIELDS} accepted")
    for name in texts:
        if not _FIELD_NAME.fullmatch(name):
            raise ValueError("a text field name must be 1-64 letters, digits or _, "
                             "not starting with a digit")
        if name in RESERVED_NAMES:
            raise ValueError(f"{name!r} is not a text field (it is a key of the request)")
    return texts


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TagRequest(_Strict):
    """One object to recommend tags for."""

    tags: list[Name] = Field(default_factory=list, max_length=MAX_TAGS,
                             description="the object's tags so far (raw strings)")
    title: LongText | None = None
    description: LongText | None = None
    texts: dict[str, LongText] = Field(default_factory=dict,
                                       description="other text fields of the recommender by "
                                                   "name")
    k: int = Field(5, ge=1, le=MAX_K, description="how many tags to return")
    user: Name | None = Field(None, description="personalized recommenders: the post's user")
    resource: Name | None = Field(None, description="personalized recommenders: the post's "
                                                    "resource")
    time: int | None = Field(None, ge=0, lt=2**62, description="personalized recommenders: "
                                                                "the post's Unix time (null: now)")

    _fields = field_validator("texts")(checked_fields)

    def post_fields(self) -> dict[str, Any]:
        """The post as :meth:`PostRecommender.recommend_tags_batch` takes it.

        Raises:
            ValueError: no user or resource, or an object's fields (tags, texts) given.
        """
        if self.tags or self.title is not None or self.description is not None or self.texts:
            raise ValueError("this service holds a personalized tag recommender: send user and "
                             "resource (and time), not an object's tags or texts")
        if self.user is None or self.resource is None:
            raise ValueError("a personalized tag recommender needs user and resource")
        return {"user": self.user, "resource": self.resource, "time": self.time}

    def object_fields(self) -> dict[str, Any]:
        """The object as :meth:`TagRecommender.recommend_tags_batch` takes it.

        ``{"tags": [...], field: text}``: ``title`` and ``description`` win over the same
        names in ``texts``.

        Raises:
            ValueError: a post's fields (user, resource, time) given.
        """
        if self.user is not None or self.resource is not None or self.time is not None:
            raise ValueError("this service holds a tag recommender for objects: send tags and "
                             "texts, not user, resource and time")
        return {**_named_texts(self), "tags": list(self.tags)}


class Post(_Strict):
    """Tags a user gave an object (a known object id, or a new one with its texts).

    A personalized recommender's post names its resource ``object`` and may carry its Unix
    ``time`` (no texts); an object-centric recommender refuses ``time``.
    """

    user: Name
    object: Name
    tags: list[Name] = Field(min_length=1, max_length=MAX_TAGS)
    title: LongText | None = None
    description: LongText | None = None
    texts: dict[str, LongText] = Field(default_factory=dict)
    time: int | None = Field(None, ge=0, lt=2**62)

    _fields = field_validator("texts")(checked_fields)

    def plain(self) -> dict[str, Any]:
        """The post as the recommenders' ``add_posts`` take it (text fields flattened)."""
        timed = {} if self.time is None else {"time": self.time}
        return {**_named_texts(self), "user": self.user, "object": self.object,
                "tags": list(self.tags), **timed}

    @classmethod
    def from_plain(cls, post: dict[str, Any]) -> Post:
        """The inverse of :meth:`plain` (every key but user, object, tags, time is a text)."""
        texts = {k: v for k, v in post.items() if k not in ("user", "object", "tags", "time")}
        return cls.model_validate({"user": post.get("user"), "object": post.get("object"),
                                   "tags": post.get("tags"), "texts": texts,
                                   "time": post.get("time")})


class PostBatch(_Strict):
    """Posts to add, all or none: one request, one journal record."""

    posts: list[Post] = Field(min_length=1, max_length=MAX_POSTS)


def _named_texts(request: TagRequest | Post) -> dict[str, str]:
    """A request's text fields: ``texts`` plus ``title`` and ``description`` when given."""
    texts = dict(request.texts)
    for name in ("title", "description"):
        value = getattr(request, name)
        if value is not None:
            texts[name] = value
    return texts


class ItemRequest(_Strict):
    """A user (and a tag) to recommend items for."""

    user: Name = Field(description="the user's raw id")
    tag: Name | None = Field(None, description="the items for this tag (null: the user's "
                                               "ranking over tags)")
    k: int = Field(10, ge=1, le=MAX_K, description="how many items to return")


class ScoredItem(BaseModel):
    """A recommended item."""

    item: str
    title: str
    score: float


class ItemResponse(BaseModel):
    """The recommended items, best first."""

    items: list[ScoredItem]
    reason: str | None = Field(None, description="why the list is empty")


class ResourceRequest(_Strict):
    """A tag query to rank resources for."""

    tags: list[Name] = Field(min_length=1, max_length=MAX_QUERY_TAGS,
                             description="the query's tags (raw strings)")
    k: int = Field(10, ge=1, le=MAX_K, description="how many resources to return")


class ScoredResource(BaseModel):
    """A ranked resource."""

    resource: str
    title: str
    score: float


class ResourceResponse(BaseModel):
    """The resources that best answer the query, best first, and the tags left out."""

    resources: list[ScoredResource]
    unknown_tags: list[str]
    reason: str | None = Field(None, description="why the list is empty")


class ScoredTag(BaseModel):
    """A recommended tag."""

    tag: str
    score: float


class TagResponse(BaseModel):
    """The recommended tags, best first, and what was left out of the input."""

    tags: list[ScoredTag]
    reason: str | None = Field(None, description="why the list is empty")
    unknown_tags: list[str]
    unknown_words: list[str]
