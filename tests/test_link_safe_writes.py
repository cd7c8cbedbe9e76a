"""Every file the project writes goes through the one link-safe writer, ``storage.atomic_write``.

An AST scan of ``tagtorch/``, ``benchmarks/``, ``docs/*.py`` and ``hydra_plugins/`` finds each
call that writes a file (``write_text``, ``open(..., "w")``, ``to_csv``, ``savefig``,
``torch.save``, ...) and accepts it only inside a ``with atomic_write(...) as partial`` block,
writing to ``partial`` (or to a handle opened on it): the temporary file is created new and
renamed over the target, which replaces a planted link instead of writing through it. The few
writes that are safe another way are listed in :data:`ALLOWED`, each with its reason. A
behavioural test plants links at ``docs/runs/NAME.json`` and ``docs/provenance.md`` and checks
that ``benchmarks/provenance.py`` leaves their targets untouched.
"""

from __future__ import annotations

import ast
import json
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCANNED = [*sorted((ROOT / "tagtorch").rglob("*.py")), *sorted((ROOT / "benchmarks").glob("*.py")),
           *sorted((ROOT / "docs").glob("*.py")), *sorted((ROOT / "hydra_plugins").rglob("*.py"))]

WRITE_METHODS = {"write_text", "write_bytes", "to_csv", "to_parquet", "to_json", "to_excel",
                 "to_pickle", "to_feather", "to_hdf", "savefig", "save_model", "touch",
                 "screenshot", "extractall"}
"""Methods that write a file (given a path: ``to_csv()`` and ``screenshot()`` alone return it)."""
WRITE_FUNCTIONS = {"np.save", "np.savez", "np.savez_compressed", "np.savetxt", "numpy.save",
                   "json.dump", "pickle.dump", "torch.save", "OmegaConf.save", "joblib.dump",
                   "shutil.copy", "shutil.copy2", "shutil.copyfile", "shutil.copytree",
                   "shutil.move"}
STREAM_DUMPS = {"yaml.dump", "yaml.safe_dump"}
"""Functions that write a file when given a stream (alone, they return the text)."""
STREAM_MODULES = {"gzip", "bz2", "lzma", "io", "codecs", "tarfile"}
"""Modules whose ``open(path, mode)`` takes the mode second, as the builtin does."""
WRITE_FLAGS = {"O_WRONLY", "O_RDWR", "O_CREAT", "O_APPEND", "O_TRUNC"}

ALLOWED = {
    ("tagtorch/evaluation/timings.py", "record", "os.open"):
        "append-only timing log: O_APPEND | O_NOFOLLOW refuses a link; trimmed by atomic_write",
    ("tagtorch/data/download.py", "fetch", "os.open"):
        "the download file: O_CREAT | O_EXCL | O_NOFOLLOW creates it new, a planted link fails",
    ("tagtorch/data/download.py", "extract", "extractall"):
        "into a staging folder it creates new (mkdir fails on anything planted at the name), "
        "the members' names checked first (no absolute path, no ..)",
    ("tagtorch/data/download.py", "extract", "shutil.move"):
        "an extracted entry renamed into place after whatever was at its name (a link too) is "
        "removed: a rename replaces, never writes through",
    ("tagtorch/serving/journal.py", "append", "os.open"):
        "the service's append-only post journal: O_NOFOLLOW refuses a link (serving owns it)",
    ("tagtorch/serving/journal.py", "check_writable", "os.open"):
        "a probe file created O_CREAT | O_EXCL, then removed: a planted link fails",
    ("tagtorch/serving/journal.py", "compact_journal", "touch"):
        "the compaction's ready mark: touch(exist_ok=False) is O_EXCL, a planted link fails",
    ("benchmarks/bench_scale.py", "_open_to_append", "os.open"):
        "--json's JSON-lines log, appended run by run (a run kept as soon as it ends): "
        "O_APPEND | O_NOFOLLOW refuses a link",
    ("hydra_plugins/tagtorch_sweeper/sweeper.py", "file_lock", "os.open"):
        "a lock file, never written: it must keep its name (a rename would break the lock); "
        "O_NOFOLLOW refuses a link",
}
"""(file, enclosing function, call) -> why that write is safe without ``atomic_write``."""


