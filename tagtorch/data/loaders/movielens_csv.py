"""Loader for the CSV releases of MovieLens (ml-latest-small, ml-latest, ml-20m, ml-25m, ...).

Harper and Konstan, "The MovieLens Datasets: History and Context", ACM TiiS 5(4), 2015.
A release holds ``tags.csv`` (``userId,movieId,tag,timestamp``; Unix seconds) and
``movies.csv`` (``movieId,title,genres``; genres separated by ``|``), UTF-8 with CSV quoting.
A byte that is not UTF-8, an id or time that is not a 64-bit integer, or a malformed line is an
error naming the file and the line; compressed files are read (see
:mod:`~tagtorch.data.loaders.reading` for the rules all loaders share).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from tagtorch.data.download import Archive, DatasetNotFoundError, ensure_archive
from tagtorch.data.folksonomy import Folksonomy
from tagtorch.data.loaders.reading import read_delimited
from tagtorch.errors import DataFormatError

#: Genre label of movies without a genre; it is not a category.
NO_GENRE = "(no genres listed)"

_FILES: tuple[str | tuple[str, ...], ...] = ("tags.csv", "movies.csv")

ML_LATEST_SMALL = Archive(
    name="MovieLens latest small",
    url="https://files.grouplens.org/datasets/movielens/ml-latest-small.zip",
    sha256="696d65a3dfceac7c45750ad32df2c259311949efec81f0f144fdfb91ebc9e436",
    folder="ml-latest-small",
    files=_FILES,
)

#: Releases with a known archive digest. Other names are fetched from GroupLens unverified.
MOVIELENS_CSV_ARCHIVES = {ML_LATEST_SMALL.folder: ML_LATEST_SMALL}


def movielens_archive(variant: str) -> Archive:
    """The archive spec of a MovieLens CSV release, e.g. ``ml-latest-small`` or ``ml-25m``.

    Example:
        >>> movielens_archive("ml-25m").url
        'https://files.grouplens.org/datasets/movielens/ml-25m.zip'
    """
    if variant in MOVIELENS_CSV_ARCHIVES:
        return MOVIELENS_CSV_ARCHIVES[variant]
    if not variant or "/" in variant or "\\" in variant:
        raise ValueError(f"not a MovieLens release name: {variant!r}")
    return Archive(
        name=f"MovieLens {variant}",
        url=f"https://files.grouplens.org/datasets/movielens/{variant}.zip",
        sha256=None,
        folder=variant,
        files=_FILES,
    )


def load_movielens_csv(
    data_dir: str | Path | None = None,
    variant: str = "ml-latest-small",
    download: bool = True,
    *,
    path: str | Path | None = None,
) -> Folksonomy:
    """Loads the tag applications of a MovieLens CSV release, with genres as categories.

    Args:
        data_dir: data home holding ``<variant>/`` (see
            :func:`~tagtorch.data.download.data_home`).
        variant: release name, also the folder name (``ml-latest-small`` is verified by
            its SHA-256; other releases are downloaded unverified).
        download: fetch the official archive if the files are missing.
        path: a folder holding ``tags.csv`` and ``movies.csv`` of any MovieLens CSV
            release (no data home, no download).

    Returns:
        The raw folksonomy: titles as the ``title`` text, genres as categories
        (:data:`NO_GENRE` is not a category), timestamps in Unix seconds.

    Raises:
        DatasetNotFoundError: the files are missing and cannot be downloaded.
        DataFormatError: a file does not have the official layout.
    """
    if path is not None:
        folder = Path(path).expanduser()
        missing = [f for f in ("tags.csv", "movies.csv") if not (folder / f).is_file()]
        if missing:
            raise DatasetNotFoundError(f"MovieLens CSV: {folder}/ lacks {', '.join(missing)}")
        name = folder.name
    else:
        archive = movielens_archive(variant)
        folder = ensure_archive(archive, data_dir, download=download)
        name = variant
    ids = ["userId", "movieId", "timestamp"]
    tags = read_delimited(folder / "tags.csv", ",", ["userId", "movieId", "tag", "timestamp"],
                          integer=ids, text=["tag"], quoting=True)
    movies = read_delimited(folder / "movies.csv", ",", ["movieId", "title", "genres"],
                            integer=["movieId"], text=["title", "genres"], quoting=True)
    movie_ids = movies.frame["movieId"].to_numpy()
    movies.unique_key("movieId", movie_ids)
    texts = pd.DataFrame({"title": movies.frame["title"].fillna("").str.strip().to_numpy()},
                         index=pd.Index(movie_ids))
    genres = pd.Series(movies.frame["genres"].fillna("").to_numpy(), index=movie_ids)
    genres = genres.str.split("|").explode().astype("string").str.strip()
    genres = genres[genres.notna() & (genres != "") & (genres != NO_GENRE)]
    categories = pd.DataFrame({"object": genres.index.to_numpy(),
                               "category": genres.to_numpy(dtype=object)})
    if not tags.frame["tag"].str.strip().fillna("").ne("").any():
        raise DataFormatError(tags.path, "at least one row with a non-empty tag", "none")
    assignments = pd.DataFrame({
        "user": tags.frame["userId"].to_numpy(),
        "object": tags.frame["movieId"].to_numpy(),
        "tag": tags.frame["tag"].to_numpy(),
        "timestamp": tags.frame["timestamp"].to_numpy(),
    })
    return Folksonomy.from_frame(assignments, texts, categories, name=name)
