"""Doctests must not depend on the last bit of a float or on how torch prints a tensor.

A printed float tensor switches format with its values (``tensor([0., 0., 1.])`` when every
value is integral, ``tensor([0.0000, 0.0000, 1.0000])`` when ``log(e)`` comes out one ulp off on
another CPU), so a doctest that shows one fails on some machines. Doctests show rounded Python
numbers instead (``round(float(x), 4)``, ``[round(v, 4) for v in x.tolist()]``).
"""

from __future__ import annotations

import doctest
import importlib
import pkgutil
import re

import tagtorch

# A printed tensor or array whose values have a decimal point, an exponent, nan or inf.
_FLOAT_TENSOR = re.compile(r"\b(tensor|array)\((?=[^)]*(\d\.|\de[-+]?\d|nan|inf))")


def _examples() -> list[tuple[str, int, str, str]]:
    finder = doctest.DocTestFinder(exclude_empty=True)
    found = []
    for info in pkgutil.walk_packages(tagtorch.__path__, prefix="tagtorch."):
        module = importlib.import_module(info.name)
        for test in finder.find(module):
            for example in test.examples:
                found.append((test.name, example.lineno, example.source, example.want))
    return found


def test_the_pattern_catches_what_broke_on_another_cpu() -> None:
    assert _FLOAT_TENSOR.search("tensor([0., 0., 1.])\n")
    assert _FLOAT_TENSOR.search("tensor([0.0000, 0.0000, 1.0000])\n")
    assert _FLOAT_TENSOR.search("tensor(0.5000)\n")
    assert _FLOAT_TENSOR.search("tensor([0.5000,    nan])\n")
    assert _FLOAT_TENSOR.search("array([1.5e-08])\n")
    assert not _FLOAT_TENSOR.search("tensor([1, 2, 3])\n")
    assert not _FLOAT_TENSOR.search("[0.5, 0.25]\n")


def test_no_doctest_prints_a_float_tensor() -> None:
    examples = _examples()
    assert len(examples) > 100  # the finder really walked the package
    offending = [f"{name} (line {line}): {source.strip()} -> {want.strip()}"
                 for name, line, source, want in examples if _FLOAT_TENSOR.search(want)]
    assert not offending, "doctests printing float tensors:\n" + "\n".join(offending)
