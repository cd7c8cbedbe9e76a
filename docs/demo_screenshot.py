"""Screenshot of the service's demo page (``/``) for the README, taken in headless Chromium.

Starts ``python -m tagtorch.serve FOLDER`` on 127.0.0.1, fills the form, sends it, waits for
the answer's table and writes a PNG. Needs ``playwright`` (the ``dev`` extra) and a system
Chromium (Debian: ``apt-get install chromium``); no browser is downloaded.

Usage::

    python -m tagtorch.train task=fit data=lastfm model=[latre_wts,two_dimensional]
    python docs/demo_screenshot.py checkpoints/recommenders/hetrec2011-lastfm-2k-latre_wts
        docs/images/demo_tags.png --field title=Nirvana --field "tags=grunge, 90s" --field k=8
    python docs/demo_screenshot.py
        checkpoints/recommenders/hetrec2011-lastfm-2k-two_dimensional
        docs/images/demo_items.png --field user=4 --field tag=rock --field k=8

(each command on one line).
"""

from __future__ import annotations

import argparse
import shutil
import sys

from playwright.sync_api import sync_playwright

from tagtorch.serve import start_service
from tagtorch.storage import atomic_write

BROWSER_FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]


def main() -> int:
    """Starts the service, drives the form in Chromium and writes the screenshot."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", help="a recommender folder written by task=fit")
    parser.add_argument("output", help="the PNG to write")
    parser.add_argument("--field", action="append", default=[], metavar="ID=VALUE",
                        help="a form input to fill (title, tags, k; user, tag)")
    args = parser.parse_args()
    browser_path = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser_path is None:
        print("error: no system Chromium (apt-get install chromium)", file=sys.stderr)
        return 2
    server, url = start_service(args.folder)
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=browser_path, args=BROWSER_FLAGS)
            page = browser.new_page(viewport={"width": 900, "height": 760})
            page.goto(f"{url}/")
            for field in args.field:
                name, _, value = field.partition("=")
                page.fill(f"#{name}", value)
            page.click("button")
            page.wait_for_selector("#result td, #note:not(:empty)", timeout=60_000)
            with atomic_write(args.output) as partial:  # never through a link at the name
                partial.write_bytes(page.screenshot(full_page=True, type="png"))
            browser.close()
    finally:
        server.terminate()
        server.wait(timeout=30)
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
