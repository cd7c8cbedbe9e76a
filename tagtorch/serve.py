"""``python -m tagtorch.serve PATH``: a fitted recommender (``task=fit``) over HTTP.

The command lives in :mod:`tagtorch.serving.command`, the app in
:mod:`tagtorch.serving.service`; this module runs it. Without the ``[serve]`` extra the
command stops with one line naming it.
"""

from __future__ import annotations

import sys

from tagtorch.extras import MissingExtraError

try:
    from tagtorch.serving.command import main, start_service
    from tagtorch.serving.service import create_app
except MissingExtraError as missing:
    if __name__ == "__main__":
        print(f"error: {missing}", file=sys.stderr)
        raise SystemExit(2) from None
    raise

__all__ = ["create_app", "main", "start_service"]

if __name__ == "__main__":
    sys.exit(main())
