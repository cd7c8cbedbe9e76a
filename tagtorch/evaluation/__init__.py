"""Evaluation: protocol runner, confidence intervals, significance tests, timing, report."""
