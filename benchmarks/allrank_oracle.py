"""allRank's losses as an oracle for tests and benchmarks, without allRank's training stack.

allRank 1.4.3 (Pobrotyn et al., "Context-Aware Learning to Rank with Self-Attention", 2020;
github.com/allegro/allRank) pins ``torch<=1.8`` and imports torchvision, gcsfs and Google auth at
package level, none of which its loss functions use. Install it without its dependencies::

    pip install --no-deps allRank==1.4.3

:func:`load_allrank_losses` then imports the five loss modules tagtorch shares with allRank from
the installed files, after registering stand-ins for the two modules they import constants
from (``allrank.data.dataset_loading``: ``PADDED_Y_VALUE = -1``; ``allrank.models.model_utils``:
``get_torch_device``), and returns the loss functions. It returns ``None`` when allRank is not
installed, so callers skip. Nothing of allRank is copied here.

allRank marks padding by a label of ``-1`` (:func:`to_allrank`) instead of a mask.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

PADDED_LABEL = -1.0
"""allRank's ``PADDED_Y_VALUE``: the label of a padded slot."""

SHARED_LOSSES = {
    "listnet": ("listNet", "listNet"),
    "ranknet": ("rankNet", "rankNet"),
    "approxndcg": ("approxNDCG", "approxNDCGLoss"),
    "neuralndcg": ("neuralNDCG", "neuralNDCG"),
    "lambdaloss": ("lambdaLoss", "lambdaLoss"),
}
"""tagtorch loss name -> (allRank module under ``allrank.models.losses``, function)."""


def _package(name: str, path: Path | None = None, **attributes: Any) -> types.ModuleType:
    module = types.ModuleType(name)
    if path is not None:
        module.__path__ = [str(path)]
    module.__dict__.update(attributes)
    sys.modules[name] = module
    return module


def load_allrank_losses() -> dict[str, Callable[..., torch.Tensor]] | None:
    """allRank's loss functions by tagtorch loss name, or ``None`` without allRank installed."""
    spec = importlib.util.find_spec("allrank")
    if spec is None or not spec.submodule_search_locations:
        return None
    root = Path(next(iter(spec.submodule_search_locations)))
    if "allrank.models.losses" not in sys.modules:
        _package("allrank", root)
        _package("allrank.data", root / "data")
        _package("allrank.data.dataset_loading", PADDED_Y_VALUE=PADDED_LABEL)
        _package("allrank.models", root / "models")
        _package("allrank.models.model_utils", get_torch_device=lambda: torch.device(
            "cuda:0" if torch.cuda.is_available() else "cpu"))
        _package("allrank.models.losses", root / "models" / "losses", DEFAULT_EPS=1e-10)
    return {name: getattr(importlib.import_module(f"allrank.models.losses.{module}"), function)
            for name, (module, function) in SHARED_LOSSES.items()}


def to_allrank(scores: torch.Tensor, labels: torch.Tensor,
               mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(y_pred, y_true)`` in allRank's convention: padded labels ``-1``, scores as they are."""
    return scores, labels.masked_fill(~mask, PADDED_LABEL)
