"""TagRec's CSV format, in and out: :func:`load_tagrec` and :func:`write_tagrec`.

TagRec (Kowald, Lex and Trattner; github.com/learning-layers/TagRec), the Java framework most
tag-recommendation papers benchmark with, stores one post per line, its fields double-quoted
and separated by ``;``, without a header::

    "user";"resource";"timestamp";"tag1,tag2,...";"cat1_0.69,cat2_0.19"

- ``timestamp``: Unix seconds (may be empty);
- tags: comma-separated inside one field;
- categories (optional, may be empty): comma-separated ``name_weight`` pairs (or bare names);
- optional further fields: a rating, then a title and a description.

Benchmark splits come as ``X_train.txt``, ``X_test.txt`` and their concatenation ``X.txt``.

Reading follows TagRec's ``BookmarkReader``: tags split on ``,``, empty ones dropped, each
lower-cased; category names lower-cased, their weight after the underscore. Deviations, all
written here:

- tags are also trimmed, and a tag repeated within a post counts once (a folksonomy holds one
  ``(user, resource, tag)`` assignment; TagRec keeps the repeat);
- ``url_decode`` (on by default; TagRec keeps the encoded text): percent-encoding is decoded
  repeatedly until nothing changes, since the public samples encode twice (``c%252b%252b`` is
  ``c%2b%2b``, then ``c++``);
- a category's weight is the number after its *last* underscore when that parses as a number
  (TagRec cuts at the first underscore and drops the weight); a category name that itself ends
  in ``_NUMBER`` is therefore read as a weighted name;
- the rating field is not read; title and description become text fields.

Writing is the way back: :func:`write_tagrec` writes a folksonomy's posts (one line per
``(user, resource)`` at its earliest time, tags in code order, as TagRec's own converters join
a user's lines for one resource), and :func:`write_tagrec_split` the three
files of a split. Characters that would break TagRec's line format inside a tag (``%``, ``,``,
``;``, ``"`` and line breaks) are percent-encoded, so a folksonomy written and read back with
``url_decode`` gives the same content when its tags hold no ``%`` (and are lower-case, or
are read with ``lowercase=False``) and each post's assignments share one time (the same
fingerprint but for the read-back's :data:`~tagtorch.data.folksonomy.SOURCE_ORDER`).

Each assignment keeps its place in the files (line by line, a line's tags in order; the
training file first): TagRec's programs read lines in that order, and its ties follow it.

A line without a tag (an empty tag field) is kept, as TagRec's reader keeps it, as an untagged
post (:attr:`~tagtorch.data.folksonomy.Folksonomy.untagged_posts`, with its place): TagRec
scores such a test post (its gold is one empty tag, never hit) and counts such a training post
among its user's and resource's lines.
"""

from __future__ import annotations

import logging
import re
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from tqdm.auto import tqdm

from tagtorch.data.folksonomy import (
    MISSING_TIME,
    SOURCE_ORDER,
    Folksonomy,
    replace_controls,
)
from tagtorch.data.loaders.reading import (
    CHUNK_BYTES,
    RawTable,
    TableLayout,
    check_chunk_bytes,
    check_seconds,
    csv_fields,
    decode_percent,
    first_line,
    first_record,
    is_compressed,
    read_delimited_chunks,
)
from tagtorch.errors import DataFormatError
from tagtorch.storage import atomic_write

log = logging.getLogger(__name__)

__all__ = ["TAGREC_FIELDS", "check_not_tagrec_like", "given_test_posts", "is_tagrec_file",
           "last_post_per_user", "load_tagrec", "tagrec_field_count", "tagrec_lines",
           "tagrec_posts", "write_tagrec", "write_tagrec_split"]

TAGREC_FIELDS = ("user", "resource", "timestamp", "tags", "categories", "rating", "title",
                 "description")
"""TagRec's fields by position (the first four are required)."""

_ENCODED = re.compile(r"[%,;\"\r\n]")
_WEIGHT = re.compile(r"^(.*)_([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)$")


def _encode_tag(tag: str) -> str:
    """A tag with the characters of TagRec's line format percent-encoded."""
    return _ENCODED.sub(lambda match: f"%{ord(match.group()):02X}", tag)


_EXPECTED = ('TagRec\'s format: "user";"resource";"timestamp";"tag1,tag2";"categories" '
             "(4 to 8 ;-separated quoted fields, no header)")


