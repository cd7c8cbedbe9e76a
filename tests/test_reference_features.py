"""Hand-computed checks of the reference (oracle) implementation of the 13 features.

The toy training set D (5 objects; tags 0-3, text-only terms 10-12, term 13 unseen in D):

    d   tags        title     desc
    d0  {0, 1, 2}   [0, 10]   [10, 10, 11]
    d1  {0, 1}      [2]       [0, 12]
    d2  {0, 2}      []        [2, 10]
    d3  {1, 3}      [3, 3]    (missing)
    d4  {0,1,2,3}   [11]      [11, 1]

Supports: f_tag = {0: 4, 1: 4, 2: 3, 3: 2}; pairs {0,1} 3, {0,2} 3, {0,3} 1, {1,2} 2, {1,3} 2,
{2,3} 1; triples {0,1,2} 2 (d0, d4), every other triple 1 (d4).

One-tag rules θ(x -> c) and positions p(c, x) (confidence desc, ties by code asc):
    0 -> 1: 3/4 (p 1), 0 -> 2: 3/4 (p 2), 0 -> 3: 1/4 (p 3)
    1 -> 0: 3/4 (p 1), 1 -> 2: 2/4 (p 2), 1 -> 3: 2/4 (p 3)
    2 -> 0: 3/3 (p 1), 2 -> 1: 2/3 (p 2), 2 -> 3: 1/3 (p 3)
    3 -> 1: 2/2 (p 1), 3 -> 0: 1/2 (p 2), 3 -> 2: 1/2 (p 3)
"""

from __future__ import annotations

import math

import pytest

from tagtorch.candidates.reference import FEATURE_NAMES, ReferenceFeatures, stability

TRAIN_TAGS = [{0, 1, 2}, {0, 1}, {0, 2}, {1, 3}, {0, 1, 2, 3}]
TRAIN_TEXTS = [
    {"title": [0, 10], "desc": [10, 10, 11]},
    {"title": [2], "desc": [0, 12]},
    {"title": [], "desc": [2, 10]},
    {"title": [3, 3]},
    {"title": [11], "desc": [11, 1]},
]
# target object A: I_o = {0, 1}; its own text has the input tag 0 and the unseen term 13
TEXT_A = {"title": [2, 10, 10], "desc": [10, 13, 0]}


def ref(**kwargs) -> ReferenceFeatures:
    return ReferenceFeatures(TRAIN_TAGS, TRAIN_TEXTS, **kwargs)


def test_candidate_set_and_feature_names():
    feats = ref().candidates({0, 1}, TEXT_A)
    # rule consequents of 0, 1 and {0, 1}: {0, 1, 2, 3}; text terms {0, 2, 10, 13}; minus I_o
    assert sorted(feats) == [2, 3, 10, 13]
    for values in feats.values():
        assert tuple(values) == FEATURE_NAMES


def test_input_tags_never_candidates():
    # 0 -> 1 and 1 -> 0 are rules and 0 is in the target's desc, yet neither is a candidate
    feats = ref().candidates([0, 1, 1], TEXT_A)
    assert 0 not in feats and 1 not in feats


def test_sum_1_and_vote():
    feats = ref().candidates({0, 1}, TEXT_A)
    # c = 2: θ(0->2) + θ(1->2) = 3/4 + 1/2 = 5/4; two antecedents vote
    assert feats[2]["sum_1"] == pytest.approx(5 / 4)
    assert feats[2]["vote"] == 2.0
    # c = 3: θ(0->3) + θ(1->3) = 1/4 + 1/2 = 3/4
    assert feats[3]["sum_1"] == pytest.approx(3 / 4)
    assert feats[3]["vote"] == 2.0


def test_sum_l_two_tag_antecedent():
    feats = ref().candidates({0, 1}, TEXT_A)
    # {0,1} held by d0, d1, d4 (supp 3); with 2: d0, d4 (2); with 3: d4 (1)
    # c = 2: 5/4 + 2/3 = 23/12; c = 3: 3/4 + 1/3 = 13/12
    assert feats[2]["sum_l"] == pytest.approx(23 / 12)
    assert feats[3]["sum_l"] == pytest.approx(13 / 12)


def test_sum_l_three_tag_antecedent():
    feats = ref().candidates({0, 1, 2}, {})
    assert sorted(feats) == [3]
    # one-tag: θ(0->3) + θ(1->3) + θ(2->3) = 1/4 + 1/2 + 1/3 = 13/12
    # two-tag: {0,1}->3 = 1/3, {0,2}->3 = 1/3 (supp {0,2} 3: d0 d2 d4), {1,2}->3 = 1/2 (d0 d4)
    # three-tag: {0,1,2}->3 = supp{0,1,2,3} / supp{0,1,2} = 1/2
    assert feats[3]["sum_1"] == pytest.approx(13 / 12)
    assert feats[3]["sum_l"] == pytest.approx(13 / 12 + 1 / 3 + 1 / 3 + 1 / 2 + 1 / 2)  # 33/12
    # ℓ = 2 drops the three-tag rule: 33/12 - 1/2 = 27/12
    two = ref(max_antecedent=2).candidates({0, 1, 2}, {})
    assert two[3]["sum_l"] == pytest.approx(27 / 12)


