"""Object texts as term codes in one vocabulary with the tags.

A text term equal to a tag string gets that tag's code, so a title word can be recommended as a
tag and matched against gold tags; terms that never occur as a tag get codes from ``n_tags`` on.
Texts are expected to be normalized already (:class:`~tagtorch.data.text.TextProcessor` joins
the terms with single spaces); they are split on whitespace.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from tagtorch.data.categories import object_categories
from tagtorch.data.folksonomy import Folksonomy
from tagtorch.data.ragged import Ragged


@dataclass(frozen=True)
class TermIndex:
    """Per-object term codes of every text field.

    Attributes:
        n_tags: number of tags; codes ``< n_tags`` are tags, the others text-only terms.
        vocabulary: ``[n_terms]`` strings: the tags, then the text-only terms.
        fields: field name -> ragged ``[n_objects]`` term codes in text order, with repeats.
        categories: ragged ``[n_objects]`` category codes of every object (``Z_o``: MovieLens
            genres), ascending; None when the folksonomy has no categories. Object metadata
            like the texts, read by the optional topic component of the candidates (xTReD).
        n_categories: number of category codes (0 without categories).
        profile_keys: ragged ``[n_objects]`` interaction key codes of every object (ours:
            :attr:`Folksonomy.profiles`, e.g. Last.fm's listeners), ascending; None without
            profiles. Read by the profile-neighbour candidates.
        profile_weights: the weight of each entry of ``profile_keys.values``.
        n_profile_keys: number of key codes (0 without profiles).

    Example:
        >>> import pandas as pd
        >>> f = Folksonomy.from_frame(
        ...     pd.DataFrame({"user": [1, 1], "object": ["a", "b"], "tag": ["rock", "jazz"]}),
        ...     texts=pd.DataFrame({"title": ["rock band rock", ""]}, index=["a", "b"]))
        >>> index = TermIndex.from_folksonomy(f)
        >>> list(index.vocabulary), index.fields["title"][0].tolist()
        (['jazz', 'rock', 'band'], [1, 2, 1])
    """

    n_tags: int
    vocabulary: np.ndarray
    fields: dict[str, Ragged]
    categories: Ragged | None = None
    n_categories: int = 0
    profile_keys: Ragged | None = None
    profile_weights: np.ndarray | None = None
    n_profile_keys: int = 0

    @property
    def n_terms(self) -> int:
        """Size of the shared tag and term vocabulary."""
        return len(self.vocabulary)

    @classmethod
    def from_folksonomy(cls, folksonomy: Folksonomy) -> TermIndex:
        """Splits every text field of every object into term codes."""
        tag_index = pd.Index(folksonomy.tags)
        extra: dict[str, int] = {}
        fields: dict[str, Ragged] = {}
        for name in folksonomy.text_fields:
            split = folksonomy.texts[name].fillna("").astype(str).str.split()
            lengths = split.str.len().to_numpy(dtype=np.int64)
            tokens = np.asarray(
                [t for row in split for t in row], dtype=object
            ) if lengths.sum() else np.zeros(0, dtype=object)
            codes = tag_index.get_indexer(tokens).astype(np.int64)
            unknown = codes < 0
            if unknown.any():
                new, uniques = pd.factorize(tokens[unknown])
                table = np.array([extra.setdefault(u, folksonomy.n_tags + len(extra))
                                  for u in uniques], dtype=np.int64)
                codes[unknown] = table[new]
            offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
            np.cumsum(lengths, out=offsets[1:])
            fields[name] = Ragged(offsets, codes)
        vocabulary = np.concatenate([np.asarray(folksonomy.tags, dtype=object),
                                     np.asarray(list(extra), dtype=object)])
        categories = None
        if len(folksonomy.categories):
            categories = object_categories(folksonomy, np.arange(folksonomy.n_objects))
        profiles = {}
        if len(folksonomy.profiles):
            table = folksonomy.profiles.sort_values(["object", "key"])
            profiles = {
                "profile_keys": Ragged.from_groups(table["object"].to_numpy(),
                                                   table["key"].to_numpy(), folksonomy.n_objects),
                "profile_weights": table["weight"].to_numpy(dtype=np.float64),
                "n_profile_keys": int(table["key"].max()) + 1}
        return cls(n_tags=folksonomy.n_tags, vocabulary=vocabulary, fields=fields,
                   categories=categories,
                   n_categories=len(folksonomy.category_names) if categories is not None else 0,
                   **profiles)
