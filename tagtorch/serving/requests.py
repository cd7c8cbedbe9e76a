"""The checks every recommender applies to a request: ``k``, the batch size and the ids.

Requests may come from anyone (the service, the CLI, a notebook): each value is checked before
it is used, and a refusal names the query's position and the field.
"""

from __future__ import annotations

from typing import Any

__all__ = ["MAX_ID_CHARS", "MAX_QUERIES", "MAX_QUERY_TAGS", "check_batch", "check_id"]

MAX_ID_CHARS = 1000
"""Longest user, resource or item id, or tag, accepted (characters)."""
MAX_QUERIES = 10_000
"""Most queries (or posts) accepted in one batch."""
MAX_QUERY_TAGS = 1000
"""Most tags in one tag query of a resource recommender."""


def check_batch(count: int, what: str = "queries") -> None:
    """Refuses more than :data:`MAX_QUERIES` queries (or posts) in one batch."""
    if count > MAX_QUERIES:
        raise ValueError(f"{count} {what}, more than the {MAX_QUERIES} accepted")


def check_id(where: str, name: str, value: Any) -> str:
    """``value`` if it is a non-empty string of at most :data:`MAX_ID_CHARS` characters.

    Example:
        >>> check_id("query 3", "user", "")
        Traceback (most recent call last):
        ...
        ValueError: query 3: user must be a non-empty string of at most 1000 characters, got ''
    """
    if not isinstance(value, str) or not value or len(value) > MAX_ID_CHARS:
        raise ValueError(f"{where}: {name} must be a non-empty string of at most "
                         f"{MAX_ID_CHARS} characters, got {value!r:.80}")
    return value
