"""Stand-in data: a small synthetic folksonomy written in the real releases' file layouts.

The docs' commands name real data (HetRec Last.fm and MovieLens, MovieLens CSV, TagRec
samples and cores, tables and LETOR folders of the user's). ``tests/test_docs_commands.py``
runs every one of them as written on these files: ``TAGTORCH_DATA_DIR`` points at
:func:`write_data_home`'s folder, and a file a command names (``data.path=posts.tsv``) is
written into its working folder by :func:`write_named_file`. The loaders, layouts and
encodings are the real ones; only the contents are the generator's, so a command that cannot
run (a missing config, a model that cannot read its data) fails in CI where the real data is
absent.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

from tagtorch.candidates.letor import write_synthetic_letor
from tagtorch.data.folksonomy import Folksonomy
from tagtorch.data.loaders.tagrec import last_post_per_user, write_tagrec, write_tagrec_split
from tagtorch.data.synthetic import generate_folksonomy


def stand_in_folksonomy(seed: int = 0) -> Folksonomy:
    """About 5,000 tag assignments by 60 users on 400 objects, with titles, genres and times:
    dense enough for the studies' 5-cores (about 3,800 assignments on 145 objects) and for the
    resource-ranking post filter (7 users of more than 60 objects)."""
    return generate_folksonomy(n_objects=400, n_users=60, n_tags=200, n_topics=6,
                               n_categories=6, n_noise_words=300, mean_posts_per_object=12.0,
                               user_zipf_exponent=0.5, seed=seed)


def _rows(folksonomy: Folksonomy) -> pd.DataFrame:
    """One row per assignment with HetRec-style integer ids (codes + 1) and tag strings."""
    frame = folksonomy.assignments
    return pd.DataFrame({"user": frame["user"].to_numpy() + 1,
                         "object": frame["object"].to_numpy() + 1,
                         "tag": frame["tag"].to_numpy() + 1,
                         "timestamp": frame["timestamp"].to_numpy()})


def _titles(folksonomy: Folksonomy) -> pd.Series:
    return folksonomy.texts["title"].fillna("").str.replace(r"[\t\n\r]", " ", regex=True)


def _write(path: Path, frame: pd.DataFrame, encoding: str = "utf-8") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    frame.to_csv(path, sep="\t", index=False, encoding=encoding)


def write_lastfm(folder: Path, folksonomy: Folksonomy) -> None:
    """``hetrec2011-lastfm-2k/``: tagged artists by day, tags (Latin-1), artists, plays."""
    rows = _rows(folksonomy)
    days = pd.to_datetime(rows["timestamp"], unit="s")
    _write(folder / "user_taggedartists.dat", pd.DataFrame({
        "userID": rows["user"], "artistID": rows["object"], "tagID": rows["tag"],
        "day": days.dt.day, "month": days.dt.month, "year": days.dt.year}))
    _write(folder / "tags.dat", pd.DataFrame({"tagID": np.arange(1, len(folksonomy.tags) + 1),
                                              "tagValue": folksonomy.tags}), "latin-1")
    ids = np.arange(1, len(folksonomy.objects) + 1)
    _write(folder / "artists.dat", pd.DataFrame({
        "id": ids, "name": _titles(folksonomy), "url": "", "pictureURL": ""}))
    listened = rows.drop_duplicates(["user", "object"])
    _write(folder / "user_artists.dat", pd.DataFrame({
        "userID": listened["user"], "artistID": listened["object"],
        "weight": 1 + (listened["user"] * 37 + listened["object"] * 11) % 900}))


def write_movielens(folder: Path, folksonomy: Folksonomy) -> None:
    """``hetrec2011-movielens-2k/``: tagged movies in milliseconds, tags, titles, genres."""
    rows = _rows(folksonomy)
    _write(folder / "user_taggedmovies-timestamps.dat", pd.DataFrame({
        "userID": rows["user"], "movieID": rows["object"], "tagID": rows["tag"],
        "timestamp": rows["timestamp"] * 1000}).rename(columns={"timestamp": "unixTimeStamp"}))
    _write(folder / "tags.dat", pd.DataFrame({"id": np.arange(1, len(folksonomy.tags) + 1),
                                              "value": folksonomy.tags}), "latin-1")
    ids = np.arange(1, len(folksonomy.objects) + 1)
    _write(folder / "movies.dat", pd.DataFrame({
        "id": ids, "title": _titles(folksonomy), "imdbID": ids, "spanishTitle": "",
        "year": 2000}), "latin-1")
    categories = folksonomy.categories
    genres = pd.DataFrame({"movieID": categories["object"].to_numpy() + 1,
                           "genre": folksonomy.category_names[categories["category"]]})
    _write(folder / "movie_genres.dat", genres)
    _write(folder / "movie_directors.dat", pd.DataFrame({
        "movieID": ids, "directorID": [f"d{i % 17}" for i in ids],
        "directorName": [f"Director {i % 17}" for i in ids]}))
    _write(folder / "movie_countries.dat", pd.DataFrame({
        "movieID": ids, "country": np.where(ids % 3 == 0, "UK", "USA")}))


def write_movielens_csv(folder: Path, folksonomy: Folksonomy) -> None:
    """A MovieLens CSV release (``tags.csv``, ``movies.csv`` with ``|``-joined genres)."""
    rows = _rows(folksonomy)
    folder.mkdir(parents=True, exist_ok=True)
    pd.DataFrame({"userId": rows["user"], "movieId": rows["object"],
                  "tag": folksonomy.tags[rows["tag"] - 1], "timestamp": rows["timestamp"]}
                 ).to_csv(folder / "tags.csv", index=False)
    categories = folksonomy.categories.assign(
        name=folksonomy.category_names[folksonomy.categories["category"]])
    genres = categories.groupby("object")["name"].agg("|".join)
    ids = np.arange(len(folksonomy.objects))
    pd.DataFrame({"movieId": ids + 1, "title": _titles(folksonomy),
                  "genres": genres.reindex(ids).fillna("(no genres listed)").to_numpy()}
                 ).to_csv(folder / "movies.csv", index=False)


def write_data_home(root: Path, seed: int = 0) -> Path:
    """A data home (``TAGTORCH_DATA_DIR``) holding every real data set the docs name."""
    folksonomy = stand_in_folksonomy(seed)
    write_lastfm(root / "hetrec2011-lastfm-2k", folksonomy)
    write_movielens(root / "hetrec2011-movielens-2k", folksonomy)
    write_movielens_csv(root / "ml-latest-small", folksonomy)
    for name in ("bib", "cul", "flickr"):
        write_tagrec(folksonomy, root / "tagrec-samples" / f"{name}_sample_test.txt")
    return root


def _table(folksonomy: Folksonomy) -> pd.DataFrame:
    rows = _rows(folksonomy)
    categories = folksonomy.categories.drop_duplicates("object").set_index("object")["category"]
    objects = rows["object"] - 1
    return pd.DataFrame({
        "user": rows["user"], "item_id": rows["object"], "tag": folksonomy.tags[rows["tag"] - 1],
        "ts": rows["timestamp"], "title": _titles(folksonomy).to_numpy()[objects],
        "genre": folksonomy.category_names[categories.reindex(objects).fillna(0).astype(int)]})


def _tagrec_split(folksonomy: Folksonomy, path: Path) -> None:
    """``X_train.txt`` and ``X_test.txt``: each user's last post held out."""
    write_tagrec_split(folksonomy, path.parent, path.name.rsplit("_", 1)[0],
                       last_post_per_user(folksonomy))


NAMED_FILES: dict[str, Callable[[Folksonomy, Path], object]] = {
    "posts.tsv": lambda f, p: _table(f).to_csv(p, sep="\t", index=False),
    "posts.csv": write_tagrec,  # TagRec's lines read as a table: header=false, sep ";"
    "tags.parquet": lambda f, p: _table(f).to_parquet(p),
    "bib_core.txt": write_tagrec,
    "my_core.txt": write_tagrec,
    "ml_core.txt": write_tagrec,
    "FILE": write_tagrec,
    "X_train.txt": _tagrec_split,
    "FOLDER": lambda f, p: write_synthetic_letor(p, queries=30, features=12,
                                                 mean_documents=8),
    "mslr_synthetic": lambda f, p: write_synthetic_letor(p, queries=30, mean_documents=8),
}
"""The files the docs' commands name in their working folder, by name, and their writers."""


def write_named_file(folder: Path, name: str, seed: int = 0) -> Path:
    """Writes the stand-in of a file a command names (a key of :data:`NAMED_FILES`)."""
    path = folder / name
    folder.mkdir(parents=True, exist_ok=True)
    if not path.exists():
        NAMED_FILES[name](stand_in_folksonomy(seed), path)
    return path

