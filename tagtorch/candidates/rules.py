"""LATRE's association rules, mined lazily per object by compiled kernels over an index of D.

The definitions (supports, confidences, the rule thresholds, ℓ, the caps) are those of
:mod:`tagtorch.candidates.latre`; this module is the engine that computes, for every target
object o, the rule features ``sum_1, sum_l, sum_plus, vote, vote_plus`` of every consequent c.
The batched generator and single-object serving run the same kernel; a batch is split into
slices that threads run side by side (the kernels release the GIL).

The index of D, built once by :meth:`RuleIndex.fit`:

- ``postings``: for every tag, the sorted D objects tagged with it; ``object_tags``: for every
  D object, its tags (both CSR, int32 values);
- the one-tag rules ``x -> c`` (CSR by x): consequent, ``supp({x, c})`` and the weight
  ``Stab(x, k_x) Stab(c, k_c) Rank(c, x, k_r)`` of Sum+ and Vote+; their confidences are
  ``supp({x, c}) / f_tag(x)``, computed in float64 when used.

Per object (:func:`_mine`), with I the input tags and A ⊆ I the antecedent tags of size ≥ 2
(all of I, or its ``max_antecedent_tags`` most frequent in D):

1. the one-tag rules of every ``x ∈ I`` are summed from the index (``sum_1``, ``sum_plus``,
   ``vote``, ``vote_plus`` and the ℓ = 1 part of ``sum_l``);
2. the *projection*: the D objects d holding at least two tags of A, found by walking the
   postings of A once, each with ``M(d) = A ∩ I_d`` (a hash table keyed by d, sized by the
   postings walked: nothing sized by |D| is built per request);
3. ``supp(X)`` of every antecedent ``X ⊆ A``, ``2 ≤ |X| ≤ ℓ``, that occurs in D, counted by
   enumerating the subsets of every ``M(d)`` (an X outside every ``M(d)`` has support 0 and
   forms no rule: this is Apriori's pruning, exact, at no extra cost);
4. the rules of those antecedents. With the default thresholds (``min_support = 1``,
   ``min_confidence = 0``) every co-occurrence is a rule, and

   ``Σ_X θ(X -> c) = Σ_X supp(X ∪ {c}) / supp(X) = Σ_d [c ∈ I_d] w(d)``,
   ``w(d) = Σ_{X ⊆ M(d), 2 ≤ |X| ≤ ℓ} 1 / supp(X)``,

   so each projected object adds its weight to its tags once, instead of once per antecedent
   it covers (a factor of up to ``C(|M(d)|, 2) + C(|M(d)|, 3)`` less work than counting the
   consequents of every antecedent). With thresholds, the consequents of every antecedent with
   ``supp(X) ≥ min_support`` (Apriori) are counted over the D objects that cover it, and a
   rule is kept when ``supp(X ∪ {c}) ≥ min_support`` and ``θ ≥ min_confidence``;
5. the consequents outside I are emitted with their five sums; with ``top_k`` (the generator's
   ``max_rule_candidates``) only the best ``top_k`` by ``sum_l`` (ties by term code) are kept,
   plus any consequent among the object's ``keep`` terms (its text terms and topic candidates,
   which are candidates anyway and need their rule features).

Both sums of step 4 are exact; they differ from a per-antecedent sum only by float64 rounding.
"""

from __future__ import annotations

import itertools
import math
import threading
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Self, TypeVar

import numba
import numpy as np

from tagtorch.data.ragged import Ragged

_GOLDEN = np.uint64(11400714819323198485)  # 2^64 / golden ratio: multiplicative hashing
T = TypeVar("T")
_MAX_KEY = 1 << 62
"""The antecedent keys of one object must stay below this (checked before mining)."""


# ------------------------------------------------------------------------------- kernels
@numba.njit(nogil=True, cache=True)
def _table_size(n: int) -> int:
    """A power of two at least twice ``n`` (and at least 16)."""
    size = 16
    while size < 2 * n:
        size *= 2
    return size


@numba.njit(nogil=True, cache=True)
def _probe(keys: np.ndarray, key: int, shift: np.uint64) -> np.int64:
    """The slot of ``key`` in an open-addressing table (where it is, or the free slot to use)."""
    mask = len(keys) - 1
    h = np.int64((np.uint64(key) * _GOLDEN) >> shift)
    while keys[h] != key and keys[h] != -1:
        h = (h + 1) & mask
    return h


