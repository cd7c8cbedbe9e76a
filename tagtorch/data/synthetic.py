"""A seeded synthetic folksonomy: the embedded default dataset and the scale generator.

The generator draws a folksonomy with the structure that tag recommendation as learning to rank
(Canuto et al., JIDM 2013) relies on: tags that co-occur within topics, so that association
rules between tags are informative, and object texts (title, description) that contain some of
the object's tags. The model, with the :class:`SyntheticConfig` field that controls each part:

* **Tag vocabulary.** ``n_tags`` unique, readable pseudo-words made of syllables ("kalomi",
  "brutan"), none of them an English stopword, and no two of them sharing a Porter stem. A
  fraction ``variant_fraction`` of the vocabulary are *variant forms* of a base tag, a plural
  ("kalomi" → "kalomis") or a capitalized form ("Kalomi"), which lowercasing plus Porter stemming
  merges with their base; a post uses the variant instead of its base with probability
  ``variant_prob``.
* **Popularity.** Every base tag has a global Zipf popularity ``rank ** -tag_zipf_exponent``
  (ranks in random order) and a home topic (``n_topics`` topics of about equal size).
  Topics themselves have a Zipf popularity (``topic_zipf_exponent``).
* **Topics.** Topic ``k`` is a distribution over tags: with probability
  ``topic_concentration`` a tag of topic ``k`` (by its popularity within the topic), otherwise a
  tag of the whole vocabulary (by global popularity). Each topic belongs to one of
  ``n_categories`` categories (names are capitalized pseudo-words).
* **Objects.** An object has one topic, or two with probability ``two_topic_prob`` (mixture
  weight of the first one uniform in [0.5, 0.9]); its categories are those of its topics. Its
  number of posts is a discretized Pareto variable with tail exponent
  ``object_popularity_exponent``, capped at ``max_posts_per_object`` and calibrated to the mean
  ``mean_posts_per_object``: many objects with few tags, a few with many. Each object also has a
  *core* of ``core_size`` tags drawn from its mixture that posts reuse with probability
  ``core_prob`` (the consensus tags that many users give an object).
* **Users.** Every user is interested in 1 to ``max_user_topics`` topics (every topic has at
  least one user) and has a Zipf activity (``user_zipf_exponent``). A post draws a topic from its
  object's mixture and its user among the users interested in that topic, by activity.
* **Posts.** A post assigns 1, 2 or 3 tags (probabilities ``tags_per_post``), each from the
  object's core or its topic mixture; repeated ``(user, object, tag)`` triples keep the earliest.
* **Texts.** ``title`` has ``title_words`` (3–8) words and ``description``
  ``description_words`` (15–40). Each word is, with probability ``title_tag_prob`` (resp.
  ``description_tag_prob``), one of the object's own tags (by its number of assignments);
  otherwise, with probability ``text_other_topic_prob``, a tag of another topic, else a word of
  a separate noise vocabulary (``n_noise_words`` pseudo-words plus English stopwords, Zipf).
* **Time.** Object ``i`` appears at a time increasing with ``i`` over ``[time_start,
  time_start + time_span)``; its posts come after it, more of them early. Raw user and object
  ids are the integers ``0..n_users-1`` and ``0..n_objects-1``.

Objects are generated in chunks of ``chunk_size`` with vectorized numpy code (no Python loop per
object or assignment), so a million objects take about 20 s and 2.5 GB. The result
is the same for the same configuration (seed *and* chunk size). The :class:`Folksonomy` is built
directly from integer codes (no string factorization), with the invariants of
:meth:`Folksonomy.from_frame`; users and tags that no assignment uses are left out, so
``n_users`` and ``n_tags`` are upper bounds, while every object has at least one assignment.

``Folksonomy.meta`` holds the ground truth, indexed by the codes of the generated folksonomy
(it is not updated by ``select`` or ``with_tags``): ``tag_topic`` ``[n_tags]`` (home topic of each
tag), ``tag_variant_of`` ``[n_tags]`` (code of a variant's base tag, -1 otherwise),
``object_topics`` ``[n_objects, 2]`` (-1 for no second topic), ``topic_category``
``[n_topics]`` and ``config`` (the configuration as a dict).
"""

from __future__ import annotations

import dataclasses
import logging
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
import Stemmer
from tqdm.auto import tqdm

from tagtorch.data.folksonomy import Folksonomy

log = logging.getLogger(__name__)

