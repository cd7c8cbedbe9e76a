"""Release hygiene: the license, the changelog, the citation file and the version."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pandas as pd
import yaml

import tagtorch
from tagtorch.evaluation.report import markdown_report
from tagtorch.storage import write_manifest

ROOT = Path(__file__).resolve().parents[1]


def test_the_license_file_is_the_one_pyproject_names():
    license_name = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["license"]
    assert license_name == {"text": "MIT"}
    assert (ROOT / "LICENSE").read_text().startswith("MIT License")


def test_the_changelog_keeps_a_changelog():
    text = (ROOT / "CHANGELOG.md").read_text()
    assert "keepachangelog.com" in text and "## [Unreleased]" in text


def test_the_citation_file_lists_the_papers_behind_the_methods():
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    assert cff["cff-version"] == "1.2.0" and cff["license"] == "MIT"
    notes = " ".join(ref["notes"] for ref in cff["references"])
    for module in ("tagtorch.candidates", "tagtorch.rankers.xtred", "tagtorch.itemrec",
                   "tagtorch.itemrec.pitf", "tagtorch.resources"):
        assert module in notes


def test_every_reference_names_its_authors_and_nothing_outside_the_repository():
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    for ref in cff["references"]:
        assert all("family-names" in author for author in ref["authors"]), ref["title"]
        assert "../" not in ref["notes"], ref["title"]
    titles = " ".join(ref["title"] for ref in cff["references"])
    assert "TagRec" in titles and "Do-Rank" in titles


def test_the_citation_and_the_changelog_agree_on_releases():
    """A version in CITATION.cff is a released one, with its section in the changelog."""
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    changelog = (ROOT / "CHANGELOG.md").read_text()
    if "version" in cff:
        assert f"## [{cff['version']}]" in changelog and "date-released" in cff
    else:
        assert "Nothing has been released yet" in changelog


def test_reports_and_manifests_name_the_version(tmp_path):
    results = pd.DataFrame({"method": ["a"], "fold": [0], "metric": ["ndcg@5"], "value": [0.5]})
    assert markdown_report(results).rstrip().endswith(f"tagtorch {tagtorch.__version__}._")
    path = write_manifest(tmp_path, dict, {}, [])
    assert json.loads(path.read_text())["tagtorch_version"] == tagtorch.__version__
