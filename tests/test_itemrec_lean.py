"""The lean training loop (``loop="lean"``): row updates, losses and fits, against references."""

from __future__ import annotations

import functools
import math

import numpy as np
import pytest
import pytorch_lightning as pl
import torch
from torch import Tensor, nn

from tagtorch.itemrec.baselines import ProbabilisticCP
from tagtorch.itemrec.data import ItemRecData
from tagtorch.itemrec.dorank import DoRank
from tagtorch.itemrec.dorank_plus import DoRankPlus
from tagtorch.itemrec.lean import RowOptimizer, RowTake, device_of, epochs_of
from tagtorch.itemrec.pitf import PITF


def random_data(seed: int = 0, n_users: int = 6, n_items: int = 9, n_tags: int = 4,
                n: int = 40) -> ItemRecData:
    rng = np.random.default_rng(seed)
    triples = np.unique(np.stack([rng.integers(0, n_users, n), rng.integers(0, n_items, n),
                                  rng.integers(0, n_tags, n)], 1), axis=0)
    return ItemRecData.from_triples("random", n_users, n_items, n_tags, triples[:-4],
                                    triples[-4:-2], triples[-2:], "triples")


def test_tagged_is_membership_in_the_training_pairs():
    data = random_data()
    known = set(map(tuple, data.train[:, :2].tolist()))
    users = torch.arange(6).repeat_interleave(9)
    items = torch.arange(9).repeat(6)[:, None].expand(-1, 3)
    got = data.tagged(users, items)
    expected = [[(u, i) in known] * 3 for u, i in zip(users.tolist(), items[:, 0].tolist(),
                                                      strict=True)]
    assert got.tolist() == expected


def sparse_gradient(index: torch.Tensor, values: torch.Tensor, n: int) -> torch.Tensor:
    return torch.sparse_coo_tensor(index[None], values, (n, values.shape[1]),
                                   check_invariants=True)


@pytest.mark.parametrize("adam", [True, False], ids=["adam", "sgd"])
def test_row_updates_match_torch_sparse_adam_and_sgd(adam):
    g = torch.Generator().manual_seed(0)
    start = torch.randn(10, 3, generator=g, dtype=torch.float64)
    ours, reference = start.clone(), nn.Parameter(start.clone())
    optimizer = RowOptimizer([ours], lr=0.05, adam=adam)
    torch_optimizer = (torch.optim.SparseAdam([reference], lr=0.05) if adam
                       else torch.optim.SGD([reference], lr=0.05))
    for _ in range(4):  # rows gathered twice (5), rows never touched (the rest)
        index = torch.tensor([1, 5, 7, 5])
        grad = torch.randn(4, 3, generator=g, dtype=torch.float64)
        take = RowTake()
        rows = take(ours, index)
        (rows * grad).sum().backward()
        optimizer.step(take)
        reference.grad = sparse_gradient(index, grad, 10).coalesce()
        if not adam:
            reference.grad = reference.grad.to_dense()
        torch_optimizer.step()
    torch.testing.assert_close(ours, reference.detach())
    torch.testing.assert_close(ours[[0, 2, 9]], start[[0, 2, 9]])


def test_optimizer_settings_without_a_row_wise_form_are_refused():
    tables = [nn.Parameter(torch.zeros(3, 2))]
    adam = RowOptimizer.from_setting(functools.partial(torch.optim.Adam, lr=0.3), tables)
    assert adam.adam and adam.lr == 0.3
    assert not RowOptimizer.from_setting(functools.partial(torch.optim.SGD, lr=0.1), tables).adam
    for make in (functools.partial(torch.optim.SGD, lr=0.1, momentum=0.9),
                 functools.partial(torch.optim.Adam, weight_decay=0.1),
                 functools.partial(torch.optim.RMSprop)):
        with pytest.raises(ValueError, match="Adam or SGD"):
            RowOptimizer.from_setting(make, tables)