def tagrec_field_count(path: str | Path, encoding: str = "utf-8") -> int | None:
    """The number of fields of the first line if it looks like TagRec's, else None.

    A line looks like TagRec's when it starts with a double quote and has two ``;``-separated
    fields or more; the file is decompressed and decoded first (a byte-order mark dropped),
    and read no further than that line (:func:`~.reading.first_line`).

    Raises:
        OSError: the file cannot be read.
        DataFormatError: an undecodable byte, or a field over the csv module's size limit.
    """
    number, line = first_line(path, encoding, "data.encoding")
    if not line.startswith('"'):
        return None
    count = len(csv_fields(line, ";", Path(path), number))
    return count if count >= 2 else None


def is_tagrec_file(path: str | Path, encoding: str = "utf-8") -> bool:
    """Whether a file looks like TagRec's format: its first line, 4 to 8 quoted ``;`` fields.

    A file that cannot be decoded or read is not (the loader then says why).
    """
    try:
        count = tagrec_field_count(path, encoding)
    except (DataFormatError, OSError, ValueError):
        return False
    return count is not None and 4 <= count <= len(TAGREC_FIELDS)


def check_not_tagrec_like(path: str | Path, encoding: str = "utf-8") -> None:
    """Refuses a file whose first line looks like TagRec's but has another number of fields.

    For the table reader, when it fails on line 1 of a file not read with ``;``: a TagRec
    file of 3 or 9 fields is not a table either, and its user meant TagRec's format.

    Raises:
        DataFormatError: naming line 1, the fields found and TagRec's 4 to 8.
    """
    count = tagrec_field_count(path, encoding)
    if count is not None and not 4 <= count <= len(TAGREC_FIELDS):
        raise DataFormatError(path, _EXPECTED, f"{count} field(s)", line=1)


def _field_names(path: Path, encoding: str) -> tuple[str, ...]:
    """TagRec's fields present in the file: as many as its first line has (4 to 8)."""
    count = len(first_record(path, ";", encoding, "data.encoding"))
    if not 4 <= count <= len(TAGREC_FIELDS):
        raise DataFormatError(path, _EXPECTED, f"{count} field(s)", line=1)
    return TAGREC_FIELDS[:count]


def _post_tags(table: RawTable, lowercase: bool,
               url_decode: bool) -> tuple[np.ndarray, np.ndarray, int]:
    """Each post's tags (split, decoded, trimmed, lower-cased) and the post of each tag.

    Split in Arrow; each *distinct* raw tag is decoded, trimmed and lower-cased once, and the
    tags are references to those strings (no Python string per tag).

    A tag's control characters and line or paragraph separators (raw or percent-decoded:
    NUL, ESC, U+008F, U+2028) are replaced (:func:`~tagtorch.data.folksonomy.replace_controls`).

    Returns:
        ``(tags, post of each tag, the number of lines with a replaced character)``.
    """
    fields = pa.array(table.frame["tags"].astype(str).to_numpy(dtype=object), type=pa.string())
    split = pc.split_pattern(fields, ",")
    posts = np.repeat(np.arange(len(fields)), pc.list_value_length(split).to_numpy())
    encoded = pc.dictionary_encode(pc.list_flatten(split))
    indices = encoded.indices.to_numpy()
    trimmed, changed = replace_controls(np.array(
        [(decode_percent(tag) if url_decode else tag).strip()
         for tag in encoded.dictionary.to_pylist()], dtype=object))
    replaced = len(np.unique(posts[np.isin(indices, np.flatnonzero(changed))]))
    distinct = np.empty(len(trimmed), dtype=object)
    distinct[:] = [tag.lower() if lowercase else tag for tag in trimmed]
    kept = np.array([tag != "" for tag in trimmed], dtype=bool)[indices]
    return distinct[indices[kept]], posts[kept], replaced


