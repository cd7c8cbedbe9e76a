"""TREC run and qrels files, so trec_eval, ranx or ir-measures can re-score tagtorch's rankings.

Query ids are object codes and document ids are tag codes (both integers, so no tag string with
spaces can break the whitespace-separated format). ``qrels.trec`` lists every gold tag of every
test object, also those no candidate reached, so recall computed from the files matches tagtorch's.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np
import torch

from tagtorch.candidates.candidate_set import CandidateSet
from tagtorch.data.ragged import Ragged


def run_file_names(methods: Sequence[str]) -> dict[str, str]:
    """TREC run file of each method: ``run.trec`` for a lone method, else ``run.{method}.trec``.

    Example:
        >>> run_file_names(["rf", "gp"])
        {'rf': 'run.rf.trec', 'gp': 'run.gp.trec'}
    """
    if len(methods) == 1:
        return {name: "run.trec" for name in methods}
    return {name: f"run.{name}.trec" for name in methods}


def run_lines(batch: CandidateSet, scores: torch.Tensor, run_name: str) -> Iterable[str]:
    """TREC run lines ``qid Q0 docid rank score run`` for one batch of ranked candidates.

    Args:
        batch: the candidate sets (``B`` objects, ``L`` slots).
        scores: ``[B, L]`` ranker scores; ranks follow the metrics' convention (score
            descending, ties by candidate order). Scores are rewritten as ``L - rank`` so
            tools that sort by score themselves see the same order.
        run_name: the run tag (the method's name, without whitespace).
    """
    masked = scores.detach().float().cpu().masked_fill(~batch.mask.cpu(), float("-inf"))
    order = torch.sort(masked, dim=-1, descending=True, stable=True).indices
    tags = torch.gather(batch.tags.cpu(), 1, order).numpy()
    n = batch.mask.sum(-1).cpu().numpy()
    width = tags.shape[1]
    for obj, row, count in zip(batch.objects.cpu().numpy(), tags, n, strict=True):
        for rank in range(int(count)):
            yield f"{obj} Q0 {row[rank]} {rank + 1} {width - rank} {run_name}\n"


def write_qrels(path: str | Path, objects: np.ndarray, gold_tags: Ragged) -> None:
    """Writes ``qid 0 docid 1`` for every gold tag of every object."""
    with open(path, "a") as out:
        for obj, gold in zip(objects, gold_tags, strict=True):
            out.writelines(f"{obj} 0 {tag} 1\n" for tag in gold)
