"""What both kinds of recommender artifact share: the manifest's entries and their reading.

A ``task=fit`` folder's manifest (:func:`tagtorch.storage.write_manifest`) records, besides the
files' sizes and digests: the settings of the text pipeline (requests are normalized by it),
the class of the fitted model under a key of the artifact's kind (``ranker_class``,
``model_class``: imported on load only from that kind's trusted modules), tagtorch's version
and what the fit recorded (configuration, data name and fingerprint, sizes).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tagtorch.data.text import TOKEN_PATTERNS, TextProcessor
from tagtorch.errors import UnreadableFileError
from tagtorch.serving.journal import check_no_compaction_left
from tagtorch.storage import (
    MANIFEST_FILE,
    read_manifest,
    reading,
    trusted_class,
    write_manifest,
)
from tagtorch.version import __version__

__all__ = ["OpenedArtifact", "open_artifact", "processor_settings", "reading",
           "write_artifact"]


def processor_settings(processor: TextProcessor) -> dict[str, Any]:
    """The text pipeline's settings (JSON; the cache settings are left out).

    Raises:
        ValueError: a token pattern an artifact may not name (:data:`TOKEN_PATTERNS`): the
            artifact could not be served.
    """
    if processor.token_pattern not in TOKEN_PATTERNS:
        raise ValueError(f"text.token_pattern={processor.token_pattern!r:.80}: a served "
                         f"artifact runs only the token patterns tagtorch ships "
                         f"({', '.join(sorted(TOKEN_PATTERNS))}); add it to "
                         f"tagtorch.data.text.TOKEN_PATTERNS if it cannot backtrack")
    return {"lowercase": processor.lowercase, "token_pattern": processor.token_pattern,
            "remove_stopwords": processor.remove_stopwords, "stemmer": processor.stemmer,
            "min_token_length": processor.min_token_length}


def write_artifact(folder: Path, kind: type, processor: TextProcessor,
                   settings: dict[str, Any], files: list[str], model_key: str, model: object,
                   info: dict[str, Any]) -> None:
    """Writes an artifact's manifest once its ``files`` are in ``folder``.

    Args:
        folder: the artifact folder.
        kind: the recommender class that reads it back.
        processor: the text pipeline (its settings join ``settings``).
        settings: the recommender's other settings.
        files: the files and model folders the manifest pins.
        model_key: the manifest key of the model's class.
        model: the fitted model.
        info: further entries (configuration, data, fingerprint, sizes); a loaded artifact's
            own ``tagtorch_version`` and model class are written anew.
    """
    kept = {k: v for k, v in info.items() if k not in ("tagtorch_version", model_key)}
    write_manifest(folder, kind, {"processor": processor_settings(processor), **settings}, files,
                   tagtorch_version=__version__,
                   **{model_key: f"{type(model).__module__}.{type(model).__qualname__}"},
                   **kept)


@dataclass(frozen=True)
class OpenedArtifact:
    """An artifact's checked manifest, its text pipeline and its model class."""

    settings: dict[str, Any]
    processor: TextProcessor
    model_class: type[Any]
    info: dict[str, Any]


def open_artifact(folder: Path, kind: type, model_key: str, modules: tuple[str, ...],
                  kinds: tuple[type, ...], required: tuple[str, ...]) -> OpenedArtifact:
    """Reads and checks an artifact's manifest (every file's size and digest, the model class).

    Args:
        folder: the artifact folder.
        kind: the recommender class reading it.
        model_key: the manifest key of the model's class.
        modules: the module prefixes the model class may come from.
        kinds: the classes the model class must subclass (one of them).
        required: the files and model folders the caller reads: the manifest must pin each.

    Raises:
        UnreadableFileError: a missing, altered, unlisted or foreign file
            (:func:`read_manifest`), a text pipeline tagtorch does not write, or a compaction
            a crash cut short (:func:`~tagtorch.serving.journal.check_no_compaction_left`).
        KeyError, TypeError, ValueError: a manifest without the expected entries, or a model
            class outside ``modules`` (the caller names the folder).
    """
    check_no_compaction_left(folder)
    manifest = read_manifest(folder, kind, required)
    model_class = trusted_class(manifest[model_key], modules, kinds,
                                f"{folder / MANIFEST_FILE}: {model_key}")
    settings = manifest["settings"]
    processor = _processor(folder / MANIFEST_FILE, settings.get("processor"))
    info = {k: v for k, v in manifest.items() if k not in ("format", "class", "settings", "files")}
    return OpenedArtifact(settings, processor, model_class, info)


def _processor(path: Path, settings: Any) -> TextProcessor:
    """The text pipeline of a manifest's ``settings.processor``, its token pattern checked.

    The pattern runs on every request, so it must be one tagtorch writes
    (:data:`~tagtorch.data.text.TOKEN_PATTERNS`): a crafted manifest's backtracking pattern
    would cost seconds per title.

    Raises:
        UnreadableFileError: ``"{path}: settings.processor...: ..."``.
    """
    if not isinstance(settings, dict):
        raise UnreadableFileError(f"{path}: settings.processor: expected an object")
    pattern = settings.get("token_pattern")
    if not isinstance(pattern, str) or pattern not in TOKEN_PATTERNS:
        raise UnreadableFileError(
            f"{path}: settings.processor.token_pattern {pattern!r:.80} is not a pattern "
            f"tagtorch writes ({', '.join(sorted(TOKEN_PATTERNS))}); it would run on every "
            f"request")
    return TextProcessor(**{**settings, "cache": False})
