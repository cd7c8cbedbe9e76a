"""MkDocs hook: pages include sections of the README, with links that work in the site.

A page line ``--8<-- "README.md:NAME"`` is replaced by the README's text between
``<!-- --8<-- [start:NAME] -->`` and ``<!-- --8<-- [end:NAME] -->`` (the README stays the one
source of that text), and the README's repository-relative links ``](docs/...`` become the
site's ``](...``: those files sit at the root of the pages. A missing section is an error.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

README = Path(__file__).resolve().parents[1] / "README.md"
_INCLUDE = re.compile(r'^--8<-- "README\.md:([\w-]+)"$', re.MULTILINE)


def _section(name: str) -> str:
    text = README.read_text(encoding="utf-8")
    match = re.search(rf"<!-- --8<-- \[start:{re.escape(name)}\] -->\n(.*?)"
                      rf"<!-- --8<-- \[end:{re.escape(name)}\] -->", text, re.DOTALL)
    if match is None:
        raise ValueError(f"README.md has no section {name!r}")
    return match.group(1).replace("](docs/", "](")


def on_page_markdown(markdown: str, **_: Any) -> str:
    """Replaces each include line by its README section."""
    return _INCLUDE.sub(lambda m: _section(m.group(1)), markdown)
