"""Personalized tag recommendation, TagRec's benchmark task: rank the tags of a new post.

A post is (user, resource); the methods rank tags for it.

- :mod:`~tagtorch.posts.data`: posts, the p-core and TagRec's splits;
- :mod:`~tagtorch.posts.metrics`: TagRec's metric definitions beside the IR ones.

Layer 2 (``data`` below it).
"""
