"""The compiled assembly of the candidates and their 13 features (Canuto et al., Table I).

One path for batches and single objects (issue 40: the features were most of an online answer,
in a hundred small tensor operations per call). Two numba kernels run over a chunk's ragged
arrays, before and after rule mining (:meth:`tagtorch.candidates.rules.RuleIndex.mine`):

1. :func:`text_terms`: the distinct terms of each object's text fields outside its input tags,
   the text candidates (they are also the terms whose rule features mining always emits).
2. :func:`assemble`: each object's candidates, the union of its rule consequents and its other
   candidate terms, by code, with the five rule features, the four text features (``ts``,
   ``tf``, ``wts``, ``wtf``), the four per-term features of D (``iff``, ``stab``, ``entropy``,
   ``pred``) and the label. The definitions are in :mod:`tagtorch.candidates.latre`.

The text fields of a chunk are passed as one array of terms with ``[n_fields, B + 1]`` offsets
(:func:`stack_fields`).
"""

from __future__ import annotations

import numba
import numpy as np

from tagtorch.candidates.rules import _contains, _distinct
from tagtorch.data.ragged import Ragged

__all__ = ["assemble", "stack_fields", "text_terms"]


def stack_fields(fields: list[Ragged], n_rows: int) -> tuple[np.ndarray, np.ndarray]:
    """The text fields of ``n_rows`` objects as ``(offsets [n_fields, n_rows + 1], terms)``.

    Field ``f`` of object ``i`` is ``terms[offsets[f, i]:offsets[f, i + 1]]``.

    Example:
        >>> offsets, terms = stack_fields([Ragged.from_lists([[4], [5, 6]]),
        ...                                Ragged.from_lists([[], [7]])], 2)
        >>> offsets.tolist(), terms.tolist()
        ([[0, 1, 3], [3, 3, 4]], [4, 5, 6, 7])
    """
    offsets = np.zeros((len(fields), n_rows + 1), np.int64)
    base = 0
    for f, field in enumerate(fields):
        offsets[f] = field.offsets + base
        base += len(field.values)
    values = [field.values.astype(np.int64, copy=False) for field in fields]
    return offsets, np.concatenate(values) if values else np.zeros(0, np.int64)


@numba.njit(nogil=True, cache=True)
def _object_terms(field_ptr: np.ndarray, field_terms: np.ndarray, i: int) -> np.ndarray:
    """The distinct terms of object ``i`` over every text field, ascending."""
    n_terms = 0
    for f in range(field_ptr.shape[0]):
        n_terms += field_ptr[f, i + 1] - field_ptr[f, i]
    terms = np.empty(n_terms, np.int64)
    at = 0
    for f in range(field_ptr.shape[0]):
        for t in range(field_ptr[f, i], field_ptr[f, i + 1]):
            terms[at] = field_terms[t]
            at += 1
    return _distinct(terms)