def _dotted(node: ast.AST) -> str:
    """``np.save`` for the callee ``np.save``; '' for what is not a plain dotted name."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        head = _dotted(node.value)
        return f"{head}.{node.attr}" if head else ""
    return ""


def _mode(call: ast.Call, position: int) -> str | None:
    """The constant mode of an ``open`` call (None: not a constant)."""
    given = [k.value for k in call.keywords if k.arg == "mode"]
    given += call.args[position:position + 1]
    if not given:
        return "r"
    mode = given[0]
    return mode.value if isinstance(mode, ast.Constant) and isinstance(mode.value, str) else None


def write_call(call: ast.Call) -> str | None:
    """The name of the write ``call`` makes (``open``, ``os.open``, ``to_csv``...), or None."""
    name = _dotted(call.func)
    if name in WRITE_FUNCTIONS or (name in STREAM_DUMPS and (
            len(call.args) > 1 or any(k.arg == "stream" for k in call.keywords))):
        return name
    if name == "os.open":
        flags = {n.attr if isinstance(n, ast.Attribute) else getattr(n, "id", "")
                 for n in ast.walk(call.args[1])} if len(call.args) > 1 else set()
        return name if flags & WRITE_FLAGS else None
    if not isinstance(call.func, ast.Attribute | ast.Name):
        return None
    last = call.func.attr if isinstance(call.func, ast.Attribute) else call.func.id
    if last == "ZipFile":
        mode = _mode(call, 1)
        return "ZipFile" if mode is None or set(mode) & set("wax") else None
    if last == "open" and name != "os.open":
        module = name.rpartition(".")[0]
        first = call.args[0] if call.args else None
        named_first = not (isinstance(first, ast.Constant) and isinstance(first.value, str))
        mode = _mode(call, 1 if name == "open" or module in STREAM_MODULES or named_first
                     else 0)
        return "open" if mode is None or set(mode) & set("wax+") else None
    if last in WRITE_METHODS and isinstance(call.func, ast.Attribute):
        gives_path = call.args or any(k.arg in {"path", "path_or_buf", "fname"}
                                      for k in call.keywords)
        return last if gives_path or last in {"write_text", "write_bytes", "touch"} else None
    return None


class _Scan(ast.NodeVisitor):
    """Collects the write calls outside an ``atomic_write`` block's temporary file."""

    def __init__(self) -> None:
        self.safe: list[set[str]] = [set()]
        self.functions: list[str] = ["<module>"]
        self.found: list[tuple[str, str, int]] = []

    def _names(self, node: ast.AST) -> set[str]:
        return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self.functions.append(node.name)
        self.generic_visit(node)
        self.functions.pop()

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> None:
        self.visit_FunctionDef(node)

    def visit_With(self, node: ast.With | ast.AsyncWith) -> None:
        safe = set(self.safe[-1])
        for item in node.items:
            self.safe.append(safe)
            self.visit(item.context_expr)
            self.safe.pop()
            expr, target = item.context_expr, item.optional_vars
            atomic = isinstance(expr, ast.Call) and _dotted(expr.func).endswith("atomic_write")
            opened = isinstance(expr, ast.Call) and bool(self._names(expr) & safe)
            if target is not None and (atomic or opened):
                safe |= self._names(target)
        self.safe.append(safe)
        for statement in node.body:
            self.visit(statement)
        self.safe.pop()

    def visit_AsyncWith(self, node: ast.AsyncWith) -> None:
        self.visit_With(node)

    def visit_Call(self, node: ast.Call) -> None:
        kind = write_call(node)
        if kind is not None and not self._names(node) & self.safe[-1]:
            self.found.append((self.functions[-1], kind, node.lineno))
        self.generic_visit(node)


def unsafe_writes(source: str) -> list[tuple[str, str, int]]:
    """``(enclosing function, call, line)`` of each write of ``source`` not to a temp file."""
    scan = _Scan()
    scan.visit(ast.parse(source))
    return scan.found


def _project_writes() -> Iterator[tuple[tuple[str, str, str], int]]:
    for path in SCANNED:
        relative = path.relative_to(ROOT).as_posix()
        for function, kind, line in unsafe_writes(path.read_text(encoding="utf-8")):
            yield (relative, function, kind), line


def test_every_write_goes_through_atomic_write_or_is_allowed_with_a_reason():
    found = list(_project_writes())
    unsafe = [f"{key[0]}:{line} {key[2]} in {key[1]}()" for key, line in found
              if key not in ALLOWED]
    assert not unsafe, ("write through storage.atomic_write (a link at the target is replaced, "
                        "never written through), or add a reason to ALLOWED:\n"
                        + "\n".join(unsafe))
    stale = set(ALLOWED) - {key for key, _ in found}
    assert not stale, f"ALLOWED lists writes that are gone: {sorted(stale)}"


@pytest.mark.parametrize("source", [
    "Path(p).write_text('x')",
    "with open(p, 'w') as f:\n    f.write('x')",
    "with gzip.open(p, mode='wt') as f:\n    pass",
    "frame.to_csv(p, index=False)",
    "fig.savefig(p, dpi=120)",
    "torch.save(state, p)",
    "json.dump(value, handle)",
    "with path.open('a') as out:\n    pass",
    "os.open(p, os.O_WRONLY | os.O_CREAT)",
    "shutil.copy(a, b)",
    "page.screenshot(path=p)",
    "zipfile.ZipFile(p, 'w')",
    "tarfile.open(p, 'w:gz')",
    "archive.extractall(folder)",
    "with atomic_write(p) as partial:\n    Path(p).write_text('x')",  # the target, not partial
    "with atomic_write(p) as partial:\n    pass\nPath(partial).write_text('x')",  # after it
])
def test_the_scan_finds_a_write_that_can_go_through_a_link(source):
    assert unsafe_writes(source), source