@numba.njit(nogil=True, cache=True)
def _table(n: int):
    """An empty open-addressing table for ``n`` keys: ``(keys, ids, shift)`` (empty: -1)."""
    size = _table_size(n)
    return np.full(size, -1, np.int64), np.empty(size, np.int32), _shift(size)


@numba.njit(nogil=True, cache=True)
def _shift(size: int) -> np.uint64:
    bits = 0
    while (1 << bits) < size:
        bits += 1
    return np.uint64(64 - bits)


@numba.njit(nogil=True, cache=True)
def _pair_rows(lo: int, hi: int, post_ptr: np.ndarray, post: np.ndarray, tag_ptr: np.ndarray,
               tags: np.ndarray, n_terms: int, min_count: int, min_ratio: float,
               diagonal: bool, out_ptr: np.ndarray, out_cols: np.ndarray,
               out_count: np.ndarray, out_position: np.ndarray,
               entropy: np.ndarray) -> None:
    """Co-occurrence rows ``x -> c`` of the tags ``x`` in ``[lo, hi)``.

    Keeps ``c`` when ``supp({x, c}) >= min_count`` and ``supp({x, c}) / f(x) >= min_ratio``
    (and ``c != x`` unless ``diagonal``). With ``out_ptr`` of length 0 it only counts: the
    kept number of each row goes to ``out_count[x]``. Otherwise it fills the row at
    ``out_ptr[x]``: consequents ascending, their supports, 1-based positions by support
    descending (ties by code ascending) and the row's entropy ``-Σ θ ln θ``.
    """
    counter = np.zeros(n_terms, np.int32)
    touched = np.empty(n_terms, np.int32)
    fill = len(out_ptr) > 0
    for x in range(lo, hi):
        n_touched = 0
        f_x = post_ptr[x + 1] - post_ptr[x]
        for p in range(post_ptr[x], post_ptr[x + 1]):
            d = post[p]
            for q in range(tag_ptr[d], tag_ptr[d + 1]):
                c = tags[q]
                if counter[c] == 0:
                    touched[n_touched] = c
                    n_touched += 1
                counter[c] += 1
        kept = 0
        for t in range(n_touched):
            c = touched[t]
            count = counter[c]
            if (count >= min_count and count / f_x >= min_ratio
                    and (diagonal or c != x)):
                if fill:
                    out_cols[out_ptr[x] + kept] = c
                kept += 1
            if not fill:
                counter[c] = 0
        if not fill:
            out_count[x] = kept
            continue
        start = out_ptr[x]
        row = np.sort(out_cols[start:start + kept].astype(np.int64))
        by_support = np.empty(kept, np.int64)  # support descending, then code ascending
        h = 0.0
        for t in range(kept):
            out_cols[start + t] = row[t]
            support = counter[row[t]]
            out_count[start + t] = support
            by_support[t] = (f_x - support) * n_terms + row[t]
            theta = support / f_x
            h -= theta * math.log(theta)
        entropy[x] = h
        by_support = np.sort(by_support)
        for rank in range(kept):
            c = by_support[rank] % n_terms
            out_position[start + np.searchsorted(row, c)] = rank + 1
        for t in range(n_touched):
            counter[touched[t]] = 0


@numba.njit(nogil=True, cache=True)
def _grow(cand: np.ndarray, acc: np.ndarray, extra: np.ndarray, need: int):
    """The candidate buffers with room for at least ``need`` entries."""
    size = len(cand)
    while size < need:
        size *= 2
    new_cand = np.empty(size, np.int32)
    new_acc = np.zeros((size, 5))
    new_extra = np.zeros(size, np.int32)
    for s in range(len(cand)):
        new_cand[s] = cand[s]
        new_extra[s] = extra[s]
        for f in range(5):
            new_acc[s, f] = acc[s, f]
    return new_cand, new_acc, new_extra


@numba.njit(nogil=True, cache=True)
def _binomials(m: int, ell: int) -> np.ndarray:
    """``[m + 1, ell + 1]`` binomial coefficients ``C(j, i)`` (int64; callers bound them)."""
    table = np.zeros((m + 1, ell + 1), np.int64)
    for j in range(m + 1):
        table[j, 0] = 1
        for i in range(1, min(j, ell) + 1):
            table[j, i] = table[j - 1, i - 1] + (table[j - 1, i] if i <= j - 1 else 0)
    return table


