"""Hostile numbers on the commands' numeric options (issue 69, point 5).

Every value of a fixed list (negative, zero, huge, 30 digits, floats, ``nan``, ``inf``,
``1e12``, ``True``, empty, Unicode digits, ...) given to each numeric option of
``python -m tagtorch.evaluation`` (``--resamples``, ``--confidence``, a metric's cut-off) and
of ``python -m tagtorch.recommend`` (``-k``, ``--time``) is either accepted, and then the
command does work bounded by its (small) input and reads the value as asked, or refused with
exit status 2 and one line on standard error naming the option, without a traceback. The
commands run in-process (their ``main``); one integration test runs both as a user does.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tagtorch.data.synthetic import generate_folksonomy
from tagtorch.data.text import TextProcessor
from tagtorch.evaluation.score_runs import main as score_main
from tagtorch.evaluation.stats import MAX_RESAMPLES
from tagtorch.metrics.functional import MAX_CUTOFF
from tagtorch.posts.baselines import MostPopularUserResource
from tagtorch.recommend import main as recommend_main
from tagtorch.serving import PostRecommender
from tagtorch.serving.schema import MAX_K

HOSTILE = ["-1", "0", "1", "3", "-0", "+5", " 7 ", "1_000", "0.5", "1.5", "-2.5", "1e12", "1e3",
           "nan", "NaN", "inf", "-inf", "True", "", " ", "0x10", "\u0663", "\uff11\uff12",
           "\u00b2", "1000", "1001", "1000000", "1000001", str(MAX_CUTOFF), str(MAX_CUTOFF + 1),
           "123456789012345678901234567890", "9" * 5000, "-123456789012345678901234567890"]
"""The values tried on every option: the same list, in the same order, every run."""


def as_int(text: str) -> int | None:
    """``text`` as Python's ``int`` reads it (what argparse's ``type=int`` takes), or None."""
    try:
        return int(text)
    except ValueError:
        return None


def as_float(text: str) -> float | None:
    """``text`` as Python's ``float`` reads it, or None."""
    try:
        return float(text)
    except ValueError:
        return None


def refused(code: object, err: str, option: str) -> bool:
    """Whether a run ended as a refusal: status 2, one line naming ``option``, no traceback."""
    if code != 2:
        return False
    assert err.count("\n") == 1 and err.startswith("error: "), err[-500:]
    assert "Traceback" not in err and option in err and len(err) < 600, err[-500:]
    return True


@pytest.fixture(scope="module")
def trec_files(tmp_path_factory) -> list[str]:
    """A qrels file and two runs of 10 queries (the randomization test enumerates 2**10 flips)."""
    folder = tmp_path_factory.mktemp("trec")
    qrels = "".join(f"q{q} 0 d{d} {(q + d) % 3}\n" for q in range(10) for d in range(6))
    runs = []
    for shift in (0, 1):
        path = folder / f"run{shift}.trec"
        path.write_text("".join(f"q{q} Q0 d{(d + shift * q) % 8} {d + 1} {8 - d} r{shift}\n"
                                for q in range(10) for d in range(8)))
        runs.append(str(path))
    (folder / "qrels.trec").write_text(qrels)
    return [str(folder / "qrels.trec"), *runs]


def score(capsys, args: list[str]) -> tuple[object, str, str]:
    """``python -m tagtorch.evaluation ARGS`` in-process: ``(status, stdout, stderr)``."""
    try:
        score_main(args)
        code: object = 0
    except SystemExit as done:
        code = done.code
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_the_score_commands_numeric_options(trec_files, capsys):
    started = time.perf_counter()
    base = [*trec_files, "--test", "randomization"]
    for value in HOSTILE:
        number = as_int(value)
        code, out, err = score(capsys, [*base, "--metrics", "map", "--resamples", value])
        if not refused(code, err, "--resamples"):
            assert code == 0 and number is not None and 1 <= number <= MAX_RESAMPLES, value
            assert "all 1024 sign assignments" in out or f"{number} drawn" in out, out
        code, out, err = score(capsys, [*base, "--metrics", "map", "--confidence", value])
        if not refused(code, err, "--confidence"):
            level = as_float(value)
            assert code == 0 and level is not None and 0 < level < 1, value
            assert f"{level:.0%} confidence interval" in out
        code, out, err = score(capsys, [*base, "--metrics", f"ndcg@{value}"])
        if not refused(code, err, "--metrics"):
            assert code == 0 and re.fullmatch(r"[1-9][0-9]*", value), value
            assert 1 <= int(value) <= MAX_CUTOFF and f"ndcg@{value}" in out
    assert time.perf_counter() - started < 30  # bounded work: a few seconds in all


@pytest.fixture(scope="module")
def post_recommender(tmp_path_factory) -> tuple[Path, str, str]:
    """A fitted personalized tag recommender (MP_u,r, a second's work), a user and a resource."""
    processor = TextProcessor(cache=False)
    folksonomy = processor.apply(generate_folksonomy(n_objects=100, seed=3))
    recommender = PostRecommender.fit(folksonomy, processor, MostPopularUserResource(), p=2)
    folder = recommender.save(tmp_path_factory.mktemp("artifact") / "synthetic-mp_ur")
    first = folksonomy.assignments.iloc[0]
    return (folder, str(folksonomy.users[first["user"]]),
            str(folksonomy.objects[first["object"]]))


def recommend(capsys, args: list[str]) -> tuple[object, str, str]:
    """``python -m tagtorch.recommend ARGS`` in-process: ``(status, stdout, stderr)``."""
    code = recommend_main(args)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_the_recommend_commands_numeric_options(post_recommender, capsys):
    folder, user, resource = post_recommender
    base = [str(folder), "--user", user, "--resource", resource, "--json"]
    for value in HOSTILE:
        number = as_int(value)
        code, out, err = recommend(capsys, [*base, "-k", value])
        if not refused(code, err, "-k"):
            assert code == 0 and number is not None and 1 <= number <= MAX_K, value
            assert out.count('"tag"') <= number  # at most k tags, whatever the vocabulary
        code, out, err = recommend(capsys, [*base, "--time", value])
        if not refused(code, err, "time"):
            assert code == 0 and number is not None and 0 <= number < 2**62, value
            assert out.count('"tag"') <= 5


@pytest.mark.integration
def test_both_commands_refuse_a_30_digit_number_in_one_line(trec_files, post_recommender):
    """As a user runs them: one line on standard error, status 2, nothing on standard output."""
    digits = "123456789012345678901234567890"
    folder, user, resource = post_recommender
    for command in ([sys.executable, "-m", "tagtorch.evaluation", *trec_files, "--metrics",
                     f"ndcg@{digits}"],
                    [sys.executable, "-m", "tagtorch.recommend", str(folder), "--user", user,
                     "--resource", resource, "-k", digits]):
        done = subprocess.run(command, capture_output=True, text=True, timeout=120)
        assert done.returncode == 2 and done.stdout == "", done.stderr[-2000:]
        assert done.stderr.count("\n") == 1 and digits in done.stderr
