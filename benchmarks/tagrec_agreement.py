"""tagtorch against TagRec's jar on every stored split: the largest difference per method.

Prints, for each method of ``tests/test_tagrec_oracle.py`` and each split it checks (the
HetRec and synthetic 3-cores, TagRec's random splits of its samples and the shuffled MovieLens
samples with and without lines without tags), the largest ``|tagtorch − TagRec|`` over
k = 1..10 and the seven columns of TagRec's metric files. The comparison is the test's own
(its splits, configs and TagRec's files); the test asserts a bound, this prints the values
(``docs/personalized_tags.md``).

Usage::

    TAGTORCH_DATA_DIR=/path/to/data python benchmarks/tagrec_agreement.py
"""

from __future__ import annotations

import sys
import tempfile
import warnings
from pathlib import Path

import numpy as np
from hydra.utils import instantiate
from omegaconf import OmegaConf

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from test_tagrec_oracle import (
    COGNITIVE,
    COGNITIVE_SPLITS,
    COLUMNS,
    CONF,
    DEFECT,
    FIXTURES,
    GIVEN,
    LEAVE_LAST,
    TAGREC_NAMES,
    tagrec_means,
)

from tagtorch.api import load
from tagtorch.data.loaders.tagrec import load_tagrec, write_tagrec
from tagtorch.posts.base import PostRanker
from tagtorch.posts.data import PostData, personalized_split
from tagtorch.posts.metrics import mean_metrics, post_metrics


def largest_difference(model: PostRanker, data: PostData, split: str, output: str) -> float:
    """max |ours − TagRec's| over k = 1..10 and :data:`COLUMNS`."""
    ranked = model.fit(data).top_tags(data.test, 10)
    means = mean_metrics(post_metrics(ranked, data.test.tags, range(1, 11)))
    ours = np.array([[means[f"{c}@{k}" if c != "coverage" else c] for c in COLUMNS]
                     for k in range(1, 11)])
    return float(np.abs(ours - tagrec_means(split, output)).max())


def splits() -> dict[str, PostData]:
    """The test's splits: tagtorch's 3-cores of TagRec-written files, then TagRec's own."""
    folder = Path(tempfile.mkdtemp())
    out = {}
    for name, options in LEAVE_LAST.items():
        path = write_tagrec(load(name, **options), folder / f"{name}.txt")  # type: ignore[arg-type]
        out[name] = personalized_split(load_tagrec(path))
    for name, stem in GIVEN.items():
        files = FIXTURES / name / stem
        out[name] = personalized_split(load_tagrec(f"{files}_train.txt.gz",
                                                   test_path=f"{files}_test.txt.gz",
                                                   integer_ids=True), p=1, split="given")
    return out


def main() -> None:
    warnings.simplefilter("ignore")
    data = splits()
    rows: dict[str, dict[str, float]] = {}
    for name, split in data.items():
        for method, output in TAGREC_NAMES.items():
            node = OmegaConf.merge(OmegaConf.load(CONF / f"{method}.yaml")[method],
                                   DEFECT.get(name, {}).get(method, {}))
            rows.setdefault(method, {})[name] = largest_difference(instantiate(node), split,
                                                                   name, output)
        if name in COGNITIVE_SPLITS:
            for method, (output, overrides) in COGNITIVE.items():
                config = method.removesuffix("_user")
                node = OmegaConf.merge(OmegaConf.load(CONF / f"{config}.yaml")[config],
                                       overrides)
                rows.setdefault(method, {})[name] = largest_difference(instantiate(node),
                                                                       split, name, output)
    print("| method | " + " | ".join(data) + " |")
    print("|---|" + "---|" * len(data))
    for method, values in rows.items():
        cells = [f"{values[name]:.1e}" if name in values else "–" for name in data]
        print(f"| {method} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
