"""A deep tag ranker of ours that reads what the tree rankers cannot: the tags themselves.

The tree rankers (λ-MART, Random Forest) and the neural rankers of :mod:`tagtorch.rankers.neural`
see each candidate through its 13 LATRE features (Canuto et al., JIDM 2013) alone: two
candidates with equal features are equal to them, whichever tags they are and whatever the
object's other tags are. :class:`TagContextRanker` (ours) adds three inputs a feature vector
cannot carry:

- a learned **embedding of the candidate tag** (a tag's prior of being a good recommendation,
  and where it sits among the other tags);
- a **set encoder of the object's input tags** ``I_o`` (``CandidateSet.input_tags``, carried by
  :class:`~tagtorch.candidates.latre.LatreCandidates`): each candidate attends over the
  object's input-tag embeddings (multi-head attention with the candidate as the query, as in
  the Set Transformer's pooling, Lee et al., ICML 2019), and the mean input embedding is
  multiplied with the candidate's (a learned co-occurrence);
- **attention across the candidate list** (Transformer encoder layers over the real
  candidates of one list: the context-aware scoring of allRank, Pobrotyn et al., 2020).

The 13 features enter as side inputs after the normalization of
:class:`~tagtorch.rankers.neural.FeatureNormalizer` (signed ``log1p`` then z-score, the first
lesson of DASALC, Qin et al., ICLR 2021), with Gaussian noise on the normalized features while
training (``input_noise``, DASALC's second lesson). The network is trained listwise with any loss
of :mod:`tagtorch.losses` exactly as :class:`~tagtorch.rankers.neural.NeuralRanker` trains (it is
one: early stopping on held-out lists, best epoch restored, the same saved folder).

What it learns from: like every ranker of the protocol, only the lists it is fitted on (V). The
tag vocabulary is the tags that occur at least ``min_tag_count`` times among the training
lists' candidates and input tags; any other tag (and padding) is the zero vector, so an unseen
tag is scored from its features. No embedding is pre-trained (nothing is learned from D beyond
the candidates' features), and T is never read before scoring. DASALC's third lesson, an
ensemble of networks, is not built in: fit several seeds and average their scores if wanted.

The object-centric task has no user per object, so no user embedding is learned here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytorch_lightning as pl
import torch
from torch import Tensor, nn

from tagtorch.candidates.candidate_set import CandidateSet
from tagtorch.data.ragged import Ragged
from tagtorch.errors import UnreadableFileError
from tagtorch.rankers.neural import FeatureNormalizer, NeuralRanker, Normalization, list_padding

__all__ = ["TagContextNet", "TagContextRanker", "TagVocabulary"]


class TagVocabulary(nn.Module):
    """Maps tag codes to embedding rows: ``1..n`` for the known tags, 0 for any other (and -1).

    Example:
        >>> vocabulary = TagVocabulary(torch.tensor([3, 9]))
        >>> vocabulary(torch.tensor([[9, 4, -1, 3]])).tolist()
        [[2, 0, 0, 1]]
    """

    codes: Tensor

    def __init__(self, codes: Tensor) -> None:
        super().__init__()
        self.register_buffer("codes", torch.unique(codes.long()))  # sorted

    def __len__(self) -> int:
        return int(self.codes.numel())

    @classmethod
    def of_lists(cls, lists: CandidateSet, min_count: int,
                 tag_sets: Ragged | None = None) -> TagVocabulary:
        """The tags seen ``min_count`` times among the lists' candidates and input tags, or in D.

        ``tag_sets``: D's tag sets (None: the lists alone).
        """
        assert lists.input_tags is not None
        seen = torch.cat([lists.tags[lists.mask], lists.input_tags[lists.input_tags >= 0]])
        codes, counts = torch.unique(seen, return_counts=True)
        kept = [codes[counts >= min_count]]
        if tag_sets is not None:
            codes, counts = torch.unique(torch.as_tensor(tag_sets.values, dtype=torch.long),
                                         return_counts=True)
            kept.append(codes[counts >= min_count])
        return cls(torch.cat(kept))

    def forward(self, tags: Tensor) -> Tensor:
        """Row indices of ``tags`` (any shape): ``1 + position`` of a known tag, else 0."""
        if not len(self):
            return torch.zeros_like(tags)
        position = torch.searchsorted(self.codes, tags.contiguous()).clamp(max=len(self) - 1)
        return torch.where(self.codes[position] == tags, position + 1, 0)


class TagContextNet(nn.Module):
    """The network of :class:`TagContextRanker`: features, tags and input tags to scores.

    Args:
        n_features: ``F``.
        n_tags: known tags (rows ``1..n_tags`` of the embedding; row 0 is the zero vector).
        embedding_dim: width of the tag embeddings.
        hidden: widths of the per-candidate MLP (at least one).
        attention_layers: Transformer encoder layers across the candidate list (0: none).
        attention_heads: heads of the input-tag and list attention (divide the widths).
        dropout: after each hidden layer, on the embeddings and inside the attention.
        use_tags: embed the candidate tag (False: the features alone, as the MLP scorer).
        use_input_tags: encode the object's input tags (needs ``use_tags``).

    Example:
        >>> net = TagContextNet(3, n_tags=5, embedding_dim=8, hidden=[8], attention_heads=2)
        >>> tags, inputs = torch.tensor([[1, 2, 0]]), torch.tensor([[3, 0]])
        >>> net(torch.randn(1, 3, 3), torch.ones(1, 3, dtype=torch.bool), tags, inputs).shape
        torch.Size([1, 3])
    """

    def __init__(self, n_features: int, n_tags: int, embedding_dim: int = 32,
                 hidden: Sequence[int] = (64,), attention_layers: int = 1,
                 attention_heads: int = 4, dropout: float = 0.1, use_tags: bool = True,
                 use_input_tags: bool = True) -> None:
        super().__init__()
        if not hidden:
            raise ValueError("hidden needs at least one width")
        if use_input_tags and not use_tags:
            raise ValueError("use_input_tags needs use_tags (the candidate is the query)")
        self.use_tags, self.use_input_tags = use_tags, use_input_tags
        self.embedding = nn.Embedding(n_tags + 1, embedding_dim, padding_idx=0)
        nn.init.normal_(self.embedding.weight, std=0.1)
        with torch.no_grad():
            self.embedding.weight[0].zero_()
        self.input_attention = nn.MultiheadAttention(
            embedding_dim, attention_heads, dropout=dropout, batch_first=True)
        self.completion = nn.Linear(embedding_dim, embedding_dim)
        self.tag_bias = nn.Embedding(n_tags + 1, 1, padding_idx=0)
        nn.init.zeros_(self.tag_bias.weight)
        width = n_features + embedding_dim * (use_tags + 2 * use_input_tags) + use_input_tags
        layers: list[nn.Module] = []
        for size in hidden:
            layers += [nn.Linear(width, size), nn.LayerNorm(size), nn.ReLU(), nn.Dropout(dropout)]
            width = size
        self.mlp = nn.Sequential(*layers)
        self.context: nn.TransformerEncoder | None = None
        if attention_layers:
            layer = nn.TransformerEncoderLayer(width, attention_heads, dim_feedforward=2 * width,
                                               dropout=dropout, batch_first=True, norm_first=True)
            self.context = nn.TransformerEncoder(layer, attention_layers,
                                                 enable_nested_tensor=False)
        self.drop = nn.Dropout(dropout)
        self.out = nn.Linear(width, 1)

    def completion_logits(self, inputs: Tensor) -> Tensor:
        """``[B, n_tags + 1]`` log-probabilities of every tag given the input tags' rows ``[B, M]``.

        The tag-set completion the embeddings are pre-trained on; row 0 (unknown) never.
        """
        given = self.embedding(inputs)
        known = (inputs > 0).unsqueeze(-1)
        mean = (given * known).sum(1) / known.sum(1).clamp(min=1)
        logits = self.completion(mean) @ self.embedding.weight.T + self.tag_bias.weight.T
        logits[:, 0] = -torch.inf
        return torch.log_softmax(logits, -1)

    def _candidate_inputs(self, features: Tensor, rows: Tensor, inputs: Tensor) -> Tensor:
        """``[B, L, F + ...]``: the features, the tag embedding and the input-tag context.

        The context: attention over the input tags, the product with their mean and the
        candidate's completion log-probability (0 for an unknown tag).
        """
        parts = [features]
        if self.use_tags:
            tag = self.drop(self.embedding(rows))
            parts.append(tag)
            if self.use_input_tags:
                given = self.drop(self.embedding(inputs))  # [B, M, d], 0 at unknown / padding
                known = inputs > 0  # an object with no known input tag sees one zero row
                attended, _ = self.input_attention(tag, given, given,
                                                   key_padding_mask=list_padding(known),
                                                   need_weights=False)
                mean = given.sum(1) / known.sum(-1, keepdim=True).clamp(min=1)
                completion = self.completion_logits(inputs).gather(1, rows)
                completion = completion.masked_fill(rows == 0, 0.0).unsqueeze(-1)
                parts += [attended, tag * mean.unsqueeze(1), completion]
        return torch.cat(parts, -1)

    def forward(self, features: Tensor, mask: Tensor, rows: Tensor, inputs: Tensor) -> Tensor:
        """Scores ``[B, L]`` (0 at padding) of normalized ``features [B, L, F]``.

        ``rows``: the candidates' vocabulary rows ``[B, L]``; ``inputs``: the input tags'
        rows ``[B, M]``.
        """
        x = self._candidate_inputs(features, rows, inputs)
        hidden = self.mlp(x[mask])
        h = x.new_zeros((*mask.shape, hidden.shape[-1]))
        h[mask] = hidden
        if self.context is not None:
            h = self.context(h, src_key_padding_mask=list_padding(mask))
        return self.out(h).squeeze(-1).masked_fill(~mask, 0.0)


PRETRAIN_TAGS = 256
"""The most tags of one D object the pre-training reads (the first in code order)."""


def pretrain_completion(net: TagContextNet, rows: Tensor, offsets: np.ndarray, epochs: int,
                        seed: int, batch_size: int = 256, lr: float = 1e-2) -> None:
    """Trains ``net``'s tag embeddings, completion head and tag biases on D's tag sets.

    Each epoch splits every D object's known tags at random into halves (the protocol's
    ``input_fraction`` of 0.5) and maximizes the completion log-probability
    (:meth:`TagContextNet.completion_logits`) of the second half given the first, averaged
    over the second half's tags (the multinomial likelihood of Mult-VAE/DAE, Liang et al.,
    WWW 2018). ``rows``: the flat vocabulary rows of D's tags; ``offsets``: their rows' bounds.
    """
    lengths = torch.as_tensor(np.diff(offsets), dtype=torch.long)
    width = min(int(lengths.max()) if len(lengths) else 0, PRETRAIN_TAGS)
    row_of = torch.repeat_interleave(torch.arange(len(lengths)), lengths)
    position = torch.arange(len(rows)) - torch.as_tensor(offsets[:-1], dtype=torch.long)[row_of]
    keep = position < width
    padded = torch.zeros((len(lengths), max(width, 1)), dtype=torch.long)
    padded[row_of[keep], position[keep]] = rows[keep]
    padded = padded[(padded > 0).sum(-1) >= 2]  # an object needs an input and a target
    if not len(padded):
        return
    generator = torch.Generator().manual_seed(seed)
    parameters = [*net.embedding.parameters(), *net.completion.parameters(),
                  *net.tag_bias.parameters()]
    optimizer = torch.optim.Adam(parameters, lr=lr)
    for _ in range(epochs):
        order = torch.randperm(len(padded), generator=generator)
        for begin in range(0, len(padded), batch_size):
            batch = padded[order[begin:begin + batch_size]]
            known = batch > 0
            shuffle = torch.rand(batch.shape, generator=generator).masked_fill(~known, 2.0)
            batch = batch.gather(1, shuffle.argsort(1))  # known tags first, in random order
            half = (known.sum(-1, keepdim=True) + 1) // 2
            first = torch.arange(batch.shape[1]) < half
            inputs, targets = batch.masked_fill(~first, 0), batch.masked_fill(first, 0)
            log_p = net.completion_logits(inputs).gather(1, targets)
            on = targets > 0
            loss = -(log_p.masked_fill(~on, 0).sum(-1) / on.sum(-1).clamp(min=1)).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()


class TagContextRanker(NeuralRanker):
    """Ours: a listwise deep ranker of the features, the tags and the whole candidate list.

    It reads the candidate tag and the object's input tags (see the module docstring).

    Args:
        loss: a loss name of :data:`tagtorch.losses.LOSSES`.
        loss_params: keyword parameters of the loss.
        embedding_dim: width of the tag embeddings.
        hidden: widths of the per-candidate MLP.
        attention_layers: Transformer layers across the candidate list (0: none).
        attention_heads: heads of the input-tag and list attention.
        dropout: dropout of the network.
        input_noise: standard deviation of the Gaussian noise added to the normalized features
            while training (DASALC; 0: none).
        min_tag_count: a tag joins the vocabulary when it occurs this often in the training
            lists (candidates and input tags), or in D's tag sets when they are given.
        pretrain_epochs: epochs of tag-set completion on D's tag sets (given through
            :meth:`learn_tag_sets`, as the protocol does) before the ranker learns on V: the
            tag embeddings, the completion head and the tag biases learn to predict a random
            half of each D object's tags from the other half. 0: nothing learned from D.
        use_tags: embed the candidate tag (False, with ``use_input_tags=False``: the MLP and
            attention scorer on the features alone, for ablations).
        use_input_tags: encode the object's input tags.
        optimizer, scheduler, trainer, normalization, batch_size, holdout_fraction, k,
        patience, checkpoint_dir, log_dir, seed, name: as :class:`NeuralRanker`.
    """

    list_inputs: ClassVar[tuple[str, ...]] = ("tags", "input_tags")

    loss_params: dict[str, Any]
    embedding_dim: int
    hidden: Sequence[int]
    attention_layers: int
    attention_heads: int
    dropout: float
    input_noise: float
    min_tag_count: int
    pretrain_epochs: int
    use_tags: bool
    use_input_tags: bool

    def __init__(
        self,
        loss: str = "lambdarank",
        loss_params: Mapping[str, Any] | None = None,
        embedding_dim: int = 32,
        hidden: Sequence[int] = (64,),
        attention_layers: int = 1,
        attention_heads: int = 4,
        dropout: float = 0.1,
        input_noise: float = 0.1,
        min_tag_count: int = 2,
        pretrain_epochs: int = 10,
        use_tags: bool = True,
        use_input_tags: bool = True,
        optimizer: Callable[..., torch.optim.Optimizer] | None = None,
        scheduler: Callable[[torch.optim.Optimizer], Any] | None = None,
        trainer: Callable[..., pl.Trainer] | None = None,
        normalization: Normalization = "log1p_zscore",
        batch_size: int = 32,
        holdout_fraction: float = 0.2,
        k: int = 5,
        patience: int | None = 5,
        checkpoint_dir: str | Path | None = None,
        log_dir: str | Path | None = None,
        seed: int = 0,
        name: str | None = None,
    ) -> None:
        super().__init__(loss=loss, loss_params=loss_params, optimizer=optimizer,
                         scheduler=scheduler, trainer=trainer, normalization=normalization,
                         batch_size=batch_size, holdout_fraction=holdout_fraction, k=k,
                         patience=patience, checkpoint_dir=checkpoint_dir, log_dir=log_dir,
                         seed=seed, name=name or "tag_context")
        if input_noise < 0:
            raise ValueError(f"input_noise must be >= 0, got {input_noise}")
        if min_tag_count < 1:
            raise ValueError(f"min_tag_count must be >= 1, got {min_tag_count}")
        if pretrain_epochs < 0:
            raise ValueError(f"pretrain_epochs must be >= 0, got {pretrain_epochs}")
        self.tag_sets: Ragged | None = None
        TagContextNet(1, 0, embedding_dim, hidden, attention_layers, attention_heads, dropout,
                      use_tags, use_input_tags)  # checks the network's settings
        self.vocabulary: TagVocabulary | None = None

    def learn_tag_sets(self, tag_sets: Ragged) -> None:
        """Keeps D's tag sets for the next :meth:`fit` (its vocabulary and pre-training)."""
        self.tag_sets = tag_sets

    def _build(self, n_features: int, train: CandidateSet | None = None) -> None:
        """The vocabulary, the normalizer and the network (pre-trained on D at fit time).

        The vocabulary: at fit time of ``train``'s tags and D's; at load time an empty one of
        the saved size, filled by the weights. The network is pre-trained on D's tag sets at
        fit time when there are any and ``pretrain_epochs > 0``.
        """
        if train is not None:
            self.vocabulary = TagVocabulary.of_lists(train, self.min_tag_count, self.tag_sets)
        elif self.vocabulary is None:
            raise RuntimeError("no vocabulary to build the network for")
        self.normalizer = FeatureNormalizer(n_features, self.normalization)
        net = TagContextNet(
            n_features, len(self.vocabulary), self.embedding_dim, self.hidden,
            self.attention_layers, self.attention_heads, self.dropout, self.use_tags,
            self.use_input_tags)
        if train is not None and self.tag_sets is not None and self.pretrain_epochs:
            pretrain_completion(net, self.vocabulary(torch.as_tensor(self.tag_sets.values)),
                                self.tag_sets.offsets, self.pretrain_epochs, self.seed)
        self.scorer = net

    def forward(self, features: Tensor, mask: Tensor, *inputs: Tensor) -> Tensor:
        """Scores ``[B, L]`` of raw ``features [B, L, F]``.

        ``inputs``: candidate ``tags [B, L]`` and ``input_tags [B, M]`` (codes as in
        :class:`CandidateSet`).
        """
        if self.scorer is None or self.normalizer is None or self.vocabulary is None:
            raise RuntimeError("TagContextRanker is not fitted: call fit() or load()")
        tags, input_tags = inputs
        x = self.normalizer(features, mask)
        if self.training and self.input_noise:
            x = (x + self.input_noise * torch.randn_like(x)).masked_fill(~mask.unsqueeze(-1), 0)
        return self.scorer(x, mask, self.vocabulary(tags), self.vocabulary(input_tags))

    def _manifest_extras(self) -> dict[str, Any]:
        return {**super()._manifest_extras(),
                "n_vocabulary": None if self.vocabulary is None else len(self.vocabulary)}

    def _load_files(self, folder: Path, manifest: Mapping[str, Any]) -> None:
        """Sizes the vocabulary from the manifest, then loads the weights (its codes too)."""
        size = manifest.get("n_vocabulary")
        if not isinstance(size, int) or isinstance(size, bool) or size < 0:
            raise UnreadableFileError(f"{folder}: n_vocabulary must be an integer >= 0 in the "
                                      f"manifest, got {size!r}")
        self.vocabulary = TagVocabulary(torch.arange(size))
        super()._load_files(folder, manifest)
