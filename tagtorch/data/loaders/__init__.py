"""Loaders: one module per source format, each returning a raw :class:`Folksonomy`.

Tags are returned as written in the files; normalization (stemming) happens later.

- :mod:`~tagtorch.data.loaders.hetrec`: HetRec 2011 Last.fm, MovieLens and Delicious.
- :mod:`~tagtorch.data.loaders.movielens_csv`: MovieLens CSV releases (``tags.csv``).
- :mod:`~tagtorch.data.loaders.tabular`: any CSV/TSV/Parquet table of tag assignments.
- :mod:`~tagtorch.data.loaders.tagrec`: TagRec's post files, read and written.
- :mod:`~tagtorch.data.loaders.reading`: the checked reader they all share (compression,
  encoding, line numbers, 64-bit integers).
"""

from tagtorch.data.loaders.hetrec import (
    DELICIOUS_2K,
    LASTFM_2K,
    MOVIELENS_2K,
    load_delicious_2k,
    load_lastfm,
    load_movielens_2k,
)
from tagtorch.data.loaders.movielens_csv import (
    ML_LATEST_SMALL,
    load_movielens_csv,
    movielens_archive,
)
from tagtorch.data.loaders.tabular import load_table
from tagtorch.data.loaders.tagrec import load_tagrec, write_tagrec

__all__ = [
    "DELICIOUS_2K",
    "LASTFM_2K",
    "ML_LATEST_SMALL",
    "MOVIELENS_2K",
    "load_delicious_2k",
    "load_lastfm",
    "load_movielens_2k",
    "load_movielens_csv",
    "load_table",
    "load_tagrec",
    "movielens_archive",
    "write_tagrec",
]
