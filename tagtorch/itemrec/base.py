"""The item-ranker interface and the shared trainer of the factorization models.

Every tag-based item recommender offers ``fit(data)``, ``score(users, tags) -> [B, n_items]``,
``save(path)`` and ``load(path)``, so one evaluator compares them all
(:class:`tagtorch.evaluation.item_recommendation.ItemRecommendationTask`). The factorization models
(Do-Rank, PITF, the probabilistic CP baseline) share :class:`FactorModel`, a Lightning module
that trains on batches of User-Tag-Set sets, measures DCG@10 on the training sets and on the
validation queries after every epoch, stops early when the validation DCG@10 stops rising,
restores the best epoch, and resumes from its last checkpoint after an interruption, to the same
result as an uninterrupted training.

Nothing is unpickled: checkpoints are read with ``torch.load(..., weights_only=True)`` (they
hold tensors and primitive containers only; no hyperparameters are saved in them), and a saved
model is a folder with a JSON manifest and its weights (:mod:`tagtorch.storage`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import random
import warnings
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any, ClassVar, Protocol, Self, cast, runtime_checkable

import numpy as np
import pytorch_lightning as pl
import torch
from pytorch_lightning.callbacks import ModelCheckpoint
from torch import Tensor, nn
from torch.utils.data import DataLoader

from tagtorch.errors import UnreadableFileError
from tagtorch.itemrec.data import AGGREGATES, ItemRecData, Queries, TagProfile, UserTagSets
from tagtorch.itemrec.lean import (
    AutogradTriples,
    LeanEpochs,
    RowOptimizer,
    RowTake,
    device_of,
    epochs_of,
    train_lean,
)
from tagtorch.lightning_fit import epoch_mean, fit_best
from tagtorch.metrics import functional
from tagtorch.metrics.retrieval import DCG
from tagtorch.progress import batch_ranges
from tagtorch.settings import ModelTask, SignatureSettings
from tagtorch.storage import (
    atomic_write,
    class_name,
    load_tensors,
    model_folder,
    read_checkpoint,
    read_manifest,
    save_tensors,
    saved_entries,
    write_manifest,
)

log = logging.getLogger(__name__)

LOOPS = ("lightning", "lean")
"""The training loops of :class:`FactorModel` (its ``loop`` setting)."""

__all__ = [
    "LOOPS",
    "FactorModel",
    "ItemRanker",
    "ProfileScorer",
    "dcg_at_k",
    "in_sets",
    "profile_mass",
    "profile_mix",
    "query_scores",
    "score_queries",
    "top_k_queries",
    "user_scores",
]


@runtime_checkable
class ItemRanker(Protocol):
    """Ranks items for ``(user, tag)`` queries."""

    def fit(self, data: ItemRecData) -> Self:
        """Learns from ``data.train`` (``data.val`` for early stopping)."""
        ...

    def score(self, users: Tensor, tags: Tensor) -> Tensor:
        """Scores ``[B, n_items]`` of every item for the queries ``(users [B], tags [B])``."""
        ...

    def save(self, path: str | Path) -> None:
        """Writes the fitted model into the folder ``path`` (JSON manifest, safe data files)."""
        ...

    @classmethod
    def load(cls, path: str | Path) -> Self:
        """Reads a model folder written by :meth:`save` (nothing in it may run code)."""
        ...


@runtime_checkable
class ProfileScorer(Protocol):
    """A ranker that scores a user's tag profile at once (the ``"profile"`` aggregation)."""

    def profile_scores(self, users: Tensor, profile: TagProfile) -> Tensor:
        """``[B, n_items]`` ``sum_t P(t | u) s(u, i, t)`` of the users ``[B]``."""
        ...


def dcg_at_k(scores: Tensor, labels: Tensor, mask: Tensor, k: int = 10) -> Tensor:
    """DCG@k ``[B]`` of item rankings ``[B, I]``: :func:`tagtorch.metrics.functional.dcg_at_k`.

    Linear gain, ``sum_{r <= k} label_r / log2(r + 1)`` over the items where ``mask`` is True,
    ranked by score, ties by item order; ``k = 10`` as in the Do-Rank paper's curves.

    Example:
        >>> dcg = dcg_at_k(torch.tensor([[0.1, 0.9, 0.5]]), torch.tensor([[1.0, 0.0, 1.0]]),
        ...                torch.ones(1, 3, dtype=torch.bool), k=2)
        >>> [round(v, 4) for v in dcg.tolist()]
        [0.6309]
    """
    return functional.dcg_at_k(scores, labels.to(scores.dtype), mask, k)


def in_sets(values: Tensor, items: Tensor, item_mask: Tensor) -> Tensor:
    """``[B, Q]`` bool: ``values[b, q]`` is one of the real ``items[b]`` (``item_mask``).

    Each row's items are sorted once and the values looked up by binary search: ``O((P + Q) log
    P)`` per row, where comparing every value with every item would build a ``[B, Q, P]`` block
    (the UTS sets of a batch are padded to the largest one, thousands of items on large data).

    Example:
        >>> in_sets(torch.tensor([[3, 5, 9]]), torch.tensor([[9, 3, 5]]),
        ...         torch.tensor([[True, True, False]])).tolist()
        [[True, False, True]]
    """
    if items.shape[-1] == 0:
        return torch.zeros(values.shape, dtype=torch.bool, device=values.device)
    sentinel = torch.iinfo(items.dtype).max  # padding sorts last and matches no value
    ordered = items.masked_fill(~item_mask, sentinel).sort(dim=-1).values
    at = torch.searchsorted(ordered, values.to(ordered.dtype)).clamp_max(ordered.shape[-1] - 1)
    return ordered.gather(-1, at) == values


