"""The lean training loop of the factorization models (ours): big steps, row-wise updates.

``FactorModel(loop="lean")`` trains through :func:`train_lean` instead of Lightning's loop over
UTS sets (``loop="lightning"``, the default, which the experiments of
``docs/dorank_results.md`` use). It is for data far past HetRec's (millions of triples,
hundreds of thousands of items), where a step of a few dozen padded sets and an optimizer that
updates every row of every factor matrix leave the CPU waiting on Python and on memory. Each
model says how its epoch runs (:meth:`~tagtorch.itemrec.base.FactorModel.lean_epochs`):

- **PITF**: LearnBPR, the per-triple SGD of the PITF and BPR papers, in a compiled kernel
  (:class:`~tagtorch.itemrec.pitf.LearnBPR`);
- **Do-Rank and Do-Rank+ with sampled negatives** (:class:`AutogradTriples`): each step takes
  ``lean_batch_size`` triples of a seeded shuffle of ``data.train`` (in user order inside the
  step, so that the negatives' checks read each user's items once; the order of a step's
  triples does not change its loss); the model's ``triple_loss`` gathers every factor row it
  needs through a :class:`RowTake` (leaf copies of the rows: the backward pass computes the
  gradients of the rows a step touches, never of whole factor matrices); :class:`RowOptimizer`
  updates those rows, by row-wise ("lazy") Adam, the update of :class:`torch.optim.SparseAdam`
  (the moments of rows a step does not touch are left as they are), or plain SGD;
- **Do-Rank's fast learning** (every negative, as published;
  :class:`~tagtorch.itemrec.dorank.FastLearning`): steps of UTS sets with the gradient of the
  smoothed DCG written out, blocks of positives x all items at a time.

After every epoch, DCG@10 on the validation queries and on a sample of the training sets is
measured and kept in ``history_`` as in the Lightning loop; training stops after ``patience``
epochs without a better validation DCG@10 and the best epoch's weights are restored.

What differs from ``loop="lightning"``:

- with sampled negatives the unit of a step is a triple, not a UTS set: the loss is the mean
  over a step's triples (a set's terms weigh by its size), and a set's L2 penalty on its user
  and tag rows is counted once per triple (as in PITF's and BPR's per-sample updates); the
  ``n`` draws are made once per step and shared by all its triples (per set in the Lightning
  loop), so that their scores are one matrix product; each triple's estimate of ``R_i - 1``
  is still unbiased (:class:`~tagtorch.itemrec.dorank.DoRank`);
- Adam is row-wise (above): a row's moments decay only in the steps that touch it; PITF's
  kernel is plain SGD;
- no checkpoint and no resumption (``checkpoint_dir`` is not used by this loop); the number of
  epochs is the ``trainer`` setting's ``max_epochs`` (50 without one); it runs on the CPU, or
  (except PITF's kernel) on CUDA where the ``trainer`` setting's ``accelerator`` is
  ``"auto"``, ``"gpu"`` or ``"cuda"`` and there is one.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import torch
from torch import Tensor, nn

from tagtorch.progress import progress

if TYPE_CHECKING:
    from tagtorch.itemrec.base import FactorModel
    from tagtorch.itemrec.data import ItemRecData

log = logging.getLogger(__name__)

__all__ = [
    "AutogradTriples",
    "LeanEpochs",
    "LeanFit",
    "RowOptimizer",
    "RowTake",
    "device_of",
    "epochs_of",
    "train_lean",
]


class RowTake:
    """Gathers factor rows as leaves of the step's graph and remembers where they came from.

    Example:
        >>> table = nn.Parameter(torch.arange(6.0).view(3, 2))
        >>> take = RowTake()
        >>> rows = take(table, torch.tensor([2, 0, 2]))
        >>> rows.sum().backward()
        >>> [(index.tolist(), taken.grad.tolist()) for _, index, taken in take.taken]
        [([2, 0, 2], [[1.0, 1.0], [1.0, 1.0], [1.0, 1.0]])]
    """

    def __init__(self) -> None:
        self.taken: list[tuple[Tensor, Tensor, Tensor]] = []

    def __call__(self, table: Tensor, index: Tensor) -> Tensor:
        """``table[index]``, detached from ``table``, as a leaf whose gradient is kept."""
        rows = table.detach()[index].requires_grad_()
        self.taken.append((table, index, rows))
        return rows


class RowOptimizer:
    """Row-wise Adam (as :class:`torch.optim.SparseAdam`) or SGD on the rows a step touched.

    Args:
        tables: the factor matrices (and bias vectors) it updates, rows along dimension 0.
        lr: the learning rate.
        adam: row-wise Adam; False: plain SGD.
        betas: Adam's ``(beta1, beta2)``.
        eps: Adam's ``eps``.
    """

    def __init__(self, tables: Sequence[Tensor], lr: float, adam: bool = True,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8) -> None:
        self.lr, self.adam, self.betas, self.eps = lr, adam, betas, eps
        self.moments = {id(t): (torch.zeros_like(t), torch.zeros_like(t)) for t in tables} \
            if adam else {}
        self.steps = {id(t): 0 for t in tables}

    @classmethod
    def from_setting(cls, make: Callable[..., torch.optim.Optimizer] | None,
                     tables: Sequence[nn.Parameter]) -> RowOptimizer:
        """The row-wise form of a model's ``optimizer`` setting (default: Adam, lr 0.01).

        Raises:
            ValueError: for an optimizer other than Adam or SGD, or settings without a
                row-wise form (weight decay, momentum, AMSGrad).
        """
        if make is None:
            return cls(tables, lr=0.01)
        built = make([nn.Parameter(torch.zeros(1))])
        settings = built.defaults
        if type(built) is torch.optim.Adam and not settings.get("amsgrad") \
                and not settings.get("weight_decay"):
            return cls(tables, float(settings["lr"]), betas=tuple(settings["betas"]),
                       eps=float(settings["eps"]))
        if type(built) is torch.optim.SGD and not settings.get("momentum") \
                and not settings.get("weight_decay"):
            return cls(tables, float(settings["lr"]), adam=False)
        raise ValueError("loop='lean' updates rows with Adam or SGD (no weight decay, "
                         f"momentum or AMSGrad; the L2 penalty is the model's): got {built!r}")

    def step(self, take: RowTake) -> None:
        """Updates every table's rows that ``take`` gathered, by their gradients."""
        grouped: dict[int, tuple[Tensor, list[Tensor], list[Tensor]]] = {}
        for table, index, rows in take.taken:
            if rows.grad is not None:
                entry = grouped.setdefault(id(table), (table, [], []))
                entry[1].append(index)
                entry[2].append(rows.grad)
        for table, indices, grads in grouped.values():
            self.update(table, torch.cat(indices), torch.cat(grads))

    @torch.no_grad()
    def update(self, table: Tensor, index: Tensor | None, grad: Tensor) -> None:
        """One update of ``table``'s rows ``index`` by ``grad`` (a repeated row: summed).

        ``index=None``: every row, ``grad`` the whole table's gradient.
        """
        key = id(table)
        self.steps[key] += 1
        if index is None:
            self._update(table, key, None, grad)
            return
        unique, inverse = torch.unique(index, return_inverse=True)
        summed = grad.new_zeros((len(unique), *grad.shape[1:])).index_add_(0, inverse, grad)
        self._update(table, key, unique, summed)

    def _update(self, table: Tensor, key: int, rows: Tensor | None, grad: Tensor) -> None:
        if not self.adam:
            if rows is None:
                table.add_(grad, alpha=-self.lr)
            else:
                table.index_add_(0, rows, grad, alpha=-self.lr)
            return
        beta1, beta2 = self.betas
        first, second = self.moments[key]
        m = first if rows is None else first[rows]
        v = second if rows is None else second[rows]
        m.lerp_(grad, 1 - beta1)  # beta1 m + (1 - beta1) g
        v.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
        t = self.steps[key]
        step_size = self.lr * math.sqrt(1 - beta2**t) / (1 - beta1**t)
        change = m / (v.sqrt() + self.eps)
        if rows is None:
            table.add_(change, alpha=-step_size)
            return
        first[rows], second[rows] = m, v
        table.index_add_(0, rows, change, alpha=-step_size)


