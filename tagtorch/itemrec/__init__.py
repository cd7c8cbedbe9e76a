"""Tag-based item recommendation: Do-Rank and its tensor and matrix baselines."""
