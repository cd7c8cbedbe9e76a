"""The one-page demo form of the service's ``/``, for the artifact's kind of recommender."""

from __future__ import annotations

import html

from tagtorch.serving import AnyRecommender, PostRecommender, ResourceRecommender, TagRecommender

__all__ = ["DEMO_PAGE", "demo_page"]

DEMO_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>tagtorch: recommend {what}</title>
<style>
body {{ font-family: sans-serif; max-width: 40em; margin: 2em auto; }}
label {{ display: block; margin-top: 0.8em; }}
input {{ width: 100%; padding: 0.3em; }}
table {{ margin-top: 1em; border-collapse: collapse; }}
td, th {{ padding: 0.2em 1em; border-bottom: 1px solid #ccc; text-align: left; }}
#note {{ color: #a33; margin-top: 1em; }}
</style></head>
<body>
<h1>Recommend {what}</h1>
<p>{about}</p>
<form id="ask">
{inputs}
<label>How many <input id="k" name="k" type="number" value="{k}" min="1" max="1000"></label>
<p><button type="submit">Recommend</button></p>
</form>
<table id="result"></table>
<div id="note"></div>
<script>
const value = (id) => document.getElementById(id).value;
document.getElementById("ask").addEventListener("submit", async (event) => {{
  event.preventDefault();
  const body = {body};
  const response = await fetch("{endpoint}", {{method: "POST",
    headers: {{"content-type": "application/json"}}, body: JSON.stringify(body)}});
  const data = await response.json();
  const table = document.getElementById("result");
  const note = document.getElementById("note");
  table.textContent = ""; note.textContent = "";
  if (!response.ok) {{ note.textContent = JSON.stringify(data.detail); return; }}
  const columns = {columns};
  const head = table.insertRow();
  for (const name of columns) {{
    head.appendChild(document.createElement("th")).textContent = name;
  }}
  for (const entry of data.{what}) {{
    const row = table.insertRow();
    for (const name of columns) {{
      const cell = entry[name];
      row.insertCell().textContent = name === "score" ? cell.toFixed(4) : cell;
    }}
  }}
  const left = [...(data.unknown_tags || []), ...(data.unknown_words || [])];
  note.textContent = (data.reason || "") + (left.length ? " Left out: " + left.join(", ") : "");
}});
</script>
</body></html>
"""
"""The demo form, filled in by :func:`demo_page` for the artifact's kind."""


def demo_page(recommender: AnyRecommender) -> str:
    """The one-page demo of ``/``: a form for the artifact's kind and a table of answers."""
    method, data = (html.escape(str(recommender.info.get(key))) for key in ("method", "data"))
    if isinstance(recommender, TagRecommender):
        inputs = ('<label>Title <input id="title" name="title"></label>\n'
                  '<label>Tags, separated by commas <input id="tags" name="tags"></label>')
        body = ('{tags: value("tags").split(",").map(t => t.trim()).filter(t => t), '
                'title: value("title"), k: Number(value("k"))}')
        return DEMO_PAGE.format(what="tags", inputs=inputs, body=body, k=5,
                                endpoint="/v1/tags", columns='["tag", "score"]',
                                about=f"{method} fitted on {data}: tags for an object.")
    if isinstance(recommender, PostRecommender):
        inputs = ('<label>User <input id="user" name="user"></label>\n'
                  '<label>Resource <input id="resource" name="resource"></label>')
        body = '{user: value("user"), resource: value("resource"), k: Number(value("k"))}'
        return DEMO_PAGE.format(what="tags", inputs=inputs, body=body, k=5,
                                endpoint="/v1/tags", columns='["tag", "score"]',
                                about=f"{method} fitted on {data}: tags for a user's post.")
    if isinstance(recommender, ResourceRecommender):
        inputs = '<label>Tags, separated by commas <input id="tags" name="tags"></label>'
        body = ('{tags: value("tags").split(",").map(t => t.trim()).filter(t => t), '
                'k: Number(value("k"))}')
        return DEMO_PAGE.format(what="resources", inputs=inputs, body=body, k=10,
                                endpoint="/v1/resources",
                                columns='["resource", "title", "score"]',
                                about=f"{method} fitted on {data}: resources for a tag query.")
    inputs = ('<label>User <input id="user" name="user"></label>\n'
              '<label>Tag (optional) <input id="tag" name="tag"></label>')
    body = '{user: value("user"), tag: value("tag") || null, k: Number(value("k"))}'
    return DEMO_PAGE.format(what="items", inputs=inputs, body=body, k=10, endpoint="/v1/items",
                            columns='["item", "title", "score"]',
                            about=f"{method} fitted on {data}: items for a user.")
