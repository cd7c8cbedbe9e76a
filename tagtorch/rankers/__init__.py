"""Rankers: every method offers ``fit(train, val)``, ``score(batch)``, ``save`` and ``load``."""
