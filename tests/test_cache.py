"""Code-keyed caches (tagtorch.cache): an edit of the code that fills a cache makes it miss.

The fingerprint is pointed at temporary copies of the package whose bytes differ, and the
candidate cache, the processed-text cache and the run pieces are counted rebuilding; the
``python -m tagtorch.cache`` command line runs against a temporary cache folder of files
whose sizes are known.
"""

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import torch

import tagtorch
import tagtorch.cache as cache
from tagtorch.candidates.cache import CANDIDATE_CODE, CandidateCache
from tagtorch.candidates.candidate_set import CandidateSet
from tagtorch.data.folksonomy import Folksonomy
from tagtorch.data.text import TEXT_CODE, TextProcessor
from tagtorch.evaluation.runs import MethodOutcome, RunPieces

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = Path(tagtorch.__file__).resolve().parent


@pytest.fixture
def package_copy(tmp_path):
    """Makes a copy of the tagtorch sources with one file's bytes changed (or none)."""
    def make(name: str, edited: str | None = None) -> Path:
        copy = tmp_path / name / "tagtorch"
        shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
        if edited is not None:
            with open(copy / edited, "a", encoding="utf-8") as handle:
                handle.write("# an edit\n")
        return copy
    return make


def test_the_fingerprint_follows_the_bytes_the_names_and_the_version(tmp_path, monkeypatch):
    root = tmp_path / "a" / "tagtorch"
    (root / "sub").mkdir(parents=True)
    (root / "top.py").write_text("x = 1\n")
    (root / "sub" / "one.py").write_text("y = 2\n")
    monkeypatch.setattr(cache, "SOURCE_ROOT", root)
    sub, top = cache.code_fingerprint("tagtorch.sub"), cache.code_fingerprint("tagtorch.top")
    assert len({sub, top, cache.code_fingerprint("tagtorch")}) == 3
    (root / "sub" / "notes.txt").write_text("not code")
    other = tmp_path / "b" / "tagtorch"
    shutil.copytree(root, other)
    monkeypatch.setattr(cache, "SOURCE_ROOT", other)
    assert cache.code_fingerprint("tagtorch.sub") == sub  # the bytes count, not the place
    (other / "top.py").write_text("x = 2\n")
    assert cache.code_fingerprint("tagtorch.sub") == sub  # top.py is not part of sub
    moved = tmp_path / "c" / "tagtorch"
    shutil.copytree(root, moved)
    (moved / "sub" / "one.py").rename(moved / "sub" / "two.py")
    monkeypatch.setattr(cache, "SOURCE_ROOT", moved)
    assert cache.code_fingerprint("tagtorch.sub") != sub  # same bytes, another file
    monkeypatch.setattr(cache, "SOURCE_ROOT", root)
    monkeypatch.setattr(cache, "__version__", "99.0")
    assert cache.code_fingerprint("tagtorch.sub") != sub
    for name in ("tagtorch.missing", "numpy", "tagtorch.sub.one.py"):
        with pytest.raises(ValueError, match="not a tagtorch module"):
            cache.code_fingerprint(name)


#: Modules whose code is no part of a cache's content: the version (``tagtorch/__init__``) and
#: the fingerprint itself key every entry anyway, and ``engines`` says where jobs run (it
#: imports ``config_checks`` for its error), not what they compute.
NOT_CONTENT = {"tagtorch", "tagtorch.cache", "tagtorch.engines"}


def _imported(names: tuple[str, ...]) -> set[str]:
    """The tagtorch modules reached from these by their import statements (read, not run),
    not following those of :data:`NOT_CONTENT`."""
    def exists(name: str) -> bool:
        path = PACKAGE.joinpath(*name.split(".")[1:])
        return path.is_dir() or path.with_suffix(".py").is_file()

    seen: set[str] = set()
    todo = list(names)
    while todo:
        name = todo.pop()
        if name in seen or name in NOT_CONTENT:
            continue
        seen.add(name)
        path = PACKAGE.joinpath(*name.split(".")[1:])
        for file in sorted(path.rglob("*.py")) if path.is_dir() else [path.with_suffix(".py")]:
            for node in ast.walk(ast.parse(file.read_text(encoding="utf-8"))):
                if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("tagtorch"):
                    todo += [f"{node.module}.{a.name}" if exists(f"{node.module}.{a.name}")
                             else node.module for a in node.names]
                elif isinstance(node, ast.Import):
                    todo += [a.name for a in node.names if a.name.startswith("tagtorch")]
    return seen


