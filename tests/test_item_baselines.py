"""The item baselines a reviewer asks for: ItemKNN, EASE^R, RP3beta, BPR-MF, HOSVD and CP-ALS.

Each is compared with an independent reference: ``implicit`` (ItemKNN's cosine, BPR-MF), the
closed forms and definitions computed with plain numpy loops (EASE^R column by column as ridge
regressions, RP3beta's random walk, HOSVD's unfoldings), and ``tensorly`` (CP-ALS from the
same initialization, the sparse tensor algebra on dense tensors).
"""

from __future__ import annotations

import functools
import warnings

import numpy as np
import pandas as pd
import pytest
import pytorch_lightning as pl
import scipy.sparse
import tensorly as tl
import torch

from tagtorch.data.ragged import Ragged
from tagtorch.errors import UnreadableFileError
from tagtorch.itemrec.base import in_sets, user_scores
from tagtorch.itemrec.baselines import ProbabilisticCP
from tagtorch.itemrec.bprmf import BPRMF
from tagtorch.itemrec.cp_als import CPALS, als_sweep
from tagtorch.itemrec.data import ItemRecData, TagProfile, item_recommendation_data
from tagtorch.itemrec.dorank import DoRank
from tagtorch.itemrec.dorank_plus import DoRankPlus
from tagtorch.itemrec.ease import EASE
from tagtorch.itemrec.hosvd import HOSVD
from tagtorch.itemrec.item_item import interaction_matrix
from tagtorch.itemrec.itemknn import ItemKNN
from tagtorch.itemrec.pitf import PITF
from tagtorch.itemrec.rp3beta import RP3Beta
from tagtorch.itemrec.sparse_tensor import (
    mttkrp,
    tensor_coordinates,
    tucker_core,
    unfolding_gram,
)
from tests.test_itemrec import toy_folksonomy


@pytest.fixture(scope="module")
def data() -> ItemRecData:
    return item_recommendation_data(toy_folksonomy(), p=1, seed=0)


@pytest.fixture(scope="module")
def user_data() -> ItemRecData:
    return item_recommendation_data(toy_folksonomy(), p=1, seed=0, query="user",
                                    aggregate="profile")


def _binary(data: ItemRecData) -> np.ndarray:
    x = np.zeros((data.n_users, data.n_items))
    x[data.train[:, 0], data.train[:, 1]] = 1.0
    return x


def _tensor(data: ItemRecData) -> np.ndarray:
    a = np.zeros((data.n_users, data.n_items, data.n_tags))
    a[data.train[:, 0], data.train[:, 1], data.train[:, 2]] = 1.0
    return a