#: English function words: never used as tags, part of the text noise vocabulary.
STOPWORDS = (
    "the", "of", "and", "to", "a", "in", "is", "it", "that", "for", "on", "with", "as", "was",
    "at", "by", "be", "this", "are", "from", "or", "an", "have", "not", "but", "had", "his",
    "they", "you", "were", "her", "she", "all", "there", "their", "which", "one", "we", "can",
    "more", "if", "has", "been", "when", "who", "will", "no", "so", "what", "its", "into", "some",
    "them", "would", "other", "than", "then", "these", "could", "also", "two", "my", "any", "our",
    "just", "may", "only", "very", "after", "most", "over", "such", "about", "before", "because",
    "between", "both", "each", "few", "here", "how", "me", "much", "must", "never", "now", "off",
    "once", "own", "same", "should", "those", "through", "under", "until", "up", "upon", "well",
    "where", "while", "why", "your"
)

_ONSETS = ("b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "t", "v", "z",
           "br", "dr", "gr", "kr", "pl", "tr", "st")
_VOWELS = ("a", "e", "i", "o", "u")
_CODAS = ("", "n", "r", "l", "m")
_CODA_PROBS = (0.7, 0.1, 0.1, 0.05, 0.05)  # mostly open syllables
_STEMMERS = ("porter", "english")


@dataclass(frozen=True)
class SyntheticConfig:
    """Every knob of the synthetic folksonomy (see the module docstring for the model).

    Attributes:
        n_objects: number of objects (all of them get assignments).
        n_users: number of users (upper bound: users without posts are left out).
        n_tags: tag vocabulary size, variant forms included (upper bound, as users).
        n_topics: number of latent topics.
        n_categories: number of categories (at most ``n_topics``).
        n_noise_words: size of the pseudo-word noise vocabulary of the texts.
        mean_posts_per_object: mean number of posts (distinct (user, tag-set)) per object.
        max_posts_per_object: cap on the posts of one object.
        object_popularity_exponent: Pareto tail exponent of the posts per object.
        tag_zipf_exponent: Zipf exponent of the global tag popularity.
        topic_zipf_exponent: Zipf exponent of the topic popularity.
        user_zipf_exponent: Zipf exponent of the user activity.
        noise_zipf_exponent: Zipf exponent of the noise words.
        topic_concentration: probability that a topic draw is one of the topic's own tags.
        two_topic_prob: probability that an object has two topics.
        core_size: number of core tags of an object.
        core_prob: probability that a post's tag is taken from the object's core.
        tags_per_post: probabilities of 1, 2 and 3 tags per post.
        max_user_topics: maximum number of topics a user is interested in.
        variant_fraction: fraction of the tag vocabulary that are variant (plural/capitalized)
            forms of base tags.
        variant_prob: probability that a post uses the variant form of a tag that has one.
        title_words: inclusive range of the number of title words.
        description_words: inclusive range of the number of description words.
        title_tag_prob: probability that a title word is one of the object's tags.
        description_tag_prob: probability that a description word is one of the object's tags.
        text_other_topic_prob: probability that a non-tag text word is a tag of another topic
            (otherwise a noise word).
        time_start: first timestamp (Unix seconds; default 2005-01-01).
        time_span: length of the time span in seconds (default 5 years).
        seed: random seed.
        chunk_size: objects generated per chunk (bounds memory; part of the seed's meaning).
        name: dataset name.
    """

    n_objects: int = 2500
    n_users: int = 600
    n_tags: int = 1500
    n_topics: int = 30
    n_categories: int = 10
    n_noise_words: int = 2000
    mean_posts_per_object: float = 10.0
    max_posts_per_object: int = 300
    object_popularity_exponent: float = 1.0
    tag_zipf_exponent: float = 1.0
    topic_zipf_exponent: float = 0.7
    user_zipf_exponent: float = 1.0
    noise_zipf_exponent: float = 1.0
    topic_concentration: float = 0.8
    two_topic_prob: float = 0.3
    core_size: int = 5
    core_prob: float = 0.35
    tags_per_post: tuple[float, float, float] = (0.45, 0.35, 0.2)
    max_user_topics: int = 3
    variant_fraction: float = 0.03
    variant_prob: float = 0.3
    title_words: tuple[int, int] = (3, 8)
    description_words: tuple[int, int] = (15, 40)
    title_tag_prob: float = 0.35
    description_tag_prob: float = 0.15
    text_other_topic_prob: float = 0.3
    time_start: int = 1_104_537_600
    time_span: int = 5 * 365 * 86_400
    seed: int = 0
    chunk_size: int = 100_000
    name: str = "synthetic"

    def __post_init__(self) -> None:
        # Hydra passes lists (ListConfig); keep hashable tuples.
        object.__setattr__(self, "tags_per_post", tuple(float(p) for p in self.tags_per_post))
        object.__setattr__(self, "title_words", tuple(int(n) for n in self.title_words))
        object.__setattr__(self, "description_words",
                           tuple(int(n) for n in self.description_words))
        problems = []
        for field in ("n_objects", "n_users", "n_topics", "n_categories", "n_noise_words",
                      "max_posts_per_object", "core_size", "max_user_topics", "chunk_size"):
            if getattr(self, field) < 1:
                problems.append(f"{field} must be >= 1")
        if self.n_categories > self.n_topics:
            problems.append("n_categories must be <= n_topics")
        if self.n_base_tags < self.n_topics:
            problems.append("n_tags (without variants) must be >= n_topics")
        if not 1 <= self.mean_posts_per_object < self.max_posts_per_object:
            problems.append("mean_posts_per_object must be in [1, max_posts_per_object)")
        for field in ("object_popularity_exponent", "tag_zipf_exponent", "topic_zipf_exponent",
                      "user_zipf_exponent", "noise_zipf_exponent"):
            if getattr(self, field) < 0 or (field == "object_popularity_exponent"
                                            and getattr(self, field) == 0):
                problems.append(f"{field} must be positive")
        for field in ("topic_concentration", "two_topic_prob", "core_prob", "variant_fraction",
                      "variant_prob", "title_tag_prob", "description_tag_prob",
                      "text_other_topic_prob"):
            if not 0 <= getattr(self, field) <= 1:
                problems.append(f"{field} must be in [0, 1]")
        if len(self.tags_per_post) != 3 or min(self.tags_per_post) < 0 or not sum(
                self.tags_per_post) > 0:
            problems.append("tags_per_post must be 3 non-negative probabilities")
        for field in ("title_words", "description_words"):
            low_high = getattr(self, field)
            if len(low_high) != 2 or not 1 <= low_high[0] <= low_high[1]:
                problems.append(f"{field} must be a range (low, high) with 1 <= low <= high")
        if problems:
            raise ValueError("invalid SyntheticConfig: " + "; ".join(problems))

    @property
    def n_variant_tags(self) -> int:
        """Number of variant forms in the tag vocabulary."""
        return round(self.n_tags * self.variant_fraction)

    @property
    def n_base_tags(self) -> int:
        """Number of base tags (the vocabulary without variant forms)."""
        return self.n_tags - self.n_variant_tags


