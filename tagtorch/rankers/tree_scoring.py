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

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numba
import numpy as np

from tagtorch.storage import load_arrays, save_arrays

__all__ = ["FlatForest"]

_MISSING = {"None": 0, "Zero": 1, "NaN": 2}
_ZERO = 1e-35  # LightGBM's kZeroThreshold


class FlatForest:
    """A forest's trees as flat node arrays, scored by :func:`_score`.

    Node ``n`` splits on ``feature[n]`` at ``threshold[n]``. A child index ``c >= 0`` is a node
    and ``c < 0`` is the leaf ``~c``, whose value is ``leaf_value[~c]``. ``roots[t]`` is tree
    ``t``'s first node, or ``~leaf`` for a tree that is a single leaf. A node's children come
    after it (checked), so every walk ends.

    Built from a LightGBM booster (:meth:`from_booster`) or a scikit-learn forest
    (:meth:`from_sklearn`), and saved as plain arrays (:meth:`save`, :meth:`load`).

    Args:
        arrays: ``feature, threshold, left, right, default_left, missing, leaf_value, roots``.
        n_features: the number of features the trees were fitted on.
        average: divide the sum by the number of trees (random forests).
        float32_rows: round the features to float32 before comparing (scikit-learn's trees
            compare float32 features with double thresholds).

    Raises:
        ValueError: arrays of the wrong shape, or indices out of range (a damaged file).
    """

    ARRAYS = ("feature", "threshold", "left", "right", "default_left", "missing", "leaf_value",
              "roots")
    DTYPES = (np.int32, np.float64, np.int32, np.int32, np.bool_, np.int8, np.float64, np.int32)
    feature: np.ndarray
    threshold: np.ndarray
    left: np.ndarray
    right: np.ndarray
    default_left: np.ndarray
    missing: np.ndarray
    leaf_value: np.ndarray
    roots: np.ndarray

    def __init__(self, arrays: Mapping[str, np.ndarray], n_features: int, average: bool = False,
                 float32_rows: bool = False) -> None:
        for name, dtype in zip(self.ARRAYS, self.DTYPES, strict=True):
            setattr(self, name, np.ascontiguousarray(np.asarray(arrays[name]), dtype=dtype))
        self.n_features, self.average, self.float32_rows = n_features, average, float32_rows
        self.importances: np.ndarray | None = None
        self._check()

    def _check(self) -> None:
        n_nodes, n_leaves = len(self.feature), len(self.leaf_value)
        if any(len(getattr(self, name)) != n_nodes
               for name in ("threshold", "left", "right", "default_left", "missing")):
            raise ValueError("the node arrays differ in length")
        index = np.arange(n_nodes)
        for child in (self.left, self.right, self.roots):
            leaf = child < 0
            parent = index if child is not self.roots else np.full(len(child), -1)
            if not ((leaf & (~child < n_leaves)) | (~leaf & (child > parent)
                                                     & (child < n_nodes))).all():
                raise ValueError("a child or root index is out of range or before its parent")
        if ((self.feature < 0) | (self.feature >= self.n_features)).any() or \
                ((self.missing < 0) | (self.missing > 2)).any():
            raise ValueError("a split feature or missing-value kind is out of range")

    @classmethod
    def from_booster(cls, booster: Any, num_iteration: int | None = None) -> FlatForest:
        """A LightGBM booster's trees (``Booster.dump_model()``), scored as ``Booster.predict``.

        Args:
            booster: a fitted ``lightgbm.Booster``.
            num_iteration: the trees used, the first ``num_iteration`` (0 or None: all), as in
                ``Booster.predict``.

        Raises:
            ValueError: categorical splits, linear trees or several trees per iteration.
        """
        model = booster.dump_model(num_iteration=num_iteration or -1)
        if model.get("num_tree_per_iteration", 1) != 1:
            raise ValueError("several trees per iteration (multiclass) are not flattened")
        nodes: dict[str, list[Any]] = {name: [] for name in cls.ARRAYS}

        def visit(node: dict[str, Any]) -> int:
            if "leaf_value" in node or "split_feature" not in node:
                if "leaf_coeff" in node:
                    raise ValueError("linear trees are not flattened")
                nodes["leaf_value"].append(float(node.get("leaf_value", 0.0)))
                return ~(len(nodes["leaf_value"]) - 1)
            if node.get("decision_type") != "<=":
                raise ValueError(f"a {node.get('decision_type')!r} split (categorical) is not "
                                 "flattened")
            index = len(nodes["feature"])
            nodes["feature"].append(int(node["split_feature"]))
            nodes["threshold"].append(float(node["threshold"]))
            nodes["default_left"].append(bool(node["default_left"]))
            nodes["missing"].append(_MISSING[str(node["missing_type"])])
            nodes["left"].append(0)
            nodes["right"].append(0)
            nodes["left"][index] = visit(node["left_child"])
            nodes["right"][index] = visit(node["right_child"])
            return index

        nodes["roots"] = [visit(tree["tree_structure"]) for tree in model["tree_info"]]
        # random-forest mode: LightGBM divides the sum by the number of trees
        return cls({k: np.asarray(v) for k, v in nodes.items()},
                   int(model["max_feature_idx"]) + 1,
                   average=bool(model.get("average_output", False)))

    @classmethod
    def from_sklearn(cls, forest: Any) -> FlatForest:
        """A fitted scikit-learn ``RandomForestRegressor`` (one output), flattened.

        Read from the trees' public attributes; it scores as the forest's ``predict`` in one
        thread does.
        """
        trees = [{"children_left": e.tree_.children_left,
                  "children_right": e.tree_.children_right,
                  "feature": e.tree_.feature, "threshold": e.tree_.threshold,
                  "missing_go_to_left": getattr(e.tree_, "missing_go_to_left", None),
                  "value": e.tree_.value[:, 0, 0]} for e in forest.estimators_]
        return cls.from_node_arrays(trees, int(forest.n_features_in_),
                                    np.asarray(forest.feature_importances_, dtype=np.float64))

    @classmethod
    def from_node_arrays(cls, trees: Sequence[Mapping[str, np.ndarray | None]],
                         n_features: int, importances: np.ndarray | None = None) -> FlatForest:
        """Trees in scikit-learn's node layout, averaged as a random forest.

        Each tree: ``children_left``/``children_right`` (-1 at leaves), ``feature``,
        ``threshold``, ``missing_go_to_left`` (or None) and ``value``, one entry per node.

        Raises:
            ValueError: a tree whose children are out of range.
        """
        arrays: dict[str, list[np.ndarray]] = {name: [] for name in cls.ARRAYS}
        n_nodes = n_leaves = 0
        for tree in trees:
            left, right = (np.asarray(tree[k], dtype=np.int64) for k in ("children_left",
                                                                         "children_right"))
            leaf = left < 0
            if len(right) != len(leaf) or ((left >= len(leaf)) | (right >= len(leaf))).any() \
                    or (leaf != (right < 0)).any() or not len(leaf):
                raise ValueError("a tree's children are out of range")
            node_index = np.cumsum(~leaf) - 1 + n_nodes  # inner nodes keep their order
            leaf_index = np.cumsum(leaf) - 1 + n_leaves

            def code(child: np.ndarray, leaf: np.ndarray = leaf,
                     nodes: np.ndarray = node_index, leaves: np.ndarray = leaf_index
                     ) -> np.ndarray:
                child = np.where(child < 0, 0, child)  # leaves' -1, never read
                return np.where(leaf[child], ~leaves[child], nodes[child])

            inner = ~leaf
            go_left = tree.get("missing_go_to_left")
            arrays["feature"].append(np.asarray(tree["feature"])[inner])
            arrays["threshold"].append(np.asarray(tree["threshold"])[inner])
            arrays["left"].append(code(left[inner]))
            arrays["right"].append(code(right[inner]))
            arrays["default_left"].append(np.zeros(int(inner.sum()), dtype=bool)
                                          if go_left is None
                                          else np.asarray(go_left, dtype=bool)[inner])
            arrays["missing"].append(np.full(int(inner.sum()), _MISSING["NaN"]))
            arrays["leaf_value"].append(np.asarray(tree["value"], dtype=np.float64)[leaf])
            arrays["roots"].append(code(np.array([0])))
            n_nodes, n_leaves = n_nodes + int(inner.sum()), n_leaves + int(leaf.sum())
        flat = cls({k: np.concatenate(v) if v else np.zeros(0) for k, v in arrays.items()},
                   n_features, average=True, float32_rows=True)
        flat.importances = importances
        return flat

    def save(self, path: str | Path) -> None:
        """Writes the node arrays, the settings and the importances to an ``.npz`` file."""
        arrays = {name: getattr(self, name) for name in self.ARRAYS}
        arrays["settings"] = np.array([self.n_features, self.average, self.float32_rows],
                                      dtype=np.int64)
        if self.importances is not None:
            arrays["importances"] = self.importances
        save_arrays(arrays, path)

    @classmethod
    def load(cls, path: str | Path) -> FlatForest:
        """Reads a forest written by :meth:`save` (``allow_pickle=False``).

        Raises:
            ValueError: an unreadable file or malformed trees (the message names the file).
        """
        try:
            arrays = load_arrays(path)  # bounded by the file's size
            n_features, average, float32_rows = (int(v) for v in arrays["settings"])
            flat = cls(arrays, n_features, bool(average), bool(float32_rows))
        except (OSError, ValueError, EOFError, KeyError, TypeError) as error:
            raise ValueError(f"{path}: not a readable forest file ({error})") from None
        flat.importances = arrays.get("importances")
        return flat

    def __len__(self) -> int:
        return len(self.roots)

    def predict(self, features: np.ndarray) -> np.ndarray:
        """``[N]`` float64 raw scores of ``[N, F]`` rows, as the library's predict gives them."""
        rows = np.asarray(features, dtype=np.float32) if self.float32_rows else features
        rows = np.ascontiguousarray(rows, dtype=np.float64)
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