@pytest.mark.parametrize(("start", "code", "known"), [
    (("tagtorch.candidates", "tagtorch.topics"), CANDIDATE_CODE,
     {"tagtorch.data.terms", "tagtorch.data.ragged", "tagtorch.data.splits"}),
    (("tagtorch.data.text",), TEXT_CODE, {"tagtorch.data.folksonomy", "tagtorch.storage"}),
])
def test_the_cached_code_covers_every_module_it_imports(start, code, known):
    reached = _imported(start)
    assert known <= reached  # imports the walk must find (read off the modules by hand)
    missed = {m for m in reached if not any(m == c or m.startswith(c + ".") for c in code)}
    assert not missed


def hand_made_set() -> CandidateSet:
    return CandidateSet(objects=torch.tensor([3, 7]), tags=torch.tensor([[1, 2], [4, 0]]),
                        features=torch.arange(8, dtype=torch.float32).reshape(2, 2, 2),
                        labels=torch.tensor([[1.0, 0.0], [0.0, 0.0]]),
                        mask=torch.tensor([[True, True], [True, False]]),
                        n_relevant=torch.tensor([1, 2]), feature_names=("a", "b"))


def test_the_candidate_cache_misses_after_an_edit_of_the_code_it_depends_on(
        tmp_path, monkeypatch, package_copy):
    built = []

    def build() -> CandidateSet:
        built.append(1)
        return hand_made_set()

    def get(root: Path) -> CandidateSet:
        monkeypatch.setattr(cache, "SOURCE_ROOT", root)
        return CandidateCache(tmp_path / "candidates", {"data": "d"}).get(0, "val", build)

    original = package_copy("original")
    get(original)
    again = get(original)
    assert len(built) == 1  # the same code: read from the cache
    assert torch.equal(again.features, hand_made_set().features)
    get(package_copy("ranker", edited="rankers/latre.py"))  # not candidate code
    assert len(built) == 1
    get(package_copy("terms", edited="data/terms.py"))  # terms that the features read
    get(package_copy("rules", edited="candidates/rules.py"))
    assert len(built) == 3
    assert len(list((tmp_path / "candidates").glob("*.npz"))) == 3
    get(original)
    assert len(built) == 3


def test_the_text_cache_misses_after_an_edit_of_the_text_code(tmp_path, monkeypatch,
                                                              package_copy):
    frame = pd.DataFrame({"user": [1, 2], "object": ["a", "b"], "tag": ["Rocks", "Jazz"]})
    raw = Folksonomy.from_frame(frame, texts=pd.DataFrame({"title": ["Rolling Stones", "Miles"]},
                                                          index=["a", "b"]))
    processed = []
    normalize = TextProcessor.normalize_texts
    monkeypatch.setattr(TextProcessor, "normalize_texts",
                        lambda self, texts: processed.append(1) or normalize(self, texts))

    def apply(root: Path) -> Folksonomy:
        monkeypatch.setattr(cache, "SOURCE_ROOT", root)
        return TextProcessor(cache_dir=str(tmp_path / "text")).apply(raw)

    original = package_copy("original")
    apply(original)
    out = apply(original)
    assert len(processed) == 1
    assert list(out.texts["title"]) == ["roll stone", "mile"]  # Porter, by hand
    apply(package_copy("rules", edited="candidates/rules.py"))  # not text code
    assert len(processed) == 1
    out = apply(package_copy("text", edited="data/text.py"))
    assert len(processed) == 2
    assert sorted(out.tags) == ["jazz", "rock"]


def test_run_pieces_of_other_code_are_run_again(tmp_path, monkeypatch, package_copy):
    outcome = MethodOutcome(results=[{"method": "m", "fold": 0, "metric": "ndcg@5",
                                      "value": 0.25}],
                            per_object=[pd.DataFrame({"object": [1], "value": [0.25]})],
                            means={"m": {"ndcg@5": 0.25}}, run_lines={"m": []})
    original = package_copy("original")
    monkeypatch.setattr(cache, "SOURCE_ROOT", original)
    RunPieces(tmp_path / "pieces", {"m": "settings"}).write(0, "m", outcome)
    back = RunPieces(tmp_path / "pieces", {"m": "settings"}).read(0, "m")
    assert back is not None and back.means == {"m": {"ndcg@5": 0.25}}
    monkeypatch.setattr(cache, "SOURCE_ROOT", package_copy("edited", edited="rankers/latre.py"))
    assert RunPieces(tmp_path / "pieces", {"m": "settings"}).read(0, "m") is None