def test_learn_bpr_takes_sgd_steps_on_the_pitf_pair_loss():
    """The compiled kernel against autograd of PITF's pair loss, one pair at a time."""
    data = random_data()
    model = PITF(rank=4, loop="lean", regularization=0.01,
                 optimizer=functools.partial(torch.optim.SGD, lr=0.1))
    torch.manual_seed(0)
    model.build(data.n_users, data.n_items, data.n_tags)
    epochs = model.lean_epochs(data, torch.device("cpu"))
    u, i, t = (int(v) for v in data.train[0])
    in_set = {int(j) for j in data.train[(data.train[:, 0] == u) & (data.train[:, 2] == t), 1]}
    outside = next(j for j in range(data.n_items) if j not in in_set)
    epochs.rng = FixedDraws([outside, i])  # a draw outside the set, then one inside (skipped)
    tables = (model.user_factors, model.tag_factors, model.item_user_factors,
              model.item_tag_factors)
    leaves = [p.detach().clone().requires_grad_() for p in tables]
    user, tag, item_user, item_tag = leaves
    j = torch.tensor([outside])
    loss = model._bpr_loss(user[[u]], tag[[t]], (item_user[[i]], item_tag[[i]]),
                           (item_user[j], item_tag[j]), torch.tensor([True]))
    loss.backward()
    mean = epochs.run(torch.tensor([0, 0]))
    assert mean == pytest.approx(loss.item(), rel=1e-5)
    for table, leaf in zip(tables, leaves, strict=True):
        torch.testing.assert_close(table.detach(), (leaf - 0.1 * leaf.grad).detach(),
                                   rtol=1e-5, atol=1e-6)


class FixedDraws:
    """Stands in for the kernel's generator: returns the given draws."""

    def __init__(self, draws: list[int]) -> None:
        self.draws = draws

    def integers(self, low: int, high: int, size: int) -> np.ndarray:
        return np.asarray(self.draws[:size], dtype=np.int64)


def test_pitf_triples_loop_needs_sgd_on_the_cpu():
    data = random_data()
    model = PITF(rank=4, loop="lean", optimizer=functools.partial(torch.optim.Adam, lr=0.1))
    model.build(data.n_users, data.n_items, data.n_tags)
    with pytest.raises(ValueError, match="SGD"):
        model.lean_epochs(data, torch.device("cpu"))
    with pytest.raises(ValueError, match="CPU"):
        PITF(loop="lean").lean_epochs(data, torch.device("cuda"))


def plain_dorank_plus_loss(model: DoRankPlus, data: ItemRecData, triples: list[tuple[int, ...]],
                           drawn: list[int], probabilities: torch.Tensor) -> float:
    """Minus the mean smoothed DCG of single positives against shared draws, plus L2."""
    user_f, item_f, tag_f = (p.detach() for p in (model.user_factors, model.item_factors,
                                                  model.tag_factors))
    bias, tag_item_t, tag_item_i = (p.detach() for p in (model.item_bias, model.tag_item_tags,
                                                          model.tag_item_items))
    tagged = set(map(tuple, data.train[:, :2].tolist()))
    n = len(drawn)

    def score(u: int, i: int, t: int) -> float:
        return float((user_f[u] * item_f[i] * tag_f[t]).sum() + bias[i]
                     + tag_item_t[t] @ tag_item_i[i])

    total = 0.0
    for u, i, t in triples:
        s_i = score(u, i, t)
        ahead = sum(1 / (n * float(probabilities[j])) / (1 + math.exp(-(score(u, j, t) - s_i)))
                    for j in drawn if (u, j) not in tagged)
        norms = sum(float(r @ r) for r in (user_f[u], tag_f[t], item_f[i], tag_item_t[t],
                                           tag_item_i[i])) + float(bias[i]) ** 2
        total += -1 / math.log2(2 + ahead) + 0.5 * model.regularization * norms
    return total / len(triples)


def test_dorank_plus_triple_loss_matches_a_plain_loop_with_shared_draws():
    data = random_data(n_items=30, n=120)
    model = DoRankPlus(rank=3, loop="lean", negatives=7, negative_power=1.0,
                       regularization=0.01)
    torch.manual_seed(0)
    model.build(data.n_users, data.n_items, data.n_tags)
    with torch.no_grad():
        model.item_bias.normal_()
    model.data = data
    model.on_fit_start()
    triples = torch.from_numpy(data.train[:10])
    torch.manual_seed(3)
    loss = model.triple_loss(RowTake(), triples[:, 0], triples[:, 1], triples[:, 2])
    torch.manual_seed(3)
    probabilities = model._draw_probabilities
    assert probabilities is not None
    drawn = torch.multinomial(probabilities, 7, replacement=True).tolist()
    expected = plain_dorank_plus_loss(model, data, [tuple(t) for t in data.train[:10].tolist()],
                                      drawn, probabilities)
    assert loss.item() == pytest.approx(expected, rel=1e-5)


