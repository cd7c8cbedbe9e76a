"""Data layer: the folksonomy table, loaders, synthetic generator, text processing, splits."""
