"""Genetic Programming ranker (Belém et al., SIGIR 2011; Canuto et al., JIDM 2013, Sec. 4.3.8).

An individual is a ranking function ``f(features) -> score`` represented as an expression tree
(:mod:`deap.gp`): terminals are the relevance features (Table I, named by
``CandidateSet.feature_names``) and ephemeral constants drawn from U(0, 1); inner nodes are
``+``, ``-``, ``*``, protected division and protected natural logarithm, which return 0 outside
their domain (a divisor of 0 or not finite; a logarithm of ``x <= 0``). A population evolves
over generations by tournament selection, one-point subtree crossover and uniform subtree
mutation; the fitness is the mean NDCG@5 over the training lists (the protocol's V). The best
individual found is the ranker.

Settings of the paper (Table III of Canuto et al. 2013; ``g`` from Belém et al. 2011), the
defaults here: population ``n = 200``, generations ``g = 200``, tournament size ``k = 2``,
maximum depth ``d = 7``, crossover probability ``p_c = 0.6``, mutation probability
``p_m = 0.1``, fitness NDCG@5.

Choices the papers leave open, and deviations:

- **Depth** is DEAP's tree height (edges from the root to the deepest leaf; a lone terminal has
  height 0), limited to ``d`` by ``gp.staticLimit`` on crossover and mutation (an offspring over
  the limit is replaced by one of its parents, Koza's rule). The initial population is ramped
  half-and-half with heights 2 to 6; mutation grows full subtrees of height 0 to 2.
- **Generation scheme** is DEAP's ``varAnd`` (``eaSimple``): tournament selection of ``n - 1``
  individuals, crossover of consecutive pairs with probability ``p_c``, mutation of each
  offspring with probability ``p_m``, plus **elitism**: the best individual so far (a hall of
  fame of size 1) is copied into every new generation and returned at the end. ``g``
  generations follow the evaluation of the initial population.
- **Fitness** is the mean NDCG@k of :func:`tagtorch.metrics.functional.ndcg_at_k` (linear gain;
  ties broken by candidate order; relevant tags missing from a list count in the ideal DCG;
  lists without relevant tags skipped), computed batched: each tree is compiled to torch
  operations on the whole padded ``[B, L, F]`` tensor, and the top ``k`` are found with ``k``
  arg-max passes instead of a full sort (:func:`ndcg_top_k`). Non-finite scores (overflow in
  ``+``, ``-``, ``*``) rank last (NaN, -inf) or first (+inf), as the largest finite magnitudes.
- ``fitness_sample`` (not in the paper) bounds the cost on a large V: each generation is then
  evaluated on a fresh random sample of the training lists, and the final individual is the
  best, on all training lists, of the per-generation champions.
- ``val`` is not used (the paper selects the best individual by its fitness on V).
- **Features** are the tree's arguments by position: a batch must have the training features
  in the training order (anything else is an error, never a silent reordering).
"""

from __future__ import annotations

import logging
import math
import operator
import random
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Self

import numpy as np
import torch
from deap import algorithms, base, gp, tools
from torch import Tensor
from tqdm import tqdm

from tagtorch.candidates.candidate_set import CandidateSet
from tagtorch.errors import UnreadableFileError
from tagtorch.metrics.functional import ideal_dcg
from tagtorch.rankers.base import BaseRanker
from tagtorch.storage import read_json, write_json

log = logging.getLogger(__name__)

__all__ = [
    "GPRanker",
    "compile_tree",
    "make_primitive_set",
    "ndcg_top_k",
    "protected_div",
    "protected_log",
    "tree_to_infix",
]


def protected_div(a: Tensor, b: Tensor) -> Tensor:
    """``a / b``, and 0 where the divisor is 0 or not finite (Canuto et al. 2013).

    Args:
        a: dividend, any shape broadcastable with ``b``.
        b: divisor.

    Returns:
        The broadcast quotient.

    Example:
        >>> q = protected_div(torch.tensor([1.0, 1.0, 3.0]), torch.tensor([0.0, float("inf"), 2.0]))
        >>> [round(v, 4) for v in q.tolist()]
        [0.0, 0.0, 1.5]
    """
    ok = (b != 0) & torch.isfinite(b)
    return torch.where(ok, a / torch.where(ok, b, torch.ones_like(b)), torch.zeros_like(a))


