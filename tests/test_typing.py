"""Settings that type checkers see: every constructor argument is a declared attribute.

:class:`~tagtorch.settings.SignatureSettings` turns constructor arguments into attributes at
run time; mypy and IDEs only see them when the class declares them (a class-level annotation,
inherited or its own) or the constructor assigns them. This test walks every subclass in the
package and fails on an argument that is neither, so ``mypy tagtorch`` keeps meaning something.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import textwrap
from pathlib import Path

import pytest

import tagtorch
from tagtorch.settings import SignatureSettings


def _all_subclasses(cls: type) -> set[type]:
    found = set()
    for sub in cls.__subclasses__():
        found |= {sub} | _all_subclasses(sub)
    return found


def _import_package() -> None:
    skip = {"tagtorch.serve", "tagtorch.train", "tagtorch.recommend"}  # entry points
    for info in pkgutil.walk_packages(tagtorch.__path__, "tagtorch."):
        if info.name in skip or info.name.endswith("__main__"):
            continue
        try:
            importlib.import_module(info.name)
        except ImportError:  # an optional dependency this machine lacks
            continue


def _assigned_in_init(cls: type) -> set[str]:
    """Names the class's own ``__init__`` assigns as ``self.<name>``."""
    init = inspect.unwrap(cls.__dict__["__init__"])
    tree = ast.parse(textwrap.dedent(inspect.getsource(init)))
    return {node.attr for node in ast.walk(tree)
            if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store)
            and isinstance(node.value, ast.Name) and node.value.id == "self"}


def undeclared_settings(cls: type) -> list[str]:
    """The constructor arguments of ``cls`` that no type checker can see as attributes."""
    if "__init__" not in cls.__dict__:
        return []
    declared = {name for klass in cls.__mro__ for name in vars(klass).get("__annotations__", {})}
    assigned = _assigned_in_init(cls)
    parameters = inspect.signature(inspect.unwrap(cls.__dict__["__init__"])).parameters
    missing = []
    for name, parameter in list(parameters.items())[1:]:
        if parameter.kind in (parameter.VAR_KEYWORD, parameter.VAR_POSITIONAL):
            continue
        attribute = inspect.getattr_static(cls, name, None)
        if name in declared or name in assigned or isinstance(attribute, property):
            continue
        missing.append(name)
    return missing


def test_the_check_finds_an_undeclared_setting() -> None:
    class Declared(SignatureSettings):
        rank: int

        def __init__(self, rank: int = 4, seed: int = 0) -> None:
            self.seed = int(seed)

    class Undeclared(SignatureSettings):
        def __init__(self, rank: int = 4) -> None:
            pass

    assert undeclared_settings(Declared) == []
    assert undeclared_settings(Undeclared) == ["rank"]
    assert Undeclared().rank == 4  # what the checker cannot see: set at run time


def test_every_setting_is_declared() -> None:
    _import_package()
    classes = [cls for cls in _all_subclasses(SignatureSettings)
               if cls.__module__.startswith("tagtorch.")]
    assert len(classes) >= 30, "the package's models, tasks and generators were not found"
    missing = {f"{cls.__module__}.{cls.__qualname__}": names for cls in classes
               if (names := undeclared_settings(cls))}
    assert missing == {}


def test_the_package_is_marked_typed() -> None:
    assert (Path(tagtorch.__file__).parent / "py.typed").is_file()


@pytest.mark.parametrize("module", ["tagtorch.rankers.base"])
def test_base_ranker_states_the_ranker_contract(module: str) -> None:
    from tagtorch.rankers.base import BaseRanker

    with pytest.raises(NotImplementedError, match=r"BaseRanker\.fit"):
        BaseRanker().fit(None)  # type: ignore[arg-type]
