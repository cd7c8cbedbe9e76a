"""Issue 69, point 5 (the serve part): every numeric option of ``python -m tagtorch.serve``.

A fuzz of the option parsing, in process and deterministic (fixed values and a seeded draw):
every value ends with exit status 2 and one line on standard error, never a traceback. A value
out of its range (the table below: the documented meaning of each option, written here by hand)
names the option; a value in range gets past the checks to the folder, which does not exist.
"""

from __future__ import annotations

import math
import random

import pytest

from tagtorch.serving.command import OPTION_RANGES, _parser, main

DAY = 86_400.0
RANGES: dict[str, tuple[type, float, float]] = {
    "--port": (int, 1, 65_535),
    "--max-new-tags-per-request": (int, 0, 10**9),
    "--max-new-tags": (int, 0, 10**9),
    "--max-pending-posts": (int, 1, 10**9),
    "--apply-interval": (float, 0.0, DAY),
    "--compact-after": (int, 1, 10**9),
    "--max-body": (int, 1, 2**30),
    "--body-timeout": (float, 0.01, DAY),
    "--header-timeout": (float, 0.01, DAY),
    "--max-connections": (int, 1, 10**6),
    "--rule-cache": (int, 0, 10**9),
}
FIXED = ["-1", "0", "1", "2", "0.5", "1.5", "-0.0", "1e3", "1e400", "nan", "NaN", "inf", "-inf",
         "", " ", "abc", "0x10", "1_000", " 7 ", "1" * 30, "-" + "9" * 30, "0." + "0" * 29 + "1",
         "65535", "65536", "86400", "86400.5", "1000000", "1000001", "1000000000", "1000000001",
         "1073741824", "1073741825", "0.01", "0.009", "\x1b[2J", "--"]


def drawn(seed: int = 0, count: int = 30) -> list[str]:
    """Values of every magnitude and sign, as integers, decimals and exponents."""
    rng = random.Random(seed)
    values = []
    for _ in range(count):
        magnitude = 10 ** rng.uniform(-4, 12)
        sign = rng.choice([1, 1, -1])
        values += [str(sign * int(magnitude)), f"{sign * magnitude:.3f}", f"{sign * magnitude:e}"]
    return values


def expected_valid(option: str, text: str) -> bool:
    """Whether ``text`` is a value ``option`` takes (Python's own parsing and the table)."""
    kind, least, most = RANGES[option]
    try:
        value = kind(text)
    except ValueError:
        return False
    return not (isinstance(value, float) and math.isnan(value)) and least <= value <= most


def test_every_numeric_option_has_a_range():
    numeric = {action.option_strings[-1] for action in _parser()._actions
               if action.type in (int, float)}
    assert numeric == set(RANGES) == set(OPTION_RANGES)


@pytest.mark.parametrize("option", sorted(RANGES))
def test_any_value_ends_in_one_line_naming_the_option_when_out_of_range(option, tmp_path,
                                                                        capsys, monkeypatch):
    monkeypatch.delenv("TAGTORCH_SERVE_TOKEN", raising=False)
    missing = str(tmp_path / "no-such-folder")
    for text in [*FIXED, *drawn()]:
        assert main([missing, f"{option}={text}"]) == 2, (option, text)
        captured = capsys.readouterr()
        lines = captured.err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: "), (option, text, captured.err)
        assert "Traceback" not in captured.err and not captured.out
        if expected_valid(option, text):
            assert "no such folder" in lines[0], (option, text, lines[0])
        else:
            assert option in lines[0] and "no such folder" not in lines[0], (option, text,
                                                                            lines[0])


def test_compact_after_zero_names_the_option_and_its_range(capsys):
    assert main(["FOLDER", "--compact-after", "0"]) == 2
    assert capsys.readouterr().err == ("error: --compact-after 0: expected an integer from 1 to "
                                       "1,000,000,000\n")
