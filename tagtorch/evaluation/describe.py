"""The ``describe`` task: a dataset's statistics and the sizes of the protocol's folds."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import pandas as pd
from omegaconf import DictConfig

from tagtorch.data.folksonomy import Folksonomy
from tagtorch.evaluation.runs import GivenObjects, MetricLogger, Task
from tagtorch.evaluation.tag_recommendation import TagRecommendationProtocol, fold_sizes
from tagtorch.settings import ModelTask
from tagtorch.storage import atomic_write


class DescribeTask(TagRecommendationProtocol, Task):
    """Prints a dataset's statistics and the sizes of the protocol's folds.

    Its settings are tag recommendation's (:class:`TagRecommendationProtocol`), whose splits it
    describes.
    """

    model_tasks: ClassVar[tuple[ModelTask, ...]] = ()  # no model is used
    """The tasks of the models this task runs (read by the config checks)."""

    def run(self, folksonomy: Folksonomy, cfg: DictConfig, output_dir: Path,
            loggers: Sequence[MetricLogger] = (), *, raw: Any = None,
            given: GivenObjects | None = None) -> dict[str, object]:
        """Prints and writes ``describe.json`` with the statistics and split sizes.

        The arguments are every task's (:meth:`Task.run <tagtorch.evaluation.runs.Task.run>`);
        no model is fitted.
        """
        stats: dict[str, object] = dict(folksonomy.describe())
        sizes = fold_sizes(folksonomy, self)
        print(f"# {folksonomy.name}\n")
        print(pd.Series(stats, dtype=object).to_string())
        print(f"\n## {self.n_folds}-fold D/V/T splits "
              f"(objects with >= {self.min_tags} tags)\n")
        print(sizes.to_string(index=False))
        stats["folds"] = sizes.to_dict(orient="records")
        with atomic_write(output_dir / "describe.json") as partial:
            partial.write_text(json.dumps(stats, indent=2))
        return stats
