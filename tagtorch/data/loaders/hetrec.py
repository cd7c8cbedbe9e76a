"""Loaders for the HetRec 2011 folksonomies: Last.fm 2k, MovieLens 2k and Delicious 2k.

The three datasets were released for the 2nd Workshop on Information Heterogeneity and Fusion
in Recommender Systems (HetRec 2011, RecSys 2011; Cantador, Brusilovsky and Kuflik) and are
distributed by GroupLens. Files are tab-separated with one header line and no quoting.

Encodings: ``tags.dat`` and ``movies.dat`` of Last.fm and MovieLens are Latin-1, their other
files UTF-8 (or plain ASCII); a byte that is not valid in a file's encoding is an error naming
the file, the line and the byte. The encoding of the Delicious files could not be checked (there
is no local copy): they are read as UTF-8, and each byte sequence that is not valid UTF-8 is
read as Latin-1 on its own (with a logged warning), never the whole file.

Ids are integers (ASCII digits with an optional sign, within the signed 64-bit range);
anything else is an error naming the file and the line. Files may be gzip, bzip2 or xz
compressed (detected from their first bytes; see :mod:`~tagtorch.data.loaders.tabular`).

Times: the date columns (``day``, ``month``, ``year``, ...) hold local time in Madrid, where
the datasets were compiled: read as ``Europe/Madrid`` they reproduce the official
``*-timestamps.dat`` files exactly (checked on all 47,957 MovieLens assignments). The
timestamps files are in milliseconds; the folksonomy stores Unix seconds.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pandas as pd

from tagtorch.data.download import Archive, DatasetNotFoundError, ensure_archive
from tagtorch.data.folksonomy import Folksonomy
from tagtorch.data.loaders.errors import DataFormatError
from tagtorch.data.loaders.tabular import (
    RawTable,
    local_time_seconds,
    lookup,
    read_delimited,
)

log = logging.getLogger(__name__)

#: Time zone of the HetRec date columns.
HETREC_TIMEZONE = "Europe/Madrid"

LASTFM_2K = Archive(
    name="HetRec 2011 Last.fm 2k",
    url="https://files.grouplens.org/datasets/hetrec2011/hetrec2011-lastfm-2k.zip",
    sha256="6738f48195667ff03caaab4d32ca9a3133d8cc026b7c3cdaf6ce1010e913c59c",
    folder="hetrec2011-lastfm-2k",
    files=("user_taggedartists.dat", "tags.dat", "artists.dat"),
)

MOVIELENS_2K = Archive(
    name="HetRec 2011 MovieLens 2k",
    url="https://files.grouplens.org/datasets/hetrec2011/hetrec2011-movielens-2k-v2.zip",
    sha256=None,  # no published digest found; the download is logged as unverified
    folder="hetrec2011-movielens-2k",
    files=(
        ("user_taggedmovies-timestamps.dat", "user_taggedmovies.dat"),
        "tags.dat",
        "movies.dat",
        "movie_genres.dat",
    ),
)

DELICIOUS_2K = Archive(
    name="HetRec 2011 Delicious 2k",
    url="https://files.grouplens.org/datasets/hetrec2011/hetrec2011-delicious-2k.zip",
    sha256=None,  # no published digest found; the download is logged as unverified
    folder="hetrec2011-delicious-2k",
    files=(
        ("user_taggedbookmarks-timestamps.dat", "user_taggedbookmarks.dat"),
        "tags.dat",
        "bookmarks.dat",
    ),
)

#: Names of the millisecond column of the ``*-timestamps.dat`` files (MovieLens uses the second).
_TIMESTAMP_COLUMNS = ("timestamp", "unixTimeStamp")
_DATE_COLUMNS = ("year", "month", "day", "hour", "minute", "second")


def _folder(archive: Archive, data_dir: str | Path | None, download: bool,
            path: str | Path | None) -> Path:
    """The dataset folder: ``path`` as given, else the data home (downloading if allowed)."""
    if path is None:
        return ensure_archive(archive, data_dir, download=download)
    folder = Path(path).expanduser()
    missing = archive.missing_files(folder)
    if missing:
        raise DatasetNotFoundError(f"{archive.label}: {folder}/ lacks {', '.join(missing)}")
    return folder


def _read(path: Path, required: list[str], *, integer: list[str] | None = None,
          text: list[str] | None = None, optional: list[str] | None = None,
          encoding: str = "utf-8", mixed: bool = False) -> RawTable:
    """Reads a HetRec file; ``mixed`` reads bytes that are not UTF-8 as Latin-1."""
    return read_delimited(
        path, "\t", required, optional=optional or [], integer=integer or [],
        text=text or [], encoding=encoding, fallback_encoding="latin-1" if mixed else None,
    )


def _tag_assignments(
    folder: Path,
    timestamps_file: str | None,
    dates_file: str,
    object_column: str,
    date_columns: dict[str, str],
    mixed: bool = False,
) -> tuple[pd.DataFrame, RawTable]:
    """Reads ``userID, <object>, tagID`` and a time from the timestamps or the dates file.

    Returns the frame (``user``, ``object``, ``tag_id``, ``timestamp`` in seconds) and the
    table it was read from.
    """
    ids = ["userID", object_column, "tagID"]
    if timestamps_file is not None and (folder / timestamps_file).is_file():
        path = folder / timestamps_file
        table = _read(path, ids, integer=ids, optional=list(_TIMESTAMP_COLUMNS), mixed=mixed)
        present = [c for c in _TIMESTAMP_COLUMNS if c in table.frame.columns]
        if not present:
            raise DataFormatError(path, f"a column {' or '.join(map(repr, _TIMESTAMP_COLUMNS))} "
                                  "in a tab-separated header", f"the header {list(table.header)}",
                                  line=1)
        seconds = table.frame[present[0]].to_numpy(dtype=np.int64) // 1000
    else:
        table = _read(folder / dates_file, ids + list(date_columns.values()),
                      integer=ids + list(date_columns.values()), mixed=mixed)
        seconds = local_time_seconds(table, date_columns, HETREC_TIMEZONE)
    frame = pd.DataFrame({
        "user": table.frame["userID"].to_numpy(),
        "object": table.frame[object_column].to_numpy(),
        "tag_id": table.frame["tagID"].to_numpy(),
        "timestamp": seconds,
    })
    return frame, table


def _titles(table: RawTable, key: str, column: str) -> pd.DataFrame:
    ids = table.frame[key].to_numpy()
    table.unique_key(key, ids)
    titles = table.frame[column].fillna("").astype(str).str.strip().to_numpy()
    return pd.DataFrame({"title": titles}, index=pd.Index(ids))


def _with_tags(frame: pd.DataFrame, source: RawTable, tags: RawTable, key: str,
               value: str) -> pd.DataFrame:
    """Replaces the ``tag_id`` column by the tag strings of ``tags``.

    Raises:
        DataFormatError: no assignment of ``source`` has a tag id with a non-empty tag.
    """
    strings = lookup(frame["tag_id"].to_numpy(), tags, key, value, "tag id")
    if not strings.astype("string").str.strip().fillna("").ne("").any():
        raise DataFormatError(source.path, f"at least one assignment whose tag id has a "
                              f"non-empty tag in {tags.path}", "none")
    return frame.drop(columns="tag_id").assign(tag=strings.to_numpy())


def load_lastfm(
    data_dir: str | Path | None = None,
    download: bool = True,
    *,
    path: str | Path | None = None,
) -> Folksonomy:
    """Loads HetRec 2011 Last.fm 2k: users tagging music artists.

    Assignments come from ``user_taggedartists.dat`` (``userID artistID tagID day month
    year``; the time is midnight of that day in Madrid), tag strings from ``tags.dat``
    (Latin-1) and the artists' names, as the ``title`` text, from ``artists.dat``. Artists
    tagged but missing from ``artists.dat`` get an empty title. There are no categories.

    Args:
        data_dir: data home holding ``hetrec2011-lastfm-2k/`` (see
            :func:`~tagtorch.data.download.data_home`).
        download: fetch the official archive if the files are missing.
        path: a folder holding the files directly (no data home, no download).

    Returns:
        The raw folksonomy (186,479 assignments by 1,892 users in the official release).

    Raises:
        DatasetNotFoundError: the files are missing and cannot be downloaded.
        DataFormatError: a file does not have the official layout.
    """
    folder = _folder(LASTFM_2K, data_dir, download, path)
    frame, source = _tag_assignments(
        folder, None, "user_taggedartists.dat",
        "artistID", {"year": "year", "month": "month", "day": "day"})
    tags = _read(folder / "tags.dat", ["tagID", "tagValue"], integer=["tagID"],
                 text=["tagValue"], encoding="latin-1")
    artists = _read(folder / "artists.dat", ["id", "name"], integer=["id"], text=["name"])
    texts = _titles(artists, "id", "name")
    _log_untitled(frame, texts, "artists.dat")
    return Folksonomy.from_frame(_with_tags(frame, source, tags, "tagID", "tagValue"), texts,
                                 name=LASTFM_2K.folder)


def load_movielens_2k(
    data_dir: str | Path | None = None,
    download: bool = True,
    *,
    path: str | Path | None = None,
) -> Folksonomy:
    """Loads HetRec 2011 MovieLens 2k: users tagging movies, with genres as categories.

    Assignments come from ``user_taggedmovies-timestamps.dat`` (milliseconds) when present,
    else from the date columns of ``user_taggedmovies.dat`` (Madrid local time); tag
    strings from ``tags.dat`` and titles from ``movies.dat`` (both Latin-1); the genres of
    ``movie_genres.dat`` become the categories.

    Args:
        data_dir: data home holding ``hetrec2011-movielens-2k/``.
        download: fetch the official archive if the files are missing.
        path: a folder holding the files directly (no data home, no download).

    Returns:
        The raw folksonomy (47,957 assignments by 2,113 users in the official release).

    Raises:
        DatasetNotFoundError: the files are missing and cannot be downloaded.
        DataFormatError: a file does not have the official layout.
    """
    folder = _folder(MOVIELENS_2K, data_dir, download, path)
    dates = {unit: f"date_{unit}" for unit in _DATE_COLUMNS}
    frame, source = _tag_assignments(folder, "user_taggedmovies-timestamps.dat",
                                     "user_taggedmovies.dat", "movieID", dates)
    tags = _read(folder / "tags.dat", ["id", "value"], integer=["id"], text=["value"],
                 encoding="latin-1")
    movies = _read(folder / "movies.dat", ["id", "title"], integer=["id"], text=["title"],
                   encoding="latin-1")
    genres = _read(folder / "movie_genres.dat", ["movieID", "genre"], integer=["movieID"],
                   text=["genre"])
    texts = _titles(movies, "id", "title")
    _log_untitled(frame, texts, "movies.dat")
    categories = pd.DataFrame({
        "object": genres.frame["movieID"].to_numpy(),
        "category": genres.frame["genre"].fillna("").astype(str).str.strip().to_numpy(),
    })
    categories = categories[categories["category"] != ""]
    return Folksonomy.from_frame(_with_tags(frame, source, tags, "id", "value"), texts,
                                 categories,
                                 name=MOVIELENS_2K.folder)


def load_delicious_2k(
    data_dir: str | Path | None = None,
    download: bool = True,
    *,
    path: str | Path | None = None,
) -> Folksonomy:
    """Loads HetRec 2011 Delicious 2k: users tagging bookmarked URLs.

    Assignments come from ``user_taggedbookmarks-timestamps.dat`` (``userID bookmarkID tagID
    timestamp``, milliseconds) when present, else from ``user_taggedbookmarks.dat``
    (``userID bookmarkID tagID day month year hour minute second``, Madrid local time); tag
    strings from ``tags.dat`` (``id value``) and the bookmarks' titles from ``bookmarks.dat``
    (``id md5 title url md5Principal urlPrincipal``). There are no categories.

    Args:
        data_dir: data home holding ``hetrec2011-delicious-2k/``.
        download: fetch the official archive if the files are missing.
        path: a folder holding the files directly (no data home, no download).

    Returns:
        The raw folksonomy.

    Raises:
        DatasetNotFoundError: the files are missing and cannot be downloaded.
        DataFormatError: a file does not have the official layout.
    """
    folder = _folder(DELICIOUS_2K, data_dir, download, path)
    dates = {unit: unit for unit in _DATE_COLUMNS}
    frame, source = _tag_assignments(folder, "user_taggedbookmarks-timestamps.dat",
                                     "user_taggedbookmarks.dat", "bookmarkID", dates,
                                     mixed=True)
    tags = _read(folder / "tags.dat", ["id", "value"], integer=["id"], text=["value"],
                 mixed=True)
    bookmarks = _read(folder / "bookmarks.dat", ["id", "title"], integer=["id"],
                      text=["title"], mixed=True)
    texts = _titles(bookmarks, "id", "title")
    _log_untitled(frame, texts, "bookmarks.dat")
    return Folksonomy.from_frame(_with_tags(frame, source, tags, "id", "value"), texts,
                                 name=DELICIOUS_2K.folder)


def _log_untitled(frame: pd.DataFrame, texts: pd.DataFrame, source: str) -> None:
    objects = pd.unique(frame["object"].to_numpy())
    untitled = int((~np.isin(objects, texts.index.to_numpy())).sum())
    if untitled:
        log.info("%d tagged objects are not in %s and get an empty title", untitled, source)