def profile_mix(profile: TagProfile, tag_rows: Tensor) -> Tensor:
    """``[B, D]`` ``sum_t P(t | u) tag_rows[t]`` for each of the ``B`` profiles.

    Example:
        >>> from tagtorch.data.ragged import Ragged
        >>> prof = TagProfile(Ragged.from_lists([[0, 1], []]), np.array([0.25, 0.75], np.float32))
        >>> profile_mix(prof, torch.tensor([[4.0, 0.0], [0.0, 4.0]])).tolist()
        [[1.0, 3.0], [0.0, 0.0]]
    """
    device = tag_rows.device
    rows = torch.from_numpy(profile.tags.row_ids).to(device)
    tags = torch.from_numpy(np.asarray(profile.tags.values, dtype=np.int64)).to(device)
    share = torch.from_numpy(profile.weights).to(device, tag_rows.dtype)
    out = torch.zeros(len(profile.tags), tag_rows.shape[1], dtype=tag_rows.dtype, device=device)
    return out.index_add_(0, rows, tag_rows[tags] * share[:, None])


def profile_mass(profile: TagProfile, tag_rows: Tensor) -> Tensor:
    """``[B, 1]`` ``sum_t P(t | u)`` of each profile (1, or 0 for an empty profile).

    A score term that does not depend on the tag enters the profile aggregation times this.
    ``tag_rows`` is any ``[n_tags, D]`` tag matrix of the model: its row count, dtype and device.

    Example:
        >>> from tagtorch.data.ragged import Ragged
        >>> prof = TagProfile(Ragged.from_lists([[0, 1], []]), np.array([0.25, 0.75], np.float32))
        >>> profile_mass(prof, torch.zeros(3, 2)).tolist()
        [[1.0], [0.0]]
    """
    return profile_mix(profile, tag_rows.new_ones(len(tag_rows), 1))