def _categories(table: RawTable, objects: np.ndarray, lowercase: bool,
                open_rows: np.ndarray) -> tuple[pd.DataFrame | None, np.ndarray]:
    """``object, category, weight`` rows from each resource's first non-empty category field.

    Only the rows ``open_rows`` (``[rows]`` bool: resources given no field before) are looked
    at; also returns the rows whose fields were read (one per resource).
    """
    if "categories" not in table.frame:
        return None, np.zeros(0, dtype=np.int64)
    fields = table.frame["categories"].astype("string")
    codes, distinct = pd.factorize(fields)  # each distinct field checked once
    filled = np.flatnonzero(np.array([bool(str(text).strip()) for text in distinct],
                                     dtype=bool)[codes] & open_rows)
    firsts = filled[~pd.Index(objects[filled]).duplicated()]  # per resource
    flat = []
    for position, obj, field_text in zip(firsts.tolist(), objects[firsts].tolist(),
                                         fields.to_numpy(dtype=object)[firsts].tolist(),
                                         strict=True):
        for item in str(field_text).split(","):
            match = _WEIGHT.match(item.strip())
            name, weight = (match.group(1), float(match.group(2))) if match else (
                item.strip(), np.nan)
            if np.isinf(weight):
                raise table.error(position, "a finite category weight", repr(item.strip()))
            if name:
                flat.append((obj, name.lower() if lowercase else name, weight))
    if not flat:
        return None, firsts
    frame = pd.DataFrame(flat, columns=["object", "category", "weight"])
    return frame if frame["weight"].notna().any() else frame.drop(columns="weight"), firsts


def _timestamps(table: RawTable) -> np.ndarray:
    """``[posts]`` Unix seconds; an empty field is :data:`MISSING_TIME`.

    Raises:
        DataFormatError: a field that is not a whole number within 64 bits (``-``, ``2^63``:
            never a silent wrap), or a time :func:`~.reading.check_seconds` refuses (no
            date, or -1), naming the line.
    """
    text = table.frame["timestamp"].astype("string").str.strip().fillna("")
    bad = ~text.str.fullmatch(r"(?:-?\d+)?").to_numpy()
    for i in np.flatnonzero(~bad & (text.str.len().to_numpy() >= 19)):  # few: exactly
        bad[i] = not -2**63 < int(text.iloc[i]) < 2**63
    if bad.any():
        position = int(np.flatnonzero(bad)[0])
        raise table.error(position, "a timestamp in Unix seconds within 64 bits (or nothing)",
                          repr(str(text.iloc[position])))
    seconds = pd.to_numeric(text.mask(text == ""), errors="raise").fillna(MISSING_TIME)
    return check_seconds(table, "timestamp", seconds.to_numpy(dtype=np.int64),
                         (text != "").to_numpy(dtype=bool))


class _Codes:
    """A growing vocabulary: each distinct value's code, in order of first appearance."""

    def __init__(self) -> None:
        self.index: dict[object, int] = {}

    def of(self, values: pd.Series | np.ndarray) -> np.ndarray:
        """``[len(values)]`` codes (each distinct value looked up once)."""
        positions, uniques = pd.factorize(pd.Series(values))
        codes = np.fromiter((self.index.setdefault(value, len(self.index))
                             for value in uniques.tolist()), dtype=np.int64, count=len(uniques))
        return codes[positions]

    def values(self) -> np.ndarray:
        """``[codes]`` the values, as an object array (``values()[codes]`` are references)."""
        out = np.empty(len(self.index), dtype=object)
        out[:] = list(self.index)
        return out


