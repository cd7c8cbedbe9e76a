"""A fitted item recommender as one artifact: recommend items for a user, or a user and a tag.

:meth:`ItemRecommender.fit` learns any item model of :mod:`tagtorch.itemrec` (Do-Rank,
Do-Rank+, PITF, the probabilistic CP, the two-dimensional and the popularity baselines) on the
p-core of a folksonomy, as the evaluation does (:func:`tagtorch.itemrec.data
.item_recommendation_data`) but without a test part: a seeded ``val_fraction`` of the core's
posts is held out for the factor models' early stopping, every other post is trained on.

:meth:`ItemRecommender.save` writes one folder: ``manifest.json`` (tagtorch's version, the
configuration, the data's fingerprint, the size and SHA-256 of every file), ``data.npz`` (the
core's ``(user, item, tag)`` triples, train and validation), ``vocabulary.json`` (the raw
user ids, item ids, item titles, normalized tags and each tag's display string) and the model's
own folder. Nothing in it is a pickle; the model class named in the manifest is imported only
from ``tagtorch.itemrec.``.

:meth:`ItemRecommender.recommend_items` answers two kinds of request:

- ``user`` and ``tag``: the model's scores ``s(u, i, t)`` of every item (the Do-Rank task);
- ``user`` alone: the per-user query of the Do-Rank paper, tag-level scores aggregated over
  tags (:func:`tagtorch.itemrec.base.user_scores`). The artifact's default is ``"profile"``
  (``sum_t P(t | u) s(u, i, t)`` over the user's own tags: one scoring pass per tag of the
  user); ``"max"``, the paper's literal reading, scores every tag of the core per request.

The items the user has tagged (in any post of the core) are never recommended again, as in the
evaluation's post split. A user or tag outside the core gets an empty list with the reason,
never an exception. The factor models' embeddings are fixed at fit time: served posts
(:meth:`tagtorch.serving.tags.TagRecommender.add_posts`) are for tag recommenders, whose
statistics are lazy; an item model needs a new ``task=fit`` to learn from new posts.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self

import numpy as np
import torch

from tagtorch.data.folksonomy import Folksonomy
from tagtorch.data.ragged import Ragged
from tagtorch.data.splits import p_core, random_post_split
from tagtorch.data.text import TextProcessor
from tagtorch.errors import UnreadableFileError
from tagtorch.itemrec.base import ItemRanker, user_scores
from tagtorch.itemrec.data import AGGREGATES, ItemRecData, TagProfile
from tagtorch.metrics.functional import check_k
from tagtorch.serving.artifact import open_artifact, reading, write_artifact
from tagtorch.serving.requests import check_batch, check_id
from tagtorch.storage import (
    check_codes,
    check_strings,
    load_arrays,
    model_folder,
    read_json,
    save_arrays,
    write_json,
)

DATA_FILE = "data.npz"
VOCABULARY_FILE = "vocabulary.json"
MODEL_FOLDER = "model"

log = logging.getLogger(__name__)

__all__ = ["ItemRecommendations", "ItemRecommender"]


@dataclass
class ItemRecommendations:
    """Items recommended for one query, best first, and why the list may be short.

    Attributes:
        items: ``[(item id, score)]``, at most ``k``, scores descending.
        titles: each recommended item's title ("" where the data has none).
        reason: why the list is empty (None when it is not).
    """

    items: list[tuple[str, float]] = field(default_factory=list)
    titles: list[str] = field(default_factory=list)
    reason: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """Plain JSON-able form."""
        return {"items": [{"item": item, "title": title, "score": score}
                          for (item, score), title in zip(self.items, self.titles, strict=True)],
                "reason": self.reason}


def _checked_triples(path: Path, sizes: tuple[int, int, int]) -> np.ndarray:
    """The ``[N, 3]`` (user, item, tag) codes of ``data.npz``, each column in its range.

    Raises:
        UnreadableFileError: ``"{path}: triples...: ..."``.
    """
    triples = load_arrays(path, ["triples"])["triples"]
    if triples.ndim != 2 or triples.shape[1] != 3:
        raise UnreadableFileError(f"{path}: triples: expected [N, 3] (user, item, tag) codes, "
                                  f"found shape {triples.shape}")
    return np.stack([check_codes(path, f"triples[:, {column}] ({what} codes)",
                                 triples[:, column], size)
                     for column, (what, size) in enumerate(zip(("user", "item", "tag"), sizes,
                                                               strict=True))], axis=1)


def _check_model(folder: Path, model: ItemRanker, n_users: int, n_items: int,
                 n_tags: int) -> None:
    """Refuses a model that cannot score the vocabulary's last user and tag over its items.

    One scoring pass (``[1, n_items]``), so a model of other sizes than the vocabulary's is
    refused on load rather than failing (or answering with the wrong items) on a request.

    Raises:
        UnreadableFileError: naming the model folder.
    """
    if not (n_users and n_tags):
        return
    sizes = f"{n_users} users, {n_items} items and {n_tags} tags"
    try:
        with torch.no_grad():
            scores = model.score(torch.tensor([n_users - 1]), torch.tensor([n_tags - 1]))
    except (IndexError, RuntimeError, ValueError) as error:
        raise UnreadableFileError(f"{folder}: the model cannot score the vocabulary's {sizes} "
                                  f"({type(error).__name__}: {' '.join(str(error).split())})"
                                  ) from None
    if tuple(scores.shape) != (1, n_items):
        raise UnreadableFileError(f"{folder}: the model's scores of one query have shape "
                                  f"{tuple(scores.shape)}, but the vocabulary has {sizes}")


class ItemRecommender:
    """A fitted item recommender: the core's users, items and tags, and the item model.

    Build one with :meth:`fit` or :meth:`load`; ask it with :meth:`recommend_items`.

    Args:
        processor: the text pipeline that normalized the tags (requests' tags go through it).
        model: the fitted item model (:class:`tagtorch.itemrec.base.ItemRanker`).
        triples: ``[N, 3]`` (user, item, tag) codes of the core: the users' tagged items (never
            recommended again) and tag profiles.
        users: raw id of each user code.
        items: raw id of each item code.
        tags: normalized string of each tag code.
        display: the string shown for each tag.
        titles: each item's title ("" where none).
        aggregate: how a request without a tag aggregates tag-level scores (:data:`AGGREGATES`).
        info: what the manifest records besides (configuration, data name, fingerprint).
    """

    def __init__(self, processor: TextProcessor, model: ItemRanker, triples: np.ndarray,
                 users: Sequence[str], items: Sequence[str], tags: Sequence[str],
                 display: Sequence[str], titles: Sequence[str], aggregate: str = "profile",
                 info: Mapping[str, Any] | None = None) -> None:
        if aggregate not in AGGREGATES:
            raise ValueError(f"aggregate must be one of {AGGREGATES}, got {aggregate!r}")
        self.processor, self.model, self.aggregate = processor, model, aggregate
        self.triples = np.asarray(triples, dtype=np.int64).reshape(-1, 3)
        self.users, self.items, self.tags = list(users), list(items), list(tags)
        self.display, self.titles = list(display), list(titles)
        if not len(self.tags) == len(self.display) or len(self.titles) != len(self.items):
            raise ValueError("one display string per tag and one title per item expected")
        self.info = dict(info or {})
        n_users, n_items = len(self.users), len(self.items)
        pairs = np.unique(self.triples[:, 0] * np.int64(n_items) + self.triples[:, 1])
        self.known = Ragged.from_groups(pairs // n_items, pairs % n_items, n_users)
        self.profile = TagProfile.from_triples(self.triples, n_users, len(self.tags))
        self.user_codes = {u: code for code, u in enumerate(self.users)}
        self.tag_codes = {t: code for code, t in enumerate(self.tags)}

    # --------------------------------------------------------------------------- fitting
    @classmethod
    def fit(cls, folksonomy: Folksonomy, processor: TextProcessor, model: ItemRanker, *,
            display: Sequence[str] | None = None, titles: Mapping[str, str] | None = None,
            p: int = 5, val_fraction: float = 0.2, split: str = "posts",
            query: str = "user_tag", aggregate: str = "profile", seed: int = 0,
            info: Mapping[str, Any] | None = None) -> Self:
        """Fits an item model on the p-core of a normalized folksonomy.

        Args:
            folksonomy: the folksonomy, tags normalized by ``processor``.
            processor: its text pipeline, applied to the tags of requests.
            model: an unfitted item model.
            display: the string shown for each tag of ``folksonomy`` (default: the tag).
            titles: raw object id -> title shown with a recommended item.
            p: the p-core level (users, items and tags in fewer posts are left out).
            val_fraction: share of the core's posts held out for early stopping.
            split: the unit held out, ``"posts"`` or ``"triples"``.
            query: the kind of the validation queries (:mod:`tagtorch.itemrec.data`).
            aggregate: requests without a tag: ``"profile"`` or ``"max"`` (module docstring).
            seed: seed of the split.
            info: extra manifest entries (configuration, ...).
        """
        core = p_core(folksonomy, p)
        a = core.assignments
        triples = np.stack([a["user"].to_numpy(), a["object"].to_numpy(), a["tag"].to_numpy()],
                           axis=1).astype(np.int64)
        held_out = random_post_split(core, val_fraction, seed, unit=split).test
        data = ItemRecData.from_triples(
            core.name, core.n_users, core.n_objects, core.n_tags, triples[~held_out],
            triples[held_out], np.zeros((0, 3), dtype=np.int64), split, query, aggregate)
        log.info("fitting %s on the %d-core of %s: %s", type(model).__name__, p, core.name,
                 data.describe())
        model.fit(data)
        shown = dict(zip(folksonomy.tags.tolist(),
                         display if display is not None else folksonomy.tags.tolist(),
                         strict=True))
        titles = titles or {}
        info = {**dict(info or {}), "data": folksonomy.name,
                "fingerprint": folksonomy.fingerprint(), "p": p, "seed": seed,
                "users": core.n_users, "items": core.n_objects, "tags": core.n_tags,
                "train_triples": len(data.train), "val_triples": len(data.val)}
        return cls(processor, model, triples, [str(u) for u in core.users],
                   [str(o) for o in core.objects], [str(t) for t in core.tags],
                   [shown[t] for t in core.tags.tolist()],
                   [titles.get(str(o), "") for o in core.objects], aggregate, info)

    # ---------------------------------------------------------------------------- saving
    def save(self, path: str | Path) -> Path:
        """Writes the artifact folder (module docstring); returns it."""
        folder = model_folder(path)
        save_arrays({"triples": self.triples}, folder / DATA_FILE)
        write_json({"users": self.users, "items": self.items, "tags": self.tags,
                    "display": self.display, "titles": self.titles}, folder / VOCABULARY_FILE)
        self.model.save(folder / MODEL_FOLDER)
        write_artifact(folder, type(self), self.processor, {"aggregate": self.aggregate},
                       [DATA_FILE, VOCABULARY_FILE, MODEL_FOLDER], "model_class", self.model,
                       self.info)
        return folder

    @classmethod
    def load(cls, path: str | Path) -> Self:
        """Reads an artifact folder; every file is checked against the manifest first.

        The manifest must list every file read; the vocabulary's lists, the triples' codes and
        the model's sizes are then checked against each other before anything is served.

        Raises:
            UnreadableFileError: naming the file, for a missing, altered or malformed one.
        """
        folder = Path(path)
        with reading(folder, "item recommender"):
            opened = open_artifact(folder, cls, "model_class", ("tagtorch.itemrec.",),
                                   (ItemRanker,), (DATA_FILE, VOCABULARY_FILE, MODEL_FOLDER))
            where = folder / VOCABULARY_FILE
            names = read_json(where, ("users", "items", "tags", "display", "titles"))
            users, items, tags = (check_strings(where, key, names[key], distinct=True)
                                  for key in ("users", "items", "tags"))
            display = check_strings(where, "display", names["display"], len(tags))
            titles = check_strings(where, "titles", names["titles"], len(items))
            triples = _checked_triples(folder / DATA_FILE, (len(users), len(items), len(tags)))
            model = opened.model_class.load(folder / MODEL_FOLDER)
            _check_model(folder / MODEL_FOLDER, model, len(users), len(items), len(tags))
            return cls(opened.processor, model, triples, users, items, tags, display, titles,
                       opened.settings["aggregate"], opened.info)

    # ------------------------------------------------------------------------ recommending
    def recommend_items(self, user: str, tag: str | None = None, k: int = 10
                        ) -> ItemRecommendations:
        """The ``k`` best items for a user, or for a user and a tag.

        Args:
            user: the user's raw id.
            tag: a raw tag (normalized here), or None for the user's per-user ranking.
            k: how many items to return.

        Raises:
            ValueError: a bad ``k``, or a user or tag that is not a string or is too long.
        """
        return self.recommend_items_batch([{"user": user, "tag": tag}], k=k)[0]

    def recommend_items_batch(self, queries: Sequence[Mapping[str, Any]], k: int = 10
                              ) -> list[ItemRecommendations]:
        """:meth:`recommend_items` for many queries (``{"user": ..., "tag": ...}``) at once.

        Raises:
            ValueError: as :meth:`recommend_items`, naming the query's position.
        """
        check_k(k)
        check_batch(len(queries))
        parsed = [self._parse(i, query) for i, query in enumerate(queries)]
        out = [ItemRecommendations(reason=reason) for _, _, reason in parsed]
        with_tag = [i for i, (u, t, r) in enumerate(parsed) if r is None and t >= 0]
        per_user = [i for i, (u, t, r) in enumerate(parsed) if r is None and t < 0]
        with torch.no_grad():
            if with_tag:
                users = torch.tensor([parsed[i][0] for i in with_tag])
                tags = torch.tensor([parsed[i][1] for i in with_tag])
                self._fill(out, with_tag, users, self.model.score(users, tags), k)
            if per_user:
                users = torch.tensor([parsed[i][0] for i in per_user])
                scores = user_scores(self.model, users, self.profile.take(users.numpy()),
                                     self.aggregate, len(self.items), len(self.tags))
                self._fill(out, per_user, users, scores, k)
        return out

    def _fill(self, out: list[ItemRecommendations], rows: list[int], users: torch.Tensor,
              scores: torch.Tensor, k: int) -> None:
        """Puts each query's ``k`` best items not yet tagged by its user into ``out``."""
        scores = scores.float().cpu().clone()
        known = self.known.take(users.numpy())
        scores[torch.from_numpy(known.row_ids), torch.from_numpy(known.values)] = -torch.inf
        ordered = torch.sort(scores, dim=1, descending=True, stable=True)  # ties by item code
        values, indices = ordered.values[:, :k].tolist(), ordered.indices[:, :k].tolist()
        for row, top_values, top_items in zip(rows, values, indices, strict=True):
            result = out[row]
            for value, item in zip(top_values, top_items, strict=True):
                if value != -np.inf:
                    result.items.append((self.items[item], float(value)))
                    result.titles.append(self.titles[item])
            if not result.items:
                result.reason = "the user has tagged every item of the recommender"

    def _parse(self, position: int, query: Mapping[str, Any]) -> tuple[int, int, str | None]:
        """``(user code, tag code or -1, reason)`` of one query; the reason when it has none."""
        where = f"query {position}"
        if not isinstance(query, Mapping):
            raise ValueError(f"{where}: expected a mapping with 'user' and 'tag', got "
                             f"{type(query).__name__}")
        extra = sorted(set(query) - {"user", "tag"})
        if extra:
            raise ValueError(f"{where}: unknown fields {extra}; a query has 'user' and 'tag'")
        user, tag = query.get("user"), query.get("tag")
        check_id(where, "user", user)
        if tag is not None:
            check_id(where, "tag", tag)
        code = self.user_codes.get(str(user))
        if code is None:
            return -1, -1, (f"unknown user {user!r}: not among the {len(self.users):,} users "
                            f"of the recommender's training core")
        if tag is None:
            return code, -1, None
        tag_code = self.tag_codes.get(self.processor.normalize_tag(tag))
        if tag_code is None:
            return code, -1, (f"unknown tag {tag!r}: not among the {len(self.tags):,} tags of "
                              f"the recommender's training core")
        return code, tag_code, None