def protected_log(x: Tensor) -> Tensor:
    """Natural logarithm, and 0 outside its domain (``x <= 0`` or NaN; Canuto et al. 2013).

    Args:
        x: any shape.

    Returns:
        ``log(x)`` where ``x > 0``, else 0.

    Example:
        >>> [round(v, 4) for v in protected_log(torch.tensor([0.0, -1.0, math.e])).tolist()]
        [0.0, 0.0, 1.0]
    """
    ok = x > 0
    return torch.where(ok, torch.log(torch.where(ok, x, torch.ones_like(x))), torch.zeros_like(x))


_OPERATORS: dict[str, tuple[Callable[..., Tensor], int, str, int]] = {
    # name: (torch function, arity, infix symbol, precedence)
    "add": (torch.add, 2, "+", 1),
    "sub": (torch.sub, 2, "-", 1),
    "mul": (torch.mul, 2, "*", 2),
    "div": (protected_div, 2, "/", 2),
    "log": (protected_log, 1, "log", 3),
}
_EPHEMERAL = "uniform01"


def _uniform01() -> float:
    """An ephemeral constant: U(0, 1) from Python's ``random`` (seeded by the ranker)."""
    return random.random()


def _argument_names(feature_names: Sequence[str]) -> list[str]:
    """Identifier-safe, unique tree argument names for the features (usually the names)."""
    taken = set(_OPERATORS) | {_EPHEMERAL}
    names = []
    for i, name in enumerate(feature_names):
        safe = re.sub(r"\W", "_", name)
        if not safe or safe[0].isdigit():
            safe = f"f_{safe}"
        if safe in taken:
            safe = f"{safe}_{i}"
        taken.add(safe)
        names.append(safe)
    return names


def make_primitive_set(feature_names: Sequence[str]) -> gp.PrimitiveSet:
    """The paper's primitive set: the features, U(0, 1) constants, ``+ - *``, protected ``/, log``.

    Args:
        feature_names: the ``F`` features, in column order; they name the tree's arguments
            (characters other than letters, digits and ``_`` become ``_``).

    Returns:
        A DEAP primitive set with ``F`` arguments.

    Example:
        >>> pset = make_primitive_set(["sum_l", "wts"])
        >>> tree = gp.PrimitiveTree.from_string("add(mul(sum_l, 0.5), log(wts))", pset)
        >>> tree_to_infix(tree, pset)
        'sum_l * 0.5 + log(wts)'
    """
    pset = gp.PrimitiveSet("ranker", len(feature_names))
    for name, (function, arity, _, _) in _OPERATORS.items():
        pset.addPrimitive(function, arity, name=name)
    pset.addEphemeralConstant(_EPHEMERAL, _uniform01)
    pset.renameArguments(**{f"ARG{i}": name
                            for i, name in enumerate(_argument_names(feature_names))})
    return pset


def _build(tree: gp.PrimitiveTree, pset: gp.PrimitiveSet) -> Callable[[Tensor], Tensor]:
    """Compiles a prefix tree to a function of ``columns [F, *S] -> [*S]`` (maybe 0-dim)."""
    column = {name: i for i, name in enumerate(pset.arguments)}
    nodes = iter(tree)

    def node() -> Callable[[Tensor], Tensor]:
        item = next(nodes)
        if isinstance(item, gp.Primitive):
            function = _OPERATORS[item.name][0]
            children = [node() for _ in range(item.arity)]
            if len(children) == 1:
                (x,) = children
                return lambda cols: function(x(cols))
            a, b = children
            return lambda cols: function(a(cols), b(cols))
        if isinstance(item.value, str) and item.value in column:
            i = column[item.value]
            return lambda cols: cols[i]
        value = float(item.value)
        return lambda cols: torch.tensor(value, dtype=cols.dtype, device=cols.device)

    function = node()
    try:
        next(nodes)
    except StopIteration:
        return function
    raise ValueError(f"malformed tree (nodes left over): {tree}")


