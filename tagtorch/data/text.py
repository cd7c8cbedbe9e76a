"""Text normalization for tags and object texts, as in Canuto et al. (JIDM 2013), Section 5.1.

The paper removes stopwords and applies the Porter stemmer to "avoid trivial recommendations
(e.g., plurals and simple variations of the same word)". tagtorch applies the same processing to
tags and to the other textual features alike, so that the tag "Rock" and the title word "rocks"
become the same term ``rock``:

1. lowercase (optional);
2. tokenize: maximal runs of letters and digits (``token_pattern``); apostrophes inside a word
   are dropped ("don't" -> "dont");
3. remove English stopwords (the NLTK list shipped in ``wordlists/stopwords_en.txt``);
4. Porter stemming (the original algorithm, through the maintained ``PyStemmer`` package).

A multi-word tag becomes its stemmed words joined by one space ("Hard Rocks" -> "hard rock").
A tag made only of stopwords ("The Who") keeps its words rather than vanishing: deviation from a
literal reading of the paper, which did not say how such tags were handled. Each distinct token
is stemmed once (a per-processor cache), so processing millions of texts costs one pass of the
regular expression plus one stemmer call per distinct word. The processed tags and texts are
also cached on disk, keyed by the processor's settings and the raw folksonomy's
:meth:`~tagtorch.data.folksonomy.Folksonomy.fingerprint` (its tags, texts and the rest, so
an edited file or a changed option never reads a stale entry) and the tagtorch version and code
(:data:`TEXT_CODE`, so an upgrade or an edit of that code never reads one either): a second run
on the same data skips text processing. An entry is a ``.npz`` file of UTF-8 bytes (read with
``allow_pickle=False``, so it cannot run code); one that cannot be read (truncated, garbled) is
discarded with a warning naming it and rebuilt.
"""

from __future__ import annotations

import hashlib
import itertools
import logging
import re
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path

import numpy as np
import pandas as pd
import Stemmer

from tagtorch.cache import code_fingerprint
from tagtorch.data.download import user_cache_dir
from tagtorch.data.folksonomy import Folksonomy
from tagtorch.storage import load_arrays, save_arrays

log = logging.getLogger(__name__)

TEXT_CODE = ("tagtorch.data.text", "tagtorch.data.download", "tagtorch.data.folksonomy",
             "tagtorch.data.ragged", "tagtorch.storage", "tagtorch.errors", "tagtorch.version")
"""The code processed text depends on (:func:`~tagtorch.cache.code_fingerprint`): this module
and every tagtorch module it imports."""


@cache
def english_stopwords() -> frozenset[str]:
    """The English stopword list (NLTK's 179 words, apostrophes removed as the tokenizer does)."""
    text = resources.files("tagtorch.data").joinpath("wordlists/stopwords_en.txt").read_text()
    return frozenset(w.replace("'", "") for w in text.split())


DEFAULT_TOKEN_PATTERN = r"[^\W_]+"
"""Letters and digits: the token pattern of every shipped text config (``conf/text``)."""

TOKEN_PATTERNS = frozenset({DEFAULT_TOKEN_PATTERN})
"""The token patterns a served artifact may name (:mod:`tagtorch.serving.artifact`).

An artifact's manifest records its pipeline's pattern, and the pattern runs on every request:
read from a file, a backtracking one (``(a+)+$``) would cost seconds per title. Only the
patterns tagtorch's configs write are accepted; add a pattern here (one without nested
quantifiers) to fit and serve artifacts with it.
"""