@dataclass
class LeanFit:
    """The outcome of :func:`train_lean`: the learning curve and the best epoch."""

    history: list[dict[str, float]] = field(default_factory=list)
    best_epoch: int | None = None


class LeanEpochs(Protocol):
    """Runs one epoch over its ``units`` (triples, or UTS sets) in a given order."""

    units: int
    """How many units an epoch passes over (the length of ``order``)."""

    def run(self, order: Tensor) -> float:
        """One pass over the units in ``order`` (a permutation); the mean loss."""
        ...


class AutogradTriples:
    """Epochs of autograd steps over the model's ``triple_loss`` (module docstring).

    Each step takes ``steps`` triples; :class:`RowOptimizer` updates the rows it gathered.

    Args:
        model: the model (``data`` set on it).
        train: ``[N, 3]`` the training triples, on the model's device.
        optimizer: updates the rows each step gathered.
        steps: triples per update.
    """

    def __init__(self, model: FactorModel, train: Tensor, optimizer: RowOptimizer,
                 steps: int) -> None:
        self.model, self.train, self.optimizer, self.steps = model, train, optimizer, steps
        self.units = len(train)

    def run(self, order: Tensor) -> float:
        """One pass over ``train[order]``; the mean loss."""
        total, seen = 0.0, 0
        for start in range(0, len(order), self.steps):
            batch = self.train[order[start : start + self.steps]]
            batch = batch[torch.argsort(batch[:, 0], stable=True)]  # user order (module doc)
            take = RowTake()
            loss = self.model.triple_loss(take, batch[:, 0], batch[:, 1], batch[:, 2])
            loss.backward()
            self.optimizer.step(take)
            total += float(loss.detach()) * len(batch)
            seen += len(batch)
        return total / max(seen, 1)