def compile_tree(tree: gp.PrimitiveTree, pset: gp.PrimitiveSet) -> Callable[[Tensor], Tensor]:
    """Compiles a DEAP tree to one batched torch function ``features [..., F] -> scores [...]``.

    The whole padded batch is evaluated at once, each node one tensor operation. Scores are not
    guarded: they may hold ±inf or NaN after an overflow (see :class:`GPRanker`).

    Args:
        tree: an individual over ``pset``.
        pset: its primitive set (:func:`make_primitive_set`).

    Returns:
        A function of ``features [..., F]`` (the columns in ``pset``'s argument order) returning
        ``[...]`` scores with the features' dtype and device.

    Example:
        >>> pset = make_primitive_set(["a", "b"])
        >>> f = compile_tree(gp.PrimitiveTree.from_string("sub(a, div(b, 0.5))", pset), pset)
        >>> [round(v, 4) for v in f(torch.tensor([[[1.0, 1.0], [3.0, 0.5]]]))[0].tolist()]
        [-1.0, 2.0]
    """
    function = _build(tree, pset)

    def scores(features: Tensor) -> Tensor:
        columns = features.movedim(-1, 0)
        return function(columns).expand(features.shape[:-1])

    return scores


def tree_to_infix(tree: gp.PrimitiveTree, pset: gp.PrimitiveSet, digits: int = 4) -> str:
    """A readable infix formula of a tree (``/`` and ``log`` are the protected operators).

    Args:
        tree: an individual over ``pset``.
        pset: its primitive set.
        digits: significant digits of the constants.

    Returns:
        The formula, with the parentheses that precedence requires.

    Example:
        >>> pset = make_primitive_set(["a", "b", "c"])
        >>> tree = gp.PrimitiveTree.from_string("sub(a, sub(mul(b, 0.123456), c))", pset)
        >>> tree_to_infix(tree, pset)
        'a - (b * 0.1235 - c)'
    """
    arguments = set(pset.arguments)
    nodes = iter(tree)

    def node() -> tuple[str, int]:
        item = next(nodes)
        if isinstance(item, gp.Primitive):
            _, arity, symbol, precedence = _OPERATORS[item.name]
            if arity == 1:
                return f"{symbol}({node()[0]})", precedence
            (left, lp), (right, rp) = node(), node()
            if lp < precedence:
                left = f"({left})"
            if rp < precedence or (rp == precedence and symbol in "-/"):
                right = f"({right})"
            return f"{left} {symbol} {right}", precedence
        if isinstance(item.value, str) and item.value in arguments:
            return item.value, 4
        return f"{float(item.value):.{digits}g}", 4

    return node()[0]


def _guard(scores: Tensor, mask: Tensor) -> Tensor:
    """Finite scores at real candidates (NaN/-inf lowest, +inf highest), -inf at padding."""
    info = torch.finfo(scores.dtype)
    finite = torch.nan_to_num(scores, nan=info.min, posinf=info.max, neginf=info.min)
    return torch.where(mask, finite, torch.full_like(finite, -math.inf))


def top_k_positions(guarded: Tensor, k: int) -> tuple[Tensor, Tensor]:
    """The top ``k`` candidates of guarded scores (finite, -inf at padding), by arg-max passes.

    ``argmax`` returns the first maximum, so ties go to the earlier candidate, as in a stable
    descending sort (the ranking of :func:`tagtorch.metrics.functional.dcg_at_k`, whose sort
    of whole lists this avoids). ``guarded`` is overwritten.

    Args:
        guarded: ``[B, L]`` scores from :func:`_guard`.
        k: cut-off.

    Returns:
        ``[B, min(k, L)]`` candidate positions in rank order and ``[B, min(k, L)]`` bool, False
        where a list has fewer real candidates than the rank.
    """
    b, length = guarded.shape
    width = min(k, length)
    positions = torch.zeros(b, width, dtype=torch.long, device=guarded.device)
    real = torch.zeros(b, width, dtype=torch.bool, device=guarded.device)
    rows = torch.arange(b, device=guarded.device)
    for rank in range(width):
        best = guarded.argmax(-1)
        positions[:, rank] = best
        real[:, rank] = guarded[rows, best] > -math.inf
        guarded[rows, best] = -math.inf
    return positions, real


def _dcg_at_positions(positions: Tensor, real: Tensor, labels: Tensor) -> Tensor:
    """``[B]`` DCG of the ranked positions of :func:`top_k_positions`.

    Accumulated rank by rank, as the GP fitness always was: another summation order would
    round differently and could change which individuals survive.
    """
    dcg = torch.zeros(labels.shape[0], dtype=labels.dtype, device=labels.device)
    gains = labels.gather(1, positions)
    for rank in range(positions.shape[1]):
        dcg += torch.where(real[:, rank], gains[:, rank], torch.zeros_like(dcg)) \
            / math.log2(rank + 2)
    return dcg