def generate_folksonomy(
    n_objects: int = 2500,
    n_users: int = 600,
    n_tags: int = 1500,
    n_topics: int = 30,
    n_categories: int = 10,
    n_noise_words: int = 2000,
    mean_posts_per_object: float = 10.0,
    max_posts_per_object: int = 300,
    object_popularity_exponent: float = 1.0,
    tag_zipf_exponent: float = 1.0,
    topic_zipf_exponent: float = 0.7,
    user_zipf_exponent: float = 1.0,
    noise_zipf_exponent: float = 1.0,
    topic_concentration: float = 0.8,
    two_topic_prob: float = 0.3,
    core_size: int = 5,
    core_prob: float = 0.35,
    tags_per_post: tuple[float, float, float] = (0.45, 0.35, 0.2),
    max_user_topics: int = 3,
    variant_fraction: float = 0.03,
    variant_prob: float = 0.3,
    title_words: tuple[int, int] = (3, 8),
    description_words: tuple[int, int] = (15, 40),
    title_tag_prob: float = 0.35,
    description_tag_prob: float = 0.15,
    text_other_topic_prob: float = 0.3,
    time_start: int = 1_104_537_600,
    time_span: int = 5 * 365 * 86_400,
    seed: int = 0,
    chunk_size: int = 100_000,
    name: str = "synthetic",
    progress: bool = False,
) -> Folksonomy:
    """Generates a synthetic folksonomy (the fields of :class:`SyntheticConfig`).

    The Hydra entry point (``_target_: tagtorch.data.synthetic.generate_folksonomy``); the
    defaults give the toolkit's small default dataset (2,500 objects, ~34k assignments).

    Args:
        n_objects: see :class:`SyntheticConfig` for this and the other model arguments.
        n_users: see :class:`SyntheticConfig`.
        n_tags: see :class:`SyntheticConfig`.
        n_topics: see :class:`SyntheticConfig`.
        n_categories: see :class:`SyntheticConfig`.
        n_noise_words: see :class:`SyntheticConfig`.
        mean_posts_per_object: see :class:`SyntheticConfig`.
        max_posts_per_object: see :class:`SyntheticConfig`.
        object_popularity_exponent: see :class:`SyntheticConfig`.
        tag_zipf_exponent: see :class:`SyntheticConfig`.
        topic_zipf_exponent: see :class:`SyntheticConfig`.
        user_zipf_exponent: see :class:`SyntheticConfig`.
        noise_zipf_exponent: see :class:`SyntheticConfig`.
        topic_concentration: see :class:`SyntheticConfig`.
        two_topic_prob: see :class:`SyntheticConfig`.
        core_size: see :class:`SyntheticConfig`.
        core_prob: see :class:`SyntheticConfig`.
        tags_per_post: see :class:`SyntheticConfig`.
        max_user_topics: see :class:`SyntheticConfig`.
        variant_fraction: see :class:`SyntheticConfig`.
        variant_prob: see :class:`SyntheticConfig`.
        title_words: see :class:`SyntheticConfig`.
        description_words: see :class:`SyntheticConfig`.
        title_tag_prob: see :class:`SyntheticConfig`.
        description_tag_prob: see :class:`SyntheticConfig`.
        text_other_topic_prob: see :class:`SyntheticConfig`.
        time_start: see :class:`SyntheticConfig`.
        time_span: see :class:`SyntheticConfig`.
        seed: random seed; the same seed gives the same folksonomy.
        chunk_size: objects generated per chunk.
        name: dataset name.
        progress: show a progress bar over the chunks.

    Returns:
        The folksonomy, with the ground truth in ``meta`` (see the module docstring).

    Example:
        >>> f = generate_folksonomy(n_objects=300, n_users=80, n_tags=400, n_topics=10,
        ...                         n_categories=5, seed=1)
        >>> f.n_objects, f.text_fields, len(f.category_names)
        (300, ['title', 'description'], 5)
    """
    values = dict(locals())
    values.pop("progress")
    return generate(SyntheticConfig(**values), progress=progress)


