"""A compiled scorer of LightGBM's numerical trees, for the short lists of online requests.

LightGBM's ``Booster.predict`` costs about 15 microseconds per candidate and thread with
λ-MART's 1,500 trees (Table III of Canuto et al. 2013), and it reaches that speed only with an
OpenMP thread per core. Under concurrent requests those threads compete with the server for
the cores. :class:`FlatForest` flattens the booster's trees (``Booster.dump_model()``) into
node arrays and walks them in one numba kernel in the calling thread.

It computes LightGBM's raw score exactly: the same comparisons of the feature, as a double,
with the same double thresholds (``x <= threshold`` goes left); LightGBM's handling of
missing values (``missing_type`` ``None``: NaN counts as 0; ``Zero``: 0 and NaN take the
default side; ``NaN``: NaN takes it); and the leaf values summed in tree order in double
precision (divided by the number of trees in random-forest mode). Boosters that this layout
cannot hold, those with categorical splits, linear trees or several trees per iteration, are
refused with ``ValueError``; the tree rankers then keep LightGBM's own predict.
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np

__all__ = ["FlatForest"]

_MISSING = {"None": 0, "Zero": 1, "NaN": 2}
_ZERO = 1e-35  # LightGBM's kZeroThreshold


class FlatForest:
    """A LightGBM booster's trees as flat node arrays, scored by :func:`_score`.

    Node ``n`` splits on ``feature[n]`` at ``threshold[n]``. A child index ``c >= 0`` is a node
    and ``c < 0`` is the leaf ``~c``, whose value is ``leaf_value[~c]``. ``roots[t]`` is tree
    ``t``'s first node, or ``~leaf`` for a tree that is a single leaf.

    Args:
        booster: a fitted ``lightgbm.Booster``.
        num_iteration: the trees used, the first ``num_iteration`` (0 or None: all), as in
            ``Booster.predict``.

    Raises:
        ValueError: categorical splits, linear trees or several trees per iteration.
    """

    def __init__(self, booster: Any, num_iteration: int | None = None) -> None:
        model = booster.dump_model(num_iteration=num_iteration or -1)
        if model.get("num_tree_per_iteration", 1) != 1:
            raise ValueError("several trees per iteration (multiclass) are not flattened")
        self.n_features = int(model["max_feature_idx"]) + 1
        features: list[int] = []
        thresholds: list[float] = []
        lefts: list[int] = []
        rights: list[int] = []
        default_left: list[bool] = []
        missing: list[int] = []
        leaves: list[float] = []
        roots: list[int] = []

        def visit(node: dict[str, Any]) -> int:
            if "leaf_value" in node or "split_feature" not in node:
                if "leaf_coeff" in node:
                    raise ValueError("linear trees are not flattened")
                leaves.append(float(node.get("leaf_value", 0.0)))
                return ~(len(leaves) - 1)
            if node.get("decision_type") != "<=":
                raise ValueError(f"a {node.get('decision_type')!r} split (categorical) is not "
                                 "flattened")
            index = len(features)
            features.append(int(node["split_feature"]))
            thresholds.append(float(node["threshold"]))
            default_left.append(bool(node["default_left"]))
            missing.append(_MISSING[str(node["missing_type"])])
            lefts.append(0)
            rights.append(0)
            lefts[index] = visit(node["left_child"])
            rights[index] = visit(node["right_child"])
            return index

        for tree in model["tree_info"]:
            roots.append(visit(tree["tree_structure"]))
        # random-forest mode: LightGBM divides the sum by the number of trees
        self.average = bool(model.get("average_output", False))
        self.feature = np.asarray(features, dtype=np.int32)
        self.threshold = np.asarray(thresholds, dtype=np.float64)
        self.left = np.asarray(lefts, dtype=np.int32)
        self.right = np.asarray(rights, dtype=np.int32)
        self.default_left = np.asarray(default_left, dtype=np.bool_)
        self.missing = np.asarray(missing, dtype=np.int8)
        self.leaf_value = np.asarray(leaves, dtype=np.float64)
        self.roots = np.asarray(roots, dtype=np.int32)

    def __len__(self) -> int:
        return len(self.roots)

    def predict(self, features: np.ndarray) -> np.ndarray:
        """``[N]`` float64 raw scores of ``[N, F]`` rows, as ``Booster.predict`` gives them."""
        rows = np.ascontiguousarray(features, dtype=np.float64)
        if rows.ndim != 2 or rows.shape[1] < self.n_features:
            raise ValueError(f"expected [N, >= {self.n_features}] features, got {rows.shape}")
        scores = _score(rows, self.roots, self.feature, self.threshold, self.left, self.right,
                        self.default_left, self.missing, self.leaf_value)
        return scores / len(self.roots) if self.average and len(self.roots) else scores


@numba.njit(cache=True, nogil=True)
def _score(rows: np.ndarray, roots: np.ndarray, feature: np.ndarray, threshold: np.ndarray,
           left: np.ndarray, right: np.ndarray, default_left: np.ndarray, missing: np.ndarray,
           leaf_value: np.ndarray) -> np.ndarray:  # pragma: no cover - compiled
    # trees outside, rows inside: one tree's few nodes stay in cache while every row walks it;
    # each row's total still adds the trees in order, as LightGBM does
    out = np.zeros(rows.shape[0], dtype=np.float64)
    for t in range(roots.shape[0]):
        root = roots[t]
        for i in range(rows.shape[0]):
            node = root
            while node >= 0:
                x = rows[i, feature[node]]
                kind = missing[node]
                if kind == 0:
                    go_left = x <= threshold[node] or (np.isnan(x) and threshold[node] >= 0.0)
                elif (kind == 1 and (np.isnan(x) or -_ZERO <= x <= _ZERO)) or (
                        kind == 2 and np.isnan(x)):
                    go_left = default_left[node]
                else:
                    go_left = x <= threshold[node]
                node = left[node] if go_left else right[node]
            out[i] += leaf_value[~node]
    return out