def test_max_antecedent_one_makes_sum_l_equal_sum_1():
    for i_o in ({0, 1}, {0, 1, 2}, {0, 3}, {1, 2, 3}):
        feats = ref(max_antecedent=1).candidates(i_o, TEXT_A)
        assert feats
        for values in feats.values():
            assert values["sum_l"] == values["sum_1"]


def test_candidate_from_two_tag_rule_only():
    # min_confidence 0.8, I_o = {0, 3}: one-tag rules left: 3 -> 1 (1.0) only (0 -> * <= 3/4,
    # 3 -> 0 and 3 -> 2 are 1/2); {0,3} is held by d4 alone, so {0,3}->1 = {0,3}->2 = 1
    feats = ref(min_confidence=0.8).candidates({0, 3}, {})
    assert sorted(feats) == [1, 2]
    assert feats[1]["sum_1"] == 1.0 and feats[1]["sum_l"] == 2.0 and feats[1]["vote"] == 1.0
    assert feats[2]["sum_1"] == 0.0 and feats[2]["sum_l"] == 1.0 and feats[2]["vote"] == 0.0
    assert feats[2]["sum_plus"] == 0.0 and feats[2]["vote_plus"] == 0.0


def test_sum_plus_and_vote_plus():
    # k_x = k_c = ln 4 so Stab = 1 for f_tag = 4 (tags 0 and 1);
    # Stab(2, ln 4) with f_tag 3: ln4 / (ln4 + ln4 - ln3) = ln4 / ln(16/3) =: s2 (~0.828143)
    # Stab(3, ln 4) with f_tag 2: ln4 / (ln4 + ln4 - ln2) = 2 ln2 / 3 ln2 = 2/3
    # k_r = 2: Rank = 2 / (2 + p)
    k = math.log(4)
    s2 = math.log(4) / math.log(16 / 3)
    feats = ref(k_x=k, k_c=k, k_r=2.0).candidates({0, 1}, TEXT_A)
    # c = 2: p(2, 0) = 2, p(2, 1) = 2 -> Rank 1/2 both
    # sum+ = 3/4 * 1 * s2 * 1/2 + 1/2 * 1 * s2 * 1/2 = 5/8 s2; vote+ = s2/2 + s2/2 = s2
    assert feats[2]["sum_plus"] == pytest.approx(5 / 8 * s2)
    assert feats[2]["vote_plus"] == pytest.approx(s2)
    # c = 3: p(3, 0) = 3, p(3, 1) = 3 -> Rank 2/5 both
    # sum+ = 1/4 * 2/3 * 2/5 + 1/2 * 2/3 * 2/5 = 1/15 + 2/15 = 1/5; vote+ = 2 * 4/15 = 8/15
    assert feats[3]["sum_plus"] == pytest.approx(1 / 5)
    assert feats[3]["vote_plus"] == pytest.approx(8 / 15)
    # text-only candidates have no rules
    assert feats[10]["sum_plus"] == 0.0 and feats[10]["vote_plus"] == 0.0


def test_sum_plus_with_unstable_antecedent():
    # I_o = {3}: Stab(3, ln 4) = 2/3 for the antecedent
    k = math.log(4)
    s2 = math.log(4) / math.log(16 / 3)
    feats = ref(k_x=k, k_c=k, k_r=2.0).candidates({3}, {})
    assert sorted(feats) == [0, 1, 2]
    # c = 1: θ 1, Stab(3) 2/3, Stab(1) 1, Rank 2/3 (p 1) -> 4/9
    assert feats[1]["sum_plus"] == pytest.approx(4 / 9)
    assert feats[1]["vote_plus"] == pytest.approx(4 / 9)
    # c = 0: θ 1/2, 2/3, Stab(0) 1, Rank 2/4 (p 2) -> 1/6; vote+ 1/3
    assert feats[0]["sum_plus"] == pytest.approx(1 / 6)
    assert feats[0]["vote_plus"] == pytest.approx(1 / 3)
    # c = 2: θ 1/2, 2/3, s2, Rank 2/5 (p 3, tie with 0 broken by code) -> 2/15 s2; vote+ 4/15 s2
    assert feats[2]["sum_plus"] == pytest.approx(2 / 15 * s2)
    assert feats[2]["vote_plus"] == pytest.approx(4 / 15 * s2)


