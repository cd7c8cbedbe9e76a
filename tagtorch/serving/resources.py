"""A fitted resource ranker as one artifact: the resources that best answer a tag query.

:meth:`ResourceRecommender.fit` learns any resource ranker of :mod:`tagtorch.resources`
(SMatch, BM25, BayesLM, the LDA query-likelihood models of Harvey, Ruthven and Carman 2010) on
every post of a folksonomy: each resource's document holds every tag of every post of it, with
repeats, as the evaluation's training documents do (:mod:`tagtorch.resources.data`), but with no
post held out. The evaluation's post filter and split are for measuring; a recommender ranks
every resource the data has.

:meth:`ResourceRecommender.save` writes one folder: ``manifest.json`` (tagtorch's version, the
configuration, the data's fingerprint, every file's size and SHA-256), ``vocabulary.json`` (raw
resource ids, their titles, normalized tags and each tag's display string) and the ranker's own
folder (its settings and fitted arrays, :meth:`~tagtorch.resources.base.ResourceRanker.save`).
Nothing is a pickle; the ranker's class is imported only from ``tagtorch.resources.``.

:meth:`ResourceRecommender.recommend_resources` normalizes a query's tags with the artifact's
text pipeline and leaves out those the data never used (they carry no evidence for any
resource, as in the evaluation's queries); a query with no known tag gets an empty list and the
reason, never an exception. The fitted statistics are fixed: new posts need a new ``task=fit``
(the service has no ``/v1/posts`` for this kind).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self

import torch

from tagtorch.data.folksonomy import Folksonomy
from tagtorch.data.ragged import Ragged
from tagtorch.data.text import TextProcessor
from tagtorch.errors import UnreadableFileError
from tagtorch.metrics.functional import check_k
from tagtorch.resources.base import ResourceRanker
from tagtorch.serving.artifact import open_artifact, reading, write_artifact
from tagtorch.serving.requests import MAX_QUERY_TAGS, check_batch, check_id
from tagtorch.storage import check_strings, model_folder, read_json, write_json

VOCABULARY_FILE = "vocabulary.json"
MODEL_FOLDER = "model"

log = logging.getLogger(__name__)

__all__ = ["ResourceRecommendations", "ResourceRecommender"]


@dataclass
class ResourceRecommendations:
    """Resources ranked for one tag query, best first, and what was left out.

    Attributes:
        resources: ``[(resource id, score)]``, at most ``k``, scores descending.
        titles: each ranked resource's title ("" where the data has none).
        unknown_tags: the query's tags the data never used (left out).
        reason: why the list is empty (None when it is not).
    """

    resources: list[tuple[str, float]] = field(default_factory=list)
    titles: list[str] = field(default_factory=list)
    unknown_tags: list[str] = field(default_factory=list)
    reason: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """Plain JSON-able form."""
        return {"resources": [{"resource": resource, "title": title, "score": score}
                              for (resource, score), title in zip(self.resources, self.titles,
                                                                  strict=True)],
                "unknown_tags": self.unknown_tags, "reason": self.reason}


def _check_model(folder: Path, model: ResourceRanker, n_resources: int, n_tags: int) -> None:
    """Refuses a ranker that cannot score the vocabulary's last tag over its resources.

    Raises:
        UnreadableFileError: naming the model folder.
    """
    if not n_tags:
        return
    try:
        with torch.no_grad():
            scores = model.score(Ragged.from_lists([[n_tags - 1]]))
    except (IndexError, RuntimeError, ValueError) as error:
        raise UnreadableFileError(f"{folder}: the ranker cannot score the vocabulary's {n_tags} "
                                  f"tags ({type(error).__name__}: {' '.join(str(error).split())})"
                                  ) from None
    if tuple(scores.shape) != (1, n_resources):
        raise UnreadableFileError(f"{folder}: the ranker's scores of one query have shape "
                                  f"{tuple(scores.shape)}, but the vocabulary has "
                                  f"{n_resources} resources")


class ResourceRecommender:
    """A fitted resource recommender: the resources, the tags and the resource ranker.

    Build one with :meth:`fit` or :meth:`load`; ask it with :meth:`recommend_resources`.

    Args:
        processor: the text pipeline that normalized the tags (queries' tags go through it).
        model: the fitted resource ranker (its documents: one per resource, in this order).
        resources: raw id of each resource code.
        tags: normalized string of each tag code.
        display: the string shown for each tag.
        titles: each resource's title ("" where none).
        info: what the manifest records besides (configuration, data name, fingerprint).
    """

    def __init__(self, processor: TextProcessor, model: ResourceRanker,
                 resources: Sequence[str], tags: Sequence[str], display: Sequence[str],
                 titles: Sequence[str], info: Mapping[str, Any] | None = None) -> None:
        if len(tags) != len(display) or len(titles) != len(resources):
            raise ValueError("one display string per tag and one title per resource expected")
        self.processor, self.model = processor, model
        self.resources, self.tags = list(resources), list(tags)
        self.display, self.titles = list(display), list(titles)
        self.info = dict(info or {})
        self.tag_codes = {t: code for code, t in enumerate(self.tags)}

    @classmethod
    def fit(cls, folksonomy: Folksonomy, processor: TextProcessor, model: ResourceRanker, *,
            display: Sequence[str] | None = None, titles: Mapping[str, str] | None = None,
            info: Mapping[str, Any] | None = None) -> Self:
        """Fits a resource ranker on the documents of every post of a normalized folksonomy.

        Args:
            folksonomy: the folksonomy, tags normalized by ``processor``.
            processor: its text pipeline, applied to the tags of queries.
            model: an unfitted resource ranker.
            display: the string shown for each tag of ``folksonomy`` (default: the tag).
            titles: raw object id -> title shown with a ranked resource.
            info: extra manifest entries (configuration, ...).
        """
        a = folksonomy.assignments
        documents = Ragged.from_groups(a["object"].to_numpy(), a["tag"].to_numpy(),
                                       folksonomy.n_objects)
        log.info("fitting %s on the documents of %d resources (%d tag assignments)",
                 type(model).__name__, folksonomy.n_objects, len(a))
        model.fit(documents, folksonomy.n_tags)
        tags = [str(t) for t in folksonomy.tags]
        resources = [str(o) for o in folksonomy.objects]
        titles = titles or {}
        info = {**dict(info or {}), "data": folksonomy.name,
                "fingerprint": folksonomy.fingerprint(), "resources": len(resources),
                "tags": len(tags), "assignments": len(a)}
        return cls(processor, model, resources, tags,
                   list(display) if display is not None else tags,
                   [titles.get(r, "") for r in resources], info)

    def save(self, path: str | Path) -> Path:
        """Writes the artifact folder (module docstring); returns it."""
        folder = model_folder(path)
        write_json({"resources": self.resources, "titles": self.titles, "tags": self.tags,
                    "display": self.display}, folder / VOCABULARY_FILE)
        self.model.save(folder / MODEL_FOLDER)
        write_artifact(folder, type(self), self.processor, {}, [VOCABULARY_FILE, MODEL_FOLDER],
                       "model_class", self.model, self.info)
        return folder

    @classmethod
    def load(cls, path: str | Path) -> Self:
        """Reads an artifact folder; every file is checked against the manifest first.

        Raises:
            UnreadableFileError: naming the file, for a missing, altered or malformed one.
        """
        folder = Path(path)
        with reading(folder, "resource recommender"):
            opened = open_artifact(folder, cls, "model_class", ("tagtorch.resources.",),
                                   (ResourceRanker,), (VOCABULARY_FILE, MODEL_FOLDER))
            where = folder / VOCABULARY_FILE
            names = read_json(where, ("resources", "titles", "tags", "display"))
            resources, tags = (check_strings(where, key, names[key], distinct=True)
                               for key in ("resources", "tags"))
            titles = check_strings(where, "titles", names["titles"], len(resources))
            display = check_strings(where, "display", names["display"], len(tags))
            model = opened.model_class.load(folder / MODEL_FOLDER)
            _check_model(folder / MODEL_FOLDER, model, len(resources), len(tags))
            return cls(opened.processor, model, resources, tags, display, titles, opened.info)

    def recommend_resources(self, tags: Sequence[str], k: int = 10) -> ResourceRecommendations:
        """The ``k`` resources that best answer a query of tags (raw; normalized here).

        Raises:
            ValueError: a bad ``k``, or tags that are not a list of short strings.
        """
        return self.recommend_resources_batch([tags], k=k)[0]

    def recommend_resources_batch(self, queries: Sequence[Sequence[str]], k: int = 10
                                  ) -> list[ResourceRecommendations]:
        """:meth:`recommend_resources` for many tag queries at once (one scoring pass).

        Raises:
            ValueError: as :meth:`recommend_resources`, naming the query's position.
        """
        check_k(k)
        check_batch(len(queries))
        out = [ResourceRecommendations() for _ in queries]
        codes = [self._codes(i, query, out[i]) for i, query in enumerate(queries)]
        rows = [i for i, row in enumerate(codes) if row]
        if rows:
            with torch.no_grad():
                scores = self.model.score(Ragged.from_lists([codes[i] for i in rows]))
            ordered = torch.sort(scores.float().cpu(), dim=1, descending=True, stable=True)
            values, indices = ordered.values[:, :k].tolist(), ordered.indices[:, :k].tolist()
            for row, top_values, top_resources in zip(rows, values, indices, strict=True):
                out[row].resources = [(self.resources[r], float(v))
                                      for v, r in zip(top_values, top_resources, strict=True)]
                out[row].titles = [self.titles[r] for r in top_resources]
        return out

    def _codes(self, position: int, query: Sequence[str],
               result: ResourceRecommendations) -> list[int]:
        """The known tag codes of one query (distinct); the rest, and a reason, in ``result``."""
        where = f"query {position}"
        if isinstance(query, str) or not isinstance(query, Sequence):
            raise ValueError(f"{where}: expected a list of tags, got {type(query).__name__}")
        if len(query) > MAX_QUERY_TAGS:
            raise ValueError(f"{where}: {len(query):,} tags; at most {MAX_QUERY_TAGS:,}")
        codes: dict[int, None] = {}  # distinct, in the query's order
        for tag in query:
            check_id(where, "tag", tag)
            code = self.tag_codes.get(self.processor.normalize_tag(tag))
            if code is None:
                result.unknown_tags.append(tag)
            else:
                codes[code] = None
        if not codes:
            result.reason = (f"none of the query's tags is among the {len(self.tags):,} tags "
                             "of the recommender's data" if query else "the query has no tag")
        return list(codes)
