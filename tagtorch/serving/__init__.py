"""Fitted recommenders as artifacts, asked through a Python API (and the CLI built on it)."""
