"""Hostile use, round three: ``task=letor``'s settings are checked before any work."""

from __future__ import annotations

import math

import pytest

from tagtorch.evaluation.letor_task import LetorTask


@pytest.mark.parametrize("value", [2, "yes", None, math.nan], ids=["2", "yes", "null", "nan"])
def test_write_trec_takes_only_true_or_false(value):
    """task.write_trec=yes or 2 wrote TREC files, =null silently wrote none."""
    with pytest.raises(ValueError, match=rf"^task.trec must be true or false, got "
                                         rf"{value!r}$".replace("(", r"\(")):
        LetorTask(trec=value)


@pytest.mark.parametrize("value", [0, -1, 2.5, math.nan, "8", True],
                         ids=["0", "-1", "2.5", "nan", "text", "bool"])
def test_batch_size_takes_only_an_integer_of_one_or_more(value):
    """A NaN or fractional batch size passed the `< 1` test and failed later (or never)."""
    with pytest.raises(ValueError, match=r"^task.batch_size must be an integer >= 1, got "):
        LetorTask(batch_size=value)


def test_the_defaults_and_plain_values_are_taken():
    task = LetorTask(batch_size=1, trec=False)
    assert (task.batch_size, task.trec) == (1, False)
