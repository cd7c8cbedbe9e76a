"""``python -m tagtorch.recommend PATH ...``: recommendations of a fitted recommender.

The command lives in :mod:`tagtorch.serving.cli`; this module runs it.
"""

from __future__ import annotations

import sys

from tagtorch.serving.cli import main

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main())
