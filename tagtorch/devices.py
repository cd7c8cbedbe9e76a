"""The one reading of a ``device`` setting, and of this machine's memory (layer 0)."""

from __future__ import annotations

import os
from pathlib import Path

import torch

from tagtorch.errors import TooLargeError

__all__ = ["check_memory", "memory_bytes", "resolve_device"]

MEMORY_SHARE = 0.8
"""The share of the machine's memory one allocation may plan to take."""


def resolve_device(device: str | torch.device) -> torch.device:
    """``"auto"``: CUDA when present, else the CPU; any other value as torch reads it.

    Example:
        >>> resolve_device("cpu").type
        'cpu'
    """
    if str(device) == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


def memory_bytes() -> int:
    """This machine's memory: the physical memory, or a smaller cgroup limit (a container).

    Example:
        >>> memory_bytes() > 0
        True
    """
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    try:
        limit = Path("/sys/fs/cgroup/memory.max").read_text().strip()
    except OSError:
        return int(total)
    return int(min(total, int(limit))) if limit.isdigit() else int(total)


def check_memory(needed: float, what: str, reason: str, alternative: str) -> None:
    """Refuses, before anything is allocated, what needs over 80% of :func:`memory_bytes`.

    Raises:
        TooLargeError: naming what, why, how much and the alternative.
    """
    available = memory_bytes()
    if needed > MEMORY_SHARE * available:
        raise TooLargeError(what, needed, available, reason, alternative)
