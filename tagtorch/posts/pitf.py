"""``pitf_posts``: PITF for personalized tag recommendation (Rendle and Schmidt-Thieme 2010).

Pairwise interaction tensor factorization scores a tag for the post ``(u, r)`` by
``<U_u, T^U_t> + <R_r, T^R_t>`` and learns by BPR over posts: for each observed ``(u, r, t)`` a
tag ``t'`` that the post does not carry is drawn uniformly and ``−ln σ(ŷ_t − ŷ_t')`` plus an L2
penalty is minimized — the paper's own task. tagtorch's item PITF
(:class:`~tagtorch.itemrec.pitf.PITF`) is the same factorization with the roles of the modes
named for item ranking: the tag here is its "item" (the target mode) and the resource its
"tag" (the query's second mode), so its ``(user, tag)`` sets are exactly the posts' tag sets
and it is reused unchanged.

Training data: each user's last training post (users with two or more) is held out for early
stopping on validation DCG@10 (the same split the test posts are made by); the model of the
best epoch scores the test posts. Deviations: Adam instead of the paper's plain SGD, and the
held-out posts are not trained on afterwards (ours).
"""

from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np
import pytorch_lightning as pl
import torch

from tagtorch.itemrec.data import ItemRecData
from tagtorch.itemrec.pitf import PITF
from tagtorch.posts.base import PostRanker
from tagtorch.posts.data import PostData, Posts, validation_posts

__all__ = ["TagPITF"]


class TagPITF(PostRanker):
    """``pitf_posts`` (module docstring).

    Args:
        rank: the factors' dimension (the paper: up to 64 on its data).
        regularization: λ of the L2 penalty (the paper: 5e-5).
        learning_rate: Adam's step size.
        batch_size: posts per step.
        max_epochs: at most this many epochs.
        patience: epochs without a better validation DCG@10 before stopping.
        seed: initialization and sampling.
        validation: how the validation posts are carved from the training posts:
            ``leave_last`` (each user's last one, as the test split; the default) or
            ``global_time`` / ``random`` (a ``validation_fraction`` share: data where users
            have one post each, e.g. TagRec's samples).
        validation_fraction: that share.
    """

    def __init__(self, rank: int = 64, regularization: float = 5e-5,
                 learning_rate: float = 0.01, batch_size: int = 64, max_epochs: int = 30,
                 patience: int = 3, seed: int = 0, validation: str = "leave_last",
                 validation_fraction: float = 0.2) -> None:
        if max_epochs < 1:
            raise ValueError(f"max_epochs must be >= 1, got {max_epochs}")
        self.rank, self.regularization, self.learning_rate = rank, regularization, learning_rate
        self.batch_size, self.max_epochs, self.patience = batch_size, max_epochs, patience
        self.seed, self.validation = seed, validation
        self.validation_fraction = validation_fraction

    def _fit(self, data: PostData) -> None:
        """BPR over the training posts, early stopping on each user's last one."""
        train = data.train
        val = validation_posts(train, data.n_users, self.validation,
                               self.validation_fraction, self.seed)
        rows = train.tags.row_ids
        # (user, "item" = tag, "tag" = resource) triples of the item PITF
        triples = np.stack([train.users[rows], train.tags.values, train.resources[rows]], 1)
        held = val[rows]
        split = ItemRecData.from_triples("posts", data.n_users, data.n_tags, data.n_resources,
                                         triples[~held], triples[held],
                                         np.zeros((0, 3), dtype=np.int64), "posts")
        trainer: Any = partial(pl.Trainer, max_epochs=self.max_epochs, accelerator="cpu",
                               devices=1, enable_progress_bar=False, logger=False,
                               enable_checkpointing=False, enable_model_summary=False)
        self.model_ = PITF(rank=self.rank, regularization=self.regularization,
                           optimizer=partial(torch.optim.Adam, lr=self.learning_rate),
                           trainer=trainer, batch_size=self.batch_size,
                           patience=self.patience, seed=self.seed)
        self.model_.fit(split)

    def score(self, posts: Posts) -> np.ndarray:
        """``[Q, W]`` ``<U_u, T^U_t> + <R_r, T^R_t>`` of every tag."""
        with torch.no_grad():
            scores = self.model_.score(torch.from_numpy(posts.users),
                                       torch.from_numpy(posts.resources))
        return scores.double().cpu().numpy()