@numba.njit(nogil=True, cache=True)
def text_terms(inp_ptr: np.ndarray, inp: np.ndarray, field_ptr: np.ndarray,
               field_terms: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The text candidates: each object's distinct text terms outside its input tags.

    Args:
        inp_ptr: ``[B + 1]`` offsets of the input tags.
        inp: the input tags.
        field_ptr: ``[n_fields, B + 1]`` offsets of the text fields (:func:`stack_fields`).
        field_terms: their terms.

    Returns:
        ``(rows [n], terms [n])``, by row, then term, ascending (int64).
    """
    bound = 0
    for f in range(field_ptr.shape[0]):
        bound += field_ptr[f, -1] - field_ptr[f, 0]
    rows = np.empty(bound, np.int64)
    terms = np.empty(bound, np.int64)
    n = 0
    for i in range(len(inp_ptr) - 1):
        inputs = _distinct(inp[inp_ptr[i]:inp_ptr[i + 1]])
        for term in _object_terms(field_ptr, field_terms, i):
            if not _contains(inputs, term):
                rows[n] = i
                terms[n] = term
                n += 1
    return rows[:n], terms[:n]


@numba.njit(nogil=True, cache=True)
def _union(rule_cols: np.ndarray, rule_feats: np.ndarray, others: np.ndarray, cols: np.ndarray,
           features: np.ndarray, at: int) -> int:
    """Writes the union of one object's rule consequents and ``others`` from row ``at`` on.

    ``rule_cols`` are ascending and distinct, ``others`` too; a candidate's first five
    features are its rule features (0 when no rule has it). Returns the next free row.
    """
    r = 0
    o = 0
    while r < len(rule_cols) or o < len(others):
        if o == len(others) or (r < len(rule_cols) and rule_cols[r] <= others[o]):
            if o < len(others) and rule_cols[r] == others[o]:
                o += 1
            cols[at] = rule_cols[r]
            for k in range(5):
                features[at, k] = rule_feats[r, k]
            r += 1
        else:
            cols[at] = others[o]
            o += 1
        at += 1
    return at


@numba.njit(nogil=True, cache=True)
def _text_features(codes: np.ndarray, field_ptr: np.ndarray, field_terms: np.ndarray,
                   afs: np.ndarray, i: int, features: np.ndarray) -> None:
    """Columns 5..8 (``ts, tf, wts, wtf``) of object ``i``'s candidates ``codes`` (ascending).

    The weighted sums add the fields in order in float32.
    """
    n_fields = field_ptr.shape[0]
    tf = np.zeros((len(codes), n_fields), np.float32)
    for f in range(n_fields):
        for t in range(field_ptr[f, i], field_ptr[f, i + 1]):
            at = np.searchsorted(codes, field_terms[t])
            if at < len(codes) and codes[at] == field_terms[t]:
                tf[at, f] += 1
    for j in range(len(codes)):
        ts, total = np.float32(0), np.float32(0)
        wts, wtf = np.float32(0), np.float32(0)
        for f in range(n_fields):
            present = np.float32(1) if tf[j, f] > 0 else np.float32(0)
            ts += present
            total += tf[j, f]
            wts += present * afs[f]
            wtf += tf[j, f] * afs[f]
        features[j, 5], features[j, 6], features[j, 7], features[j, 8] = ts, total, wts, wtf


@numba.njit(nogil=True, cache=True)
def assemble(rule_ptr: np.ndarray, rule_cols: np.ndarray, rule_feats: np.ndarray,
             other_ptr: np.ndarray, others: np.ndarray, field_ptr: np.ndarray,
             field_terms: np.ndarray, afs: np.ndarray, gold_ptr: np.ndarray, gold: np.ndarray,
             term_features: np.ndarray
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Candidates, features and labels of a chunk of ``B`` objects.

    Args:
        rule_ptr: ``[B + 1]`` offsets of each object's rule consequents.
        rule_cols: the consequents, ascending within an object.
        rule_feats: ``[n_rules, 5]`` float64 ``sum_1, sum_l, sum_plus, vote, vote_plus``.
        other_ptr: ``[B + 1]`` offsets of each object's other candidate terms.
        others: those terms (any order, repeats allowed).
        field_ptr: ``[n_fields, B + 1]`` offsets of the text fields (:func:`stack_fields`).
        field_terms: their terms.
        afs: ``[n_fields]`` float32 ``AFS`` of each field.
        gold_ptr: ``[B + 1]`` offsets of the gold tags (labels only).
        gold: the gold tags.
        term_features: ``[n_terms, 4]`` float32 ``iff, stab, entropy, pred`` of every term.

    Returns:
        ``(rows [n], cols [n], features [n, 13] float32, labels [n] float32)``, by row, then
        code, ascending.
    """
    bound = len(rule_cols) + len(others)
    rows = np.empty(bound, np.int64)
    cols = np.empty(bound, np.int64)
    features = np.zeros((bound, 9 + term_features.shape[1]), np.float32)
    labels = np.zeros(bound, np.float32)
    end = 0
    for i in range(len(rule_ptr) - 1):
        first = end
        end = _union(rule_cols[rule_ptr[i]:rule_ptr[i + 1]],
                     rule_feats[rule_ptr[i]:rule_ptr[i + 1]],
                     _distinct(others[other_ptr[i]:other_ptr[i + 1]]), cols, features, first)
        codes = cols[first:end]
        rows[first:end] = i
        _text_features(codes, field_ptr, field_terms, afs, i, features[first:end])
        for j in range(end - first):
            features[first + j, 9:] = term_features[codes[j]]
        for g in range(gold_ptr[i], gold_ptr[i + 1]):
            at = np.searchsorted(codes, gold[g])
            if at < len(codes) and codes[at] == gold[g]:
                labels[first + at] = 1.0
    return rows[:end], cols[:end], features[:end], labels[:end]
