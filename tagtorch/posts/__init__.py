"""Personalized tag recommendation, TagRec's benchmark task: rank the tags of a new post.

A post is (user, resource); the methods rank tags for it.

- :mod:`~tagtorch.posts.data`: posts, the p-core and TagRec's splits;
- :mod:`~tagtorch.posts.metrics`: TagRec's metric definitions beside the IR ones;
- :mod:`~tagtorch.posts.baselines`: TagRec's MP, MP_u, MP_r, MP_u,r, BLL and BLL+C, batched.

Layer 2 (``data`` and ``candidates.neighbours``' top-k below it).
"""
