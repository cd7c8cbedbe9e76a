"""The one reading of a ``device`` setting (layer 0: imports nothing of tagtorch)."""

from __future__ import annotations

import torch

__all__ = ["resolve_device"]


def resolve_device(device: str | torch.device) -> torch.device:
    """``"auto"``: CUDA when present, else the CPU; any other value as torch reads it.

    Example:
        >>> resolve_device("cpu").type
        'cpu'
    """
    if str(device) == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)