def user_scores(ranker: ItemRanker, users: Tensor, profile: TagProfile, aggregate: str,
                n_items: int, n_tags: int, budget: int = 1 << 24) -> Tensor:
    """``[B, n_items]`` item scores of users from the ranker's tag-level scores.

    The per-user queries of the Do-Rank paper (:mod:`tagtorch.itemrec.data`): ``"max"`` takes
    ``max_t s(u, i, t)`` over all ``n_tags`` tags, ``"profile"`` sums ``P(t | u) s(u, i, t)``
    over the user's training tags. A ranker with a ``user_aggregate`` attribute (the
    two-dimensional model: ``"profile"``, its per-user form) uses that instead. Tag-level
    scores are computed ``budget`` values at a time (a block of (user, tag) pairs), never as
    a dense users x tags x items tensor; a ranker with ``profile_scores``
    (:class:`ProfileScorer`) computes the ``"profile"`` aggregation itself.

    Args:
        ranker: scores ``(users [N], tags [N]) -> [N, n_items]``.
        users: ``[B]`` the users.
        profile: their tag profiles, one row per user (for ``"profile"``).
        aggregate: ``"max"`` or ``"profile"``.
        n_items: the items scored.
        n_tags: the tags of the ``"max"`` aggregation.
        budget: tag-level scores computed at once.

    Example:
        >>> class Toy:  # s(u, i, t) = (t + 1) * i for two items
        ...     def score(self, users, tags):
        ...         return (tags.float() + 1).unsqueeze(1) * torch.tensor([[0.0, 1.0]])
        >>> from tagtorch.data.ragged import Ragged
        >>> prof = TagProfile(Ragged.from_lists([[0, 2]]), np.array([0.5, 0.5], np.float32))
        >>> user_scores(Toy(), torch.tensor([0]), prof, "max", 2, 3).tolist()
        [[0.0, 3.0]]
        >>> user_scores(Toy(), torch.tensor([0]), prof, "profile", 2, 3).tolist()
        [[0.0, 2.0]]
    """
    aggregate = getattr(ranker, "user_aggregate", None) or aggregate
    b = len(users)
    if aggregate == "max":
        step = max(1, budget // max(b * n_items, 1))
        out: Tensor | None = None
        for start in range(0, n_tags, step):
            tags = torch.arange(start, min(start + step, n_tags), device=users.device)
            scores = ranker.score(users.repeat_interleave(len(tags)), tags.repeat(b))
            best = scores.float().view(b, len(tags), -1).amax(1)
            out = best if out is None else torch.maximum(out, best)
        assert out is not None, "no tag to aggregate over"
        return out
    if aggregate != "profile":
        raise ValueError(f"aggregate must be 'max' or 'profile', got {aggregate!r}")
    if isinstance(ranker, ProfileScorer):
        return ranker.profile_scores(users, profile)
    rows = torch.from_numpy(profile.tags.row_ids).to(users.device)
    tags = torch.from_numpy(np.asarray(profile.tags.values, dtype=np.int64)).to(users.device)
    weights = torch.from_numpy(profile.weights).to(users.device)
    out = None
    step = max(1, budget // max(n_items, 1))
    for start in range(0, len(rows), step):
        part = slice(start, start + step)
        scores = ranker.score(users[rows[part]], tags[part]).float()
        if out is None:
            out = torch.zeros(b, scores.shape[1], device=scores.device)
        out.index_add_(0, rows[part].to(scores.device),
                       scores * weights[part].to(scores.device).unsqueeze(1))
    return out if out is not None else torch.zeros(b, n_items, device=users.device)


def query_scores(ranker: ItemRanker, queries: Queries, rows: np.ndarray, n_items: int,
                 n_tags: int, device: torch.device | str = "cpu") -> Tensor:
    """``[b, n_items]`` scores of the queries at ``rows``: per (user, tag), or per user."""
    users = torch.from_numpy(queries.users[rows]).to(device)
    if not queries.per_user:
        return ranker.score(users, torch.from_numpy(queries.tags[rows]).to(device))
    assert queries.profile is not None and queries.aggregate is not None
    return user_scores(ranker, users, queries.profile.take(rows), queries.aggregate, n_items,
                       n_tags)


def score_queries(ranker: ItemRanker, queries: Queries, n_items: int, n_tags: int,
                  batch_size: int = 1024,
                  ) -> Iterator[tuple[np.ndarray, Tensor, Tensor, Tensor]]:
    """Scores queries in batches: yields ``(rows, scores, labels, mask)``, each ``[b, I]``."""
    for start, stop in batch_ranges(len(queries), batch_size, f"{type(ranker).__name__}: queries"):
        rows = np.arange(start, stop)
        labels, mask = queries.batch(rows, n_items)
        with torch.no_grad():
            scores = query_scores(ranker, queries, rows, n_items, n_tags).float().cpu()
        yield rows, scores, labels, mask


def mean_dcg_at_10(ranker: ItemRanker, queries: Queries, n_items: int, n_tags: int,
                   batch_size: int = 1024) -> float:
    """Mean DCG@10 of ``queries`` (the validation score the item models early-stop on)."""
    total, count = 0.0, 0
    for _, scores, labels, mask in score_queries(ranker, queries, n_items, n_tags, batch_size):
        total += float(dcg_at_k(scores, labels, mask, 10).sum())
        count += len(scores)
    return total / max(count, 1)


def top_k_queries(ranker: ItemRanker, queries: Queries, n_items: int, n_tags: int, k: int = 10,
                  batch_size: int = 1024) -> Iterator[tuple[np.ndarray, Tensor, Tensor]]:
    """The ``k`` best items of every query, ``batch_size`` queries at a time.

    Yields ``(rows, items [b, k], scores [b, k])``, ranked as the metrics rank
    (:func:`~tagtorch.metrics.functional.top_rank_order`: equal scores by item code); the
    queries' known items get ``-inf`` scores, so they are never returned unless fewer than
    ``k`` items are left (their places then hold ``-inf``). Memory is bounded by one block of
    ``[b, n_items]`` scores (and, inside :func:`user_scores`, its tag-level budget): never
    users x items or users x items x tags; no label or mask matrix is built.
    """
    for start in range(0, len(queries), batch_size):
        rows = np.arange(start, min(start + batch_size, len(queries)))
        with torch.no_grad():
            scores = query_scores(ranker, queries, rows, n_items, n_tags).float().cpu()
        known = queries.known.take(rows)
        scores[torch.from_numpy(known.row_ids).long(),
               torch.from_numpy(np.asarray(known.values)).long()] = -torch.inf
        items = functional.top_rank_order(scores, None, k)
        yield rows, items, scores.gather(-1, items)


@contextlib.contextmanager
def _deterministic_algorithms() -> Iterator[None]:
    """Runs the block with torch's deterministic algorithms (``warn_only``), then restores.

    With more than one CPU thread, the default backward of the factor-row lookups (an
    accumulating ``index_put_``) adds in parallel, in an order that varies from run to run:
    two trainings of the same seed differed by about 1e-6 in the factors after one epoch, so a
    training resumed in a new process could not equal an uninterrupted one. The deterministic
    version adds serially (as fast at these sizes). Operations without a deterministic
    version (some on CUDA) only warn.
    """
    enabled = torch.are_deterministic_algorithms_enabled()
    warn_only = torch.is_deterministic_algorithms_warn_only_enabled()
    torch.use_deterministic_algorithms(True, warn_only=True)
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(enabled, warn_only=warn_only)


@contextlib.contextmanager
def _quiet_deterministic() -> Iterator[None]:
    """Training's context: deterministic algorithms, no warning about the run folder's files.

    The folder is the training's own (:meth:`FactorModel.run_folder`): its checkpoints are no
    surprise to Lightning's "not empty" check.
    """
    with warnings.catch_warnings(), _deterministic_algorithms():
        warnings.filterwarnings("ignore", "Checkpoint directory .* is not empty")
        yield


class _SetIndex(torch.utils.data.Dataset):
    """Indices of the training sets (a batch gathers its sets in the collate function)."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> int:
        return i


class _SetBatch:
    """Gathers a batch of training sets: users, tags, padded items and their mask.

    A class, not a closure, so that a spawned DDP process can receive the loader.
    """

    def __init__(self, sets: UserTagSets) -> None:
        self.sets = sets

    def __call__(self, rows: list[int]) -> list[Tensor]:
        index = np.asarray(rows)
        items, mask = self.sets.padded(index)
        return [torch.from_numpy(self.sets.users[index]), torch.from_numpy(self.sets.tags[index]),
                items, mask]


class _QueryBatch:
    """Gathers a batch of queries: their rows, labels over all items and mask (see _SetBatch)."""

    def __init__(self, queries: Queries, n_items: int) -> None:
        self.queries, self.n_items = queries, n_items

    def __call__(self, rows: list[int]) -> list[Tensor]:
        index = np.asarray(rows)
        labels, mask = self.queries.batch(index, self.n_items)
        return [torch.from_numpy(index), labels, mask]


class FactorModel(SignatureSettings, pl.LightningModule):
    """Lightning trainer shared by the factorization models.

    Subclasses build their parameters in :meth:`build`, score in :meth:`score` and define the
    training objective in :meth:`set_loss` over a batch of UTS sets. Training follows the
    Do-Rank paper's protocol: after every epoch, DCG@10 on (a sample of) the training sets and
    on the validation queries is logged (``train/dcg@10``, ``val/dcg@10``) and kept in
    ``history_`` (the learning curve, with the epoch's mean training loss ``train_loss``);
    training stops when ``val/dcg@10`` has not risen for ``patience`` epochs, and the best
    epoch's weights are restored.

    **Checkpoints and resumption.** With ``checkpoint_dir``, each training keeps its state in
    a folder of its own, keyed by what shapes it (:meth:`run_folder`)::

        {checkpoint_dir}/runs/{key}/settings.json   the key's content, for people (never read)
        {checkpoint_dir}/runs/{key}/last.ckpt       the newest epoch (resumption)
        {checkpoint_dir}/runs/{key}/best.ckpt       the best epoch so far

    where ``key`` is 16 hex digits of the SHA-256 of :meth:`settings_key`: the class, the
    settings (without the trainer, the checkpoint folder and the name), the data sizes and
    :meth:`ItemRecData.fingerprint`. A ``fit`` with the same settings on the same data resumes
    from ``last.ckpt``: the epoch, the weights, the optimizer's state (and a scheduler's, were
    one configured), the early-stopping and best-checkpoint state, the learning curve, and
    every random generator (torch, CUDA, NumPy, Python and the generator of the batch order),
    so the epochs after the interruption are those of an uninterrupted training. Training
    runs with torch's deterministic algorithms (:func:`_deterministic_algorithms`), so that
    this holds across processes too (on CUDA, as far as its kernels have deterministic
    versions; the trainer's settings, such as its precision, are not part of the key). A training
    with other settings or data uses another folder and never touches this one. A finished
    training deletes its ``last.ckpt`` (a later ``fit`` starts over). A checkpoint that cannot
    be read safely (truncated, garbage, a pickle payload: everything is read with
    ``weights_only=True``) or does not match is discarded with a warning naming the file, and
    training starts over.

    Args:
        rank: the number of latent factors ``r``.
        regularization: ``lambda`` of the subclass's L2 penalty on the factor rows it trains.
        optimizer: builds the optimizer from the parameters (``_partial_``); default Adam with
            ``lr = 0.01``. It counts in the checkpoint key by its ``repr``.
        trainer: builds the Lightning ``Trainer`` (``_partial_``); default 50 epochs.
        batch_size: UTS sets per training step.
        patience: epochs without a better validation DCG@10 before training stops.
        init_std: standard deviation of the normal initialization of the factors.
        train_sample: training sets whose DCG@10 is reported per epoch (a seeded sample).
        checkpoint_dir: root of the training folders (None: a temporary folder, no
            resumption).
        seed: seeds the initialization, the batch order and the negative sampling.
        name: the run's name in logs.
        val_sample: early stopping on a seeded sample of this many validation queries (None:
            all; for per-user queries aggregated by the max over many tags, whose validation
            costs ``tags x items`` per query every epoch).
        user_aggregate: per-user queries: the aggregation of its tag-level scores, ``"max"``
            or ``"profile"`` (:func:`user_scores`), whatever the task's ``aggregate``; None:
            the task's.
        loop: ``"lightning"``: Lightning's loop over UTS sets (``batch_size`` per step;
            checkpoints and resumption); ``"lean"``: big steps and row-wise updates
            (:mod:`tagtorch.itemrec.lean`; PITF, Do-Rank, Do-Rank+), for data past HetRec's
            size.
        lean_batch_size: ``loop="lean"`` with sampled negatives: training triples per update.
    """

    task: ClassVar[ModelTask] = "itemrec"
    """The evaluation task these models belong to (read by the config checks)."""

    factory_settings: ClassVar[Mapping[str, tuple[type, ...]]] = MappingProxyType({
        "optimizer": (torch.optim.Optimizer,), "trainer": (pl.Trainer,)})
    """The settings that build objects (``_partial_`` configs), and the classes each may build."""

    trains_lean: ClassVar[bool] = False
    """Whether ``loop="lean"`` can train the model (:meth:`lean_epochs`)."""

    rank: int
    regularization: float
    optimizer: Callable[..., torch.optim.Optimizer] | None
    batch_size: int
    patience: int
    init_std: float
    train_sample: int
    checkpoint_dir: str | Path | None
    seed: int
    name: str | None
    val_sample: int | None
    user_aggregate: str | None
    loop: str
    lean_batch_size: int

    #: subclasses take their own settings by name and pass the rest on (``**kwargs``); the
    #: settings (``init_args``) are captured from the signatures (:mod:`tagtorch.settings`)
    _forwards_kwargs = True

    def __init__(
        self,
        rank: int = 64,
        regularization: float = 1e-4,
        optimizer: Callable[..., torch.optim.Optimizer] | None = None,
        trainer: Callable[..., pl.Trainer] | None = None,
        batch_size: int = 64,
        patience: int = 3,
        init_std: float = 0.1,
        train_sample: int = 2000,
        checkpoint_dir: str | Path | None = None,
        seed: int = 0,
        name: str | None = None,
        val_sample: int | None = None,
        user_aggregate: str | None = None,
        loop: str = "lightning",
        lean_batch_size: int = 8192,
    ) -> None:
        super().__init__()
        if loop not in LOOPS:
            raise ValueError(f"loop must be one of {LOOPS}, got {loop!r}")
        if loop == "lean" and not self.trains_lean:
            raise ValueError(f"{type(self).__name__} trains with loop='lightning' only")
        if lean_batch_size < 1:
            raise ValueError(f"lean_batch_size must be >= 1, got {lean_batch_size}")
        if user_aggregate is not None and user_aggregate not in AGGREGATES:
            raise ValueError(f"user_aggregate must be one of {AGGREGATES} or None, "
                             f"got {user_aggregate!r}")
        if rank < 1:
            raise ValueError(f"rank must be >= 1, got {rank}")
        if regularization < 0:
            raise ValueError(f"regularization must be >= 0, got {regularization}")
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if patience < 1:
            raise ValueError(f"patience must be >= 1, got {patience}")
        if val_sample is not None and val_sample < 1:
            raise ValueError(f"val_sample must be >= 1 or None, got {val_sample}")
        self.run_name = name or type(self).__name__.lower()
        self.sizes: tuple[int, int, int] | None = None
        self._key: str | None = None
        self._loader_generator: torch.Generator | None = None
        self.data: ItemRecData | None = None
        self._train_sample: Queries | None = None
        self._val_queries: Queries | None = None
        self.best_epoch_: int | None = None
        self.history_: list[dict[str, float]] = []
        self.val_dcg = DCG(10)  # the validation queries' DCG@10: early stopping
        self.train_dcg = DCG(10)  # a sample of the training sets': the learning curve
        self._loss_sum: Tensor | float = 0.0
        self._loss_count = 0

    # ------------------------------------------------------------- to implement
    def build(self, n_users: int, n_items: int, n_tags: int) -> None:
        """Creates the parameters for the given sizes."""
        raise NotImplementedError

    def score(self, users: Tensor, tags: Tensor) -> Tensor:
        """Scores ``[B, n_items]`` of every item for ``(users [B], tags [B])``."""
        raise NotImplementedError

    def score_items(self, users: Tensor, tags: Tensor, items: Tensor) -> Tensor:
        """Scores ``[B, P]`` of the items ``[B, P]`` for ``(users [B], tags [B])``.

        This default gathers from :meth:`score`; subclasses score the rows directly (the cost
        ``B x P x r`` instead of ``B x n_items x r``).
        """
        return self.score(users, tags).gather(1, items)

    def set_loss(self, users: Tensor, tags: Tensor, items: Tensor, item_mask: Tensor) -> Tensor:
        """Training loss (scalar, minimized) of a batch of UTS sets.

        Args:
            users: ``[B]`` the sets' users.
            tags: ``[B]`` the sets' tags.
            items: ``[B, P]`` the sets' positive items, padded.
            item_mask: ``[B, P]`` bool, True at real positives.
        """
        raise NotImplementedError

    def lean_epochs(self, data: ItemRecData, device: torch.device) -> LeanEpochs:
        """The epochs of ``loop="lean"`` (:mod:`tagtorch.itemrec.lean`).

        By default autograd steps over :meth:`triple_loss` with the row-wise form of the
        ``optimizer`` setting (:class:`~tagtorch.itemrec.lean.AutogradTriples`).
        """
        tables = [p for p in self.parameters() if p.requires_grad]
        return AutogradTriples(self, torch.from_numpy(data.train).to(device),
                               RowOptimizer.from_setting(self.init_args["optimizer"], tables),
                               self.lean_batch_size)

    def triple_loss(self, take: RowTake, users: Tensor, items: Tensor, tags: Tensor) -> Tensor:
        """Training loss (scalar) of a step of triples, for ``loop="lean"``.

        Every factor row it reads comes through ``take`` (:class:`~tagtorch.itemrec.lean.
        RowTake`), which is how the loop knows the rows to update.

        Args:
            take: gathers factor rows: ``take(self.user_factors, users)``.
            users: ``[B]`` the triples' users (in user order).
            items: ``[B]`` their items.
            tags: ``[B]`` their tags.
        """
        raise NotImplementedError(f"{type(self).__name__} trains with loop='lightning' only")

    # ------------------------------------------------------------- helpers
    def _init_factor(self, n: int) -> nn.Parameter:
        return nn.Parameter(torch.randn(n, self.rank) * self.init_std)

    def negative_mask(self, users: Tensor) -> Tensor:
        """``[B, n_items]`` bool, True at the UTS negatives (items ``u`` never tagged)."""
        if self.data is None:
            raise RuntimeError("negative items are known during fit only")
        return self.data.negative_mask(users)

    # ------------------------------------------------------------- Lightning hooks
    def on_train_epoch_start(self) -> None:
        """Resets the epoch's loss sum."""
        self._loss_sum, self._loss_count = 0.0, 0

    def training_step(self, batch: list[Tensor], batch_idx: int) -> Tensor:
        """The subclass's loss on a batch of UTS sets."""
        loss = self.set_loss(*batch)
        self.log("train/loss", loss, on_step=False, on_epoch=True, batch_size=len(batch[0]),
                 sync_dist=True)
        self._loss_sum = self._loss_sum + loss.detach() * len(batch[0])
        self._loss_count += len(batch[0])
        return loss

    def on_validation_epoch_start(self) -> None:
        """Resets the DCG metrics."""
        self.val_dcg.reset()
        self.train_dcg.reset()

    def validation_step(self, batch: list[Tensor], batch_idx: int,
                        dataloader_idx: int = 0) -> None:
        """DCG@10 of validation queries (loader 0) or of training sets (loader 1).

        Validation queries are of the test queries' kind: per (user, tag) or per user.
        """
        rows, labels, mask = batch
        metric = self.val_dcg if dataloader_idx == 0 else self.train_dcg
        assert self.data is not None
        queries = self._val_queries if dataloader_idx == 0 else self._train_sample
        assert queries is not None
        scores = query_scores(self, queries, rows.cpu().numpy(), self.data.n_items,
                              self.data.n_tags, device=labels.device)
        metric.update(scores, labels, mask)

    def on_validation_epoch_end(self) -> None:
        """Logs ``val/dcg@10`` (the early-stopping monitor) and ``train/dcg@10``."""
        val, train = epoch_mean(self.val_dcg), epoch_mean(self.train_dcg)
        self.log("val/dcg@10", val, sync_dist=True)  # metrics summed over DDP processes: equal
        self.log("train/dcg@10", train, sync_dist=True)
        if not self.trainer.sanity_checking:
            loss = float(self._loss_sum) / max(self._loss_count, 1)
            self.history_.append({"epoch": float(self.current_epoch), "train_loss": loss,
                                  "train_dcg@10": train, "val_dcg@10": val})
            log.info("%s epoch %d: train loss %.4f, train DCG@10 %.4f, val DCG@10 %.4f",
                     self.run_name, self.current_epoch, loss, train, val)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        """The optimizer (default Adam, ``lr = 0.01``)."""
        make = self.init_args["optimizer"] or (lambda p: torch.optim.Adam(p, lr=0.01))
        return make(self.parameters())

    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        """Adds the learning curve, the settings key and the random generators' states."""
        checkpoint["tagtorch_history"] = [dict(row) for row in self.history_]
        checkpoint["tagtorch_settings"] = self._key
        checkpoint["tagtorch_random"] = self._random_state()

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        """Restores the learning curve and the random generators of a resumed training."""
        self.history_ = [dict(row) for row in checkpoint["tagtorch_history"]]
        self._restore_random_state(checkpoint["tagtorch_random"])

    # ------------------------------------------------------------- random state
    def _random_state(self) -> dict[str, Any]:
        """Every random generator that shapes the rest of training, as tensors and numbers."""
        _, keys, pos, has_gauss, gauss = cast(tuple[str, np.ndarray, int, int, float],
                                              np.random.get_state())
        version, internal, gauss_next = random.getstate()
        cuda = (list(torch.cuda.get_rng_state_all())
                if torch.cuda.is_available() and torch.cuda.is_initialized() else [])
        return {"torch": torch.get_rng_state(), "cuda": cuda,
                "loader": self._loader_generator.get_state()
                if self._loader_generator is not None else None,
                "numpy": {"keys": torch.from_numpy(keys.astype(np.int64)), "pos": int(pos),
                          "has_gauss": int(has_gauss), "gauss": float(gauss)},
                "python": {"version": version, "internal": list(internal),
                           "gauss_next": gauss_next}}

    @staticmethod
    def _parse_random_state(state: Any) -> dict[str, Any]:
        """The generators' states in the form their setters take.

        Raises:
            ValueError: if ``state`` is malformed (checked before anything is restored).
        """
        def byte_state(value: Any, like: Tensor) -> Tensor:
            if not (isinstance(value, Tensor) and value.dtype == torch.uint8
                    and value.shape == like.shape):
                raise ValueError("expected a generator state like torch's")
            return value

        try:
            numpy_state, python = state["numpy"], state["python"]
            keys = numpy_state["keys"]
            if not isinstance(keys, Tensor) or keys.shape != (624,):
                raise ValueError("expected 624 Mersenne Twister keys")
            internal = tuple(int(v) for v in python["internal"])
            if len(internal) != 625:
                raise ValueError("expected Python's 625 state words")
            gauss_next = python["gauss_next"]
            cuda = list(state["cuda"])
            if any(not isinstance(c, Tensor) or c.dtype != torch.uint8 for c in cuda):
                raise ValueError("expected CUDA generator states")
            cpu = torch.get_rng_state()
            return {
                "torch": byte_state(state["torch"], cpu), "cuda": cuda,
                "loader": byte_state(state["loader"], cpu),
                "numpy": ("MT19937", keys.numpy().astype(np.uint32), int(numpy_state["pos"]),
                          int(numpy_state["has_gauss"]), float(numpy_state["gauss"])),
                "python": (int(python["version"]), internal,
                           None if gauss_next is None else float(gauss_next))}
        except (KeyError, TypeError, AttributeError) as error:
            raise ValueError(f"malformed random state ({error!r})") from error

    def _restore_random_state(self, state: Any) -> None:
        """Sets every generator to the state of :meth:`_random_state`."""
        parsed = self._parse_random_state(state)
        torch.set_rng_state(parsed["torch"])
        if parsed["cuda"] and torch.cuda.is_available() \
                and len(parsed["cuda"]) == torch.cuda.device_count():
            torch.cuda.set_rng_state_all(parsed["cuda"])
        np.random.set_state(parsed["numpy"])
        random.setstate(parsed["python"])
        if self._loader_generator is not None:
            self._loader_generator.set_state(parsed["loader"])

    # ------------------------------------------------------------- checkpoints
    def settings_key(self, data: ItemRecData) -> str:
        """What a checkpoint must have been trained with to be resumed (JSON).

        The class, the settings, the data sizes and :meth:`ItemRecData.fingerprint`. The
        trainer, the checkpoint folder and the name do not count (a resumed run may raise
        ``max_epochs``); the optimizer counts by its ``repr``.
        """
        args = {k: v for k, v in self.init_args.items()
                if k not in ("trainer", "checkpoint_dir", "name")}
        return json.dumps({"class": class_name(type(self)), "settings": args,
                           "sizes": [data.n_users, data.n_items, data.n_tags],
                           "data": data.fingerprint()}, sort_keys=True, default=repr)

    def run_folder(self, data: ItemRecData) -> Path | None:
        """The training folder of ``fit(data)``: ``{checkpoint_dir}/runs/{key}``.

        None without ``checkpoint_dir``; the layout is in the class docstring.
        """
        if self.init_args["checkpoint_dir"] is None:
            return None
        digest = hashlib.sha256(self.settings_key(data).encode()).hexdigest()[:16]
        return Path(self.init_args["checkpoint_dir"]) / "runs" / digest

    def _check_checkpoint(self, path: Path, resumable: bool) -> None:
        """Reads a checkpoint safely and checks that it belongs to this training.

        Raises:
            UnreadableFileError: naming the file, if it cannot be read safely or does not
                match (other settings or data, other weights, missing training state).
        """
        state = read_checkpoint(path)
        if state.get("tagtorch_settings") != self._key:
            raise UnreadableFileError(f"{path}: was trained with other settings or data")
        weights = state.get("state_dict")
        expected = {k: v.shape for k, v in self.state_dict().items()}
        if not isinstance(weights, dict) or {
                k: getattr(v, "shape", None) for k, v in weights.items()} != expected:
            raise UnreadableFileError(f"{path}: its weights do not fit the model")
        if not isinstance(state.get("epoch"), int):
            raise UnreadableFileError(f"{path}: no epoch")
        if resumable:
            missing = {"loops", "callbacks", "optimizer_states", "lr_schedulers",
                       "tagtorch_history", "tagtorch_random"} - set(state)
            if missing:
                raise UnreadableFileError(f"{path}: lacks the training state {sorted(missing)}")
            history = state["tagtorch_history"]
            if not isinstance(history, list) or not all(isinstance(h, dict) for h in history):
                raise UnreadableFileError(f"{path}: its learning curve is malformed")
            try:
                self._parse_random_state(state["tagtorch_random"])
            except ValueError as error:
                raise UnreadableFileError(f"{path}: {error}") from error

    def _resumable(self, folder: Path) -> Path | None:
        """``folder``'s ``last.ckpt`` if training can resume from it, else None.

        Unusable files are discarded (``last.ckpt`` and ``best.ckpt``, so that training starts
        over) with a warning naming the file.
        """
        last, best = folder / "last.ckpt", folder / "best.ckpt"
        if not last.is_file():
            return None
        try:
            self._check_checkpoint(last, resumable=True)
            if not best.is_file():
                raise UnreadableFileError(f"{best}: missing beside {last}")
            self._check_checkpoint(best, resumable=False)
        except UnreadableFileError as error:
            log.warning("%s: %s; discarding it and starting over", self.run_name, error)
            return None
        return last

    # ------------------------------------------------------------- loaders
    def _train_loader(self, sets: UserTagSets, generator: torch.Generator) -> DataLoader:
        return DataLoader(_SetIndex(len(sets)), batch_size=self.batch_size, shuffle=True,
                          collate_fn=_SetBatch(sets), generator=generator)

    def _query_loader(self, queries: Queries, n_items: int) -> DataLoader:
        return DataLoader(_SetIndex(len(queries)), batch_size=512,
                          collate_fn=_QueryBatch(queries, n_items))

    def _validation_queries(self, data: ItemRecData) -> Queries:
        """The validation queries early stopping scores: all, or a seeded ``val_sample``."""
        queries = data.val_queries
        if self.val_sample is None or self.val_sample >= len(queries):
            return queries
        rng = np.random.default_rng(self.seed)
        return queries.take(np.sort(rng.permutation(len(queries))[: self.val_sample]))

    def _train_queries(self, data: ItemRecData) -> Queries:
        """A seeded sample of the training sets, as queries with nothing excluded."""
        sets = data.train_sets
        rng = np.random.default_rng(self.seed)
        rows = np.sort(rng.permutation(len(sets))[: self.train_sample])
        gold = sets.items.take(rows)
        empty = type(gold)(np.zeros(len(rows) + 1, dtype=np.int64), np.zeros(0, dtype=np.int64))
        return Queries(sets.users[rows], sets.tags[rows], gold, empty)

    # ------------------------------------------------------------- ItemRanker interface
    def fit(self, data: ItemRecData) -> Self:
        """Trains on ``data.train``, early-stopping on ``data.val``'s queries.

        ``loop="lightning"``: Lightning over UTS sets, resuming from the training folder's
        ``last.ckpt`` when there is a usable one (see the class docstring); ``loop="lean"``:
        the lean loop of :mod:`tagtorch.itemrec.lean`.
        """
        if len(data.train_sets) == 0:
            raise ValueError("no training triples")
        if len(data.val_queries) == 0:
            raise ValueError("no validation queries for early stopping")
        pl.seed_everything(self.seed, workers=True, verbose=False)
        self.sizes = (data.n_users, data.n_items, data.n_tags)
        self._key = self.settings_key(data)
        self.build(*self.sizes)
        self.data = data
        self.history_ = []
        self.best_epoch_ = None
        self._train_sample = self._train_queries(data)
        self._val_queries = self._validation_queries(data)
        try:
            if self.loop == "lean":
                trainer = self.init_args["trainer"]
                with _deterministic_algorithms():
                    outcome = train_lean(self, data, epochs_of(trainer), device_of(trainer))
                self.history_, self.best_epoch_ = outcome.history, outcome.best_epoch
            else:
                self._fit_sets(data)
        finally:
            self.data = None
            self._train_sample = self._val_queries = None
            self._loader_generator = None
        log.info("%s: best val DCG@10 at epoch %s of %d", self.run_name, self.best_epoch_,
                 len(self.history_))
        return self.cpu().eval()

    def _fit_sets(self, data: ItemRecData) -> None:
        """Lightning's loop over the UTS sets, with checkpoints and resumption."""
        folder = self.run_folder(data)
        scratch = None
        if folder is None:
            import tempfile

            scratch = tempfile.TemporaryDirectory(prefix="tagtorch-itemrec-")
            folder = Path(scratch.name)
        folder.mkdir(parents=True, exist_ok=True)
        with atomic_write(folder / "settings.json") as partial:  # never through a link
            partial.write_text(json.dumps(json.loads(self._key or "{}"), indent=1))
        # every epoch (no monitor: the newest is kept), for resuming after an interruption
        latest = ModelCheckpoint(dirpath=folder, filename="last", save_top_k=1,
                                 enable_version_counter=False)
        resume = self._resumable(folder)
        if resume is not None:
            log.info("%s: resuming from %s", self.run_name, resume)
        else:  # a fresh training: files of an earlier (finished or unusable) one do not count
            for name in ("last.ckpt", "best.ckpt"):
                (folder / name).unlink(missing_ok=True)
        # the batch order's generator: its state is checkpointed and restored on resumption
        self._loader_generator = torch.Generator().manual_seed(self.seed)
        assert self._val_queries is not None and self._train_sample is not None
        try:
            best = fit_best(
                self, self._train_loader(data.train_sets, self._loader_generator),
                [self._query_loader(self._val_queries, data.n_items),
                 self._query_loader(self._train_sample, data.n_items)],
                monitor="val/dcg@10", folder=folder, best_name="best", patience=self.patience,
                trainer=self.init_args["trainer"], max_epochs=50, extra_callbacks=[latest],
                ckpt_path=resume, fit_context=_quiet_deterministic, num_sanity_val_steps=0)
            self.best_epoch_ = best.epoch
            (folder / "last.ckpt").unlink(missing_ok=True)  # finished: a later fit starts over
        finally:
            if scratch is not None:
                scratch.cleanup()

    def epoch_dcg(self) -> tuple[float, float]:
        """DCG@10 of the validation queries and of the training sample (during fit)."""
        if self.data is None or self._val_queries is None or self._train_sample is None:
            raise RuntimeError("epoch_dcg measures during fit only")
        values = []
        for queries in (self._val_queries, self._train_sample):
            metric = DCG(10)
            for _, scores, labels, mask in score_queries(self, queries, self.data.n_items,
                                                         self.data.n_tags, batch_size=512):
                metric.update(scores, labels, mask)
            values.append(epoch_mean(metric))
        return values[0], values[1]

    def _plain_settings(self) -> dict[str, Any]:
        """The constructor arguments that JSON can hold (the callables are left out)."""
        settings = {k: v for k, v in self.init_args.items() if k not in ("optimizer", "trainer")}
        if settings.get("checkpoint_dir") is not None:
            settings["checkpoint_dir"] = str(settings["checkpoint_dir"])
        return settings

    def save(self, path: str | Path) -> None:
        """Writes the model folder: ``manifest.json`` and ``weights.pt`` (tensors only).

        The manifest holds the class, the settings (the optimizer and the trainer, callables,
        only by their ``repr``, for reference), the sizes, the best epoch and the learning
        curve, and the weights' SHA-256.
        """
        if self.sizes is None:
            raise RuntimeError(f"{type(self).__name__} is not fitted: nothing to save")
        folder = model_folder(path)
        save_tensors(self.state_dict(), folder / "weights.pt")
        write_manifest(folder, type(self), self._plain_settings(), ["weights.pt"],
                       sizes=list(self.sizes), best_epoch=self.best_epoch_,
                       history=self.history_,
                       callables={k: repr(self.init_args[k]) for k in ("optimizer", "trainer")})

    @classmethod
    def load(cls, path: str | Path, **settings: Any) -> Self:
        """Reads a model folder written by :meth:`save`.

        Args:
            path: the folder.
            **settings: constructor arguments that replace the saved ones (the optimizer and
                the trainer are not saved: pass them to train the loaded model further).

        Raises:
            UnreadableFileError: naming the file that is missing, altered or unsafe.
        """
        folder = Path(path)
        manifest = read_manifest(folder, cls, saved_entries(folder))
        weights = load_tensors(folder / "weights.pt")
        try:
            model = cls(**{**manifest["settings"], **settings})
            model.sizes = (int(manifest["sizes"][0]), int(manifest["sizes"][1]),
                           int(manifest["sizes"][2]))
            model.build(*model.sizes)
            model.load_state_dict(weights)
        except (KeyError, TypeError, ValueError, IndexError, RuntimeError) as error:
            raise UnreadableFileError(f"{folder / 'manifest.json'}: does not describe the "
                                      f"weights beside it ({error})") from error
        model.best_epoch_ = manifest.get("best_epoch")
        model.history_ = list(manifest.get("history", []))
        return model.eval()