@dataclass
class TextProcessor:
    """Lowercase, tokenize, remove stopwords and stem; applied to tags and texts alike.

    Args:
        lowercase: fold case before tokenizing.
        token_pattern: regular expression of one token (default: letters and digits); a
            fitted recommender is saved and served only with one of :data:`TOKEN_PATTERNS`.
        remove_stopwords: drop English stopwords (a tag made only of stopwords keeps them).
        stemmer: a PyStemmer algorithm name (``"porter"``, the paper's choice, or e.g.
            ``"english"`` for Porter2), or ``None`` for no stemming.
        min_token_length: drop shorter tokens.
        cache: keep processed tags and texts on disk and reuse them.
        cache_dir: the cache folder (default: ``text/`` in the user cache folder,
            ``$XDG_CACHE_HOME/tagtorch`` or ``~/.cache/tagtorch``).

    Example:
        >>> p = TextProcessor()
        >>> p.terms("The Rocks of Running Bands!")
        ['rock', 'run', 'band']
        >>> p.normalize_tag("Hard Rocks"), p.normalize_tag("The Who")
        ('hard rock', 'the who')
    """

    lowercase: bool = True
    token_pattern: str = DEFAULT_TOKEN_PATTERN
    remove_stopwords: bool = True
    stemmer: str | None = "porter"
    min_token_length: int = 1
    cache: bool = True
    cache_dir: str | None = None
    _cache: dict[str, str] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        self._regex = re.compile(self.token_pattern)
        self._stemmer = Stemmer.Stemmer(self.stemmer) if self.stemmer else None
        self._stop = english_stopwords() if self.remove_stopwords else frozenset()

    def tokens(self, text: str) -> list[str]:
        """Splits a text into (lowercased) tokens, without stopword removal or stemming."""
        text = text.replace("'", "").replace("\u2019", "")
        if self.lowercase:
            text = text.lower()
        return [t for t in self._regex.findall(text) if len(t) >= self.min_token_length]

    def stem(self, token: str) -> str:
        """Stems one token (memoized)."""
        stem = self._cache.get(token)
        if stem is None:
            stem = self._stemmer.stemWord(token) if self._stemmer else token
            self._cache[token] = stem
        return stem

    def terms(self, text: str) -> list[str]:
        """The normalized terms of a text: tokens without stopwords, stemmed."""
        return [self.stem(t) for t in self.tokens(text) if t not in self._stop]

    def normalize_tag(self, tag: str) -> str:
        """The normalized form of a tag: its terms joined by one space."""
        tokens = self.tokens(tag)
        kept = [t for t in tokens if t not in self._stop] or tokens
        return " ".join(self.stem(t) for t in kept)

    def normalize_texts(self, texts: pd.Series) -> pd.Series:
        """Normalizes a column of texts into space-joined terms."""
        return pd.Series([" ".join(self.terms(t)) for t in texts], index=texts.index, dtype=object)

    def apply(self, folksonomy: Folksonomy) -> Folksonomy:
        """Normalizes the tags (merging those that become equal) and every text field."""
        path = self._cache_path(folksonomy) if self.cache else None
        cached = _read_cache(path, folksonomy) if path is not None and path.is_file() else None
        if cached is not None:
            tags, texts = cached
            log.info("%s: processed tags and texts read from %s", folksonomy.name, path)
        else:
            tags = np.array([self.normalize_tag(str(t)) for t in folksonomy.tags], dtype=object)
            texts = pd.DataFrame(
                {name: self.normalize_texts(folksonomy.texts[name])
                 for name in folksonomy.text_fields},
                index=folksonomy.texts.index,
            )
            if path is not None:
                _write_cache(path, tags, texts)
        out = folksonomy.with_tags(tags).with_texts(texts)
        log.info("%s: text processing left %d tags (from %d)", folksonomy.name, out.n_tags,
                 folksonomy.n_tags)
        return out

    def _cache_path(self, folksonomy: Folksonomy) -> Path:
        """Cache file of this processor's output on these raw tags and texts (and this code)."""
        settings = (self.lowercase, self.token_pattern, self.remove_stopwords, self.stemmer,
                    self.min_token_length, sorted(self._stop), Stemmer.version(),
                    code_fingerprint(*TEXT_CODE))
        digest = hashlib.sha256(repr(settings).encode())
        digest.update(folksonomy.fingerprint().encode())
        folder = Path(self.cache_dir) if self.cache_dir else user_cache_dir() / "text"
        return folder / f"{folksonomy.name}-{digest.hexdigest()[:24]}.npz"


def _pack(strings: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Strings as their concatenated UTF-8 bytes ``[total]`` and offsets ``[n + 1]``.

    Example:
        >>> data, offsets = _pack(["rock", "", "café"])
        >>> offsets.tolist(), _unpack(data, offsets)
        ([0, 4, 4, 9], ['rock', '', 'café'])
    """
    encoded = [s.encode("utf-8") for s in strings]
    offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
    np.cumsum([len(e) for e in encoded], out=offsets[1:])
    return np.frombuffer(b"".join(encoded), dtype=np.uint8), offsets


def _unpack(data: np.ndarray, offsets: np.ndarray) -> list[str]:
    """The strings of :func:`_pack`; ValueError when the offsets do not fit the bytes."""
    raw = data.tobytes()
    if offsets.ndim != 1 or len(offsets) == 0 or offsets[0] != 0 or offsets[-1] != len(raw) \
            or (np.diff(offsets) < 0).any():
        raise ValueError("string offsets do not match the bytes")
    return [raw[a:b].decode("utf-8") for a, b in itertools.pairwise(offsets)]


def _write_cache(path: Path, tags: np.ndarray, texts: pd.DataFrame) -> None:
    """Stores processed tags and texts as UTF-8 arrays in a ``.npz`` file (no pickle)."""
    arrays = {"fields": np.array(list(texts.columns), dtype=str)}
    arrays["tags.data"], arrays["tags.offsets"] = _pack(list(tags))
    for i, name in enumerate(texts.columns):
        arrays[f"text{i}.data"], arrays[f"text{i}.offsets"] = _pack(list(texts[name]))
    save_arrays(arrays, path)


def _read_cache(path: Path, folksonomy: Folksonomy) -> tuple[np.ndarray, pd.DataFrame] | None:
    """Processed tags and texts of a cache entry, or None (with a warning) if it is unreadable.

    The zip container's CRC-32 checks catch truncated or garbled entries; ``allow_pickle=False``
    keeps a planted file from running code. A bad entry is rebuilt by the caller.
    """
    try:
        stored = load_arrays(path)  # bounded by the file's size
        fields = [str(name) for name in stored["fields"]]
        if fields != list(folksonomy.text_fields):
            raise ValueError(f"text fields {fields}, expected {folksonomy.text_fields}")
        tags = np.array(_unpack(stored["tags.data"], stored["tags.offsets"]), dtype=object)
        columns = {name: _unpack(stored[f"text{i}.data"], stored[f"text{i}.offsets"])
                   for i, name in enumerate(fields)}
        if len(tags) != folksonomy.n_tags or any(len(c) != folksonomy.n_objects
                                                 for c in columns.values()):
            raise ValueError("the entry holds other numbers of tags or objects")
    except Exception as error:  # any unreadable entry is rebuilt
        log.warning("%s: unreadable text cache entry, processing the text again (%s: %s)",
                    path, type(error).__name__, error)
        return None
    texts = pd.DataFrame({name: pd.Series(values, index=folksonomy.texts.index, dtype=object)
                          for name, values in columns.items()}, index=folksonomy.texts.index)
    return tags, texts