def generate(config: SyntheticConfig, progress: bool = False) -> Folksonomy:
    """Generates the synthetic folksonomy described by ``config``.

    Args:
        config: the model parameters.
        progress: show a progress bar over the chunks of objects.

    Returns:
        The folksonomy, with the ground truth in ``meta``.
    """
    return _Generator(config).run(progress)


# ---------------------------------------------------------------------------- sampling helpers
class _GroupedCategorical:
    """One categorical distribution per group, sampled vectorized by inverse CDF.

    The CDFs of all groups are stored in one flat array shifted by the group index (group ``g``
    occupies ``(g, g + 1]``), so a draw for group ``g`` is a binary search for ``g + u``.
    """

    def __init__(self, groups: np.ndarray, items: np.ndarray, weights: np.ndarray,
                 n_groups: int) -> None:
        order = np.lexsort((items, groups))
        groups, items, weights = groups[order], items[order], weights[order].astype(np.float64)
        counts = np.bincount(groups, minlength=n_groups)
        if (counts == 0).any():
            raise ValueError("every group needs at least one item")
        self.ends = np.cumsum(counts)
        starts = self.ends - counts
        cum = np.cumsum(weights)
        before = np.concatenate([[0.0], cum])[starts]
        totals = cum[self.ends - 1] - before
        cdf = (cum - np.repeat(before, counts)) / np.repeat(totals, counts)
        cdf[self.ends - 1] = 1.0
        self.flat = groups + cdf
        self.items = items

    def sample(self, rng: np.random.Generator, groups: np.ndarray) -> np.ndarray:
        """Draws one item for each entry of ``groups``."""
        u = groups + rng.random(len(groups))
        pos = np.searchsorted(self.flat, u, side="right")
        return self.items[np.minimum(pos, self.ends[groups] - 1)]


class _Categorical(_GroupedCategorical):
    """A single categorical distribution over ``0..len(weights)-1``."""

    def __init__(self, weights: np.ndarray) -> None:
        n = len(weights)
        super().__init__(np.zeros(n, np.int64), np.arange(n, dtype=np.int64), weights, 1)

    def draw(self, rng: np.random.Generator, size: int) -> np.ndarray:
        """Draws ``size`` items."""
        return self.sample(rng, np.zeros(size, np.int64))


def _zipf_weights(n: int, exponent: float, rng: np.random.Generator) -> np.ndarray:
    """Zipf weights ``rank ** -exponent`` with the ranks in random order."""
    return (rng.permutation(n) + 1.0) ** -exponent


def _pareto_scale(mean: float, alpha: float, cap: int) -> float:
    """Scale ``x_min`` such that ``clip(ceil(x_min * U ** (-1 / alpha)), 1, cap)`` has ``mean``.

    ``P(ceil(X) >= k) = min(1, (x_min / (k - 1)) ** alpha)`` for ``k >= 2``, so the mean is
    ``1 + sum_{j=1}^{cap-1} min(1, (x_min / j) ** alpha)``, increasing in ``x_min``.
    """
    j = np.arange(1, cap, dtype=np.float64)

    def expected(x_min: float) -> float:
        return 1.0 + float(np.minimum(1.0, (x_min / j) ** alpha).sum())

    low, high = 0.0, float(cap)
    for _ in range(100):
        middle = (low + high) / 2
        low, high = (middle, high) if expected(middle) < mean else (low, middle)
    return (low + high) / 2


