"""tagtorch: ranking in social tagging systems with PyTorch.

The whole surface in a few lines (:mod:`tagtorch.api`)::

    import tagtorch as tt

    folk = tt.load("synthetic")
    res = tt.evaluate("tagrec", folk, models=["latre_wts", "rf"], folds=[0])
    print(res.report)
    rec = tt.fit(folk, "latre_wts")
    rec.recommend_tags(["rock"], title="a title", k=5)

The names are imported on first use, so ``import tagtorch`` stays light.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from tagtorch.version import __version__

_EXPORTS = {
    "load": "tagtorch.api", "evaluate": "tagtorch.api", "fit": "tagtorch.api",
    "compose": "tagtorch.api", "datasets": "tagtorch.api",
    "EvaluationResult": "tagtorch.evaluation.runs", "Folksonomy": "tagtorch.data.folksonomy",
    "Recommender": "tagtorch.serving", "TagRecommender": "tagtorch.serving",
    "ItemRecommender": "tagtorch.serving", "PostRecommender": "tagtorch.serving",
    "ResourceRecommender": "tagtorch.serving",
    "LetorData": "tagtorch.candidates.letor",
}

__all__ = ["EvaluationResult", "Folksonomy", "ItemRecommender", "LetorData", "PostRecommender",
           "Recommender", "ResourceRecommender", "TagRecommender", "__version__", "compose",
           "datasets", "evaluate", "fit", "load"]

if TYPE_CHECKING:
    from tagtorch.api import compose, datasets, evaluate, fit, load
    from tagtorch.candidates.letor import LetorData
    from tagtorch.data.folksonomy import Folksonomy
    from tagtorch.evaluation.runs import EvaluationResult
    from tagtorch.serving import (
        ItemRecommender,
        PostRecommender,
        Recommender,
        ResourceRecommender,
        TagRecommender,
    )


def __getattr__(name: str) -> Any:
    """Imports a public name's module on first use (PEP 562)."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'tagtorch' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