def ndcg_top_k(
    scores: Tensor, labels: Tensor, mask: Tensor, k: int, n_relevant: Tensor | None = None,
    idcg: Tensor | None = None,
) -> Tensor:
    """NDCG@k of each list, as :func:`~tagtorch.metrics.functional.ndcg_at_k`, without a sort.

    The GP fitness: ``k`` arg-max passes find the top ``k`` (ties by candidate order), which is
    much cheaper than sorting whole lists when ``k`` is small; the ideal DCG is
    :func:`~tagtorch.metrics.functional.ideal_dcg`. Inputs are not validated; non-finite
    scores rank as the largest finite magnitudes (NaN last).

    Args:
        scores: ``[B, L]`` candidate scores.
        labels: ``[B, L]`` relevance grades, ``>= 0``.
        mask: ``[B, L]`` bool, True at real candidates.
        k: cut-off, ``>= 1``.
        n_relevant: ``[B]`` relevant items per list, including those missing from the list;
            default: the relevant candidates present.
        idcg: ``[B]`` the lists' ideal DCG@k when already known (the fitness computes it once
            per training set); default: computed from ``labels`` and ``n_relevant``.

    Returns:
        ``[B]`` NDCG@k, NaN for lists with no relevant item.

    Example:
        >>> scores = torch.tensor([[0.1, 0.9, 0.5]])
        >>> labels = torch.tensor([[1.0, 0.0, 1.0]])
        >>> ndcg = ndcg_top_k(scores, labels, torch.ones(1, 3, dtype=torch.bool), k=3)
        >>> [round(v, 4) for v in ndcg.tolist()]
        [0.6934]
    """
    labels = torch.where(mask, labels.to(scores.dtype), torch.zeros((), dtype=scores.dtype))
    if n_relevant is None:
        n_relevant = (labels > 0).sum(-1)
    if idcg is None:
        idcg = ideal_dcg(labels, mask, k, n_relevant)
    dcg = _dcg_at_positions(*top_k_positions(_guard(scores, mask), k), labels)
    ndcg = dcg / torch.where(idcg > 0, idcg, torch.ones_like(idcg))
    return torch.where(n_relevant > 0, ndcg, torch.full_like(ndcg, math.nan))


class _Lists:
    """Training lists prepared for fast fitness: only lists with a relevant candidate are kept.

    Lists whose relevant tags are all missing have NDCG 0 whatever the ranking; they only count
    in the denominator ``n_counted`` (the lists with ``n_relevant > 0``).
    """

    def __init__(self, lists: CandidateSet, k: int, terminals: Tensor,
                 keep: Tensor | None = None) -> None:
        """Keeps ``keep`` of ``lists`` (default: those with a relevant candidate).

        ``terminals`` are the lists' ``[B, L, F']`` tree inputs, ``k`` the NDCG cut-off.
        """
        mask = lists.mask
        labels = torch.where(mask, lists.labels.float(), torch.zeros(()))
        self.useful = (labels > 0).any(-1)
        keep = self.useful if keep is None else keep
        self.n_counted = int((lists.n_relevant > 0).sum())
        features = torch.where(mask.unsqueeze(-1), terminals.float(), torch.zeros(()))
        self.columns = features[keep].movedim(-1, 0).contiguous()  # [F', B', L]
        self.labels = labels[keep]
        self.mask = mask[keep]
        self.idcg = ideal_dcg(self.labels, self.mask, k, lists.n_relevant[keep])
        self.k = k

    def fitness(self, function: Callable[[Tensor], Tensor]) -> float:
        """Mean NDCG@k over the counted lists of a compiled tree (see :func:`_build`)."""
        if self.n_counted == 0:
            return 0.0
        scores = function(self.columns).expand(self.mask.shape)
        ndcg = ndcg_top_k(scores, self.labels, self.mask, self.k, idcg=self.idcg)
        return float(ndcg.sum()) / self.n_counted  # every kept list has a relevant candidate


class _Fitness(base.Fitness):
    weights = (1.0,)


class _Individual(gp.PrimitiveTree):
    """An expression tree with a fitness (what ``creator.create`` would build, without globals)."""

    def __init__(self, content: Any) -> None:
        super().__init__(content)
        self.fitness = _Fitness()