@dataclass
class _Posts:
    """Files' assignments as codes into shared vocabularies, texts and categories by part."""

    users: _Codes = field(default_factory=_Codes)
    objects: _Codes = field(default_factory=_Codes)
    tags: _Codes = field(default_factory=_Codes)
    columns: list[tuple[np.ndarray, ...]] = field(default_factory=list)
    texts: list[pd.DataFrame] = field(default_factory=list)
    categories: list[pd.DataFrame] = field(default_factory=list)
    categorized: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))
    replaced_lines: int = 0
    untagged: list[tuple[np.ndarray, ...]] = field(default_factory=list)
    placed: int = 0

    def add(self, table: RawTable, integer_ids: bool, lowercase: bool, url_decode: bool) -> int:
        """Adds one chunk's posts; returns the number of its assignments."""
        raw = [pd.Series(table.integers(column)) if integer_ids
               else table.frame[column].astype("string").str.strip()
               for column in ("user", "resource")]
        seen = len(self.objects.index)
        tags, posts, replaced = _post_tags(table, lowercase, url_decode)
        self.replaced_lines += replaced
        users, objects = self.users.of(raw[0]), self.objects.of(raw[1])
        lines, counts = self._line_places(posts, len(users))
        within = np.arange(len(posts)) - (np.cumsum(counts) - counts)[posts]
        times, bare = _timestamps(table), counts == 0
        self.columns.append((users[posts], objects[posts], self.tags.of(tags), times[posts],
                             lines[posts] + within))  # a line's tags in order
        self.untagged.append((users[bare], objects[bare], times[bare], lines[bare]))
        fields = [f for f in ("title", "description") if f in table.frame]
        first = ~pd.Index(objects).duplicated() & (objects >= seen)  # resources new here
        if fields and first.any():
            self.texts.append(table.frame.loc[first, fields].astype(str).set_axis(
                raw[1].to_numpy(dtype=object)[first]))
        self.categorized = np.concatenate(
            (self.categorized, np.zeros(len(self.objects.index) - seen, dtype=bool)))
        cats, read = _categories(table, raw[1].to_numpy(dtype=object), lowercase,
                                 ~self.categorized[objects])
        self.categorized[objects[read]] = True
        if cats is not None:
            self.categories.append(cats)
        return len(posts)

    def _line_places(self, posts: np.ndarray, n_lines: int) -> tuple[np.ndarray, np.ndarray]:
        """Each line's first place in the files and its number of tags.

        A line takes one place per tag, a line without a tag one of its own, so the places of
        every file's lines and tags follow the file (:data:`SOURCE_ORDER`).
        """
        counts = np.bincount(posts, minlength=n_lines)
        slots = np.maximum(counts, 1)
        starts = self.placed + np.cumsum(slots) - slots
        self.placed += int(slots.sum())
        return starts, counts

    def frame(self, start: int = 0, stop: int | None = None) -> pd.DataFrame:
        """The assignments of chunks ``[start, stop)``: raw ids (references), time, place."""
        user, obj, tag, seconds, places = _joined(self.columns[start:stop])
        return pd.DataFrame({"user": self.users.values()[user],
                             "object": self.objects.values()[obj],
                             "tag": self.tags.values()[tag], "timestamp": seconds,
                             SOURCE_ORDER: places})

    def untagged_frame(self, start: int = 0, stop: int | None = None) -> pd.DataFrame:
        """The lines without a tag of chunks ``[start, stop)``: raw ids, time and place."""
        user, obj, seconds, places = _joined(self.untagged[start:stop])
        return pd.DataFrame({"user": self.users.values()[user],
                             "object": self.objects.values()[obj], "timestamp": seconds,
                             SOURCE_ORDER: places})


def _joined(parts: list[tuple[np.ndarray, ...]]) -> list[np.ndarray]:
    """The chunks' columns, each concatenated."""
    return [np.concatenate(column) for column in zip(*parts, strict=True)]


def _read_posts(path: Path, posts: _Posts, options: dict[str, bool], encoding: str,
                chunk_bytes: int | None) -> None:
    """Adds one TagRec file's posts, a chunk of ``chunk_bytes`` at a time, with a bar."""
    names = _field_names(path, encoding)
    layout = TableLayout(";", names, quoting=True, names=names)
    size = path.stat().st_size
    assignments = 0
    # tqdm itself, as the generator's bar: the data layer does not import tagtorch.progress
    # (which brings Lightning); shown on a terminal only, removed when done
    with tqdm(desc=f"reading {path.name}", unit="B", unit_scale=True, leave=False,
              total=None if is_compressed(path) else size, dynamic_ncols=True,
              disable=None if size > (chunk_bytes or size) else True) as bar:
        for table in read_delimited_chunks(path, layout, encoding, None, "data.encoding",
                                           chunk_bytes, on_bytes=bar.update):
            assignments += posts.add(table, **options)
    if assignments == 0:
        raise DataFormatError(path, "at least one post with a user, a resource and a tag",
                              "none")