def train_lean(model: FactorModel, data: ItemRecData, max_epochs: int,
               device: torch.device) -> LeanFit:
    """Trains ``model`` (its parameters built) on ``data.train`` by the loop of this module.

    Args:
        model: a factorization model that trains on triples (its :meth:`~tagtorch.itemrec.
            base.FactorModel.lean_epochs`), ``data`` set on it for the negatives' checks.
        data: the split (training triples; validation queries for early stopping).
        max_epochs: the most epochs.
        device: where the factors live during training.

    Returns:
        The learning curve (as ``FactorModel.history_``) and the best epoch, whose weights
        ``model`` holds on return.
    """
    model.to(device)
    model.on_fit_start()  # as Lightning's loop calls it (Do-Rank: the negatives' distribution)
    epochs = model.lean_epochs(data, device)
    generator = torch.Generator().manual_seed(model.seed)
    fit, best, best_state, stale = LeanFit(), -math.inf, None, 0
    for epoch in progress(range(max_epochs), f"{model.run_name} epochs", unit="epoch"):
        order = torch.randperm(epochs.units, generator=generator).to(device)
        loss = epochs.run(order)
        val, train_dcg = model.epoch_dcg()
        fit.history.append({"epoch": float(epoch), "train_loss": loss,
                            "train_dcg@10": train_dcg, "val_dcg@10": val})
        log.info("%s epoch %d: train loss %.4f, train DCG@10 %.4f, val DCG@10 %.4f",
                 model.run_name, epoch, loss, train_dcg, val)
        if not np.isfinite(loss):
            raise FloatingPointError(f"{model.run_name}: the training loss is {loss}")
        if val > best:
            best, fit.best_epoch, stale = val, epoch, 0
            best_state = {k: v.detach().clone() for k, v in model.state_dict().items()}
        else:
            stale += 1
            if stale >= model.patience:
                break
    if best_state is not None:
        model.load_state_dict(best_state)
    return fit


def device_of(trainer: Callable[..., Any] | None) -> torch.device:
    """The device of the lean loop: CUDA where the trainer setting allows it and it exists."""
    keywords = getattr(trainer, "keywords", {}) or {}
    wants_gpu = str(keywords.get("accelerator", "cpu")) in ("auto", "gpu", "cuda")
    return torch.device("cuda" if wants_gpu and torch.cuda.is_available() else "cpu")


def epochs_of(trainer: Callable[..., Any] | None, default: int = 50) -> int:
    """The trainer setting's ``max_epochs`` (``default`` without one)."""
    keywords = getattr(trainer, "keywords", {}) or {}
    value = keywords.get("max_epochs")
    return int(value) if value is not None and int(value) > 0 else default
