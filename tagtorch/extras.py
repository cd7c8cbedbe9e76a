"""Optional extras: a feature whose heavy dependency is missing says which extra to install.

``pip install -e .`` installs what the main job needs; the service (``[serve]``: FastAPI,
uvicorn), hyperparameter sweeps (``[sweep]``: Optuna) and scale-out engines (``[scale]``: Dask,
Ray) come with their extras (``[dev]`` has them all). Where such a dependency is missing, the
feature stops with one line naming the extra, never a traceback from deep inside a library.

Layer 0: no tagtorch import.
"""

from __future__ import annotations

from typing import Any, NoReturn

__all__ = ["EXTRAS", "MissingExtraError", "MissingModule", "require_extra"]

EXTRAS = {
    "serve": ("python -m tagtorch.serve", "fastapi, uvicorn"),
    "sweep": ("hparams_search (Optuna sweeps)", "optuna"),
    "scale": ("task.backend=dask|ray and the Ray launcher", "dask[distributed], ray"),
}
"""Extra -> (the feature that needs it, what it installs)."""


class MissingExtraError(ImportError):
    """A feature's optional dependency is missing; the message names the extra to install."""

    def __init__(self, extra: str, module: str | None = None) -> None:
        feature, packages = EXTRAS[extra]
        missing = f" ({module} is not installed)" if module else ""
        super().__init__(f"{feature} needs the [{extra}] extra{missing}: "
                         f"pip install 'tagtorch[{extra}]' (it installs {packages})")
        self.extra = extra


def require_extra(extra: str, error: ModuleNotFoundError) -> NoReturn:
    """Raises :class:`MissingExtraError` for ``extra`` from an import that failed.

    Example:
        >>> try:
        ...     require_extra("sweep", ModuleNotFoundError(name="optuna"))
        ... except MissingExtraError as missing:
        ...     print(str(missing).split(": ")[1])
        pip install 'tagtorch[sweep]' (it installs optuna)
    """
    raise MissingExtraError(extra, error.name) from None


class MissingModule:
    """Stands in for a module of a missing extra: any use raises :class:`MissingExtraError`.

    A module that only needs the dependency when its feature is used imports it at the top and
    falls back to this, so that importing the module (Hydra scans every plugin module) works.
    """

    def __init__(self, extra: str, module: str) -> None:
        self._extra, self._module = extra, module

    def __getattr__(self, name: str) -> Any:
        raise MissingExtraError(self._extra, self._module)
