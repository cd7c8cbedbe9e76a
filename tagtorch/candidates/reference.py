"""Plain per-object reference implementation of the 13 features (the test oracle).

Written straight from the formulas in the docstring of :mod:`tagtorch.candidates.latre`
with dicts, sets and loops, one target object at a time, and no array code, so that the batched
implementation can be checked against an independent computation. It is slow by design: rules
with two or more antecedent tags are derived per object by scanning D (LATRE style).

Example:
    >>> ref = ReferenceFeatures(
    ...     train_tags=[[0, 1], [0, 1, 2], [0, 2]],
    ...     train_texts=[{"title": [5]}, {"title": [1, 5]}, {"title": [2]}],
    ... )
    >>> feats = ref.candidates([0], {"title": [5, 5]})
    >>> sorted(feats)  # rule consequents 1 and 2 plus the text term 5
    [1, 2, 5]
    >>> round(feats[1]["sum_1"], 4), feats[1]["vote"], feats[5]["tf"], feats[5]["pred"]
    (0.6667, 1.0, 2.0, 0.0)
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from itertools import combinations

from tagtorch.candidates.generator import check_rule_settings

FEATURE_NAMES = (
    "sum_1",
    "sum_l",
    "sum_plus",
    "vote",
    "vote_plus",
    "ts",
    "tf",
    "wts",
    "wtf",
    "iff",
    "stab",
    "entropy",
    "pred",
)


def stability(f_tag: int, k: float) -> float:
    """``Stab = k / (k + |k - ln f_tag|)``, and 0 when ``f_tag = 0``.

    Example:
        >>> stability(0, 9.0), stability(1, 9.0), round(stability(4, math.log(4)), 6)
        (0.0, 0.5, 1.0)
    """
    if f_tag == 0:
        return 0.0
    return k / (k + abs(k - math.log(f_tag)))


class ReferenceFeatures:
    """Plain per-object implementation of the 13 features (test oracle; slow by design).

    Args:
        train_tags: ``train_tags[d]`` = tag codes of training object d (a set; repeats ignored).
        train_texts: ``train_texts[d]`` = ``{field name: term codes with repeats}``; a field
            missing from an object is an empty field.
        max_antecedent: ℓ, the largest antecedent size of a rule.
        min_support: a rule ``X -> c`` needs ``supp(X ∪ {c}) >= min_support`` (at least 1).
        min_confidence: a rule ``X -> c`` needs ``θ(X -> c) >= min_confidence``.
        k_x: stability constant of an antecedent tag in Sum+ and Vote+.
        k_c: stability constant of the candidate in Sum+ and Vote+.
        k_r: rank constant of Sum+ and Vote+.
        k_s: stability constant of the Stab feature.
        max_antecedent_tags: antecedents of size >= 2 only from this many input tags, those
            with the highest f_tag in D (ties: lower code first); None: all input tags.
        max_train_tags: a training object with more tags keeps only this many, those with the
            highest f_tag over the whole training data (ties: lower code first); None: no cap.
    """

    def __init__(
        self,
        train_tags: Sequence[Collection[int]],
        train_texts: Sequence[Mapping[str, Sequence[int]]],
        *,
        max_antecedent: int = 3,
        min_support: int = 1,
        min_confidence: float = 0.0,
        k_x: float = 9.0,
        k_c: float = 11.0,
        k_r: float = 4.0,
        k_s: float = 9.0,
        max_antecedent_tags: int | None = None,
        max_train_tags: int | None = None,
    ) -> None:
        if len(train_tags) != len(train_texts):
            raise ValueError(
                f"train_tags has {len(train_tags)} objects but train_texts {len(train_texts)}"
            )
        check_rule_settings(max_antecedent, min_support, min_confidence)
        for name, k in (("k_x", k_x), ("k_c", k_c), ("k_r", k_r), ("k_s", k_s)):
            if not k > 0:
                raise ValueError(f"{name} must be > 0, got {k}")
        self.max_antecedent = max_antecedent
        self.min_support = min_support
        self.min_confidence = min_confidence
        self.k_x, self.k_c, self.k_r, self.k_s = k_x, k_c, k_r, k_s
        self.max_antecedent_tags = max_antecedent_tags

        # D as tag sets (the most frequent max_train_tags of a longer one) and text fields
        full_counts: Counter[int] = Counter()
        for tags in train_tags:
            full_counts.update(set(tags))
        self.tag_sets: list[frozenset[int]] = []
        for tags in train_tags:
            best = sorted(set(tags), key=lambda t: (-full_counts[t], t))
            if max_train_tags is not None:
                best = best[:max_train_tags]
            self.tag_sets.append(frozenset(best))
        self.texts: list[dict[str, list[int]]] = [
            {field: list(terms) for field, terms in text.items()} for text in train_texts
        ]
        self.n_objects = len(self.tag_sets)
        self.train_fields: set[str] = set()
        for text in self.texts:
            self.train_fields.update(text)
        self._count_terms()
        self._average_field_spread()
        self._mine_one_tag_rules()

    def _count_terms(self) -> None:
        """``f_tag``, ``f_text`` and ``f_both`` of every term over D."""
        self.f_tag: Counter[int] = Counter()
        self.f_text: Counter[int] = Counter()
        self.f_both: Counter[int] = Counter()
        for tags, text in zip(self.tag_sets, self.texts, strict=True):
            text_terms: set[int] = set()
            for terms in text.values():
                text_terms.update(terms)
            for t in tags:
                self.f_tag[t] += 1
            for t in text_terms:
                self.f_text[t] += 1
                if t in tags:
                    self.f_both[t] += 1

    def _average_field_spread(self) -> None:
        """``AFS(F^i)``: the mean ``FIS(F_d^i)`` over D's objects whose field i is not empty."""
        self.afs: dict[str, float] = {}
        for field in self.train_fields:
            fis_values = []
            for text in self.texts:
                terms = text.get(field, [])
                if len(terms) == 0:
                    continue
                distinct = set(terms)
                ts_sum = 0
                for t in distinct:
                    ts_sum += self.term_spread(t, text)
                fis_values.append(ts_sum / len(distinct))
            self.afs[field] = sum(fis_values) / len(fis_values) if fis_values else 0.0

    def _mine_one_tag_rules(self) -> None:
        """One-tag rules ``x -> c`` with their positions ``p(c, x)`` and entropies."""
        # one-tag rules x -> c: pair supports, then the thresholds
        pair_support: dict[int, Counter[int]] = {}
        for tags in self.tag_sets:
            for x in tags:
                counts = pair_support.setdefault(x, Counter())
                for c in tags:
                    if c != x:
                        counts[c] += 1
        self.one_tag_rules: dict[int, dict[int, float]] = {}
        for x, counts in pair_support.items():
            rules = {}
            for c, supp_xc in counts.items():
                if self._is_rule(supp_xc, self.f_tag[x]):
                    rules[c] = supp_xc / self.f_tag[x]
            self.one_tag_rules[x] = rules

        # p(c, x): 1-based position of c among the consequents of x -> ., confidence
        # descending, ties by term code ascending
        self.position: dict[int, dict[int, int]] = {}
        for x, rules in self.one_tag_rules.items():
            ordered = sorted(rules, key=lambda c: (-rules[c], c))
            self.position[x] = {c: i + 1 for i, c in enumerate(ordered)}

        # H^tags(c) over the one-tag rules c -> i
        self.entropy: dict[int, float] = {}
        for c, rules in self.one_tag_rules.items():
            h = 0.0
            for theta in rules.values():
                h -= theta * math.log(theta)
            self.entropy[c] = h

    @staticmethod
    def term_spread(term: int, text: Mapping[str, Sequence[int]]) -> int:
        """``TS(t, d)``: number of text fields of one object that contain the term."""
        return sum(1 for terms in text.values() if term in terms)

    def _is_rule(self, supp_xc: int, supp_x: int) -> bool:
        return supp_xc >= self.min_support and supp_xc / supp_x >= self.min_confidence

    def rules(self, antecedent: Collection[int]) -> dict[int, float]:
        """``{c: θ(X -> c)}`` for the rules with antecedent X, found by scanning D.

        Example:
            >>> ref = ReferenceFeatures([[0, 1], [0, 1, 2], [0, 2]], [{}, {}, {}])
            >>> ref.rules([0, 1])  # supp({0, 1}) = 2, supp({0, 1, 2}) = 1
            {2: 0.5}
        """
        x_set = frozenset(antecedent)
        holding = [tags for tags in self.tag_sets if x_set <= tags]
        supp_x = len(holding)
        if supp_x == 0:
            return {}
        counts: Counter[int] = Counter()
        for tags in holding:
            for c in tags:
                if c not in x_set:
                    counts[c] += 1
        result = {}
        for c in sorted(counts):
            if self._is_rule(counts[c], supp_x):
                result[c] = counts[c] / supp_x
        return result

    def stab(self, term: int, k: float) -> float:
        """``Stab(term, k)`` with D's ``f_tag``."""
        return stability(self.f_tag[term], k)

    def rank(self, c: int, x: int) -> float:
        """``Rank(c, x, k_r) = k_r / (k_r + p(c, x))``; ``x -> c`` must be a rule."""
        return self.k_r / (self.k_r + self.position[x][c])

    def candidates(
        self, input_tags: Collection[int], texts: Mapping[str, Sequence[int]]
    ) -> dict[int, dict[str, float]]:
        """The candidates of one target object and their 13 features.

        Args:
            input_tags: I_o, the target's input tags (repeats ignored).
            texts: ``{field name: term codes with repeats}`` of the target; a missing field is
                empty.

        Returns:
            ``{candidate: {feature name: value}}`` with the names in :data:`FEATURE_NAMES`
            order: every consequent of a rule ``X -> c`` with ``X ⊆ I_o``, ``|X| <= ℓ``, plus
            every term of the target's text fields, minus I_o.
        """
        i_o = set(input_tags)
        fields = set(self.train_fields) | set(texts)
        target_text = {field: list(texts.get(field, [])) for field in fields}

        rules_by_antecedent = self._rules_of(i_o)
        candidate_set: set[int] = set()
        for rules in rules_by_antecedent.values():
            candidate_set.update(rules)
        for terms in target_text.values():
            candidate_set.update(terms)
        candidate_set -= i_o

        result: dict[int, dict[str, float]] = {}
        for c in sorted(candidate_set):
            iff = math.log((self.n_objects + 1) / (self.f_tag[c] + 1))
            stab = self.stab(c, self.k_s)
            entropy = self.entropy.get(c, 0.0)
            pred = self.f_both[c] / self.f_text[c] if self.f_text[c] > 0 else 0.0
            values = [*self._rule_features(c, rules_by_antecedent),
                      *self._text_features(c, target_text), iff, stab, entropy, pred]
            result[c] = {name: float(v) for name, v in zip(FEATURE_NAMES, values, strict=True)}
        return result

    def _rules_of(self, i_o: set[int]) -> dict[tuple[int, ...], dict[int, float]]:
        """Rules with antecedents ``X ⊆ I_o``, ``1 <= |X| <= ℓ``, by antecedent.

        The one-tag ones are precomputed; the larger ones are formed only from the
        ``max_antecedent_tags`` input tags most frequent in D.
        """
        frequent = sorted(i_o, key=lambda t: (-self.f_tag[t], t))
        if self.max_antecedent_tags is not None:
            frequent = frequent[: self.max_antecedent_tags]
        rules_by_antecedent: dict[tuple[int, ...], dict[int, float]] = {}
        for size in range(1, min(self.max_antecedent, len(i_o)) + 1):
            for x_tuple in combinations(sorted(i_o if size == 1 else frequent), size):
                if size == 1:
                    rules_by_antecedent[x_tuple] = self.one_tag_rules.get(x_tuple[0], {})
                else:
                    rules_by_antecedent[x_tuple] = self.rules(x_tuple)
        return rules_by_antecedent

    def _rule_features(self, c: int, rules_by_antecedent: Mapping[tuple[int, ...],
                                                                  Mapping[int, float]]
                       ) -> list[float]:
        """``sum_1, sum_l, sum_plus, vote, vote_plus`` of candidate c."""
        sum_1 = sum_l = sum_plus = vote = vote_plus = 0.0
        for x_tuple, rules in rules_by_antecedent.items():
            if c not in rules:
                continue
            theta = rules[c]
            sum_l += theta
            if len(x_tuple) == 1:
                x = x_tuple[0]
                weight = self.stab(x, self.k_x) * self.stab(c, self.k_c) * self.rank(c, x)
                sum_1 += theta
                sum_plus += theta * weight
                vote += 1.0
                vote_plus += weight
        return [sum_1, sum_l, sum_plus, vote, vote_plus]

    def _text_features(self, c: int, target_text: Mapping[str, list[int]]) -> list[float]:
        """``ts, tf, wts, wtf`` of candidate c in the target's text fields."""
        ts = tf = wts = wtf = 0.0
        for field, terms in target_text.items():
            occurrences = terms.count(c)
            afs = self.afs.get(field, 0.0)
            if occurrences > 0:
                ts += 1.0
                wts += afs
            tf += occurrences
            wtf += afs * occurrences
        return [ts, tf, wts, wtf]