def test_sum_plus_default_constants():
    # defaults k_x 9, k_c 11, k_r 4; I_o = {3}, c = 1:
    # Stab(3, 9) = 9 / (9 + 9 - ln 2); Stab(1, 11) = 11 / (11 + 11 - ln 4); Rank = 4 / 5
    feats = ref().candidates({3}, {})
    expected = 1.0 * (9 / (18 - math.log(2))) * (11 / (22 - math.log(4))) * (4 / 5)
    assert feats[1]["sum_plus"] == pytest.approx(expected)


def test_afs():
    # FIS over distinct terms, TS(t, d) = fields of d holding t:
    # title: d0 [0,10]: TS 1, 2 -> 1.5; d1 [2]: 1; d2 empty (skipped); d3 [3,3]: 1; d4 [11]: 2
    #        AFS = (1.5 + 1 + 1 + 2) / 4 = 1.375
    # desc:  d0 {10, 11}: TS 2, 1 -> 1.5 (not 5/3: repeats do not count); d1 {0,12}: 1;
    #        d2 {2,10}: 1; d3 missing (skipped); d4 {11, 1}: 2, 1 -> 1.5
    #        AFS = (1.5 + 1 + 1 + 1.5) / 4 = 1.25
    r = ref()
    assert r.afs == pytest.approx({"title": 1.375, "desc": 1.25})


def test_ts_tf_wts_wtf():
    texts = {"title": [2, 10, 10], "desc": [10, 13, 0], "extra": [13, 13]}
    feats = ref().candidates({0, 1}, texts)
    # c = 2: title once -> ts 1, tf 1, wts 1.375, wtf 1.375
    assert [feats[2][n] for n in ("ts", "tf", "wts", "wtf")] == pytest.approx([1, 1, 1.375, 1.375])
    # c = 10: title twice, desc once -> ts 2, tf 3, wts 1.375 + 1.25 = 2.625,
    # wtf = 2 * 1.375 + 1 * 1.25 = 4.0
    assert [feats[10][n] for n in ("ts", "tf", "wts", "wtf")] == pytest.approx([2, 3, 2.625, 4.0])
    # c = 13: desc once, "extra" (no D object has it: AFS 0) twice -> ts 2, tf 3,
    # wts = 1.25 + 0, wtf = 1.25 + 2 * 0
    assert [feats[13][n] for n in ("ts", "tf", "wts", "wtf")] == pytest.approx([2, 3, 1.25, 1.25])
    # c = 3: rule candidate, absent from the text
    assert [feats[3][n] for n in ("ts", "tf", "wts", "wtf")] == [0.0, 0.0, 0.0, 0.0]


def test_text_only_terms_are_candidates():
    # no input tags: no rules; every text term is a candidate with 0 rule features
    feats = ref().candidates(set(), {"title": [12, 13], "desc": [3]})
    assert sorted(feats) == [3, 12, 13]
    for values in feats.values():
        for name in ("sum_1", "sum_l", "sum_plus", "vote", "vote_plus"):
            assert values[name] == 0.0
    # an input tag unknown to D gives no rules either
    assert sorted(ref().candidates({99}, {"title": [12]})) == [12]


def test_iff():
    feats = ref().candidates({0, 1}, TEXT_A)
    # |D| = 5: iff = ln(6 / (f_tag + 1))
    assert feats[2]["iff"] == pytest.approx(math.log(6 / 4))  # f_tag(2) = 3
    assert feats[3]["iff"] == pytest.approx(math.log(6 / 3))  # f_tag(3) = 2
    assert feats[10]["iff"] == pytest.approx(math.log(6))  # never a tag
    assert feats[13]["iff"] == pytest.approx(math.log(6))  # unseen in D


def test_stab():
    # k_s = ln 4: f_tag 3 -> ln4 / ln(16/3); f_tag 2 -> 2/3; f_tag 0 -> 0
    feats = ref(k_s=math.log(4)).candidates({0, 1}, TEXT_A)
    assert feats[2]["stab"] == pytest.approx(math.log(4) / math.log(16 / 3))
    assert feats[3]["stab"] == pytest.approx(2 / 3)
    assert feats[10]["stab"] == 0.0
    assert feats[13]["stab"] == 0.0
    # default k_s = 9, f_tag 2: 9 / (9 + 9 - ln 2)
    assert ref().candidates({0, 1}, TEXT_A)[3]["stab"] == pytest.approx(9 / (18 - math.log(2)))
    assert stability(1, 2.0) == pytest.approx(2 / 4)  # ln 1 = 0: k / 2k


