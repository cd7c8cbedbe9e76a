"""Padded candidate lists: the ``[B, L, F]`` batches every ranker, loss and metric consumes."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, fields, replace

import torch

_PADDING = {"tags": -1, "mask": False, "tag_distance": 1, "input_tags": -1}
"""Padding values of the fields whose padding is not 0 (see :class:`CandidateSet`)."""
_PER_OBJECT = ("objects", "n_relevant", "object_topics", "input_tags")
"""The fields with one entry per list, not per candidate."""
_RAGGED = ("input_tags",)
"""The per-list fields whose width varies from part to part (padded to the widest)."""


@dataclass(frozen=True)
class CandidateSet:
    """Candidate tags of ``B`` objects, padded to ``L`` candidates, with ``F`` features each.

    Attributes:
        objects: ``[B]`` long object codes.
        tags: ``[B, L]`` long candidate tag codes (``-1`` at padding).
        features: ``[B, L, F]`` float32 relevance features (0 at padding).
        labels: ``[B, L]`` float32, 1 where the candidate is a gold tag of the object.
        mask: ``[B, L]`` bool, True at real candidates.
        n_relevant: ``[B]`` long number of gold tags of each object, including those that are
            not candidates (metrics count them: a ranker cannot recover what candidate
            generation missed).
        feature_names: the ``F`` feature names.
        tag_topics: optional ``[B, L, Z]`` float32 ``p(z | t)`` of each candidate (0 at
            padding), for the xTReD diversifier and the diversity metrics; None when the
            generator's topic component is off.
        object_topics: optional ``[B, Z]`` float32 ``p(z | o)``, 0 outside the object's topics
            ``Z_o``; present exactly when ``tag_topics`` is.
        tag_distance: optional ``[B, L, L]`` float16 distance between the candidates of each
            list, ``1 -`` Jaccard of the sets of D objects tagged with them (1 when both are
            empty, 0 on the diagonal of a tag in D; 1 at padding), for GP_rnd's ADC terminal
            and AILD fitness (Belém et al.); None unless the generator computes it.
        input_tags: optional ``[B, M]`` long codes of each object's input tags ``I_o``
            (ascending, ``-1`` at padding), for rankers that read the object's tags
            themselves (:mod:`tagtorch.rankers.tag_context`); None where the lists have no
            input tags (LETOR files).
    """

    objects: torch.Tensor
    tags: torch.Tensor
    features: torch.Tensor
    labels: torch.Tensor
    mask: torch.Tensor
    n_relevant: torch.Tensor
    feature_names: tuple[str, ...]
    tag_topics: torch.Tensor | None = None
    object_topics: torch.Tensor | None = None
    tag_distance: torch.Tensor | None = None
    input_tags: torch.Tensor | None = None

    def __post_init__(self) -> None:
        if (self.tag_topics is None) != (self.object_topics is None):
            raise ValueError("tag_topics and object_topics come together (both or neither)")

    @property
    def has_topics(self) -> bool:
        """Whether the lists carry ``tag_topics`` and ``object_topics``."""
        return self.tag_topics is not None

    @classmethod
    def from_flat(
        cls,
        objects: torch.Tensor,
        rows: torch.Tensor,
        tags: torch.Tensor,
        features: torch.Tensor,
        labels: torch.Tensor,
        n_relevant: torch.Tensor,
        feature_names: tuple[str, ...],
        tag_topics: torch.Tensor | None = None,
        object_topics: torch.Tensor | None = None,
    ) -> CandidateSet:
        """Pads flat candidate entries, grouped by object, into ``[B, L]`` lists.

        Args:
            objects: ``[B]`` object codes.
            rows: ``[N]`` list index (``0..B-1``) of each candidate, non-decreasing.
            tags: ``[N]`` candidate codes; candidates keep this order within a list.
            features: ``[N, F]`` feature values.
            labels: ``[N]`` relevance labels.
            n_relevant: ``[B]`` gold tags per object, candidates or not.
            feature_names: the ``F`` feature names.
            tag_topics: optional ``[N, Z]`` ``p(z | t)`` of each candidate.
            object_topics: optional ``[B, Z]`` ``p(z | o)`` of each object (with ``tag_topics``).
        """
        return cls.from_chunks(objects, [(rows, tags, features, labels, tag_topics)], n_relevant,
                               feature_names, object_topics)

    @classmethod
    def from_chunks(
        cls,
        objects: torch.Tensor,
        chunks: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor,
                           torch.Tensor | None]],
        n_relevant: torch.Tensor,
        feature_names: tuple[str, ...],
        object_topics: torch.Tensor | None = None,
        input_tags: torch.Tensor | None = None,
    ) -> CandidateSet:
        """:meth:`from_flat` of flat pieces, each emptied from ``chunks`` once it is copied.

        The pieces ``(rows, tags, features, labels, tag_topics or None)`` come in list order
        (rows non-decreasing across them, an object's candidates in one piece): the flat
        entries and the padded lists are never both held whole. ``input_tags``: the optional
        ``[B, M]`` input tags of the objects (``-1`` padding).
        """
        b = len(objects)
        counts = torch.zeros(b, dtype=torch.long)
        for rows, *_ in chunks:
            counts += torch.bincount(rows, minlength=b)
        width = int(counts.max()) if b else 0
        starts = torch.cumsum(counts, 0) - counts
        n_features = chunks[0][2].shape[1] if chunks else len(feature_names)
        mask = torch.zeros((b, width), dtype=torch.bool)
        padded_tags = torch.full((b, width), -1, dtype=torch.long)
        padded_features = torch.zeros((b, width, n_features), dtype=torch.float32)
        padded_labels = torch.zeros((b, width), dtype=torch.float32)
        topics = chunks[0][4] if chunks else None
        padded_topics = (None if topics is None
                         else torch.zeros((b, width, topics.shape[1]), dtype=torch.float32))
        done = 0
        while chunks:
            rows, tags, features, labels, topics = chunks.pop(0)
            position = done + torch.arange(len(rows)) - starts[rows]
            done += len(rows)
            mask[rows, position] = True
            padded_tags[rows, position] = tags.long()
            padded_features[rows, position] = features.float()
            padded_labels[rows, position] = labels.float()
            if padded_topics is not None and topics is not None:
                padded_topics[rows, position] = topics.float()
            del rows, tags, features, labels, topics
        return cls(objects=objects.long(), tags=padded_tags, features=padded_features,
                   labels=padded_labels, mask=mask, n_relevant=n_relevant.long(),
                   feature_names=tuple(feature_names), tag_topics=padded_topics,
                   object_topics=None if object_topics is None else object_topics.float(),
                   input_tags=None if input_tags is None else input_tags.long())

    @classmethod
    def concat(cls, parts: list[CandidateSet]) -> CandidateSet:
        """The lists of ``parts`` one after another, padded to the widest part.

        Each part is emptied from ``parts`` once it is copied, so the parts and the result are
        never both held whole. Padding takes each field's padding value (tag ``-1``, distance
        1, otherwise 0 or False): the result equals the set generated in one piece. The parts
        must agree on the feature names and on which optional fields they carry.

        Example:
            >>> part = CandidateSet.from_flat(
            ...     torch.tensor([7]), torch.tensor([0, 0]), torch.tensor([3, 4]),
            ...     torch.ones(2, 1), torch.tensor([1.0, 0.0]), torch.tensor([1]), ("f",))
            >>> other = CandidateSet.from_flat(
            ...     torch.tensor([8]), torch.tensor([0]), torch.tensor([5]),
            ...     torch.ones(1, 1), torch.tensor([0.0]), torch.tensor([2]), ("f",))
            >>> CandidateSet.concat([part, other]).tags.tolist()
            [[3, 4], [5, -1]]
        """
        if not parts:
            raise ValueError("nothing to concatenate")
        feature_names = parts[0].feature_names
        if any(part.feature_names != feature_names for part in parts):
            raise ValueError("the parts have different feature names")
        names = [f.name for f in fields(cls) if f.name != "feature_names"]
        for name in names:
            if len({getattr(part, name) is None for part in parts}) > 1:
                raise ValueError(f"{name} is present in some parts only")
        b, width = sum(len(part) for part in parts), max(part.tags.shape[1] for part in parts)
        merged: dict[str, torch.Tensor | None] = {}
        for name in names:
            value = getattr(parts[0], name)
            if value is None:
                merged[name] = None
                continue
            shape = [b, *value.shape[1:]]
            if name not in _PER_OBJECT:
                shape[1] = width
            if name in _RAGGED:
                shape[1] = max(getattr(part, name).shape[1] for part in parts)
            if name == "tag_distance":
                shape[2] = width
            merged[name] = value.new_full(shape, _PADDING.get(name, 0))
        del value
        row = 0
        while parts:
            part = parts.pop(0)
            n, length = len(part), part.tags.shape[1]
            for name, out in merged.items():
                if out is None:
                    continue
                value = getattr(part, name)
                if name in _RAGGED:
                    out[row : row + n, : value.shape[1]] = value
                elif name in _PER_OBJECT:
                    out[row : row + n] = value
                elif name == "tag_distance":
                    out[row : row + n, :length, :length] = value
                else:
                    out[row : row + n, :length] = value
            row += n
            del part
        return cls(feature_names=feature_names, **merged)  # type: ignore[arg-type]

    def state(self) -> dict[str, object]:
        """The fields as a plain dict (``CandidateSet(**state)`` rebuilds it; absent: None)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def __len__(self) -> int:
        return int(self.objects.shape[0])

    def feature(self, name: str) -> torch.Tensor:
        """``[B, L]`` values of one feature."""
        try:
            return self.features[..., self.feature_names.index(name)]
        except ValueError:
            raise KeyError(f"no feature {name!r}; the features are {self.feature_names}") from None

    def without_features(self, names: tuple[str, ...] | list[str]) -> CandidateSet:
        """The same lists with the features ``names`` left out (the others in their order).

        Raises:
            KeyError: a name is not a feature of the set.
        """
        missing = [name for name in names if name not in self.feature_names]
        if missing:
            raise KeyError(f"no features {missing}; the features are {self.feature_names}")
        kept = [i for i, name in enumerate(self.feature_names) if name not in names]
        return replace(self, features=self.features[..., kept],
                       feature_names=tuple(self.feature_names[i] for i in kept))

    def to(self, device: torch.device | str) -> CandidateSet:
        """Moves every tensor to ``device`` (absent optional fields stay None)."""
        return replace(self, **{
            f.name: getattr(self, f.name).to(device)
            for f in fields(self) if isinstance(getattr(self, f.name), torch.Tensor)
        })

    def __getitem__(self, rows: slice | torch.Tensor) -> CandidateSet:
        """The lists at ``rows`` (a slice, or a long or bool index tensor; padding width kept)."""
        return replace(self, **{
            f.name: getattr(self, f.name)[rows]
            for f in fields(self) if isinstance(getattr(self, f.name), torch.Tensor)
        })

    def batches(self, batch_size: int) -> Iterator[CandidateSet]:
        """Consecutive batches of at most ``batch_size`` objects."""
        for start in range(0, len(self), batch_size):
            yield self[start : start + batch_size]