@pytest.mark.parametrize(("temperature", "power", "rule"), [
    (1.0, 0.0, "sgd"), (0.5, 1.0, "sgd"), (0.5, 1.0, "adagrad")])
def test_dorank_plus_kernel_steps_on_the_autograd_triple_loss(temperature, power, rule):
    """The compiled kernel (SampledDCG) against autograd of Do-Rank+'s own triple terms.

    One triple against three draws, one of them an item its user tagged (weight 0): the loss
    the kernel reports and every row after its step equal the step of torch's own SGD or
    Adagrad on autograd's gradient of
    ``-1 / log2(2 + sum_j w_j sigmoid((s_j - s_i) / tau)) + lambda / 2 * penalty``.
    """
    from tagtorch.itemrec.dorank import smoothed_dcg_fast
    from tagtorch.itemrec.dorank_plus import SampledDCG

    data = random_data(n_items=30, n=120)
    torch_rule = torch.optim.SGD if rule == "sgd" else torch.optim.Adagrad
    model = DoRankPlus(rank=3, loop="lean", negatives=3, negative_power=power,
                       regularization=0.05, temperature=temperature,
                       optimizer=functools.partial(torch_rule, lr=0.2))
    torch.manual_seed(0)
    model.build(data.n_users, data.n_items, data.n_tags)
    with torch.no_grad():
        model.item_bias.normal_()
    epochs = model.lean_epochs(data, torch.device("cpu"))
    assert isinstance(epochs, SampledDCG)
    u, i, t = (int(v) for v in data.train[5])
    tagged = {int(j) for j in data.train[data.train[:, 0] == u, 1]}
    free = [j for j in range(data.n_items) if j not in tagged]
    drawn = [free[0], i if i != free[0] else next(iter(tagged)), free[3]]
    epochs.draw = lambda n: np.asarray([drawn] * n, dtype=np.int64)
    counts = np.bincount(data.train[:, 1], minlength=data.n_items) + 1.0
    q = torch.from_numpy(counts ** power / (counts ** power).sum())
    weights = torch.tensor([0.0 if j in tagged else float(1 / (3 * q[j])) for j in drawn])
    positive, against, penalty = model.triple_terms(
        lambda table, index: table[index], torch.tensor([u]), torch.tensor([i]),
        torch.tensor([t]), torch.tensor(drawn))
    dcg = smoothed_dcg_fast(positive[:, None], torch.ones(1, 1, dtype=torch.bool), against,
                            weights[None].float(), temperature)
    loss = (-dcg + 0.5 * model.regularization * penalty).mean()
    loss.backward()
    tables = [p for p in model.parameters() if p.grad is not None]
    reference = [nn.Parameter(p.detach().clone()) for p in tables]
    for ref, p in zip(reference, tables, strict=True):
        ref.grad = p.grad.clone()
    torch_rule(reference, lr=0.2).step()
    expected = [ref.detach() for ref in reference]
    mean = epochs.run(torch.tensor([5]))
    assert mean == pytest.approx(loss.item(), rel=1e-5)
    for table, want in zip(tables, expected, strict=True):
        torch.testing.assert_close(table.detach(), want, rtol=1e-5, atol=1e-6)


def fast_gradients_and_autograd(model: DoRank, data: ItemRecData, rows: np.ndarray,
                                block: int) -> tuple[float, float, list[tuple[Tensor, Tensor]]]:
    """FastLearning's loss and gradients of the sets ``rows`` (blocks of ``block`` positives)
    beside autograd's of ``DoRank.set_loss``: ``(loss, expected, [(got, want) per factor])``."""
    torch.manual_seed(0)
    model.build(data.n_users, data.n_items, data.n_tags)
    model.data = data
    epochs = model.lean_epochs(data, torch.device("cpu"))
    epochs.block = block
    loss, (users, tags, d_users, d_items, d_tags) = epochs.gradients(rows)
    items, mask = data.train_sets.padded(rows)
    expected = model.set_loss(users, tags, items, mask)
    expected.backward()
    grad_u = torch.zeros_like(model.user_factors).index_add_(0, users, d_users)
    grad_t = torch.zeros_like(model.tag_factors).index_add_(0, tags, d_tags)
    return loss, expected.item(), [(grad_u, model.user_factors.grad),
                                   (d_items, model.item_factors.grad),
                                   (grad_t, model.tag_factors.grad)]


