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
compressed (detected from their first bytes; see :mod:`~tagtorch.data.loaders.reading`).

Downloads: Last.fm's archive has a published SHA-256; MovieLens' and Delicious' have none.
The files extracted from the Last.fm and MovieLens archives are checked against per-file SHA-256
digests computed from unmodified copies (:attr:`~tagtorch.data.download.Archive.file_sha256`),
so a corrupt or tampered download fails with an error naming the file. Files of the official
archives that were absent from those copies (Last.fm ``user_taggedartists-timestamps.dat``;
MovieLens ``movie_actors.dat``, ``user_ratedmovies*.dat`` and the readme) have no digest and
are not checked. Delicious keeps no digest at all (no verified copy was available): its
download is unverified, with a logged warning. Files already in the data folder are used as
they are; :func:`~tagtorch.data.download.verify_files` checks them on request.

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
from tagtorch.data.loaders.reading import (
    RawTable,
    check_seconds,
    local_time_seconds,
    lookup,
    read_delimited,
)
from tagtorch.errors import DataFormatError

log = logging.getLogger(__name__)

#: Time zone of the HetRec date columns.
HETREC_TIMEZONE = "Europe/Madrid"

# Per-file SHA-256 digests of the official files, computed (sha256sum) from an unmodified copy
# of each archive's files. Files of the archive missing from that copy have no digest and are
# not checked: user_taggedartists-timestamps.dat of Last.fm; movie_actors.dat,
# user_ratedmovies.dat, user_ratedmovies-timestamps.dat and the readme of MovieLens.

LASTFM_2K = Archive(
    name="HetRec 2011 Last.fm 2k",
    url="https://files.grouplens.org/datasets/hetrec2011/hetrec2011-lastfm-2k.zip",
    sha256="6738f48195667ff03caaab4d32ca9a3133d8cc026b7c3cdaf6ce1010e913c59c",
    folder="hetrec2011-lastfm-2k",
    files=("user_taggedartists.dat", "tags.dat", "artists.dat"),
    file_sha256={
        "artists.dat": "c173881362c6b28551368fecb3c0be5a6a30a6cd859e1f5775413dfe46d48648",
        "readme.txt": "44c38757b3a24e68e844ac60c97ba7fd8e0f691cf1b00e9cf6bd8854df0dd64a",
        "tags.dat": "c815d7216101fd0ba9b9c59fa2a011998d2fd076e0064d281ec4153d95ae8095",
        "user_artists.dat": "254272fa721c3935e8be286d28c051b206844307128698ab4eaa41d483379416",
        "user_friends.dat": "0360883a3557776e04fdebda851f2e5dd23e796cad7059b968acdebd528d13fa",
        "user_taggedartists.dat":
            "c4a9ffae9ab47a9f9b2f0678ab1f7e5c1db4ca818837d8cddd1f5699c5bbf048",
    },
)

MOVIELENS_2K = Archive(
    name="HetRec 2011 MovieLens 2k",
    url="https://files.grouplens.org/datasets/hetrec2011/hetrec2011-movielens-2k-v2.zip",
    sha256=None,  # no published digest: the extracted files are checked one by one instead
    folder="hetrec2011-movielens-2k",
    files=(
        ("user_taggedmovies-timestamps.dat", "user_taggedmovies.dat"),
        "tags.dat",
        "movies.dat",
        "movie_genres.dat",
    ),
    file_sha256={
        "movie_countries.dat": "020c2848c50d372a7cb3c2025e27523a010a4afc97063f26c2ff254978acb703",
        "movie_directors.dat": "375401091cc4ead6fe745d480735221fb53cb4a960c9fc29f2c1adfdf296e382",
        "movie_genres.dat": "c2eaa3088b1136135c0fac9c25c6a3c85b9ec8db71c6e503aafdf00f0d36c6fc",
        "movie_tags.dat": "ce4aa8a256fbdf8d20ee2c6abc3a4bc937eb544558cb0788cc5889fef6100dc5",
        "movies.dat": "8c9a7ea36bfde2e426fa658ad9eff12930a91099ce43d2401d56bc0d784e230e",
        "tags.dat": "d9b9cb07ad7d9c9c09185c4347d400a87a329325a6ae88457dffade90701c694",
        "user_taggedmovies-timestamps.dat":
            "b464ac2ebb64a1e62ccc70419d1351800e7eefaa75a13ab55b4dca966ff8cb3b",
        "user_taggedmovies.dat":
            "f6e4f076f7604facc32adef781e8fb440d79c3b382b49f70618ef1de120f4302",
    },
)

DELICIOUS_2K = Archive(
    name="HetRec 2011 Delicious 2k",
    url="https://files.grouplens.org/datasets/hetrec2011/hetrec2011-delicious-2k.zip",
    # No published digest and no verified local copy to compute per-file digests from: the
    # download is not verified (a warning logs the archive's SHA-256).
    sha256=None,
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
        seconds = check_seconds(table, present[0], table.integers(present[0]) // 1000,
                                np.ones(len(table.frame), dtype=bool))
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
    listening: bool = False,
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
        listening: read ``user_artists.dat`` (``userID artistID weight``, play counts) into
            the folksonomy's profiles (ours, for the profile-neighbour candidates): key the
            listener, weight the play count.

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
    profiles = None
    if listening:
        plays = _read(folder / "user_artists.dat", ["userID", "artistID", "weight"],
                      integer=["userID", "artistID", "weight"])
        profiles = pd.DataFrame({"object": plays.frame["artistID"].to_numpy(),
                                 "key": plays.frame["userID"].to_numpy(),
                                 "weight": plays.frame["weight"].to_numpy()})
    return Folksonomy.from_frame(_with_tags(frame, source, tags, "tagID", "tagValue"), texts,
                                 name=LASTFM_2K.folder, profiles=profiles)


def load_movielens_2k(
    data_dir: str | Path | None = None,
    download: bool = True,
    *,
    path: str | Path | None = None,
    metadata: bool = False,
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
        metadata: add the movies' metadata as text fields beside the title (ours, for the
            extended candidates): ``directors`` (``movie_directors.dat``, the names),
            ``countries`` (``movie_countries.dat``) and ``genres`` (``movie_genres.dat``), each
            a movie's values joined by spaces in file order ("" without any).

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
    if metadata:
        directors = _read(folder / "movie_directors.dat", ["movieID", "directorName"],
                          integer=["movieID"], text=["directorName"], optional=["directorID"],
                          encoding="latin-1")
        countries = _read(folder / "movie_countries.dat", ["movieID", "country"],
                          integer=["movieID"], text=["country"], encoding="latin-1")
        for name, table, column in (("directors", directors, "directorName"),
                                    ("countries", countries, "country"),
                                    ("genres", genres, "genre")):
            values = table.frame[column].fillna("").astype(str).str.strip()
            joined = values.groupby(table.frame["movieID"].to_numpy(), sort=False).agg(" ".join)
            texts[name] = joined.reindex(texts.index).fillna("").to_numpy()
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