@numba.njit(nogil=True, cache=True)
def _distinct(values: np.ndarray) -> np.ndarray:
    """The distinct values, ascending (int64)."""
    ordered = np.sort(values.astype(np.int64))
    n = 0
    for t in range(len(ordered)):
        if t == 0 or ordered[t] != ordered[t - 1]:
            ordered[n] = ordered[t]
            n += 1
    return ordered[:n]


@numba.njit(nogil=True, cache=True)
def _contains(sorted_values: np.ndarray, value: int) -> np.bool_:
    at = np.searchsorted(sorted_values, value)
    return at < len(sorted_values) and sorted_values[at] == value


@numba.njit(nogil=True, cache=True)
def kth_largest(values: np.ndarray, k: int) -> float:
    """The ``k``-th largest of ``values`` (``1 <= k <= len(values)``), by a bounded min-heap."""
    heap = values[:k].copy()
    for start in range(k // 2 - 1, -1, -1):
        _sift_down(heap, start)
    for t in range(k, len(values)):
        if values[t] > heap[0]:
            heap[0] = values[t]
            _sift_down(heap, 0)
    return heap[0]


@numba.njit(nogil=True, cache=True)
def _sift_down(heap: np.ndarray, at: int) -> None:
    n = len(heap)
    while True:
        low, left = at, 2 * at + 1
        if left < n and heap[left] < heap[low]:
            low = left
        if left + 1 < n and heap[left + 1] < heap[low]:
            low = left + 1
        if low == at:
            return
        heap[at], heap[low] = heap[low], heap[at]
        at = low


@numba.njit(nogil=True, cache=True)
def _by_code(chosen: np.ndarray, cand: np.ndarray, slot: np.ndarray) -> np.ndarray:
    """The slots ``chosen`` ordered by their terms' codes.

    When the codes span a range not much wider than their number, a scan of the term-to-slot
    map over that range replaces the sort.
    """
    n = len(chosen)
    if n == 0:
        return chosen
    low = high = cand[chosen[0]]
    for t in range(1, n):
        low = min(low, cand[chosen[t]])
        high = max(high, cand[chosen[t]])
    if high - low >= 8 * n:  # codes are unique: sort (code, slot) keys
        keys = np.empty(n, np.int64)
        for t in range(n):
            keys[t] = np.int64(cand[chosen[t]]) * len(cand) + chosen[t]
        keys = np.sort(keys)
        for t in range(n):
            keys[t] = keys[t] % len(cand)
        return keys
    picked = np.zeros(len(cand), np.bool_)
    for t in range(n):
        picked[chosen[t]] = True
    out = np.empty(n, chosen.dtype)
    k = 0
    for c in range(low, high + 1):
        s = slot[c]
        if s >= 0 and picked[s]:
            out[k] = s
            k += 1
    return out


@numba.njit(nogil=True, cache=True)
def _slot_of(c, slot, cand, acc, extra, n_cand):
    """``(slot of term c, candidates so far)``: a new, zeroed slot when c is new.

    The buffers must have room for it.
    """
    s = slot[c]
    if s >= 0:
        return s, n_cand
    slot[c] = n_cand
    cand[n_cand] = c
    for f in range(5):
        acc[n_cand, f] = 0.0
    extra[n_cand] = 0
    return n_cand, n_cand + 1


@numba.njit(nogil=True, cache=True)
def _one_tag_sums(inputs, post_ptr, rule_ptr, rule_cols, rule_support, rule_weight, slot,
                  cand, acc, extra, n_cand):
    """Step 1: the one-tag rules of every input tag (``inputs`` sorted) into the sums."""
    for p in range(len(inputs)):
        x = inputs[p]
        if p > 0 and inputs[p - 1] == x:
            continue
        f_x = post_ptr[x + 1] - post_ptr[x]
        start, stop = rule_ptr[x], rule_ptr[x + 1]
        if n_cand + stop - start > len(cand):
            cand, acc, extra = _grow(cand, acc, extra, n_cand + stop - start)
        for r in range(start, stop):
            s, n_cand = _slot_of(rule_cols[r], slot, cand, acc, extra, n_cand)
            theta = rule_support[r] / f_x
            w = rule_weight[r]
            acc[s, 0] += theta
            acc[s, 1] += theta
            acc[s, 2] += theta * w
            acc[s, 3] += 1.0
            acc[s, 4] += w
    return cand, acc, extra, n_cand


@numba.njit(nogil=True, cache=True)
def _projection(antecedents, post_ptr, post, n_terms):
    """Step 2: the D objects holding at least two tags of A (``antecedents``, distinct).

    The tags are walked by postings length ascending, so that the longest list, walked last,
    only looks objects up (an object first met there holds one tag of A).

    Returns:
        ``(objects [n], held [n], member_ptr [n + 1], members)``: each object, how many tags
        of A it holds, and those tags as ascending indices into A ordered by length.
    """
    m = len(antecedents)
    by_length = np.empty(m, np.int64)
    for j in range(m):
        a = antecedents[j]
        by_length[j] = (post_ptr[a + 1] - post_ptr[a]) * n_terms + a
    by_length = np.sort(by_length)
    walked = 0
    for j in range(m - 1):
        walked += by_length[j] // n_terms
    longest = by_length[m - 1] // n_terms
    keys, ids, shift = _table(walked)
    objects = np.empty(walked, np.int32)
    held = np.zeros(walked, np.int32)
    entry_d = np.empty(walked + longest, np.int32)
    entry_j = np.empty(walked + longest, np.int32)
    n_d = 0
    e = 0
    for j in range(m):
        a = by_length[j] % n_terms
        last = j == m - 1
        for p in range(post_ptr[a], post_ptr[a + 1]):
            d = post[p]
            h = _probe(keys, d, shift)
            if keys[h] == -1:
                if last:
                    continue
                keys[h] = d
                ids[h] = n_d
                objects[n_d] = d
                n_d += 1
            entry_d[e] = ids[h]
            entry_j[e] = j
            held[ids[h]] += 1
            e += 1
    member_ptr = np.zeros(n_d + 1, np.int64)
    for k in range(n_d):
        member_ptr[k + 1] = member_ptr[k] + (held[k] if held[k] >= 2 else 0)
    members = np.empty(member_ptr[n_d], np.int32)
    filled = np.zeros(n_d, np.int64)
    for t in range(e):  # entries come by j ascending: member lists are sorted
        k = entry_d[t]
        if held[k] >= 2:
            members[member_ptr[k] + filled[k]] = entry_j[t]
            filled[k] += 1
    return objects[:n_d], held[:n_d], member_ptr, members


@numba.njit(nogil=True, cache=True)
def _antecedent_supports(m, held, member_ptr, members, top):
    """Step 3: ``supp(X)`` of the antecedents ``X ⊆ A``, ``2 <= |X| <= top``, in the projection.

    Keys are colex ranks offset by size. Every projected object's subsets are enumerated in a
    fixed order (objects, then sizes, then combinations), which the later steps repeat.

    Returns:
        ``(support [n_x], entry [n_entries], binom)``: the support of each distinct antecedent,
        the antecedent of each enumerated subset, and the binomial table.
    """
    binom = _binomials(m, top)
    offset = np.zeros(top + 2, np.int64)
    for s in range(2, top + 1):
        offset[s + 1] = offset[s] + binom[m, s]
    n_entries = 0
    for k in range(len(held)):
        n_entries += _subsets(held[k], top, binom)
    distinct = min(n_entries, offset[top + 1])
    keys, ids, shift = _table(distinct)
    support = np.zeros(distinct, np.int32)
    entry = np.empty(n_entries, np.int32)
    n_x = 0
    e = 0
    index = np.empty(top, np.int64)
    for k in range(len(held)):
        n_held = held[k]
        if n_held < 2:
            continue
        row = members[member_ptr[k]:member_ptr[k + 1]]
        for s in range(2, min(top, n_held) + 1):
            for t in range(s):
                index[t] = t
            while True:
                key = offset[s]
                for t in range(s):
                    key += binom[row[index[t]], t + 1]
                h = _probe(keys, key, shift)
                if keys[h] == -1:
                    keys[h] = key
                    ids[h] = n_x
                    n_x += 1
                support[ids[h]] += 1
                entry[e] = ids[h]
                e += 1
                t = s - 1  # the next combination of s positions among n_held
                while t >= 0 and index[t] == n_held - s + t:
                    t -= 1
                if t < 0:
                    break
                index[t] += 1
                for u in range(t + 1, s):
                    index[u] = index[u - 1] + 1
    return support[:n_x], entry, binom


@numba.njit(nogil=True, cache=True)
def _subsets(n_held, top, binom):
    """How many subsets of sizes ``2..top`` a projected object with ``n_held`` tags has."""
    n = 0
    for s in range(2, min(top, n_held) + 1):
        n += binom[n_held, s]
    return n


@numba.njit(nogil=True, cache=True)
def _weighted_sums(objects, held, support, entry, binom, top, tag_ptr, tags, slot, cand,
                   acc, extra, n_cand):
    """Step 4 without thresholds: every projected object adds ``w(d)`` to its tags' sum_l."""
    e = 0
    for k in range(len(objects)):
        n_sub = _subsets(held[k], top, binom)
        weight = 0.0
        for t in range(e, e + n_sub):
            weight += 1.0 / support[entry[t]]
        e += n_sub
        if n_sub == 0:
            continue
        d = objects[k]
        if n_cand + tag_ptr[d + 1] - tag_ptr[d] > len(cand):
            cand, acc, extra = _grow(cand, acc, extra, n_cand + tag_ptr[d + 1] - tag_ptr[d])
        for q in range(tag_ptr[d], tag_ptr[d + 1]):
            s, n_cand = _slot_of(tags[q], slot, cand, acc, extra, n_cand)
            acc[s, 1] += weight
    return cand, acc, extra, n_cand


@numba.njit(nogil=True, cache=True)
def _threshold_sums(objects, held, support, entry, binom, top, tag_ptr, tags, min_support,
                    min_confidence, slot, cand, acc, extra, n_cand):
    """Step 4 with thresholds: the consequents of every antecedent with enough support."""
    n_x = len(support)
    x_ptr = np.zeros(n_x + 1, np.int64)
    for x in range(n_x):
        x_ptr[x + 1] = x_ptr[x] + support[x]
    covering = np.empty(x_ptr[n_x], np.int32)  # the projected objects of each antecedent
    placed = np.zeros(n_x, np.int64)
    e = 0
    for k in range(len(objects)):
        for _ in range(_subsets(held[k], top, binom)):
            x = entry[e]
            covering[x_ptr[x] + placed[x]] = k
            placed[x] += 1
            e += 1
    touched = np.empty(16, np.int32)
    for x in range(n_x):
        supp_x = support[x]
        if supp_x < min_support:  # Apriori: no consequent of X reaches it either
            continue
        n_touched = 0
        for r in range(x_ptr[x], x_ptr[x + 1]):
            d = objects[covering[r]]
            grow_to = n_cand + tag_ptr[d + 1] - tag_ptr[d]
            if grow_to > len(cand):
                cand, acc, extra = _grow(cand, acc, extra, grow_to)
            if grow_to > len(touched):
                bigger = np.empty(max(grow_to, 2 * len(touched)), np.int32)
                for t in range(n_touched):
                    bigger[t] = touched[t]
                touched = bigger
            for q in range(tag_ptr[d], tag_ptr[d + 1]):
                s, n_cand = _slot_of(tags[q], slot, cand, acc, extra, n_cand)
                if extra[s] == 0:
                    touched[n_touched] = s
                    n_touched += 1
                extra[s] += 1
        for t in range(n_touched):
            s = touched[t]
            count = extra[s]
            extra[s] = 0
            theta = count / supp_x
            if count >= min_support and theta >= min_confidence:
                acc[s, 1] += theta
    return cand, acc, extra, n_cand


@numba.njit(nogil=True, cache=True)
def _chosen(inputs, keep_terms, top_k, slot, cand, acc, n_cand):
    """Step 5: the slots emitted, by code.

    They are the consequents outside I: the best ``top_k`` by sum_l (a bounded heap finds the
    bar, ties go to the lowest codes) plus the keep terms.
    """
    eligible = np.empty(n_cand, np.int64)
    n_eligible = 0
    for s in range(n_cand):
        if acc[s, 1] > 0.0 and not _contains(inputs, cand[s]):
            eligible[n_eligible] = s
            n_eligible += 1
    eligible = eligible[:n_eligible]
    if 0 <= top_k < n_eligible:
        values = np.empty(n_eligible)
        for t in range(n_eligible):
            values[t] = acc[eligible[t], 1]
        bar = kth_largest(values, top_k)
        above = 0
        n_ties = 0
        for t in range(n_eligible):
            above += values[t] > bar
            n_ties += values[t] == bar
        tied = np.empty(n_ties, np.int64)
        n_ties = 0
        for t in range(n_eligible):
            if values[t] == bar:
                tied[n_ties] = cand[eligible[t]]
                n_ties += 1
        last_tie = np.sort(tied)[top_k - above - 1]
        kept = 0
        for t in range(n_eligible):
            code = cand[eligible[t]]
            if (values[t] > bar or (values[t] == bar and code <= last_tie)
                    or _contains(keep_terms, code)):
                eligible[kept] = eligible[t]
                kept += 1
        eligible = eligible[:kept]
    return _by_code(eligible, cand, slot)


@numba.njit(nogil=True, cache=True)
def _mine(lo, hi, inp_ptr, inp, ant_ptr, ant, keep_ptr, keep, post_ptr, post, tag_ptr, tags,
          rule_ptr, rule_cols, rule_support, rule_weight, n_terms, ell, min_support,
          min_confidence, top_k):
    """Rule features of the objects ``[lo, hi)``: ``(rows, cols, features [n, 5])``.

    Steps 1-5 of the module docstring; ``features`` are ``sum_1, sum_l, sum_plus, vote,
    vote_plus`` (float64). Rows are object indices; ``top_k < 0`` keeps every consequent.
    """
    slot = np.full(n_terms, -1, np.int32)  # term -> candidate slot of the current object
    cand = np.empty(1024, np.int32)
    acc = np.zeros((1024, 5))
    extra = np.zeros(1024, np.int32)  # per-antecedent consequent counts (thresholds)
    out_n = 0
    out_rows = np.empty(4096, np.int64)
    out_cols = np.empty(4096, np.int32)
    out_feats = np.empty((4096, 5))
    thresholds = min_support > 1 or min_confidence > 0.0
    for i in range(lo, hi):
        inputs = _distinct(inp[inp_ptr[i]:inp_ptr[i + 1]])
        cand, acc, extra, n_cand = _one_tag_sums(inputs, post_ptr, rule_ptr, rule_cols,
                                                 rule_support, rule_weight, slot, cand, acc,
                                                 extra, 0)
        antecedents = _distinct(ant[ant_ptr[i]:ant_ptr[i + 1]])
        top = min(ell, len(antecedents))
        if top >= 2:
            objects, held, member_ptr, members = _projection(antecedents, post_ptr, post,
                                                             n_terms)
            support, entry, binom = _antecedent_supports(len(antecedents), held, member_ptr,
                                                         members, top)
            if thresholds:
                cand, acc, extra, n_cand = _threshold_sums(
                    objects, held, support, entry, binom, top, tag_ptr, tags, min_support,
                    min_confidence, slot, cand, acc, extra, n_cand)
            else:
                cand, acc, extra, n_cand = _weighted_sums(
                    objects, held, support, entry, binom, top, tag_ptr, tags, slot, cand, acc,
                    extra, n_cand)
        keep_terms = _distinct(keep[keep_ptr[i]:keep_ptr[i + 1]])
        chosen = _chosen(inputs, keep_terms, top_k, slot, cand, acc, n_cand)
        if out_n + len(chosen) > len(out_rows):
            size = len(out_rows)
            while size < out_n + len(chosen):
                size *= 2
            rows_new = np.empty(size, np.int64)
            cols_new = np.empty(size, np.int32)
            feats_new = np.empty((size, 5))
            for t in range(out_n):
                rows_new[t] = out_rows[t]
                cols_new[t] = out_cols[t]
                for f in range(5):
                    feats_new[t, f] = out_feats[t, f]
            out_rows, out_cols, out_feats = rows_new, cols_new, feats_new
        for s in chosen:
            out_rows[out_n] = i
            out_cols[out_n] = cand[s]
            for f in range(5):
                out_feats[out_n, f] = acc[s, f]
            out_n += 1
        for s in range(n_cand):
            slot[cand[s]] = -1
    return out_rows[:out_n], out_cols[:out_n], out_feats[:out_n]


# --------------------------------------------------------------------------------- index
def _slices(n: int, parts: int) -> list[tuple[int, int]]:
    """``[0, n)`` cut into at most ``parts`` contiguous non-empty slices."""
    bounds = np.linspace(0, n, max(parts, 1) + 1).astype(int)
    return [(int(a), int(b)) for a, b in itertools.pairwise(bounds) if b > a]


class RuleIndex:
    """D indexed for lazy rule mining: postings, object tag lists and one-tag rules.

    Args:
        max_antecedent: ℓ.
        min_support: minimum ``supp(X ∪ {c})`` of a rule.
        min_confidence: minimum confidence of a rule.
        cache_size: for serving (ours): the results of this many one-object calls are kept,
            least recently used out first, keyed by the object's input, antecedent and keep
            terms and ``top_k``; a repeated request is then answered without mining. 0: off.

    Example:
        >>> d = Ragged.from_lists([[0, 1], [0, 1, 2], [0, 2]])
        >>> index = RuleIndex(max_antecedent=2).fit(d, 3, np.ones(3), np.ones(3), k_r=1.0)
        >>> rows, cols, feats = index.mine(Ragged.from_lists([[0, 1]]),
        ...                                Ragged.from_lists([[0, 1]]), Ragged.from_lists([[]]))
        >>> cols.tolist(), [round(v, 3) for v in feats[0].tolist()]
        ([2], [1.167, 1.667, 0.389, 2.0, 0.667])

        ``0 -> 2`` has θ 2/3 at position 2 (after ``0 -> 1``: same support, lower code) and
        ``1 -> 2`` θ 1/2 at position 2 (after ``1 -> 0``), so both weigh 1/3; ``{0, 1} -> 2``
        has θ 1/2 and adds to ``sum_l`` only.
    """

    def __init__(self, max_antecedent: int = 3, min_support: int = 1,
                 min_confidence: float = 0.0, cache_size: int = 0) -> None:
        if isinstance(cache_size, bool) or not isinstance(cache_size, int) or cache_size < 0:
            raise ValueError(f"cache_size must be an integer >= 0, got {cache_size!r}")
        self.max_antecedent, self.min_support = max_antecedent, min_support
        self.min_confidence = min_confidence
        self.cache_size = cache_size
        self._cache: OrderedDict[bytes, tuple[np.ndarray, np.ndarray, np.ndarray]] = (
            OrderedDict())
        self._cache_lock = threading.Lock()
        self.cache_hits = self.cache_misses = 0

    def __getstate__(self) -> dict[str, object]:
        """The index without its cache and lock (for copies sent to worker processes)."""
        state = dict(self.__dict__)
        state.pop("_cache_lock")
        state["_cache"] = OrderedDict()
        return state

    def __setstate__(self, state: dict[str, object]) -> None:
        self.__dict__.update(state)
        self._cache_lock = threading.Lock()

    def clear_cache(self) -> None:
        """Empties the serving cache and resets its counters."""
        with self._cache_lock:
            self._cache.clear()
            self.cache_hits = self.cache_misses = 0

    def fit(self, train_tags: Ragged, n_terms: int, stability_x: np.ndarray,
            stability_c: np.ndarray, k_r: float, threads: int = 1) -> Self:
        """Indexes D's tag sets and mines the one-tag rules.

        Args:
            train_tags: ragged ``[n_D]`` tag codes of D's objects (codes below ``n_terms``).
            n_terms: the vocabulary size.
            stability_x: ``[n_terms]`` ``Stab(x, k_x)`` of every term as an antecedent.
            stability_c: ``[n_terms]`` ``Stab(c, k_c)`` of every term as a consequent.
            k_r: the rank constant: a rule's weight is ``Stab(x, k_x) Stab(c, k_c)
                k_r / (k_r + p(c, x))``.
            threads: threads the rows are split over.
        """
        self.n_terms, self.threads = n_terms, threads
        self.tag_ptr = train_tags.offsets.astype(np.int64)
        self.tags = train_tags.values.astype(np.int32)
        order = np.argsort(self.tags, kind="stable")  # by tag, then by object
        self.post = train_tags.row_ids[order].astype(np.int32)
        self.post_ptr = np.zeros(n_terms + 1, np.int64)
        np.cumsum(np.bincount(self.tags, minlength=n_terms), out=self.post_ptr[1:])
        self.f_tag = np.diff(self.post_ptr)
        self.rule_ptr, self.rule_cols, support, position, self.entropy = self._pairs(
            self.min_support, self.min_confidence, diagonal=False, threads=threads)
        self.rule_support = support.astype(np.int32)
        x = np.repeat(np.arange(n_terms), np.diff(self.rule_ptr))
        weight = stability_x[x] * stability_c[self.rule_cols] * k_r / (k_r + position)
        self.rule_weight = weight.astype(np.float32)
        return self

    def _pairs(self, min_count: int, min_ratio: float, diagonal: bool, threads: int
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """``(ptr, cols, supports, positions, entropy)`` of the co-occurrence rows kept."""
        n = self.n_terms
        counts = np.zeros(n, np.int64)
        empty, no_cols, no_entropy = np.zeros(0, np.int64), np.zeros(0, np.int32), np.zeros(0)
        args = (self.post_ptr, self.post, self.tag_ptr, self.tags, n, min_count,
                float(min_ratio), diagonal)
        _parallel(lambda lo, hi: _pair_rows(lo, hi, *args, empty, no_cols, counts, empty,
                                            no_entropy), n, threads)
        ptr = np.zeros(n + 1, np.int64)
        np.cumsum(counts, out=ptr[1:])
        cols = np.empty(ptr[-1], np.int32)
        support = np.empty(ptr[-1], np.int64)
        position = np.empty(ptr[-1], np.int64)
        entropy = np.zeros(n)
        _parallel(lambda lo, hi: _pair_rows(lo, hi, *args, ptr, cols, support, position,
                                            entropy), n, threads)
        return ptr, cols, support, position, entropy

    def pairs(self, threads: int = 1) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every co-occurrence ``(x, c, supp({x, c}))`` in D, diagonal included (x-major)."""
        ptr, cols, support, _, _ = self._pairs(1, 0.0, diagonal=True, threads=threads)
        return np.repeat(np.arange(self.n_terms), np.diff(ptr)), cols, support

    def mine(self, input_tags: Ragged, antecedent_tags: Ragged, keep: Ragged,
             top_k: int | None = None, threads: int = 1
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Rule features of a batch of objects (steps 1-5 of the module docstring).

        Args:
            input_tags: ragged ``[B]`` I of each object.
            antecedent_tags: ragged ``[B]`` A ⊆ I of each object, the tags antecedents of
                size ≥ 2 are formed from.
            keep: ragged ``[B]`` terms whose rule features are emitted even past ``top_k``.
            top_k: the most consequents kept per object by ``sum_l``; None keeps all.
            threads: threads the objects are split over (contiguous slices).

        Returns:
            ``(rows [n], cols [n], features [n, 5])``: object row, consequent code and
            ``sum_1, sum_l, sum_plus, vote, vote_plus`` (float64), for the rule consequents
            outside I, ordered by row, then code.
        """
        longest = int(antecedent_tags.lengths.max(initial=0))
        top = min(self.max_antecedent, longest)
        if top >= 2 and sum(math.comb(longest, s) for s in range(2, top + 1)) >= _MAX_KEY:
            raise ValueError(f"{longest} antecedent tags with max_antecedent {self.max_antecedent}"
                             f" form too many antecedents to index; set max_antecedent_tags")
        key = None
        if self.cache_size and len(input_tags) == 1:
            key = b"|".join(np.unique(r.values).astype(np.int32).tobytes()
                            for r in (input_tags, antecedent_tags, keep)) + str(top_k).encode()
            with self._cache_lock:
                hit = self._cache.get(key)
                if hit is not None:
                    self._cache.move_to_end(key)
                    self.cache_hits += 1
                    return hit[0].copy(), hit[1].copy(), hit[2].copy()
                self.cache_misses += 1
        args = (input_tags.offsets, input_tags.values.astype(np.int32, copy=False),
                antecedent_tags.offsets, antecedent_tags.values.astype(np.int32, copy=False),
                keep.offsets, keep.values.astype(np.int32, copy=False), self.post_ptr,
                self.post, self.tag_ptr, self.tags, self.rule_ptr, self.rule_cols,
                self.rule_support, self.rule_weight, self.n_terms, self.max_antecedent,
                self.min_support, float(self.min_confidence), -1 if top_k is None else top_k)
        results = _parallel(lambda lo, hi: _mine(lo, hi, *args), len(input_tags), threads)
        if len(results) > 1:
            rows, columns, values = ([r[k] for r in results] for k in range(3))
            return np.concatenate(rows), np.concatenate(columns), np.concatenate(values)
        if key is not None:
            with self._cache_lock:
                self._cache[key] = results[0]
                while len(self._cache) > self.cache_size:
                    self._cache.popitem(last=False)
        return results[0]


def _parallel(work: Callable[[int, int], T], n: int, threads: int) -> list[T]:
    """``work(lo, hi)`` over ``[0, n)`` cut into ``threads`` slices, one thread each.

    The kernels release the GIL, so the slices run side by side; one slice runs in the
    calling thread.
    """
    parts = _slices(n, min(threads, n))
    if len(parts) <= 1:
        return [work(0, n)]
    with ThreadPoolExecutor(len(parts)) as pool:
        return list(pool.map(lambda part: work(*part), parts))