def _pseudo_words(n: int, rng: np.random.Generator) -> list[str]:
    """``n`` distinct pseudo-words with distinct Porter stems, none an English stopword.

    Every word ``w`` also satisfies ``stem(w + "s") == stem(w)`` (for the porter and the
    english/Porter2 stemmers), so that its plural merges with it when stemmed.
    """
    stemmers = [Stemmer.Stemmer(algorithm) for algorithm in _STEMMERS]
    taken: set[str] = set(STOPWORDS)
    for stemmer in stemmers:
        taken.update(stemmer.stemWords(list(STOPWORDS)))
    words: list[str] = []
    while len(words) < n:
        batch = max(1024, 2 * (n - len(words)))
        n_syllables = rng.choice([2, 3], size=batch, p=[0.5, 0.5])
        parts = (np.array(_ONSETS, dtype=object)[rng.integers(0, len(_ONSETS), (batch, 3))]
                 + np.array(_VOWELS, dtype=object)[rng.integers(0, len(_VOWELS), (batch, 3))]
                 + np.array(_CODAS, dtype=object)[rng.choice(len(_CODAS), (batch, 3),
                                                             p=_CODA_PROBS)])
        candidates = parts[:, 0] + parts[:, 1]
        candidates[n_syllables == 3] += parts[n_syllables == 3, 2]
        candidates = list(dict.fromkeys(candidates.tolist()))
        stems = [stemmer.stemWords(candidates) for stemmer in stemmers]
        plural_stems = [stemmer.stemWords([c + "s" for c in candidates]) for stemmer in stemmers]
        for i, word in enumerate(candidates):
            keys = {word} | {s[i] for s in stems}
            if (len(word) < 4 or keys & taken
                    or any(p[i] != s[i] for p, s in zip(plural_stems, stems, strict=True))):
                continue
            taken.update(keys)
            words.append(word)
            if len(words) == n:
                break
    return words


def _join_rows(vocabulary: np.ndarray, words: np.ndarray, lengths: np.ndarray) -> list[str]:
    """Joins consecutive runs of ``lengths`` words into space-separated strings (no row empty)."""
    separators = np.full(len(words), " ", dtype=object)
    separators[np.cumsum(lengths) - 1] = "\n"
    interleaved = np.empty(2 * len(words), dtype=object)
    interleaved[0::2] = vocabulary[words]
    interleaved[1::2] = separators
    return "".join(interleaved.tolist()).split("\n")[:-1]


