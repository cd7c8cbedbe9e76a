"""``python -m tagtorch.serve PATH``: a fitted recommender (``task=fit``) over HTTP.

The service lives in :mod:`tagtorch.serving.service`; this module is its command (and keeps
``from tagtorch.serve import start_service`` working). Without the ``[serve]`` extra the
command stops with one line naming it.
"""

from __future__ import annotations

import sys

from tagtorch.extras import MissingExtraError

try:
    from tagtorch.serving.service import create_app, main, start_service
except MissingExtraError as missing:
    if __name__ == "__main__":
        print(f"error: {missing}", file=sys.stderr)
        raise SystemExit(2) from None
    raise

__all__ = ["create_app", "main", "start_service"]

if __name__ == "__main__":
    sys.exit(main())