def load_tagrec(path: str | Path, name: str | None = None, url_decode: bool = True,
                lowercase: bool = True, integer_ids: bool = False, encoding: str = "utf-8",
                test_path: str | Path | None = None,
                chunk_bytes: int | None = CHUNK_BYTES) -> Folksonomy:
    """Loads a file in TagRec's format (module docstring) as a folksonomy.

    Args:
        path: the file (``X.txt``, ``X_train.txt``, ...; gzip, bzip2 and xz are decompressed).
        name: the dataset's name (default: the file name without extensions).
        url_decode: decode percent-encoded tags, repeatedly (ours; TagRec keeps them).
        lowercase: lower-case tags and categories (TagRec's reader does).
        integer_ids: read user and resource ids as 64-bit integers (``007`` and ``7`` are
            then one user; ids sort as numbers) instead of opaque strings.
        encoding: the files' encoding.
        test_path: a given split's test file (``X_test.txt``, with ``path`` its
            ``X_train.txt``): its posts join the folksonomy and are marked as test
            (:attr:`Folksonomy.test_posts`, read by ``task.split=given``).
        chunk_bytes: the text read and parsed at a time (None: each file whole): memory grows
            with it and with the distinct users, resources and tags, and the posts' codes, not
            with a Python object per post (a line holds at most
            :data:`~.reading.MAX_LINE_BYTES`).

    Returns:
        The raw folksonomy: one assignment per (user, resource, tag), the post's timestamp;
        ``title``/``description`` text fields and weighted categories when the files have
        them (a resource's first, the training file first).

    Raises:
        DataFormatError: a file is not in TagRec's format (the line and what was found).
        ValueError: ``chunk_bytes`` is not a size (:func:`~.reading.check_chunk_bytes`).
    """
    chunk_bytes = check_chunk_bytes(chunk_bytes)
    path = Path(path)
    files = [path, *([Path(test_path)] if test_path is not None else [])]
    posts, ends = _Posts(), []
    options = {"integer_ids": integer_ids, "lowercase": lowercase, "url_decode": url_decode}
    for file in files:
        _read_posts(file, posts, options, encoding, chunk_bytes)
        ends.append(len(posts.columns))
    if posts.replaced_lines:
        warnings.warn(f"{', '.join(map(str, files))}: {posts.replaced_lines} line(s) hold tags "
                      f"with control characters or line separators, replaced with U+FFFD",
                      stacklevel=2)
    test_posts = (pd.concat([posts.frame(ends[0]), posts.untagged_frame(ends[0])])[
        ["user", "object"]] if test_path is not None else None)
    dataset = name or path.name.split(".")[0].removesuffix("_train") or path.name
    cats = pd.concat(posts.categories, ignore_index=True) if posts.categories else None
    return Folksonomy.from_frame(posts.frame(), pd.concat(posts.texts) if posts.texts else None,
                                 cats, name=dataset, test_posts=test_posts,
                                 untagged_posts=posts.untagged_frame())


def tagrec_posts(folksonomy: Folksonomy) -> pd.DataFrame:
    """The folksonomy's posts: one row per (user, object) with its tag codes.

    A post is a user's tagging of one resource, as in TagRec's own converters (which join a
    user's consecutive lines for one resource) and in :func:`tagtorch.posts.data.
    posts_from_assignments`: its time is the earliest of its assignments'. The untagged posts
    (:attr:`Folksonomy.untagged_posts`) are posts without tags. Ordered by user, then time,
    then object (each user's posts in time order, as TagRec's splits are written).

    Returns:
        Columns ``user``, ``object``, ``timestamp`` (codes and seconds) and ``tags`` (a list
        of tag codes, ascending).
    """
    frame = folksonomy.assignments.sort_values(["user", "object", "tag"])
    grouped = frame.groupby(["user", "object"], sort=False).agg(
        timestamp=("timestamp", "min"), tags=("tag", list)).reset_index()
    bare = folksonomy.untagged_posts[["user", "object", "timestamp"]]
    if len(bare):
        grouped = pd.concat([grouped, bare.assign(tags=[[] for _ in range(len(bare))])],
                            ignore_index=True)
    return grouped.sort_values(["user", "timestamp", "object"], kind="stable",
                               ignore_index=True)[["user", "object", "timestamp", "tags"]]


def _check_ids(values: np.ndarray, what: str) -> None:
    bad = [str(v) for v in values if re.search(r"[\";\r\n]", str(v))]
    if bad:
        raise ValueError(f"{what} {bad[0]!r} holds a quote, a ';' or a line break, which "
                         "TagRec's line format cannot hold")


def _quoted(text: str) -> str:
    return '"' + text.replace('"', '""') + '"'


def _category_fields(folksonomy: Folksonomy) -> dict[int, str]:
    """Each object's categories as TagRec writes them (``name_weight`` or ``name``)."""
    cats = folksonomy.categories
    names = folksonomy.category_names
    weights = cats["weight"].to_numpy() if "weight" in cats else np.full(len(cats), np.nan)
    fields: dict[int, list[str]] = {}
    for obj, code, weight in zip(cats["object"].to_numpy(), cats["category"].to_numpy(),
                                 weights, strict=True):
        name = _encode_tag(str(names[code]))
        fields.setdefault(int(obj), []).append(name if np.isnan(weight)
                                               else f"{name}_{float(weight)!r}")
    return {obj: ",".join(items) for obj, items in fields.items()}