def _compress(codes: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Contiguous codes for the used values of ``codes`` in ``[0, n)``: ``(new_codes, used)``."""
    used = np.bincount(codes, minlength=n) > 0
    remap = np.cumsum(used) - 1
    return remap[codes], used


def _sort_key(columns: list[np.ndarray], sizes: list[int]) -> np.ndarray:
    """Stable order of rows by the columns (first = most significant), by one int64 key if it fits.

    Args:
        columns: equal-length non-negative integer columns.
        sizes: an exclusive upper bound of each column.
    """
    if math.prod(sizes) < 2**62:
        key = np.zeros(len(columns[0]), dtype=np.int64)
        for column, size in zip(columns, sizes, strict=True):
            key *= size
            key += column
        return np.argsort(key, kind="stable")
    return np.lexsort(columns[::-1])


# ---------------------------------------------------------------------------- the generator
class _Generator:
    """Holds the global model (vocabularies, topics, users) and generates chunks of objects."""

    def __init__(self, config: SyntheticConfig) -> None:
        self.config = c = config
        model_seed, vocabulary_seed, chunk_seed = np.random.SeedSequence(c.seed).spawn(3)
        rng = np.random.default_rng(model_seed)
        vocabulary_rng = np.random.default_rng(vocabulary_seed)
        self.chunk_seed = chunk_seed
        n_base, n_variants = c.n_base_tags, c.n_variant_tags

        # Vocabularies: base tags, noise words, category names; variants of some base tags.
        words = _pseudo_words(n_base + c.n_noise_words + c.n_categories, vocabulary_rng)
        base = words[:n_base]
        noise = words[n_base:n_base + c.n_noise_words]
        categories = [w.capitalize() for w in words[n_base + c.n_noise_words:]]
        self.variant_base = vocabulary_rng.choice(n_base, size=n_variants, replace=False)
        plural = vocabulary_rng.random(n_variants) < 0.6
        variants = [base[b] + "s" if p else base[b].capitalize()
                    for b, p in zip(self.variant_base.tolist(), plural.tolist(), strict=True)]
        #: generator tag index -> tag string (base tags first, then variants).
        self.tag_strings = np.array(base + variants, dtype=object)
        self.variant_of = np.full(n_base, -1, dtype=np.int64)
        self.variant_of[self.variant_base] = n_base + np.arange(n_variants)
        self.text_vocabulary = np.array([*base, *variants, *STOPWORDS, *noise], dtype=object)
        self.n_noise = len(STOPWORDS) + len(noise)
        #: category index -> name, sorted (topics get categories in random order below).
        self.category_names = np.array(sorted(categories), dtype=object)

        # Topics: popularity, home topic of every base tag, category of every topic.
        self.topics = _Categorical(_zipf_weights(c.n_topics, c.topic_zipf_exponent, rng))
        self.tag_popularity = _zipf_weights(n_base, c.tag_zipf_exponent, rng)
        self.tag_topic = rng.permutation(np.arange(n_base) % c.n_topics)
        self.topic_category = rng.permutation(np.arange(c.n_topics) % c.n_categories)
        self.own_tags = _GroupedCategorical(self.tag_topic, np.arange(n_base),
                                            self.tag_popularity, c.n_topics)
        self.global_tags = _Categorical(self.tag_popularity)
        # Noise words by Zipf rank: the stopwords are the most frequent.
        self.noise_words = _Categorical((np.arange(self.n_noise) + 1.0) ** -c.noise_zipf_exponent)

        # Users: 1..max_user_topics interests each (every topic covered), Zipf activity.
        n_interests = rng.integers(1, c.max_user_topics + 1, size=c.n_users)
        interest_user = np.repeat(np.arange(c.n_users), n_interests)
        interest_topic = self.topics.draw(rng, len(interest_user))
        cover = rng.permutation(c.n_users)[np.arange(c.n_topics) % c.n_users]
        pairs = np.unique(np.stack([np.concatenate([interest_topic, np.arange(c.n_topics)]),
                                    np.concatenate([interest_user, cover])]), axis=1)
        activity = _zipf_weights(c.n_users, c.user_zipf_exponent, rng)
        self.topic_users = _GroupedCategorical(pairs[0], pairs[1], activity[pairs[1]],
                                               c.n_topics)

        self.posts_scale = _pareto_scale(c.mean_posts_per_object, c.object_popularity_exponent,
                                         c.max_posts_per_object)
        self.tags_per_post = np.asarray(c.tags_per_post) / sum(c.tags_per_post)

    # ------------------------------------------------------------------ one chunk
    def _mixture_tags(self, rng: np.random.Generator, first: np.ndarray, second: np.ndarray,
                      weight: np.ndarray) -> np.ndarray:
        """One base tag per entry, drawn from the entry's two-topic mixture."""
        topic = np.where(rng.random(len(first)) < weight, first, second)
        own = rng.random(len(first)) < self.config.topic_concentration
        tags = np.empty(len(first), dtype=np.int64)
        tags[own] = self.own_tags.sample(rng, topic[own])
        tags[~own] = self.global_tags.draw(rng, int((~own).sum()))
        return tags

    def _chunk(self, seed: np.random.SeedSequence, start: int, stop: int) -> dict[str, object]:
        """Generates objects ``start..stop-1``: their assignments, texts and topics."""
        c = self.config
        rng = np.random.default_rng(seed)
        m = stop - start
        first, second, weight = self._object_topics(rng, m)
        second_or_first = np.where(second >= 0, second, first)
        post_object, post_user, post_time = self._posts(rng, start, m, first, second_or_first,
                                                        weight)
        post, tag = self._post_tags(rng, m, post_object, first, second_or_first, weight)
        obj, user, tag, time = _distinct_assignments(
            post_object[post], post_user[post], tag, post_time[post],
            [m, c.n_users, len(self.tag_strings)])
        counts = np.bincount(obj, minlength=m)
        texts = {field: self._text_field(rng, m, first, tag, counts, words, tag_prob)
                 for field, words, tag_prob in (
                     ("title", c.title_words, c.title_tag_prob),
                     ("description", c.description_words, c.description_tag_prob))}
        return {
            "user": user.astype(np.int32),
            "object": (obj + start).astype(np.int32),
            "tag": tag.astype(np.int32),
            "timestamp": time,
            "topics": np.stack([first, second], axis=1).astype(np.int32),
            **texts,
        }

    def _object_topics(self, rng: np.random.Generator, m: int
                       ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(first, second, weight)`` per object: its topics (second -1 if one) and mixture."""
        c = self.config
        first = self.topics.draw(rng, m)
        second = self.topics.draw(rng, m)
        clash = second == first
        if c.n_topics > 1:
            second[clash] = (first[clash] + 1
                             + rng.integers(0, c.n_topics - 1, int(clash.sum()))) % c.n_topics
        has_two = (rng.random(m) < c.two_topic_prob) & (c.n_topics > 1)
        second[~has_two] = -1
        weight = np.where(has_two, rng.uniform(0.5, 0.9, m), 1.0)
        return first, second, weight

    def _posts(self, rng: np.random.Generator, start: int, m: int, first: np.ndarray,
               second_or_first: np.ndarray, weight: np.ndarray
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(object, user, time)`` of every post: a count per object, a topic, a user."""
        c = self.config
        u = 1.0 - rng.random(m)
        n_posts = np.clip(np.ceil(self.posts_scale * u ** (-1.0 / c.object_popularity_exponent)),
                          1, c.max_posts_per_object).astype(np.int64)
        post_object = np.repeat(np.arange(m), n_posts)
        n_all = len(post_object)
        post_topic = np.where(rng.random(n_all) < weight[post_object], first[post_object],
                              second_or_first[post_object])
        post_user = self.topic_users.sample(rng, post_topic)
        created = c.time_start + c.time_span * (start + np.arange(m) + rng.random(m)) / c.n_objects
        end = c.time_start + c.time_span
        post_time = (created[post_object]
                     + (end - created[post_object]) * rng.random(n_all) ** 2).astype(np.int64)
        return post_object, post_user, post_time

    def _post_tags(self, rng: np.random.Generator, m: int, post_object: np.ndarray,
                   first: np.ndarray, second_or_first: np.ndarray, weight: np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray]:
        """``(post, tag)``: 1-3 tags per post, from the object's core or its topic mixture."""
        c = self.config
        core = self._mixture_tags(rng, np.repeat(first, c.core_size),
                                  np.repeat(second_or_first, c.core_size),
                                  np.repeat(weight, c.core_size)).reshape(m, c.core_size)
        per_post = rng.choice(3, size=len(post_object), p=self.tags_per_post) + 1
        post = np.repeat(np.arange(len(post_object)), per_post)
        obj = post_object[post]
        tag = self._mixture_tags(rng, first[obj], second_or_first[obj], weight[obj])
        from_core = rng.random(len(tag)) < c.core_prob
        tag[from_core] = core[obj[from_core], rng.integers(0, c.core_size, int(from_core.sum()))]
        variant = self.variant_of[tag]
        use_variant = (variant >= 0) & (rng.random(len(tag)) < c.variant_prob)
        tag[use_variant] = variant[use_variant]
        return post, tag

    def _text_field(self, rng: np.random.Generator, m: int, first: np.ndarray, tag: np.ndarray,
                    counts: np.ndarray, words_range: tuple[int, int], tag_prob: float
                    ) -> pd.Series:
        """One text field per object: its own tags, other topics' tags and noise words.

        ``tag`` holds the chunk's distinct assignments sorted by object, ``counts`` their
        number per object.
        """
        c = self.config
        offsets = np.cumsum(counts) - counts
        low, high = words_range
        lengths = rng.integers(low, high + 1, size=m)
        slot_object = np.repeat(np.arange(m), lengths)
        n_slots = len(slot_object)
        words = np.empty(n_slots, dtype=np.int64)
        own = rng.random(n_slots) < tag_prob
        owner = slot_object[own]
        words[own] = tag[offsets[owner] + (rng.random(len(owner)) * counts[owner]).astype(
            np.int64)]
        other = ~own & (rng.random(n_slots) < c.text_other_topic_prob)
        if c.n_topics > 1:
            other_topic = (first[slot_object[other]] + 1
                           + rng.integers(0, c.n_topics - 1, int(other.sum()))) % c.n_topics
            words[other] = self.own_tags.sample(rng, other_topic)
        else:
            words[other] = self.global_tags.draw(rng, int(other.sum()))
        rest = ~own & ~other
        words[rest] = len(self.tag_strings) + self.noise_words.draw(rng, int(rest.sum()))
        # A pandas string column per chunk (Arrow-backed under pandas 3): compact, and the
        # Python strings of the chunk are freed at once.
        return pd.Series(np.array(_join_rows(self.text_vocabulary, words, lengths), dtype=object))

    # ------------------------------------------------------------------ all chunks
    def _categories(self, topics: np.ndarray) -> tuple[pd.DataFrame, np.ndarray, np.ndarray]:
        """The categories of the objects' topics ``[n_objects, 2]`` (second -1 if none).

        Returns:
            ``(object, category)`` rows, the mask of the categories in use, and each topic's
            category code (-1 when its category is unused).
        """
        c = self.config
        has_two = topics[:, 1] >= 0
        cat_object = np.concatenate([np.arange(c.n_objects), np.flatnonzero(has_two)])
        cat_code = self.topic_category[np.concatenate([topics[:, 0], topics[has_two, 1]])]
        cat_code, used_categories = _compress(cat_code, c.n_categories)
        categories = (pd.DataFrame({"object": cat_object, "category": cat_code})
                      .drop_duplicates().sort_values(["object", "category"], ignore_index=True)
                      .astype(np.int64))
        topic_category = np.where(used_categories[self.topic_category],
                                  np.cumsum(used_categories)[self.topic_category] - 1, -1)
        return categories, used_categories, topic_category

    def _tag_truth(self, tag_index: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Ground truth by tag code: each tag's topic, and the code of its base form (or -1)."""
        c = self.config
        base_index = np.concatenate([np.arange(c.n_base_tags), self.variant_base])[tag_index]
        code_of_index = np.full(len(self.tag_strings), -1, dtype=np.int64)
        code_of_index[tag_index] = np.arange(len(tag_index))
        base_of = np.where(tag_index >= c.n_base_tags, code_of_index[base_index], -1)
        return self.tag_topic[base_index], base_of

    def run(self, progress: bool) -> Folksonomy:
        """Generates every chunk and assembles the folksonomy."""
        c = self.config
        bounds = [*range(0, c.n_objects, c.chunk_size), c.n_objects]
        seeds = self.chunk_seed.spawn(len(bounds) - 1)
        chunks = [
            self._chunk(seeds[i], bounds[i], bounds[i + 1])
            for i in tqdm(range(len(bounds) - 1), desc=f"{c.name}: objects", unit="chunk",
                          disable=not progress)
        ]
        columns = {key: np.concatenate([chunk.pop(key) for chunk in chunks])
                   for key in ("user", "object", "tag", "timestamp", "topics")}
        texts = pd.DataFrame(index=pd.RangeIndex(c.n_objects))
        for field in ("title", "description"):
            texts[field] = pd.concat([chunk.pop(field) for chunk in chunks],
                                     ignore_index=True).array
        del chunks

        # Tag codes: rank of each tag string in the sorted vocabulary, then the used ones only.
        string_order = np.argsort(self.tag_strings.astype(str), kind="stable")
        rank = np.empty(len(string_order), dtype=np.int64)
        rank[string_order] = np.arange(len(string_order))
        tag, used_tags = _compress(rank[columns.pop("tag")], len(rank))
        tag_index = string_order[used_tags]  # generator index of each tag code
        user, used_users = _compress(columns.pop("user"), c.n_users)
        obj = columns.pop("object").astype(np.int64)
        time = columns.pop("timestamp")
        n_tags, n_users = int(used_tags.sum()), int(used_users.sum())

        order = _sort_key([user, obj, tag], [n_users, c.n_objects, n_tags])
        assignments = pd.DataFrame({"user": user[order], "object": obj[order],
                                    "tag": tag[order], "timestamp": time[order]})
        del user, obj, tag, time, order

        topics = columns.pop("topics").astype(np.int64)
        categories, used_categories, topic_category = self._categories(topics)
        tag_topic, base_of = self._tag_truth(tag_index)

        folksonomy = Folksonomy(
            assignments=assignments,
            users=np.flatnonzero(used_users).astype(object),
            objects=np.arange(c.n_objects).astype(object),
            tags=self.tag_strings[tag_index],
            texts=texts,
            categories=categories,
            category_names=self.category_names[used_categories],
            name=c.name,
            meta={
                "tag_topic": tag_topic.astype(np.int64),
                "tag_variant_of": base_of,
                "object_topics": topics,
                "topic_category": topic_category.astype(np.int64),
                "config": dataclasses.asdict(c),
            },
        )
        log.info("generated %r", folksonomy)
        return folksonomy


def scaled_config(n_objects: int) -> dict[str, int]:
    """Users, tags and topics that grow with the number of objects (for scale benchmarks).

    Example:
        >>> scaled_config(150_000)["n_tags"]
        7500
    """
    return {
        "n_objects": n_objects,
        "n_users": max(600, n_objects // 5),
        "n_tags": max(1500, n_objects // 20),
        "n_topics": max(30, n_objects // 10_000),
        "n_categories": 10,
    }


def _distinct_assignments(obj: np.ndarray, user: np.ndarray, tag: np.ndarray, time: np.ndarray,
                          sizes: list[int]) -> tuple[np.ndarray, ...]:
    """Distinct ``(object, user, tag)`` rows with their earliest time, sorted by object."""
    order = _sort_key([obj, user, tag], sizes)
    obj, user, tag, time = obj[order], user[order], tag[order], time[order]
    first_row = np.ones(len(obj), dtype=bool)
    first_row[1:] = (obj[1:] != obj[:-1]) | (user[1:] != user[:-1]) | (tag[1:] != tag[:-1])
    starts = np.flatnonzero(first_row)
    return obj[starts], user[starts], tag[starts], np.minimum.reduceat(time, starts)