def test_the_entries_the_caches_write_are_the_ones_the_command_line_knows(tmp_path):
    CandidateCache(tmp_path / "candidates", {"k": 1}).get(0, "val", hand_made_set)
    frame = pd.DataFrame({"user": [1], "object": ["a"], "tag": ["Rock"]})
    TextProcessor(cache_dir=str(tmp_path / "text")).apply(Folksonomy.from_frame(frame))
    usage = {u.kind: u.entries for u in cache.cache_usage(tmp_path)}
    assert usage == {"candidates": 1, "text": 1}


def tool(env_home: Path, *args: str, stdin: str = "") -> subprocess.CompletedProcess:
    env = {**os.environ, "XDG_CACHE_HOME": str(env_home)}
    return subprocess.run([sys.executable, "-m", "tagtorch.cache", *args], cwd=ROOT, env=env,
                          input=stdin, capture_output=True, text=True, timeout=120)


@pytest.fixture
def cache_home(tmp_path):
    """A cache root with entries of known sizes, and files no cache wrote."""
    home = tmp_path / "xdg"
    root = home / "tagtorch"
    (root / "candidates").mkdir(parents=True)
    (root / "text").mkdir()
    (root / "hetrec2011-lastfm-2k").mkdir()
    files = {"candidates/" + "a" * 32 + ".npz": 1000, "candidates/" + "0" * 32 + ".npz": 2500,
             "candidates/." + "b" * 32 + ".npz.x7k2q9.tmp": 100,
             "text/lastfm-" + "c" * 24 + ".npz": 300,
             "candidates/notes.txt": 7, "candidates/" + "d" * 31 + ".npz": 11,
             "hetrec2011-lastfm-2k/user_taggedartists.dat": 50}
    for name, size in files.items():
        (root / name).write_bytes(b"x" * size)
    outside = tmp_path / "outside" / ("e" * 32 + ".npz")
    outside.parent.mkdir()
    outside.write_bytes(b"x" * 5000)
    (root / "candidates" / outside.name).symlink_to(outside)
    return home


def test_info_counts_the_entries_of_each_cache(cache_home):
    done = tool(cache_home, "info")
    assert done.returncode == 0, done.stderr
    # by hand: 1000 + 2500 + 100 (a partial write); not notes.txt, the 31-digit name, the link
    assert "candidates: 3 entries, 3600 bytes (3.6 kB)" in done.stdout
    assert "text: 1 entry, 300 bytes (300 B)" in done.stdout
    assert "total: 4 entries, 3900 bytes (3.9 kB)" in done.stdout
    assert str(cache_home / "tagtorch") in done.stdout


def test_clear_removes_only_the_entries_it_recognizes(cache_home, tmp_path):
    root = cache_home / "tagtorch"
    done = tool(cache_home, "clear", "--what", "text", "--yes")
    assert done.returncode == 0, done.stderr
    assert "removed 1 entry, 300 bytes" in done.stdout
    assert not list((root / "text").iterdir())
    asked = tool(cache_home, "clear")  # no answer: nothing removed
    assert asked.returncode == 1 and "pass --yes" in asked.stderr
    assert len(list((root / "candidates").iterdir())) == 6
    done = tool(cache_home, "clear", stdin="y\n")
    assert done.returncode == 0, done.stderr
    assert "removed 3 entries, 3600 bytes" in done.stdout
    left = sorted(p.name for p in (root / "candidates").iterdir())
    assert left == sorted(["notes.txt", "d" * 31 + ".npz", "e" * 32 + ".npz"])
    assert (root / "candidates" / ("e" * 32 + ".npz")).is_symlink()
    assert (tmp_path / "outside" / ("e" * 32 + ".npz")).stat().st_size == 5000
    assert (root / "hetrec2011-lastfm-2k" / "user_taggedartists.dat").is_file()
    assert "nothing to remove" in tool(cache_home, "clear", "--yes").stdout


def test_a_linked_cache_folder_is_not_followed(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / ("f" * 32 + ".npz")).write_bytes(b"x" * 10)
    root = tmp_path / "xdg" / "tagtorch"
    root.mkdir(parents=True)
    (root / "candidates").symlink_to(elsewhere, target_is_directory=True)
    done = tool(tmp_path / "xdg", "clear", "--yes")
    assert done.returncode == 0 and "symbolic link" in done.stderr
    assert (elsewhere / ("f" * 32 + ".npz")).is_file()


def test_bad_uses_end_with_a_clear_message(tmp_path):
    done = tool(tmp_path, "clear", "--what", "models")
    assert done.returncode == 2 and "invalid choice: 'models'" in done.stderr
    (tmp_path / "tagtorch").write_text("a file")
    done = tool(tmp_path, "info")
    assert done.returncode == 2 and "is not a folder" in done.stderr
    assert tool(tmp_path).returncode == 2  # a command is required
