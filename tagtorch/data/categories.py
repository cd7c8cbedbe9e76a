"""Object topics for the xTReD diversifier: p(z | t) and p(z | o) from the training objects.

Belém et al. (xTReD, Sections 4.2.2 and 5.2) take an object's categories as its topics ``Z_o``
(MovieLens genres, LastFM artist styles) and estimate how related a tag ``t`` is to a topic
``z`` on the training objects D: ``p(z | t) = f(z, t) / f(t)``, with ``f(z, t)`` the objects of
D with category ``z`` tagged ``t`` and ``f(t)`` the objects of D tagged ``t`` (each object
counts once, however many users gave the tag). ``p(z | t) = 0`` for a tag absent from D.

``p(z | o)`` is read as uniform over ``Z_o`` (default), or, as an option, proportional to
``sum_{t in I_o} p(z | t)`` within ``Z_o`` (the object's input tags' evidence), uniform again
where the input tags say nothing about ``Z_o``. Topics inferred from tags (LDA on LastFM) give
``Z_o`` the same way, as category codes per object.
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from tagtorch.data.folksonomy import Folksonomy
from tagtorch.data.ragged import Ragged

__all__ = ["object_categories", "topic_given_object", "topic_given_tag"]


def object_categories(folksonomy: Folksonomy, objects: np.ndarray) -> Ragged:
    """The category codes of the given objects (``Z_o``), ascending, one row per object.

    Args:
        folksonomy: the data, with its ``categories`` (object, category) rows.
        objects: ``[n]`` object codes (e.g. a fold's ``train_objects`` or ``test.objects``).

    Returns:
        Ragged ``[n]`` rows of distinct category codes.

    Example:
        >>> import pandas as pd
        >>> f = Folksonomy.from_frame(
        ...     pd.DataFrame({"user": ["u", "u"], "object": ["a", "b"], "tag": ["x", "y"]}),
        ...     categories=pd.DataFrame({"object": ["b", "b", "a"], "category": ["P", "R", "R"]}))
        >>> [row.tolist() for row in object_categories(f, np.array([1, 0]))]
        [[0, 1], [1]]
    """
    objects = np.asarray(objects, dtype=np.int64)
    cats = folksonomy.categories
    position = np.full(folksonomy.n_objects, -1, dtype=np.int64)
    position[objects] = np.arange(len(objects))
    rows = position[cats["object"].to_numpy(np.int64)]
    keep = rows >= 0
    pairs = np.unique(np.stack([rows[keep], cats["category"].to_numpy(np.int64)[keep]]), axis=1)
    return Ragged.from_groups(pairs[0], pairs[1], len(objects))


def _pairs(rows: Ragged, n_codes: int, what: str) -> tuple[np.ndarray, np.ndarray]:
    """Distinct (row, code) pairs of a ragged array, codes checked against ``n_codes``."""
    values = np.asarray(rows.values, dtype=np.int64)
    if len(values) and (values.min() < 0 or values.max() >= n_codes):
        raise ValueError(f"{what} codes must lie in [0, {n_codes})")
    key = np.unique(rows.row_ids * n_codes + values)
    return key // n_codes, key % n_codes


def topic_given_tag(train_tags: Ragged, object_categories: Ragged, n_tags: int,
                    n_topics: int) -> np.ndarray:
    """``p(z | t) = f(z, t) / f(t)`` on the training objects D (Belém et al., Section 4.2.2).

    Args:
        train_tags: ragged ``[n_D]`` tag codes of each object of D (repeats count once).
        object_categories: ragged ``[n_D]`` category codes of the same objects.
        n_tags: number of tag codes (pass the number of candidate codes, e.g. the terms of a
            ``TermIndex``, to get rows for text-only terms too: they are 0).
        n_topics: number of categories ``Z``.

    Returns:
        ``[n_tags, n_topics]`` float64; row ``t`` is 0 where ``f(t) = 0``.

    Raises:
        ValueError: when the two ragged arrays have different numbers of rows or a code is out
            of range.

    Example:
        >>> tags = Ragged.from_lists([[0, 1], [0], [1, 1]])
        >>> cats = Ragged.from_lists([[0], [0, 1], []])
        >>> topic_given_tag(tags, cats, n_tags=3, n_topics=2).tolist()
        [[1.0, 0.5], [0.5, 0.0], [0.0, 0.0]]
    """
    if len(train_tags) != len(object_categories):
        raise ValueError(f"train_tags has {len(train_tags)} rows but object_categories has "
                         f"{len(object_categories)}")
    tag_obj, tag = _pairs(train_tags, n_tags, "tag")
    cat_obj, cat = _pairs(object_categories, n_topics, "category")
    f_t = np.bincount(tag, minlength=n_tags).astype(np.float64)
    # f(z, t): for every (object, tag) pair, the object's categories.
    n_cats = np.bincount(cat_obj, minlength=len(train_tags))
    start = np.zeros(len(train_tags) + 1, dtype=np.int64)
    np.cumsum(n_cats, out=start[1:])
    repeat = n_cats[tag_obj]
    tag_rep = np.repeat(tag, repeat)
    within = np.arange(repeat.sum()) - np.repeat(np.cumsum(repeat) - repeat, repeat)
    cat_rep = cat[np.repeat(start[tag_obj], repeat) + within]
    f_zt = np.bincount(tag_rep * n_topics + cat_rep, minlength=n_tags * n_topics)
    f_zt = f_zt.reshape(n_tags, n_topics).astype(np.float64)
    return np.divide(f_zt, f_t[:, None], out=np.zeros_like(f_zt), where=f_t[:, None] > 0)


def topic_given_object(object_categories: Ragged, n_topics: int,
                       mode: Literal["uniform", "tags"] = "uniform",
                       input_tags: Ragged | None = None,
                       tag_topics: np.ndarray | None = None) -> np.ndarray:
    """``p(z | o)`` over each object's topics ``Z_o`` (0 outside ``Z_o``).

    Args:
        object_categories: ragged ``[n]`` category codes of each object (``Z_o``).
        n_topics: number of categories ``Z``.
        mode: ``"uniform"`` (``1 / |Z_o|``) or ``"tags"`` (proportional to
            ``sum_{t in I_o} p(z | t)`` within ``Z_o``; uniform where that sum is 0 on ``Z_o``).
        input_tags: ragged ``[n]`` input tag codes ``I_o`` (``mode="tags"``).
        tag_topics: ``[n_tags, Z]`` ``p(z | t)`` from :func:`topic_given_tag` (``mode="tags"``).

    Returns:
        ``[n, n_topics]`` float64; each row sums to 1, or is all 0 for an empty ``Z_o``.

    Example:
        >>> cats = Ragged.from_lists([[0, 1], [], [1]])
        >>> topic_given_object(cats, 3).tolist()
        [[0.5, 0.5, 0.0], [0.0, 0.0, 0.0], [0.0, 1.0, 0.0]]
        >>> pzt = np.array([[0.9, 0.3, 1.0], [0.0, 0.0, 0.0]])
        >>> inputs = Ragged.from_lists([[0], [0], [1]])
        >>> out = topic_given_object(cats, 3, "tags", inputs, pzt)
        >>> [[round(v, 4) for v in row] for row in out.tolist()]
        [[0.75, 0.25, 0.0], [0.0, 0.0, 0.0], [0.0, 1.0, 0.0]]
    """
    obj, cat = _pairs(object_categories, n_topics, "category")
    support = np.zeros((len(object_categories), n_topics), dtype=np.float64)
    support[obj, cat] = 1.0
    if mode == "uniform":
        weights = support
    elif mode == "tags":
        if input_tags is None or tag_topics is None:
            raise ValueError("mode='tags' needs input_tags and tag_topics")
        if len(input_tags) != len(object_categories) or tag_topics.shape[1] != n_topics:
            raise ValueError("input_tags must have one row per object and tag_topics "
                             f"{n_topics} columns")
        evidence = np.zeros_like(support)
        np.add.at(evidence, input_tags.row_ids, tag_topics[np.asarray(input_tags.values)])
        weights = evidence * support
        weights[weights.sum(-1) == 0] = support[weights.sum(-1) == 0]
    else:
        raise ValueError(f"mode must be 'uniform' or 'tags', got {mode!r}")
    total = weights.sum(-1, keepdims=True)
    return np.divide(weights, total, out=np.zeros_like(weights), where=total > 0)
