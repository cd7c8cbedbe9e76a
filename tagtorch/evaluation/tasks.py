"""Tasks that ``python -m tagtorch.train`` runs, chosen by the ``task`` config group."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Any, cast

import pandas as pd
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from tagtorch.data.folksonomy import Folksonomy
from tagtorch.evaluation.protocol import EvaluationResult, TagRecommendationProtocol, fold_sizes
from tagtorch.evaluation.runs import MetricLogger
from tagtorch.storage import atomic_write

log = logging.getLogger(__name__)


class TagRecommendationTask:
    """Evaluates the configured rankers (``model``: method name -> ranker config) by the protocol.

    The first method is the baseline of the significance tests; candidates come from
    ``features``.

    Args:
        protocol: the D/V/T evaluation protocol.
    """

    def __init__(self, protocol: TagRecommendationProtocol) -> None:
        self.protocol = protocol

    def run(self, folksonomy: Folksonomy, cfg: DictConfig, output_dir: Path,
            loggers: Sequence[MetricLogger] = ()) -> EvaluationResult:
        """Runs the protocol and prints the report."""
        # resolved here: worker processes of parallel folds have no Hydra resolvers
        configs = {str(name): OmegaConf.to_container(node, resolve=True)
                   for name, node in cfg.model.items()}
        result = self.protocol.evaluate(
            folksonomy,
            candidates=partial(instantiate, cfg.candidates),
            rankers={name: partial(instantiate, config) for name, config in configs.items()},
            ranker_configs=configs,
            output_dir=output_dir,
            loggers=loggers,
            candidate_config=cast(dict[str, Any],
                                  OmegaConf.to_container(cfg.candidates, resolve=True)),
        )
        print(result.report)
        return result


class DescribeTask:
    """Prints a dataset's statistics and the sizes of the protocol's folds.

    Args:
        protocol: the protocol whose splits are described.
    """

    def __init__(self, protocol: TagRecommendationProtocol) -> None:
        self.protocol = protocol

    def run(self, folksonomy: Folksonomy, cfg: DictConfig, output_dir: Path,
            loggers: Sequence[MetricLogger] = ()) -> dict[str, object]:
        """Prints and writes ``describe.json`` with the statistics and split sizes."""
        stats: dict[str, object] = dict(folksonomy.describe())
        sizes = fold_sizes(folksonomy, self.protocol)
        print(f"# {folksonomy.name}\n")
        print(pd.Series(stats, dtype=object).to_string())
        print(f"\n## {self.protocol.n_folds}-fold D/V/T splits "
              f"(objects with >= {self.protocol.min_tags} tags)\n")
        print(sizes.to_string(index=False))
        stats["folds"] = sizes.to_dict(orient="records")
        with atomic_write(output_dir / "describe.json") as partial:
            partial.write_text(json.dumps(stats, indent=2))
        return stats
