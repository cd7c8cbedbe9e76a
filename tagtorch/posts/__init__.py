"""Personalized tag recommendation, TagRec's benchmark task: rank the tags of a new post.

A post is (user, resource); the methods rank tags for it.

- :mod:`~tagtorch.posts.data`: posts, the p-core and TagRec's splits;
- :mod:`~tagtorch.posts.metrics`: TagRec's metric definitions beside the IR ones;
- :mod:`~tagtorch.posts.base`: the contract (``fit(PostData)``, ``score(Posts)``, save, load);
- :mod:`~tagtorch.posts.baselines`: TagRec's MP, MP_u, MP_r, MP_u,r, BLL and BLL+C;
- :mod:`~tagtorch.posts.cf`, :mod:`~tagtorch.posts.folkrank`, :mod:`~tagtorch.posts.girp`:
  CF, APR and FolkRank, GIRP and GIRPTM;
- :mod:`~tagtorch.posts.local_folkrank`: ours, APR and FolkRank by local push;
- :mod:`~tagtorch.posts.lda`, :mod:`~tagtorch.posts.pitf`: TagRec's LDA recommender and PITF;
- :mod:`~tagtorch.posts.hybrid`: ours, a learned ranker over the baselines.

Layer 3 (``data``, ``topics``, ``candidates.neighbours``, and ``rankers`` and ``itemrec``,
which never import it).
"""

from tagtorch.posts.base import PostRanker, recommend
from tagtorch.posts.baselines import BaseLevelLearning, MostPopular, MostPopularUserResource
from tagtorch.posts.cf import UserCF
from tagtorch.posts.data import PostData, Posts, personalized_split
from tagtorch.posts.folkrank import FolkRank
from tagtorch.posts.girp import Girp
from tagtorch.posts.hybrid import Hybrid
from tagtorch.posts.lda import TopicTags
from tagtorch.posts.local_folkrank import LocalFolkRank
from tagtorch.posts.metrics import mean_metrics, post_metrics
from tagtorch.posts.pitf import TagPITF

__all__ = ["BaseLevelLearning", "FolkRank", "Girp", "Hybrid", "LocalFolkRank", "MostPopular",
           "MostPopularUserResource", "PostData", "PostRanker", "Posts", "TagPITF", "TopicTags",
           "UserCF",
           "mean_metrics", "personalized_split", "post_metrics", "recommend"]
