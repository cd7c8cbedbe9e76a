"""The one ranker contract: the interface every method implements and the base that saves them.

:class:`Ranker` is the interface (``fit``, ``score``, ``save``, ``load``) one evaluator compares
all methods through. :class:`BaseRanker` implements the parts every ranker shares, once:

- **Settings** are the constructor's arguments, bound to its signature (defaults filled in)
  when an instance is built (:class:`tagtorch.settings.SignatureSettings`, shared with the
  item models); ``settings()`` returns them and ``type(r)(**r.settings())`` is an unfitted copy.
- **Feature names**: a fitted ranker records its training features in ``feature_names_``
  (scikit-learn's convention) and :func:`check_feature_names` refuses a batch whose features
  differ (another order included: columns are never silently reordered).
- **Save/load**: a saved ranker is a folder (:mod:`tagtorch.storage`)::

      manifest.json   class, settings, feature_names, the files' sizes and SHA-256, extras
      model files     the ranker's weights: tensors, JSON or a library's native model file

  Subclasses write and read only their own model files (:meth:`BaseRanker._save_files`,
  :meth:`BaseRanker._load_files`); nothing is ever unpickled.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar, Protocol, Self, cast, runtime_checkable

import torch

from tagtorch.candidates.candidate_set import CandidateSet
from tagtorch.data.ragged import Ragged
from tagtorch.errors import UnreadableFileError
from tagtorch.settings import ModelTask, SignatureSettings, checked_settings
from tagtorch.storage import (
    MANIFEST_FILE,
    check_strings,
    model_folder,
    read_json,
    read_manifest,
    reading,
    saved_entries,
    trusted_class,
    write_manifest,
)

__all__ = ["RANKER_MODULES", "BaseRanker", "Ranker", "TagSetLearner", "check_feature_names",
           "fit_ranker", "load_ranker"]


@runtime_checkable
class Ranker(Protocol):
    """Orders candidate tags: learns on V's candidate sets, scores T's.

    Lightning modules and library wrappers (LightGBM, XGBoost, DEAP, ...) alike implement it;
    wrappers use composition rather than pretending to be torch modules.
    """

    def fit(self, train: CandidateSet, val: CandidateSet | None = None) -> Self:
        """Learns from labelled candidate sets (the protocol's V); ``val`` for early stopping."""
        ...

    def score(self, batch: CandidateSet) -> torch.Tensor:
        """Scores candidates: ``[B, L]`` float, higher is better (padding values are ignored)."""
        ...

    def save(self, path: str | Path) -> None:
        """Writes the fitted model to ``path``."""
        ...

    @classmethod
    def load(cls, path: str | Path) -> Self:
        """Reads a model written by :meth:`save`."""
        ...


@runtime_checkable
class TagSetLearner(Protocol):
    """A ranker that also learns from D's tag assignments, before its ``fit`` on V.

    Ours: the tag embeddings of :class:`~tagtorch.rankers.tag_context.TagContextRanker`.
    """

    def learn_tag_sets(self, tag_sets: Ragged) -> None:
        """Keeps D's tag sets (ragged ``[n_D]`` tag codes) for the next ``fit``."""
        ...


def fit_ranker(ranker: Ranker, train: CandidateSet, tag_sets: Ragged | None) -> None:
    """``ranker.fit(train)``, first handing D's ``tag_sets`` to a :class:`TagSetLearner`.

    The one way the protocol, its tuning and a fitted recommender fit a tag ranker: D's tags
    reach only the rankers that ask for them, V is what every ranker learns on, T is unseen.
    """
    if tag_sets is not None and isinstance(ranker, TagSetLearner):
        ranker.learn_tag_sets(tag_sets)
    ranker.fit(train, None)


def check_feature_names(fitted: tuple[str, ...] | None, batch: CandidateSet) -> None:
    """Raises ValueError when a batch's features differ from those a ranker was fitted on.

    The same names in another order differ too: a ranker never reorders columns silently.

    Args:
        fitted: the ranker's ``feature_names_`` (None: not fitted, nothing to compare).
        batch: the candidate lists to score.

    Raises:
        ValueError: naming both feature tuples.

    Example:
        >>> check_feature_names(None, None)  # not fitted yet: nothing to compare
    """
    if fitted is not None and tuple(batch.feature_names) != tuple(fitted):
        raise ValueError(f"the batch's features {tuple(batch.feature_names)} differ from the "
                         f"fitted features {tuple(fitted)}")


RANKER_MODULES = ("tagtorch.rankers.",)
"""Where the ranker classes a config or a saved folder may name come from."""


class BaseRanker(SignatureSettings):
    """Settings capture, the feature-name check and one save/load layout for every ranker.

    A subclass stores its fitted features in ``feature_names_`` and overrides only what
    differs: :meth:`_save_files` and :meth:`_load_files` (its model files), and where needed
    :meth:`is_fitted`, :meth:`_manifest_extras` and the JSON form of its settings
    (:meth:`_settings_to_json`; read back by :func:`~tagtorch.settings.checked_settings`).
    Constructors take named arguments only (no ``*args`` or ``**kwargs``), so that the
    settings are the signature's.
    """

    task: ClassVar[ModelTask] = "tagrec"
    """The evaluation task these models belong to (read by the config checks)."""
    feature_names_: tuple[str, ...] | None = None

    # -- the Ranker contract (each subclass implements both) ---------------------------------

    def fit(self, train: CandidateSet, val: CandidateSet | None = None) -> Self:
        """Learns from labelled candidate sets (the protocol's V); ``val`` for early stopping."""
        raise NotImplementedError(f"{type(self).__name__}.fit")

    def score(self, batch: CandidateSet) -> torch.Tensor:
        """Scores candidates: ``[B, L]`` float, higher is better (padding values are ignored)."""
        raise NotImplementedError(f"{type(self).__name__}.score")

    # -- settings (captured by :class:`~tagtorch.settings.SignatureSettings`) ----------------

    def _settings_to_json(self) -> dict[str, Any]:
        """The settings as the manifest stores them (JSON values)."""
        return self.settings()

    # -- features ---------------------------------------------------------------------------

    def check_features(self, batch: CandidateSet) -> None:
        """Raises ValueError if ``batch``'s features differ from ``feature_names_``."""
        check_feature_names(self.feature_names_, batch)

    # -- save / load ------------------------------------------------------------------------

    def is_fitted(self) -> bool:
        """Whether there is a model to save (default: ``feature_names_`` is set)."""
        return self.feature_names_ is not None

    def _save_files(self, folder: Path) -> list[str]:
        """Writes the model files into ``folder``; returns their names (default: none)."""
        return []

    def _load_files(self, folder: Path, manifest: Mapping[str, Any]) -> None:
        """Reads the model files that :meth:`_save_files` wrote (checked by the manifest)."""

    def _manifest_extras(self) -> dict[str, Any]:
        """Further JSON entries of the manifest (best epoch, history, ...)."""
        return {}

    def save(self, path: str | Path) -> None:
        """Writes the folder ``path``: ``manifest.json`` and the model files.

        The manifest (:func:`~tagtorch.storage.write_manifest`) records the class, the
        settings, the fitted feature names, each model file's size and SHA-256 and the
        ranker's extras.

        Raises:
            RuntimeError: the ranker is not fitted.
            ValueError: a setting cannot be saved as JSON.
        """
        if not self.is_fitted():
            raise RuntimeError(f"{type(self).__name__} is not fitted: nothing to save")
        settings = self._settings_to_json()
        try:
            json.dumps(settings)
        except (TypeError, ValueError) as error:
            raise ValueError(f"{type(self).__name__} settings cannot be saved as JSON: "
                             f"{error}") from None
        folder = model_folder(path)
        files = self._save_files(folder)
        names = None if self.feature_names_ is None else list(self.feature_names_)
        write_manifest(folder, type(self), settings, files, feature_names=names,
                       **self._manifest_extras())

    @classmethod
    def load(cls, path: str | Path) -> Self:
        """Reads a ranker written by :meth:`save` (its folder).

        Every file is checked against the manifest's size and SHA-256 before it is parsed.

        Raises:
            ValueError: another class's folder, a missing, truncated or altered file, or
                refused settings (the message names the file).
        """
        folder = Path(path)
        manifest = read_manifest(folder, cls, saved_entries(folder))
        try:
            settings = checked_settings(cls, manifest["settings"], "settings")
            ranker = cls(**settings)
        except (TypeError, ValueError) as error:
            raise UnreadableFileError(f"{folder / MANIFEST_FILE}: {error}") from None
        names = manifest.get("feature_names")
        ranker.feature_names_ = None if names is None else tuple(
            check_strings(folder / MANIFEST_FILE, "feature_names", names, distinct=True))
        with reading(folder / MANIFEST_FILE, f"saved {cls.__name__}"):
            ranker._load_files(folder, manifest)
        return ranker


def load_ranker(path: str | Path) -> BaseRanker:
    """Reads a saved tag ranker of any class: the one its manifest names, from ``tagtorch.rankers``.

    Raises:
        UnreadableFileError: no manifest, a class outside ``tagtorch.rankers`` or not a
            ranker, or what the class's own :meth:`BaseRanker.load` refuses.
    """
    where = Path(path) / MANIFEST_FILE
    manifest = read_json(where, ("class",))
    try:
        cls = trusted_class(str(manifest["class"]), RANKER_MODULES, (BaseRanker,),
                            f"{where}: class")
    except ValueError as error:
        raise UnreadableFileError(str(error)) from None
    return cast(type[BaseRanker], cls).load(path)