def test_entropy():
    feats = ref().candidates({0, 1}, TEXT_A)
    # c = 2: rules 2 -> 0 (1), 2 -> 1 (2/3), 2 -> 3 (1/3):
    # H = -(1 ln 1 + 2/3 ln 2/3 + 1/3 ln 1/3) = ln 3 - 2/3 ln 2
    assert feats[2]["entropy"] == pytest.approx(math.log(3) - 2 / 3 * math.log(2))
    # c = 3: 3 -> 1 (1), 3 -> 0 (1/2), 3 -> 2 (1/2): H = -2 * 1/2 ln 1/2 = ln 2
    assert feats[3]["entropy"] == pytest.approx(math.log(2))
    # never a tag: no rules
    assert feats[10]["entropy"] == 0.0


def test_pred():
    feats = ref().candidates({0, 1}, TEXT_A)
    # 2 is in the text of d1 and d2, a tag of d2 only (d1 tags {0, 1}): 1/2
    assert feats[2]["pred"] == pytest.approx(1 / 2)
    # 3 in the text of d3, which has tag 3: 1/1
    assert feats[3]["pred"] == 1.0
    # 10 in the text of d0, d2, never a tag: 0/2; 13 never in D's text: 0 by definition
    assert feats[10]["pred"] == 0.0
    assert feats[13]["pred"] == 0.0


def test_min_support_removes_rules():
    # min_support 2 drops every rule with supp(X ∪ {c}) = 1: 0 -> 3, 3 -> 0, 2 -> 3, 3 -> 2
    # and the two-tag rule {0,1} -> 3 (only d4); 1 -> 3 (supp 2) and {0,1} -> 2 (supp 2) stay
    feats = ref(min_support=2).candidates({0, 1}, TEXT_A)
    assert feats[3]["sum_1"] == pytest.approx(1 / 2)
    assert feats[3]["sum_l"] == pytest.approx(1 / 2)
    assert feats[3]["vote"] == 1.0
    assert feats[2]["sum_l"] == pytest.approx(5 / 4 + 2 / 3)
    # entropy(2) keeps 2 -> 0 (1) and 2 -> 1 (2/3): -2/3 ln 2/3; entropy(3): 3 -> 1 (1): 0
    assert feats[2]["entropy"] == pytest.approx(-2 / 3 * math.log(2 / 3))
    assert feats[3]["entropy"] == 0.0
    # I_o = {3}: only 3 -> 1 is left, and 3 -> 1 keeps position 1
    assert sorted(ref(min_support=2).candidates({3}, {})) == [1]


def test_min_confidence_removes_rules():
    # min_confidence 1/2 (inclusive) drops 0 -> 3 (1/4), 2 -> 3 (1/3) and {0,1} -> 3 (1/3)
    feats = ref(min_confidence=0.5, k_x=math.log(4), k_c=math.log(4), k_r=2.0).candidates(
        {0, 1}, TEXT_A
    )
    assert feats[3]["sum_1"] == pytest.approx(1 / 2)  # 1 -> 3 = 1/2 kept
    assert feats[3]["sum_l"] == pytest.approx(1 / 2)
    assert feats[3]["vote"] == 1.0
    # sum+ of 3: 1/2 * 1 * 2/3 * 2/(2+3) = 2/15 (p(3, 1) = 3 still)
    assert feats[3]["sum_plus"] == pytest.approx(2 / 15)
    assert feats[2]["sum_l"] == pytest.approx(5 / 4 + 2 / 3)  # {0,1} -> 2 = 2/3 kept
    # entropy(2): 2 -> 0 (1), 2 -> 1 (2/3) left
    assert feats[2]["entropy"] == pytest.approx(-2 / 3 * math.log(2 / 3))
    # min_confidence 0.8: no rule from 0, 1 or {0, 1}; 3 is gone, 2 stays as a text term
    high = ref(min_confidence=0.8).candidates({0, 1}, TEXT_A)
    assert sorted(high) == [2, 10, 13]
    assert high[2]["sum_1"] == 0.0 and high[2]["sum_l"] == 0.0 and high[2]["vote"] == 0.0
    assert high[2]["ts"] == 1.0  # its text features are unchanged


def test_rank_positions():
    # min_confidence 0.5 drops 0 -> 3, leaving 1 (p 1) and 2 (p 2) after 0
    r = ref(min_confidence=0.5)
    assert r.position[0] == {1: 1, 2: 2}
    assert ref().position[3] == {1: 1, 0: 2, 2: 3}


def test_invalid_arguments():
    with pytest.raises(ValueError):
        ref(min_support=0)
    with pytest.raises(ValueError):
        ref(min_confidence=1.5)
    with pytest.raises(ValueError):
        ref(max_antecedent=0)
    with pytest.raises(ValueError):
        ReferenceFeatures(TRAIN_TAGS, TRAIN_TEXTS[:2])