# ------------------------------------------------------------------- item-item models
def test_itemknn_cosine_equals_implicits(data):
    from implicit.nearest_neighbours import CosineRecommender

    x = _binary(data)
    oracle = CosineRecommender(K=data.n_items + 1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        oracle.fit(scipy.sparse.csr_matrix(x.astype(np.float32)), show_progress=False)
    expected = oracle.similarity.toarray()
    np.fill_diagonal(expected, 0.0)
    model = ItemKNN(neighbours=None, shrink=0.0).fit(data)
    np.testing.assert_allclose(model.weights, expected, atol=1e-5)


def test_itemknn_shrink_and_neighbours_match_plain_loops(data):
    x = _binary(data)
    k, h = 5, 3.0
    model = ItemKNN(neighbours=k, shrink=h).fit(data)
    n = data.n_items
    expected = np.zeros((n, n))
    for j in range(n):
        sims = [(x[:, i] @ x[:, j]) / (np.linalg.norm(x[:, i]) * np.linalg.norm(x[:, j]) + h)
                if i != j else 0.0 for i in range(n)]
        for i in sorted(range(n), key=lambda i: (-sims[i], i))[:k]:
            expected[i, j] = sims[i]
    np.testing.assert_allclose(model.weights, expected, atol=1e-5)


def test_ease_columns_are_the_ridge_regressions_without_the_item(data):
    x = _binary(data)
    lam = 7.0
    model = EASE(regularization=lam).fit(data)
    for j in range(0, data.n_items, 7):  # each column: min |x_j - X_-j b|^2 + lam |b|^2
        others = [i for i in range(data.n_items) if i != j]
        xo = x[:, others]
        b = np.linalg.solve(xo.T @ xo + lam * np.eye(len(others)), xo.T @ x[:, j])
        np.testing.assert_allclose(model.weights[others, j], b, atol=1e-4)
        assert model.weights[j, j] == 0.0


def test_rp3beta_matches_the_random_walk_written_out(data):
    x = _binary(data)
    alpha, beta, k = 0.8, 0.4, 6
    model = RP3Beta(alpha=alpha, beta=beta, neighbours=k).fit(data)
    n_items, n_users = data.n_items, data.n_users
    deg_item, deg_user = x.sum(0), x.sum(1)
    expected = np.zeros((n_items, n_items))
    for i in range(n_items):
        row = np.zeros(n_items)
        for u in range(n_users):
            if x[u, i]:
                for j in range(n_items):
                    if x[u, j] and j != i:
                        row[j] += (1 / deg_item[i]) ** alpha * (1 / deg_user[u]) ** alpha
        row /= np.maximum(deg_item, 1) ** beta
        for j in sorted(range(n_items), key=lambda j: (-row[j], j))[:k]:
            expected[i, j] = row[j]
    np.testing.assert_allclose(model.weights, expected, atol=1e-6)


def test_tag_aware_query_adds_the_query_tags_items():
    # two users, three items, two tags; user 0 tagged item 0 with tag 0, user 1 item 1 and 2
    triples = np.array([[0, 0, 0], [1, 1, 1], [1, 2, 0]])
    data = ItemRecData.from_triples("hand", 2, 3, 2, triples, triples[:0], triples[:0],
                                    split="posts")
    stacked = interaction_matrix(data, tags=True).tolist()
    assert stacked == [[1, 0, 0], [0, 1, 1], [1, 0, 1], [0, 1, 0]]
    model = RP3Beta(alpha=1.0, beta=0.0, neighbours=None, tags=True, tag_weight=2.0).fit(data)
    w = np.asarray(model.weights)
    # user 0, tag 0: q = x_0 / 1 + 2 * (items 0 and 2) / 2
    expected = np.array([1.0, 0.0, 0.0]) @ w + 2.0 * np.array([0.5, 0.0, 0.5]) @ w
    got = model.score(torch.tensor([0]), torch.tensor([0]))[0].numpy()
    np.testing.assert_allclose(got, expected, atol=1e-6)
    plain = RP3Beta(alpha=1.0, beta=0.0, neighbours=None).fit(data)
    assert torch.equal(plain.score(torch.tensor([0]), torch.tensor([0])),
                       plain.score(torch.tensor([0]), torch.tensor([1])))


class _PerTag:
    """Hides a ranker's profile_scores: the generic per-(user, tag) profile aggregation."""

    def __init__(self, ranker) -> None:
        self.ranker = ranker

    def score(self, users, tags):
        return self.ranker.score(users, tags)


@pytest.mark.parametrize("make", [
    lambda: EASE(regularization=5.0, tags=True, tag_weight=0.7),
    lambda: ItemKNN(neighbours=8, tags=True),
    lambda: HOSVD(user_rank=6, item_rank=8, tag_rank=5),
    lambda: CPALS(rank=6, iterations=5),
], ids=["ease_tags", "itemknn_tags", "hosvd", "cp_als"])
def test_profile_scores_equal_the_profile_aggregation_of_tag_scores(user_data, make):
    model = make().fit(user_data)
    users = torch.arange(user_data.n_users)
    profile = TagProfile.from_triples(user_data.train, user_data.n_users, user_data.n_tags)
    fast = user_scores(model, users, profile, "profile", user_data.n_items, user_data.n_tags)
    slow = user_scores(_PerTag(model), users, profile, "profile", user_data.n_items,
                       user_data.n_tags)
    torch.testing.assert_close(fast, slow, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("seed", range(5))
def test_in_sets_equals_comparing_every_value_with_every_item(seed):
    g = torch.Generator().manual_seed(seed)
    items = torch.randint(0, 30, (6, 9), generator=g)
    mask = torch.rand(6, 9, generator=g) < 0.6
    values = torch.randint(0, 30, (6, 13), generator=g)
    expected = [[any(bool(m) and int(i) == int(v) for i, m in zip(row_i, row_m, strict=True))
                 for v in row_v] for row_i, row_m, row_v in zip(items, mask, values, strict=True)]
    assert in_sets(values, items, mask).tolist() == expected
    assert not in_sets(values, items[:, :0], mask[:, :0]).any()


@pytest.mark.parametrize("make", [
    DoRank, ProbabilisticCP, PITF, DoRankPlus, functools.partial(DoRankPlus, user_item=True),
], ids=["dorank", "probabilistic_cp", "pitf", "dorank_plus", "dorank_plus_user_item"])
def test_factor_models_score_a_profile_by_its_mix_of_tag_rows(make):
    """One product per block of users equals the sum over the profile's (user, tag) rows."""
    torch.manual_seed(0)
    model = make(rank=5)
    model.build(4, 7, 12)  # more tags than users and items: a mix-up of sizes fails
    with torch.no_grad():  # non-zero biases, so that the empty profile's zero row is tested
        for parameter in model.parameters():
            parameter.normal_()
    # user 2 has no training tag: its aggregated scores are 0
    profile = TagProfile(Ragged.from_lists([[0, 11], [1], [], [0, 1, 9]]),
                         np.array([0.25, 0.75, 1.0, 0.5, 0.3, 0.2], np.float32))
    users = torch.arange(4)
    fast = user_scores(model, users, profile, "profile", 7, 12)
    expected = torch.zeros(4, 7)
    for user, (tags, weights) in enumerate([([0, 11], [0.25, 0.75]), ([1], [1.0]), ([], []),
                                            ([0, 1, 9], [0.5, 0.3, 0.2])]):
        for tag, weight in zip(tags, weights, strict=True):
            expected[user] += weight * model.score(torch.tensor([user]), torch.tensor([tag]))[0]
    torch.testing.assert_close(fast.detach(), expected.detach(), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("make", [
    lambda: EASE(regularization=5.0, tags=True), lambda: RP3Beta(),
    lambda: HOSVD(user_rank=4, item_rank=4, tag_rank=4), lambda: CPALS(rank=4, iterations=3),
], ids=["ease", "rp3beta", "hosvd", "cp_als"])
def test_saved_models_score_alike_and_refuse_altered_files(data, tmp_path, make):
    model = make().fit(data)
    model.save(tmp_path / "m")
    again = type(model).load(tmp_path / "m")
    users, tags = torch.tensor([0, 3, 5]), torch.tensor([1, 2, 0])
    torch.testing.assert_close(again.score(users, tags), model.score(users, tags))
    arrays = tmp_path / "m" / "arrays.npz"
    arrays.write_bytes(arrays.read_bytes()[:-7] + b"garbage")
    with pytest.raises(UnreadableFileError):
        type(model).load(tmp_path / "m")


def test_bad_settings_are_refused():
    for make in (lambda: ItemKNN(neighbours=0), lambda: ItemKNN(shrink=-1),
                 lambda: EASE(regularization=0), lambda: RP3Beta(alpha=0),
                 lambda: RP3Beta(beta=-1), lambda: EASE(tag_weight=-1),
                 lambda: HOSVD(user_rank=0), lambda: CPALS(init="nope"),
                 lambda: CPALS(rank=0), lambda: HOSVD(user_aggregate="mean")):
        with pytest.raises(ValueError):
            make()
    with pytest.raises(RuntimeError, match="not fitted"):
        EASE().score(torch.tensor([0]), torch.tensor([0]))


# ------------------------------------------------------------------------------ BPR-MF
def _dcg_at_10(scores: np.ndarray, data: ItemRecData) -> float:
    total = 0.0
    queries = data.test_queries
    for row in range(len(queries)):
        labels, mask = queries.batch(np.array([row]), data.n_items)
        s = torch.as_tensor(scores[queries.users[row]]).float()[None]
        order = torch.argsort(s.masked_fill(~mask, -torch.inf), descending=True)[0, :10]
        total += float((labels[0, order] / torch.log2(torch.arange(2, 12).float())).sum())
    return total / len(queries)


def test_bprmf_learns_as_well_as_implicits_bpr():
    from implicit.cpu.bpr import BayesianPersonalizedRanking

    data = item_recommendation_data(toy_folksonomy(n_users=90, n_items=90), p=1, seed=0,
                                    query="user", aggregate="profile")
    x = _binary(data).astype(np.float32)
    oracle = BayesianPersonalizedRanking(factors=16, iterations=60, learning_rate=0.05,
                                         regularization=0.01, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        oracle.fit(scipy.sparse.csr_matrix(x), show_progress=False)
    theirs = _dcg_at_10(oracle.user_factors @ oracle.item_factors.T, data)
    model = BPRMF(rank=16, regularization=1e-3, batch_size=16, patience=5,
                  trainer=functools.partial(pl.Trainer, max_epochs=30, accelerator="cpu",
                                            enable_progress_bar=False, logger=False))
    model.fit(data)
    ours = _dcg_at_10(model.score(torch.arange(data.n_users), torch.zeros(data.n_users,
                                                                          dtype=torch.long))
                      .detach().numpy(), data)
    popularity = _dcg_at_10(np.tile(x.sum(0), (data.n_users, 1)), data)
    assert theirs > popularity + 0.2  # the planted groups are learnable
    assert ours > theirs - 0.1, (ours, theirs)


def test_bprmf_loss_is_the_bpr_objective_by_hand():
    model = BPRMF(rank=2, regularization=0.5)
    model.build(1, 3, 1)
    with torch.no_grad():
        model.user_factors.copy_(torch.tensor([[1.0, 0.0]]))
        model.item_factors.copy_(torch.tensor([[2.0, 0.0], [0.0, 1.0], [1.0, 1.0]]))
        model.item_bias.copy_(torch.tensor([0.0, 0.5, -0.5]))
    torch.manual_seed(0)
    drawn = torch.randint(3, (1, 1))  # the draw set_loss makes after this seed
    torch.manual_seed(0)
    loss = model.set_loss(torch.tensor([0]), torch.tensor([0]), torch.tensor([[0]]),
                          torch.tensor([[True]]))
    j = int(drawn)
    s = [2.0, 0.5, 0.5]
    if j == 0:  # drawn the positive itself: skipped
        assert loss.item() == 0.0
    else:
        penalty = 1.0 + 4.0 + [4.0, 1.0, 2.0][j] + [0.0, 0.25, 0.25][j]
        expected = np.log1p(np.exp(-(s[0] - s[j]))) + 0.5 * penalty
        assert loss.item() == pytest.approx(expected, rel=1e-6)


# --------------------------------------------------------------------- tensor models
def test_sparse_tensor_algebra_equals_tensorlys_on_the_dense_tensor(data):
    a = _tensor(data)
    coords = tensor_coordinates(data.train)
    sizes = a.shape
    rng = np.random.default_rng(0)
    factors = [torch.from_numpy(rng.normal(size=(n, 4))) for n in sizes]
    for mode in range(3):
        unfolded = tl.unfold(a, mode)
        np.testing.assert_allclose(unfolding_gram(coords, sizes, mode).numpy(),
                                   unfolded @ unfolded.T, atol=1e-9)
        expected = tl.tenalg.unfolding_dot_khatri_rao(a, (np.ones(4), [f.numpy() for f in
                                                                        factors]), mode)
        np.testing.assert_allclose(mttkrp(coords, factors, mode).numpy(), expected, atol=1e-9)
    small = [f[:, :3] for f in factors]
    expected_core = tl.tenalg.multi_mode_dot(a, [f.numpy().T for f in small])
    np.testing.assert_allclose(tucker_core(coords, small, chunk=17).numpy(), expected_core,
                               atol=1e-9)


def test_hosvd_reconstruction_equals_a_plain_numpy_hosvd(data):
    a = _tensor(data)
    ranks = (5, 7, 4)
    factors = []
    for mode, k in enumerate(ranks):  # the leading left singular vectors of each unfolding
        u, _, _ = np.linalg.svd(np.moveaxis(a, mode, 0).reshape(a.shape[mode], -1),
                                full_matrices=False)
        factors.append(u[:, :k])
    core = np.einsum("uit,ua,ib,tc->abc", a, *factors)
    expected = np.einsum("abc,ua,ib,tc->uit", core, *factors)
    model = HOSVD(*ranks).fit(data)
    users = torch.arange(data.n_users).repeat_interleave(data.n_tags)
    tags = torch.arange(data.n_tags).repeat(data.n_users)
    got = model.score(users, tags).reshape(data.n_users, data.n_tags, data.n_items)
    np.testing.assert_allclose(got.permute(0, 2, 1).numpy(), expected, atol=1e-4)
    # the reduced tensor by hand from the model's own core and factors, through tensorly
    rebuilt = tl.tucker_to_tensor((model.core, [model.user_factors, model.item_factors,
                                                model.tag_factors]))
    np.testing.assert_allclose(rebuilt, expected, atol=1e-4)


def test_cp_als_sweeps_equal_tensorlys_parafac_from_the_same_start(data):
    a = _tensor(data)
    model = CPALS(rank=5, l2_reg=0.1, iterations=4, tol=0.0, init="random", seed=3)
    coords = tensor_coordinates(data.train)
    start = model.initial_factors(coords, a.shape)
    cp = tl.decomposition.parafac(a, 5, n_iter_max=4, init=tl.cp_tensor.CPTensor(
        (np.ones(5), [f.numpy().copy() for f in start])), tol=0, l2_reg=0.1,
        normalize_factors=False)
    ours = [f.clone() for f in start]
    for _ in range(4):
        ours = als_sweep(coords, ours, 0.1)
    for mine, theirs in zip(ours, cp.factors, strict=True):
        np.testing.assert_allclose(mine.numpy(), theirs, rtol=1e-6, atol=1e-8)
    model.fit(data)
    np.testing.assert_allclose(model.item_factors, cp.factors[1], rtol=1e-4, atol=1e-5)
    expected_error = np.linalg.norm(a - tl.cp_to_tensor(cp)) / np.linalg.norm(a)
    assert model.errors_[-1] == pytest.approx(expected_error, rel=1e-6)


# ----------------------------------------------------------------------------- ensemble
ENSEMBLE_MEMBERS = {
    "two_dimensional": {"_target_": "tagtorch.itemrec.baselines.TwoDimensional", "beta": 0.5},
    "ease_tags": {"_target_": "tagtorch.itemrec.ease.EASE", "regularization": 5.0,
                  "tags": True},
    "popularity": {"_target_": "tagtorch.itemrec.baselines.GlobalPopularity"},
}


def _plain_dcg(scores: np.ndarray, labels: np.ndarray, mask: np.ndarray) -> float:
    values = []
    for s, g, m in zip(scores, labels, mask, strict=True):
        order = sorted(np.flatnonzero(m), key=lambda i: (-s[i], i))[:10]
        values.append(sum(g[i] / np.log2(r + 2) for r, i in enumerate(order)))
    return float(np.mean(values))


def test_ensemble_weights_are_the_best_grid_point_on_validation(data):
    from tagtorch.itemrec.ensemble import ItemEnsemble

    grid = [0.0, 0.5, 1.0]
    model = ItemEnsemble(ENSEMBLE_MEMBERS, member_grids={"ease_tags": {
        "regularization": [1.0, 50.0]}}, weight_grid=grid).fit(data)
    queries = data.val_queries
    labels, mask = (t.numpy() for t in queries.batch(np.arange(len(queries)), data.n_items))
    users, tags = torch.from_numpy(queries.users), torch.from_numpy(queries.tags)
    z = {}  # standardized over the items each query ranks (validation: all but training's)
    for name, member in model.fitted_.items():
        s = member.score(users, tags).double().numpy()
        ranked = np.ma.masked_array(s, ~mask)
        mean, std = ranked.mean(1).data[:, None], ranked.std(1).data[:, None]
        z[name] = (s - mean) / np.where(std > 0, std, np.inf)
    best = max((w for w in np.array(np.meshgrid(grid, grid, grid)).T.reshape(-1, 3)
                if w.sum() > 0),
               key=lambda w: round(_plain_dcg(sum(wi * z[n] for wi, n in zip(
                   w, z, strict=True)), labels, mask), 9))
    chosen = np.array([model.weights_[n] for n in z])
    assert _plain_dcg(sum(wi * z[n] for wi, n in zip(chosen, z, strict=True)), labels, mask) \
        == pytest.approx(_plain_dcg(sum(wi * z[n] for wi, n in zip(best, z, strict=True)),
                                    labels, mask), abs=1e-6)
    assert model.choices_["ease_tags"]["regularization"] in (1.0, 50.0)
    expected = sum(w * z[n] for w, n in zip(chosen, z, strict=True))
    np.testing.assert_allclose(model.score(users, tags).numpy(), expected, atol=1e-4)


def test_ensemble_saves_loads_and_refuses_foreign_classes(data, tmp_path):
    import json

    from tagtorch.itemrec.ensemble import ItemEnsemble

    model = ItemEnsemble(ENSEMBLE_MEMBERS, weight_grid=[0.0, 1.0]).fit(data)
    model.save(tmp_path / "e")
    again = ItemEnsemble.load(tmp_path / "e")
    users, tags = torch.tensor([0, 4]), torch.tensor([1, 0])
    torch.testing.assert_close(again.score(users, tags), model.score(users, tags))
    manifest = tmp_path / "e" / "manifest.json"
    content = json.loads(manifest.read_text())
    content["classes"]["popularity"] = "subprocess.Popen"
    manifest.write_text(json.dumps(content))
    with pytest.raises(UnreadableFileError, match="not a saved ensemble"):
        ItemEnsemble.load(tmp_path / "e")
    with pytest.raises(ValueError, match=r"members\.bad"):
        ItemEnsemble({"bad": {"_target_": "os.system"}})
    with pytest.raises(ValueError, match="member_grids"):
        ItemEnsemble(ENSEMBLE_MEMBERS, member_grids={"nobody": {"beta": [0.1]}})
    with pytest.raises(ValueError, match="weight_grid"):
        ItemEnsemble(ENSEMBLE_MEMBERS, weight_grid=[0.0])


def test_ensemble_per_user_queries_weigh_the_members_per_user_forms(user_data):
    from tagtorch.itemrec.ensemble import ItemEnsemble

    model = ItemEnsemble(ENSEMBLE_MEMBERS, weight_grid=[0.5, 1.0]).fit(user_data)
    users = torch.arange(user_data.n_users)
    profile = TagProfile.from_triples(user_data.train, user_data.n_users, user_data.n_tags)
    # the task's per-user path under aggregate="max": the ensemble keeps its own per-user form
    got = user_scores(model, users, profile, "max", user_data.n_items, user_data.n_tags)
    expected = torch.zeros_like(got)
    for name, weight in model.weights_.items():
        member = model.fitted_[name]
        s = user_scores(_PerTag(member), users, profile, "profile", user_data.n_items,
                        user_data.n_tags).double().numpy()
        for u in range(user_data.n_users):  # over the items u did not tag in training
            ranked = [i for i in range(user_data.n_items)
                      if i not in set(user_data.train[user_data.train[:, 0] == u, 1])]
            mean, std = s[u, ranked].mean(), s[u, ranked].std()
            expected[u] += weight * float(std > 0) * torch.from_numpy(
                (s[u] - mean) / (std if std > 0 else 1.0)).float()
    torch.testing.assert_close(got, expected, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("name", ["ease.EASE", "itemknn.ItemKNN", "rp3beta.RP3Beta"])
def test_an_item_item_model_too_large_for_memory_is_refused_before_allocating(name):
    """Issue 54: at MovieLens-25M's tag size (tens of thousands of items) the dense items x
    items matrices exceed memory; the model refuses in one line naming the reason and the
    alternative, before anything is allocated (a data with no arrays would fail otherwise)."""
    import importlib
    from types import SimpleNamespace

    from tagtorch.devices import memory_bytes
    from tagtorch.errors import TooLargeError

    module, cls = name.split(".")
    model = getattr(importlib.import_module(f"tagtorch.itemrec.{module}"), cls)(tags=True)
    items = int((memory_bytes() / 4) ** 0.5) + 1  # 4 bytes a pair would already not fit
    huge = SimpleNamespace(n_users=10, n_items=items, n_tags=5, train=None)
    with pytest.raises(TooLargeError, match=r"x [\d,]+ items\).*factor model"):
        model.fit(huge)


def test_an_ensemble_takes_the_runs_fits_of_its_members_with_equal_results(tmp_path,
                                                                             monkeypatch):
    """Issue 55: the ensembles refitted their members' grids; a member fitted by the run with
    the same settings and grid is taken as it is, and the ensemble's values do not change."""
    from tagtorch.api import compose
    from tagtorch.itemrec.ease import EASE
    from tagtorch.train import run_task

    fits = []
    fit = EASE.fit
    monkeypatch.setattr(EASE, "fit", lambda self, data: fits.append(1) or fit(self, data))
    base = ["task=itemrec", "text=none", "data.n_objects=300", "task.p=2", "task.seeds=[0]",
            "+itemrec@task.tune=baseline_tune", "task.trec=false"]
    run = run_task(compose([*base, "model=[ease_tags,two_dimensional,baseline_ensemble]"],
                           tmp_path / "run"))
    assert len(fits) == 4  # ease_tags' grid, fitted once for the run and its ensemble
    fits.clear()
    alone = run_task(compose([*base, "model=[baseline_ensemble]"], tmp_path / "alone"))
    assert len(fits) == 4
    ours = run.per_object[run.per_object["method"] == "baseline_ensemble"]
    pd.testing.assert_frame_equal(ours.reset_index(drop=True),
                                  alone.per_object.reset_index(drop=True))


def test_a_model_refused_before_allocating_leaves_the_run_and_the_others_go_on(tmp_path,
                                                                              monkeypatch):
    """Issue 54: at 1.36M tag assignments EASE^R's refusal ended the whole run, so the factor
    models after it never ran; now it is left out with a note and the others are reported."""
    from tagtorch.api import compose
    from tagtorch.errors import TooLargeError
    from tagtorch.train import run_task

    monkeypatch.setattr("tagtorch.devices.memory_bytes", lambda: 1000)  # nothing item-item fits
    base = ["task=itemrec", "text=none", "data.n_objects=300", "task.p=2", "task.seeds=[0,1]",
            "task.trec=false"]
    result = run_task(compose([*base, "model=[ease_tags,tag_popularity,itemknn]"], tmp_path))
    assert set(result.results["method"]) == {"tag_popularity"}
    assert set(result.results["fold"]) == {0, 1}
    assert "refused before allocating: `ease_tags`: EASE needs about" in result.report
    assert "`itemknn`: ItemKNN needs about" in result.report
    with pytest.raises(TooLargeError, match="EASE needs about"):
        run_task(compose([*base, "model=[ease_tags]"], tmp_path / "none"))


def test_an_ensemble_takes_the_runs_do_rank_plus_despite_its_checkpoint_folder(tmp_path,
                                                                             monkeypatch):
    """The item task gives its Do-Rank+ a checkpoint folder; the ensemble's member had none,
    and the settings compared unequal, so every seed refitted Do-Rank+'s grid (the
    dorank_movielens_usertag run's log). Where a training keeps its state is not a setting."""
    from tagtorch.api import compose
    from tagtorch.itemrec.dorank_plus import DoRankPlus
    from tagtorch.train import run_task

    fits = []
    fit = DoRankPlus.fit
    monkeypatch.setattr(DoRankPlus, "fit", lambda self, data: fits.append(
        self.init_args["checkpoint_dir"]) or fit(self, data))
    grid = "{rank:[4],regularization:[0.001,0.003]}"
    run_task(compose(["task=itemrec", "text=none", "data.n_objects=200", "task.p=2",
                      "task.seeds=[0]", "task.trec=false", "trainer.max_epochs=1",
                      f"paths.checkpoint_dir={tmp_path / 'checkpoints'}",
                      "model=[dorank_plus,dorank_ensemble]", f"+task.tune.dorank_plus={grid}",
                      "model.dorank_plus.batch_size=32", "model.dorank_plus.optimizer.lr=0.001",
                      "model.dorank_plus.user_aggregate=profile",  # the member's settings
                      f"model.dorank_ensemble.member_grids.dorank_plus={grid}"],
                     tmp_path / "run"))
    assert len(fits) == 2 and all(fits)  # the run's grid, with its checkpoint folders, once