@pytest.mark.parametrize("temperature", [1.0, 0.5])
def test_fast_learning_gradients_match_autograd_of_the_set_loss(temperature):
    """The written-out gradient against autograd of Do-Rank's own fast-learning loss."""
    model = DoRank(rank=3, loop="lean", regularization=0.02, temperature=temperature)
    # blocks of two positives: the blocks are exercised
    loss, expected, pairs = fast_gradients_and_autograd(model, random_data(n_items=30, n=150),
                                                        np.array([0, 3]), block=2)
    assert loss == pytest.approx(expected, rel=1e-5)
    for got, want in pairs:
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-7)


def test_bfloat16_fast_learning_stays_near_the_float32_autograd_gradient():
    """``fast_dtype="bfloat16"``: the same loss and gradient as autograd's in float32, to
    bfloat16's rounding (8 bits of mantissa in the scores and the slopes)."""
    model = DoRank(rank=8, loop="lean", regularization=0.02, fast_dtype="bfloat16", init_std=0.5)
    loss, expected, pairs = fast_gradients_and_autograd(model, random_data(n_items=300, n=1500),
                                                        np.arange(8), block=3)
    assert loss == pytest.approx(expected, rel=1e-2)
    for got, want in pairs:
        assert float((got - want).norm() / want.norm()) < 0.03
        assert float(torch.nn.functional.cosine_similarity(got.flatten(), want.flatten(),
                                                          dim=0)) > 0.999


def test_fast_dtype_is_checked():
    with pytest.raises(ValueError, match="fast_dtype must be one of"):
        DoRank(loop="lean", fast_dtype="float16")
    with pytest.raises(ValueError, match="needs loop='lean' and negatives=0"):
        DoRank(fast_dtype="bfloat16")


def toy_fit_data() -> ItemRecData:
    from tagtorch.itemrec.data import item_recommendation_data
    from tests.test_itemrec import toy_folksonomy
    return item_recommendation_data(toy_folksonomy(), p=1, seed=0, split="triples")


def lean(model_class: type, **settings: object) -> object:
    trainer = functools.partial(pl.Trainer, max_epochs=12, accelerator="cpu")
    return model_class(rank=8, loop="lean", lean_batch_size=64, patience=4, seed=0,
                       trainer=trainer, **settings)


def test_the_triples_loop_is_seeded_and_keeps_the_best_epoch():
    data = toy_fit_data()
    first = lean(DoRankPlus, negatives=10).fit(data)
    second = lean(DoRankPlus, negatives=10).fit(data)
    for a, b in zip(first.state_dict().values(), second.state_dict().values(), strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    curve = [row["val_dcg@10"] for row in first.history_]
    assert first.best_epoch_ == int(np.argmax(curve))
    assert len(curve) <= 12


def test_triples_loop_settings_are_checked():
    with pytest.raises(ValueError, match="loop must be"):
        PITF(loop="epochs")
    with pytest.raises(ValueError, match="loop='lightning' only"):
        ProbabilisticCP(loop="lean")
    with pytest.raises(ValueError, match="fast=True"):
        DoRank(loop="lean", fast=False)
    data = random_data()
    plus = DoRankPlus(loop="lean")
    plus.build(data.n_users, data.n_items, data.n_tags)
    with pytest.raises(ValueError, match="negatives > 0"):
        plus.lean_epochs(data, torch.device("cpu"))
    with pytest.raises(ValueError, match="lean_batch_size"):
        PITF(loop="lean", lean_batch_size=0)


def test_device_and_epochs_come_from_the_trainer_setting():
    assert epochs_of(None) == 50
    assert epochs_of(functools.partial(pl.Trainer, max_epochs=7)) == 7
    assert device_of(functools.partial(pl.Trainer, accelerator="cpu")).type == "cpu"
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert device_of(functools.partial(pl.Trainer, accelerator="auto")).type == expected