@pytest.mark.parametrize("source", [
    "with atomic_write(p) as partial:\n    partial.write_text('x')",
    "with atomic_write(p) as partial, open(partial, 'wb') as out:\n    np.savez(out, **a)",
    "with storage.atomic_write(p) as partial:\n    frame.to_csv(partial, index=False)",
    "with atomic_write(p) as tmp:\n    with tmp.open('w') as h:\n        json.dump(v, h)",
    "with open(p) as f:\n    f.read()",
    "with open(p, 'rb') as f:\n    pass",
    "os.open(p, os.O_RDONLY)",
    "text = frame.to_csv(index=False)",
    "png = page.screenshot(full_page=True)",
    "with zipfile.ZipFile(p) as archive:\n    archive.open(entry)",
])
def test_the_scan_accepts_writes_to_the_temporary_file_and_reads(source):
    assert not unsafe_writes(source), source


def _run_folder(folder: Path) -> Path:
    """A finished run's files, as :func:`headline_record` reads them (no run needed)."""
    from tagtorch.evaluation.provenance import PROVENANCE_FILE, run_provenance

    folder.mkdir()
    (folder / PROVENANCE_FILE).write_text(json.dumps(run_provenance("python -m tagtorch.train")))
    (folder / "config.yaml").write_text("data:\n  _target_: tagtorch.data.synthetic."
                                        "generate_folksonomy\ntask:\n  seeds: [0]\n")
    (folder / "report.md").write_text("# Results\n\n## Best first by ndcg@5\n\n"
                                      "| rank | method | ndcg@5 |\n|---|---|---|\n"
                                      "| 1 | sum | 0.4321 |\n")
    return folder


@pytest.mark.parametrize("dangling", [False, True])
def test_the_provenance_script_never_writes_through_a_planted_link(tmp_path, dangling):
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from provenance import RESULT_PAGES, main

    docs = tmp_path / "docs"
    (docs / "runs").mkdir(parents=True)
    for page in RESULT_PAGES:
        shutil.copy(ROOT / "docs" / page, docs / page)
    victims = {name: tmp_path / f"victim_{name}" for name in ("record", "page")}
    for victim in victims.values():
        if not dangling:  # a dangling link: its target must not come to exist
            victim.write_text("keep")
    (docs / "runs" / "planted.json").symlink_to(victims["record"])
    (docs / "provenance.md").symlink_to(victims["page"])
    assert main(["--docs", str(docs), f"planted={_run_folder(tmp_path / 'run')}"]) == 0
    for victim in victims.values():
        assert (victim.read_text() == "keep") if not dangling else not victim.exists()
    assert not (docs / "runs" / "planted.json").is_symlink()  # the record replaced the link
    assert json.loads((docs / "runs" / "planted.json").read_text())["best_first"][-1] == (
        "| 1 | sum | 0.4321 |")
    assert not (docs / "provenance.md").is_symlink()
    assert "## planted" in (docs / "provenance.md").read_text()


@pytest.mark.parametrize("backend", ["lightgbm", "xgboost"])
def test_a_tree_ranker_never_writes_its_model_file_through_a_planted_link(tmp_path, backend):
    pytest.importorskip(backend)
    import torch

    from tagtorch.candidates.candidate_set import CandidateSet
    from tagtorch.rankers.trees import MODEL_FILES, LambdaMARTRanker

    generator = torch.Generator().manual_seed(0)
    lists = CandidateSet.from_flat(
        objects=torch.arange(20), rows=torch.arange(20).repeat_interleave(5),
        tags=torch.arange(100) % 7, features=torch.rand(100, 2, generator=generator),
        labels=(torch.arange(100) % 5 == 0).float(), n_relevant=torch.ones(20, dtype=torch.long),
        feature_names=("a", "b"))
    ranker = LambdaMARTRanker(backend=backend, n_iterations=3, n_jobs=1).fit(lists)
    folder, victim = tmp_path / "model", tmp_path / "victim"
    folder.mkdir()
    victim.write_text("keep")
    (folder / MODEL_FILES[backend]).symlink_to(victim)
    ranker.save(folder)
    assert victim.read_text() == "keep" and not (folder / MODEL_FILES[backend]).is_symlink()
    scores = LambdaMARTRanker.load(folder).score(lists)
    assert torch.equal(scores, ranker.score(lists))  # the file written is the model


def test_the_sweepers_lock_file_refuses_a_planted_link(tmp_path):
    pytest.importorskip("optuna")
    from hydra_plugins.tagtorch_sweeper.sweeper import file_lock

    with file_lock(tmp_path / "study.db.lock"):  # an ordinary lock file: created, held
        assert (tmp_path / "study.db.lock").is_file()
    (tmp_path / "planted.lock").symlink_to(tmp_path / "victim")
    with pytest.raises(OSError), file_lock(tmp_path / "planted.lock"):
        pass
    assert not (tmp_path / "victim").exists()  # a dangling link's target never created