def tagrec_lines(folksonomy: Folksonomy, posts: pd.DataFrame | None = None) -> list[str]:
    """The TagRec lines of ``posts`` (default: every post of :func:`tagrec_posts`).

    Raises:
        ValueError: a user or object id that TagRec's line format cannot hold.
    """
    posts = tagrec_posts(folksonomy) if posts is None else posts
    _check_ids(folksonomy.users, "user id")
    _check_ids(folksonomy.objects, "object id")
    categories = _category_fields(folksonomy)
    # the text fields up to the last one present (TagRec's fields 7 and 8)
    texts = ["title", "description"][:max(
        (i + 1 for i, f in enumerate(("title", "description")) if f in folksonomy.texts),
        default=0)]
    tags = np.asarray([_encode_tag(str(t)) for t in folksonomy.tags], dtype=object)
    lines = []
    for user, obj, stamp, codes in posts.itertuples(index=False):
        fields = [str(folksonomy.users[user]), str(folksonomy.objects[obj]),
                  "" if stamp == MISSING_TIME else str(stamp), ",".join(tags[codes]),
                  categories.get(int(obj), "")]
        if texts:
            text = folksonomy.texts.iloc[obj]
            fields += ["", *(str(text.get(field, "")) for field in texts)]
        lines.append(";".join(_quoted(field) for field in fields))
    return lines


def write_tagrec(folksonomy: Folksonomy, path: str | Path,
                 posts: pd.DataFrame | None = None) -> Path:
    """Writes ``posts`` (default: all) of a folksonomy as a TagRec file; returns its path.

    Text fields other than ``title`` and ``description``, and profiles, are not written
    (TagRec's format has no place for them).
    """
    path = Path(path)
    dropped = [f for f in folksonomy.text_fields if f not in ("title", "description")]
    if dropped or len(folksonomy.profiles):
        log.warning("TagRec's format holds no %s: not written",
                    ", ".join([*dropped, *(["profiles"] if len(folksonomy.profiles) else [])]))
    with atomic_write(path) as partial:
        partial.write_text("".join(line + "\n" for line in tagrec_lines(folksonomy, posts)),
                           encoding="utf-8")
    return path


def write_tagrec_split(folksonomy: Folksonomy, folder: str | Path, name: str,
                       test: np.ndarray | Sequence[bool]) -> list[Path]:
    """Writes TagRec's three files of a split: ``NAME_train.txt``, ``NAME_test.txt``, ``NAME.txt``.

    Args:
        folksonomy: the folksonomy.
        folder: where the files go (created).
        name: the files' stem.
        test: ``[posts]`` bool over the rows of :func:`tagrec_posts`: the test posts.

    Returns:
        The three paths (``NAME.txt`` is the train lines, then the test lines).
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    posts = tagrec_posts(folksonomy)
    test = np.asarray(test, dtype=bool)
    if test.shape != (len(posts),):
        raise ValueError(f"test must mark each of the {len(posts)} posts, got shape "
                         f"{test.shape}")
    train_lines = tagrec_lines(folksonomy, posts[~test])
    test_lines = tagrec_lines(folksonomy, posts[test])
    paths = [folder / f"{name}_train.txt", folder / f"{name}_test.txt", folder / f"{name}.txt"]
    for path, lines in zip(paths, (train_lines, test_lines, train_lines + test_lines),
                           strict=True):
        with atomic_write(path) as partial:
            partial.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return paths


def given_test_posts(folksonomy: Folksonomy) -> np.ndarray:
    """``[posts]`` bool over :func:`tagrec_posts`: the posts the source marked as test."""
    posts = tagrec_posts(folksonomy)
    marked = folksonomy.test_posts.assign(test=True)
    return posts.merge(marked, on=["user", "object"], how="left")["test"].fillna(False
                                                                            ).to_numpy(bool)


def last_post_per_user(folksonomy: Folksonomy) -> np.ndarray:
    """``[posts]`` bool: each user's latest post, for users of two posts or more.

    TagRec's leave-last-post-out test set; posts as in :func:`tagrec_posts` (time, then
    object order within a user).
    """
    posts = tagrec_posts(folksonomy)
    n_posts = posts.groupby("user")["user"].transform("size").to_numpy()
    last = ~posts["user"].duplicated(keep="last").to_numpy()
    return last & (n_posts >= 2)