MODEL_FILE = "model.json"
"""Name of the file holding the evolved tree (prefix and infix) and its fitness."""


class GPRanker(BaseRanker):
    """Genetic Programming ranker: evolves a ranking formula over the features (DEAP).

    Belém et al. (SIGIR 2011) introduced GP for tag recommendation; Canuto et al. (JIDM 2013,
    Section 4.3.8, Table III) compare it with seven other L2R methods. The defaults are the
    papers' settings; see the module docstring for the details and deviations.

    Args:
        population: population size ``n`` (the paper: 200).
        generations: generations ``g`` after the initial population (Belém et al.: 200).
        tournament_size: tournament size ``k`` of the selection (the paper: 2).
        max_depth: maximum tree height ``d`` after crossover and mutation (the paper: 7).
        crossover_prob: one-point subtree crossover probability ``p_c`` (the paper: 0.6).
        mutation_prob: subtree mutation probability ``p_m`` (the paper: 0.1).
        init_depth: (min, max) heights of the ramped half-and-half initial trees.
        mutation_depth: (min, max) heights of the full subtrees grown by mutation.
        k: NDCG cut-off of the fitness (the paper: NDCG@5).
        fitness_sample: training lists sampled afresh each generation to bound the cost on a
            large V; None evaluates every generation on all training lists.
        seed: seeds Python's ``random`` and numpy's global generator (DEAP draws from
            ``random``) and the list sampling.
        num_threads: torch CPU threads during :meth:`fit` (restored after); None keeps them.
        progress: show a tqdm bar over the generations.
    """

    population: int
    generations: int
    tournament_size: int
    max_depth: int
    crossover_prob: float
    mutation_prob: float
    k: int
    fitness_sample: int | None
    seed: int
    num_threads: int | None
    progress: bool

    def __init__(
        self,
        population: int = 200,
        generations: int = 200,
        tournament_size: int = 2,
        max_depth: int = 7,
        crossover_prob: float = 0.6,
        mutation_prob: float = 0.1,
        init_depth: Sequence[int] = (2, 6),
        mutation_depth: Sequence[int] = (0, 2),
        k: int = 5,
        fitness_sample: int | None = None,
        seed: int = 0,
        num_threads: int | None = None,
        progress: bool = True,
    ) -> None:
        if population < 2 or generations < 0 or tournament_size < 1 or k < 1:
            raise ValueError("need population >= 2, generations >= 0, tournament_size >= 1, "
                             "k >= 1")
        if not (0.0 <= crossover_prob <= 1.0 and 0.0 <= mutation_prob <= 1.0):
            raise ValueError("crossover_prob and mutation_prob must be in [0, 1]")
        init_depth, mutation_depth = tuple(init_depth), tuple(mutation_depth)
        if not 0 <= init_depth[0] <= init_depth[1] <= max_depth:
            raise ValueError(f"init_depth must satisfy 0 <= min <= max <= max_depth, "
                             f"got {init_depth}")
        if not 0 <= mutation_depth[0] <= mutation_depth[1]:
            raise ValueError(f"mutation_depth must satisfy 0 <= min <= max, got {mutation_depth}")
        if fitness_sample is not None and fitness_sample < 1:
            raise ValueError(f"fitness_sample must be >= 1 or None, got {fitness_sample}")
        self.init_depth, self.mutation_depth = init_depth, mutation_depth  # as tuples
        self.feature_names_: tuple[str, ...] | None = None
        self.fitness: float | None = None
        self.history: list[dict[str, float]] = []
        self._pset: gp.PrimitiveSet | None = None
        self._tree: gp.PrimitiveTree | None = None
        self._function: Callable[[Tensor], Tensor] | None = None

    def _toolbox(self, pset: gp.PrimitiveSet) -> base.Toolbox:
        toolbox = base.Toolbox()
        low, high = self.init_depth
        toolbox.register("expr", gp.genHalfAndHalf, pset=pset, min_=low, max_=high)
        toolbox.register("individual", tools.initIterate, _Individual, toolbox.expr)
        toolbox.register("population", tools.initRepeat, list, toolbox.individual)
        toolbox.register("select", tools.selTournament, tournsize=self.tournament_size)
        toolbox.register("mate", gp.cxOnePoint)
        low, high = self.mutation_depth
        toolbox.register("expr_mut", gp.genFull, min_=low, max_=high)
        toolbox.register("mutate", gp.mutUniform, expr=toolbox.expr_mut, pset=pset)
        limit = gp.staticLimit(key=operator.attrgetter("height"), max_value=self.max_depth)
        toolbox.decorate("mate", limit)
        toolbox.decorate("mutate", limit)
        return toolbox

    def terminal_names(self) -> tuple[str, ...]:
        """The trees' variables: the training features (subclasses may add terminals)."""
        assert self.feature_names_ is not None
        return self.feature_names_

    def terminals(self, batch: CandidateSet) -> Tensor:
        """``[B, L, F']`` values of :meth:`terminal_names` for a batch: its features."""
        return batch.features

    def _training_lists(self, lists: CandidateSet) -> _Lists:
        """The training lists prepared for the fitness (the mean NDCG@k)."""
        return _Lists(lists, self.k, self.terminals(lists))

    def _set_tree(self, tree: gp.PrimitiveTree) -> None:
        assert self._pset is not None
        self._tree = gp.PrimitiveTree(tree)
        self._function = compile_tree(self._tree, self._pset)

    def fit(self, train: CandidateSet, val: CandidateSet | None = None) -> Self:
        """Evolves ranking functions on ``train`` (V); keeps the fittest. ``val`` is unused.

        Args:
            train: labelled candidate lists; the fitness is their mean NDCG@k.
            val: ignored.

        Returns:
            self, with :attr:`formula`, :attr:`fitness` and :attr:`history` (per generation:
            best and mean fitness, mean tree size) set.

        Raises:
            ValueError: if no training list has a relevant tag.
        """
        if int((train.n_relevant > 0).sum()) == 0:
            raise ValueError("no training list has a relevant tag: nothing to learn")
        threads = torch.get_num_threads()
        if self.num_threads is not None:
            torch.set_num_threads(self.num_threads)
        try:
            with torch.inference_mode():
                self._evolve(train)
        finally:
            torch.set_num_threads(threads)
        log.info("GP: NDCG@%d %.4f on the training lists with f = %s",
                 self.k, self.fitness, self.formula)
        return self

    def _evolve(self, train: CandidateSet) -> None:
        random.seed(self.seed)
        np.random.seed(self.seed)
        rng = np.random.default_rng(self.seed)
        self.feature_names_ = tuple(train.feature_names)
        pset = self._pset = make_primitive_set(self.terminal_names())
        toolbox = self._toolbox(pset)
        counted = torch.nonzero(train.n_relevant > 0).squeeze(-1)
        sampling = self.fitness_sample is not None and self.fitness_sample < len(counted)
        pool = train[counted] if sampling else train
        everything = self._training_lists(train)
        full_cache: dict[str, float] = {}

        def evaluate(individuals: list[_Individual], lists: _Lists,
                     cache: dict[str, float]) -> None:
            for individual in individuals:
                if not individual.fitness.valid:
                    key = str(individual)
                    if key not in cache:
                        cache[key] = lists.fitness(_build(individual, pset))
                    individual.fitness.values = (cache[key],)

        def lists_of_generation() -> tuple[_Lists, dict[str, float]]:
            if not sampling:
                return everything, full_cache
            assert self.fitness_sample is not None
            rows = np.sort(rng.choice(len(pool), size=self.fitness_sample, replace=False))
            sample = pool[torch.as_tensor(rows, device=counted.device)]
            return self._training_lists(sample), {}

        hall = tools.HallOfFame(1)
        champions: dict[str, _Individual] = {}
        self.history = []
        population = toolbox.population(n=self.population)
        bar = tqdm(range(self.generations + 1), desc="GP", unit="gen", disable=not self.progress,
                   leave=False)
        for generation in bar:
            lists, cache = lists_of_generation()
            if generation > 0:
                population = self._next_generation(toolbox, population)
            if sampling:
                for individual in population:
                    del individual.fitness.values
            evaluate(population, lists, cache)
            hall.update(population)
            best = tools.selBest(population, 1)[0]
            champions.setdefault(str(best), toolbox.clone(best))
            bar.set_postfix(best=f"{self._record(generation, population):.4f}")
        bar.close()
        if sampling:  # the champion of the most generations' samples is not the best on V
            candidates = list(champions.values())
            for candidate in candidates:
                del candidate.fitness.values
            evaluate(candidates, everything, full_cache)
            best = max(candidates, key=lambda c: c.fitness.values[0])  # first on ties
        else:
            best = hall[0]
        self._set_tree(best)
        self.fitness = best.fitness.values[0]

    def _next_generation(self, toolbox: base.Toolbox, population: list[_Individual]
                         ) -> list[_Individual]:
        """Tournament selection, crossover and mutation; the best individual survives as is."""
        elite = toolbox.clone(tools.selBest(population, 1)[0])
        offspring = toolbox.select(population, self.population - 1)
        offspring = algorithms.varAnd(offspring, toolbox, self.crossover_prob,
                                      self.mutation_prob)
        return [*offspring, elite]

    def _record(self, generation: int, population: list[_Individual]) -> float:
        """Appends a generation's best and mean fitness and mean size to ``history``."""
        values = [individual.fitness.values[0] for individual in population]
        self.history.append({"generation": generation, "best": max(values),
                             "mean": float(np.mean(values)),
                             "size": float(np.mean([len(i) for i in population]))})
        return max(values)

    @property
    def expression(self) -> str:
        """The evolved function in DEAP's prefix form (``gp.PrimitiveTree.from_string`` reads it).

        Raises:
            RuntimeError: before :meth:`fit` or :meth:`load`.
        """
        if self._tree is None:
            raise RuntimeError("the ranker is not fitted: call fit() or load()")
        return str(self._tree)

    @property
    def formula(self) -> str:
        """The evolved function as a readable infix formula (``/``, ``log``: protected).

        Raises:
            RuntimeError: before :meth:`fit` or :meth:`load`.
        """
        if self._tree is None or self._pset is None:
            raise RuntimeError("the ranker is not fitted: call fit() or load()")
        return tree_to_infix(self._tree, self._pset)

    def score(self, batch: CandidateSet) -> Tensor:
        """``[B, L]`` scores of the evolved function on the batch's device.

        Non-finite values are replaced by the largest finite magnitudes (NaN lowest); padding
        gets whatever its features give.

        Raises:
            RuntimeError: before :meth:`fit` or :meth:`load`.
            ValueError: if the batch's features (names or order) differ from the training
                features.
        """
        if self._function is None or self.feature_names_ is None:
            raise RuntimeError("the ranker is not fitted: call fit() or load()")
        self.check_features(batch)
        with torch.inference_mode():
            scores = self._function(self.terminals(batch))
        info = torch.finfo(scores.dtype)
        return torch.nan_to_num(scores, nan=info.min, posinf=info.max, neginf=info.min)

    def is_fitted(self) -> bool:
        """Whether a tree is evolved or loaded."""
        return self._tree is not None

    def _save_files(self, folder: Path) -> list[str]:
        """Writes ``model.json``: the tree (prefix and infix) and its fitness."""
        write_json({"expression": self.expression, "formula": self.formula,
                    "fitness": self.fitness}, folder / MODEL_FILE)
        return [MODEL_FILE]

    def _load_files(self, folder: Path, manifest: Mapping[str, Any]) -> None:
        """Parses the tree back from ``model.json``'s ``expression``.

        Raises:
            ValueError: the file is not listed, or its expression holds anything but
                primitives, the features and decimal constants (the message names the file).
        """
        path = folder / MODEL_FILE
        if MODEL_FILE not in manifest["files"] or self.feature_names_ is None:
            raise UnreadableFileError(f"{path}: not listed in the manifest, or no feature names")
        state = read_json(path)
        expression = state.get("expression") if isinstance(state, dict) else None
        if not isinstance(expression, str):
            raise UnreadableFileError(f"{path}: expected an 'expression' string")
        self.fitness = state.get("fitness")
        self._pset = make_primitive_set(self.terminal_names())
        # DEAP's parser hands every token it does not know to Python's evaluator: admit only
        # primitives, the features and plain decimal constants (what save writes), so nothing
        # else is evaluated
        unknown = [token for token in re.split(r"[ \t\n\r\f\v(),]", expression)
                   if token and token not in self._pset.mapping
                   and not _CONSTANT.fullmatch(token)]
        if unknown:
            raise UnreadableFileError(
                f"{path}: the expression holds {unknown[:3]}, neither primitives, features "
                f"{self.feature_names_} nor decimal constants")
        self._set_tree(gp.PrimitiveTree.from_string(expression, self._pset))


_CONSTANT = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")
"""A decimal constant of a saved expression (the ephemeral constants)."""
