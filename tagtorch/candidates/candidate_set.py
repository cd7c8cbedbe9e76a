"""Padded candidate lists: the ``[B, L, F]`` batches every ranker, loss and metric consumes."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, fields, replace

import numpy as np
import torch

from tagtorch.data.ragged import Ragged


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
    """

    objects: torch.Tensor
    tags: torch.Tensor
    features: torch.Tensor
    labels: torch.Tensor
    mask: torch.Tensor
    n_relevant: torch.Tensor
    feature_names: tuple[str, ...]

    @classmethod
    def from_ragged(
        cls,
        objects: np.ndarray,
        tags: Ragged,
        features: Mapping[str, Ragged],
        gold_tags: Ragged,
    ) -> CandidateSet:
        """Pads ragged candidate lists and labels them against the gold tags.

        Args:
            objects: ``[B]`` object codes.
            tags: ragged ``[B]`` candidate tag codes.
            features: feature name -> ragged ``[B]`` values aligned with ``tags``.
            gold_tags: ragged ``[B]`` gold tags Y_o.
        """
        n_tags = int(max(tags.values.max(initial=-1), gold_tags.values.max(initial=-1))) + 1
        gold = gold_tags.to_csr(max(n_tags, 1))
        labels = np.asarray(gold[tags.row_ids, tags.values]).ravel().astype(np.float32)
        padded_tags, mask = tags.to_padded(pad_value=-1)
        stacked = np.stack(
            [np.asarray(f.values, dtype=np.float32) for f in features.values()], axis=-1
        ) if features else np.zeros((len(tags.values), 0), dtype=np.float32)
        feature_tensor = torch.zeros((*mask.shape, stacked.shape[1]), dtype=torch.float32)
        feature_tensor[mask] = torch.from_numpy(stacked)
        label_tensor = torch.zeros(mask.shape, dtype=torch.float32)
        label_tensor[mask] = torch.from_numpy(labels)
        return cls(
            objects=torch.as_tensor(objects, dtype=torch.long),
            tags=padded_tags.long(),
            features=feature_tensor,
            labels=label_tensor,
            mask=mask,
            n_relevant=torch.as_tensor(gold_tags.lengths, dtype=torch.long),
            feature_names=tuple(features),
        )

    def __len__(self) -> int:
        return int(self.objects.shape[0])

    def feature(self, name: str) -> torch.Tensor:
        """``[B, L]`` values of one feature."""
        try:
            return self.features[..., self.feature_names.index(name)]
        except ValueError:
            raise KeyError(f"no feature {name!r}; the features are {self.feature_names}") from None

    def to(self, device: torch.device | str) -> CandidateSet:
        """Moves every tensor to ``device``."""
        return replace(self, **{
            f.name: getattr(self, f.name).to(device)
            for f in fields(self) if isinstance(getattr(self, f.name), torch.Tensor)
        })

    def __getitem__(self, rows: slice) -> CandidateSet:
        """A batch of rows (padding width kept)."""
        return replace(self, **{
            f.name: getattr(self, f.name)[rows]
            for f in fields(self) if isinstance(getattr(self, f.name), torch.Tensor)
        })

    def batches(self, batch_size: int) -> Iterator[CandidateSet]:
        """Consecutive batches of at most ``batch_size`` objects."""
        for start in range(0, len(self), batch_size):
            yield self[start : start + batch_size]
