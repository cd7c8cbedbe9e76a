"""``task=fit``: fit a whole recommender on the data and write it as one artifact folder.

``python -m tagtorch.train task=fit data=lastfm model=lambdamart`` fits the text pipeline's
vocabulary, the candidate statistics of D and the ranker on V (:class:`TagRecommender`), and
writes ``{task.output}/{dataset}-{method}/`` (default ``checkpoints/recommenders/``). With
several methods, one folder each.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from tagtorch.data.folksonomy import Folksonomy
from tagtorch.evaluation.runs import MetricLogger, methods_of
from tagtorch.serving.tags import TagRecommender, display_names

log = logging.getLogger(__name__)


class FitTask:
    """Fits each configured tag ranker into a :class:`TagRecommender` artifact.

    Args:
        output: the folder the artifacts go under (``DATASET-METHOD/`` each).
        val_fraction: share of the objects with at least ``min_tags`` tags put in V.
        input_fraction: share of a V object's tags given as input.
        min_tags: fewest tags of a V object.
        seed: seed of the D/V split.
    """

    def __init__(self, output: str | Path = "checkpoints/recommenders",
                 val_fraction: float = 0.2, input_fraction: float = 0.5, min_tags: int = 2,
                 seed: int = 0) -> None:
        self.output = Path(output)
        self.val_fraction, self.input_fraction = val_fraction, input_fraction
        self.min_tags, self.seed = min_tags, seed

    def run(self, folksonomy: Folksonomy, cfg: DictConfig, output_dir: Path,
            loggers: Sequence[MetricLogger] = ()) -> list[Path]:
        """Fits and writes one artifact per method; returns their folders."""
        processor = instantiate(cfg.text) if cfg.get("text") is not None else None
        if processor is None:
            raise ValueError("task=fit needs the text pipeline (text=porter): new objects' "
                             "texts and tags are normalized by it")
        display = display_names(instantiate(cfg.data), processor, folksonomy)
        candidates: dict[str, Any] = {
            k: v for k, v in OmegaConf.to_container(cfg.candidates, resolve=True).items()
            if k != "_target_"}
        folders = []
        for name, config in methods_of(cfg).items():
            ranker = instantiate(config)
            recommender = TagRecommender.fit(
                folksonomy, processor, candidates, ranker, display=display,
                val_fraction=self.val_fraction, input_fraction=self.input_fraction,
                min_tags=self.min_tags, seed=self.seed,
                info={"method": name, "config": OmegaConf.to_container(cfg, resolve=True)})
            folder = recommender.save(self.output / f"{folksonomy.name}-{name}")
            log.info("%s: fitted on %d D objects and %d V objects, written to %s", name,
                     recommender.info["d_objects"], recommender.info["v_objects"], folder)
            print(f"{name}: {folder}")
            folders.append(folder)
        return folders
