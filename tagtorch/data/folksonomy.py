"""The folksonomy table: tag assignments, object texts and object categories with integer ids.

A folksonomy is a set of tag assignments ``(user, object, tag, timestamp)`` (Hotho et al. 2006),
plus, for tag recommendation as in Canuto et al. (JIDM 2013), the other textual features of each
object (title, description, ...) and, for the xTReD diversifier, the objects' categories.
Every entity gets a contiguous integer id; the raw ids and tag strings are kept as vocabularies.
"""

from __future__ import annotations

import hashlib
import logging
import re
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd

from tagtorch.data.ragged import Ragged

log = logging.getLogger(__name__)

#: Timestamp stored for assignments whose source gives no time.
MISSING_TIME = -1

ASSIGNMENT_COLUMNS = ("user", "object", "tag", "timestamp")

SOURCE_ORDER = "source_order"
"""The optional assignment column of a source whose line order means something (TagRec's
files: its programs process lines in file order): each assignment's place in the source, line
by line and within a line in its order (a repeated assignment: its first place)."""


CONTROL_CHARACTERS = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")
"""Characters no tag keeps (C0 and C1 control characters, DEL, Unicode's line and paragraph
separators): real folksonomies hold them (MovieLens-20M's tags.csv has U+008F), and each one
becomes :data:`REPLACEMENT`, so no file tagtorch writes (TagRec's lines, TREC and LETOR files)
and no line it serves can be broken by a tag."""
REPLACEMENT = "\ufffd"
"""What a control character or line separator in a tag becomes (Unicode's replacement character)."""


def replace_controls(texts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    r"""``texts`` (distinct strings) with :data:`CONTROL_CHARACTERS` replaced, and which changed.

    Example:
        >>> cleaned, changed = replace_controls(np.array(["rock", "sci\x8ffi"], dtype=object))
        >>> cleaned.tolist() == ["rock", "sci\ufffdfi"], changed.tolist()
        (True, [False, True])
    """
    cleaned = np.asarray(texts, dtype=object).copy()
    changed = np.zeros(len(cleaned), dtype=bool)
    for i, text in enumerate(cleaned.tolist()):
        if CONTROL_CHARACTERS.search(text):
            cleaned[i], changed[i] = CONTROL_CHARACTERS.sub(REPLACEMENT, text).strip(), True
    return cleaned, changed


def _category_table(categories: pd.DataFrame | None,
                    object_index: pd.Index) -> tuple[np.ndarray, pd.DataFrame]:
    """The category names and the ``object, category`` codes of the known objects."""
    if categories is None or not len(categories):
        return np.zeros(0, dtype=object), pd.DataFrame(
            {"object": np.zeros(0, np.int64), "category": np.zeros(0, np.int64)})
    cat_frame = categories.loc[categories["object"].isin(object_index)]
    cat, category_names = _encode(cat_frame["category"].astype(str))
    table = pd.DataFrame({"object": object_index.get_indexer(cat_frame["object"]),
                          "category": cat})
    if "weight" in cat_frame:  # e.g. TagRec's name_weight categories
        table["weight"] = pd.to_numeric(cat_frame["weight"], errors="coerce").to_numpy(
            dtype=np.float64)
    # in object order (each object's categories as given): a canonical table, whatever the
    # order of the source's rows
    table = table.drop_duplicates(["object", "category"], ignore_index=True)
    return category_names, table.sort_values("object", kind="stable", ignore_index=True)


def _encode(values: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """Contiguous codes in first-seen-sorted order: returns ``(codes, vocabulary)``."""
    codes, uniques = pd.factorize(values, sort=True)
    return codes.astype(np.int64), np.asarray(uniques, dtype=object)


@dataclass(frozen=True)
class Folksonomy:
    """Tag assignments with contiguous integer ids, per-object texts and categories.

    Attributes:
        assignments: one row per assignment; int64 columns ``user``, ``object``, ``tag``
            (codes into the vocabularies below) and ``timestamp`` (Unix seconds,
            :data:`MISSING_TIME` where unknown), and :data:`SOURCE_ORDER` where the source's
            order matters (TagRec's files). No duplicate ``(user, object, tag)`` rows.
        users: raw user id of each user code.
        objects: raw object id of each object code.
        tags: tag string of each tag code.
        texts: one row per object code (index ``0..n_objects-1``), one string column per text
            field (``title``, ``description``, ...); missing text is the empty string.
        categories: ``object`` and ``category`` int64 codes, one row per (object, category),
            and a float64 ``weight`` where the source gives one (TagRec's ``name_weight``
            categories; NaN for a category without a weight). The weights are kept and
            written back; the diversity code reads the categories as unweighted sets.
        category_names: name of each category code.
        name: dataset name used in logs and reports.
        profiles: object interactions other than tags (ours; e.g. Last.fm's listening counts):
            ``object`` and ``key`` int64 codes and a float64 ``weight``, one row per
            (object, key); empty for most datasets. Object metadata, like the texts.
        meta: free-form facts from the source, indexed by the codes above (e.g. the synthetic
            generator's ground truth); transforms that re-code tags or objects drop it.
        test_posts: the posts a given split marks as test (``user`` and ``object`` int64
            codes; e.g. the lines of TagRec's ``X_test.txt``), for ``task.split=given``;
            empty when the source gives no split. Kept through every transform.
        untagged_posts: the posts the source holds without a tag (TagRec's lines with an
            empty tag field, which TagRec keeps, counts and scores): ``user``, ``object`` and
            ``timestamp`` int64, and :data:`SOURCE_ORDER` where the source's order matters;
            one row per (user, object) without an assignment. Their users and objects have
            codes. Empty for most sources.
    """

    assignments: pd.DataFrame
    users: np.ndarray
    objects: np.ndarray
    tags: np.ndarray
    texts: pd.DataFrame
    categories: pd.DataFrame
    category_names: np.ndarray
    name: str = "folksonomy"
    meta: Mapping[str, Any] = field(default_factory=dict)
    profiles: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(
        {"object": np.zeros(0, np.int64), "key": np.zeros(0, np.int64),
         "weight": np.zeros(0, np.float64)}))
    test_posts: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(
        {"user": np.zeros(0, np.int64), "object": np.zeros(0, np.int64)}))
    untagged_posts: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(
        {c: np.zeros(0, np.int64) for c in ("user", "object", "timestamp")}))

    @classmethod
    def from_frame(
        cls,
        assignments: pd.DataFrame,
        texts: pd.DataFrame | None = None,
        categories: pd.DataFrame | None = None,
        name: str = "folksonomy",
        profiles: pd.DataFrame | None = None,
        test_posts: pd.DataFrame | None = None,
        untagged_posts: pd.DataFrame | None = None,
    ) -> Folksonomy:
        """Builds a folksonomy from raw ids.

        Args:
            assignments: columns ``user``, ``object``, ``tag`` (raw ids and tag strings) and
                optionally ``timestamp`` (Unix seconds). Rows with a missing value or an empty
                tag are dropped; duplicate ``(user, object, tag)`` rows keep the earliest time.
            texts: indexed by raw object id, one string column per text field. Objects
                without assignments are ignored.
            categories: columns ``object`` (raw id), ``category`` (name) and optionally
                ``weight`` (a number; a repeated (object, category) keeps the first).
            name: dataset name.
            profiles: columns ``object`` (raw id), ``key`` (raw id) and ``weight`` (a number):
                the objects' other interactions (see the attribute). Objects without
                assignments and rows with a missing or non-positive weight are ignored; a
                repeated (object, key) keeps its summed weight.
            test_posts: columns ``user`` and ``object`` (raw ids): the posts a given split
                marks as test; pairs without an assignment or untagged post are ignored.
            untagged_posts: columns ``user``, ``object`` (raw ids), optionally ``timestamp``
                and :data:`SOURCE_ORDER`: posts without a tag (see the attribute); a pair that
                also has an assignment is left out (the tagged post stands for both).

        Returns:
            The folksonomy with contiguous ids (sorted raw ids and tag strings).

        Raises:
            ValueError: if a required column is missing or nothing is left.
        """
        missing = {"user", "object", "tag"} - set(assignments.columns)
        if missing:
            raise ValueError(f"{name}: assignments lack the column(s) {sorted(missing)}")
        frame = _assignment_frame(assignments, name)
        bare = _untagged_frame(untagged_posts)
        user, users = _encode(_with_untagged(frame["user"], bare["user"]))
        obj, objects = _encode(_with_untagged(frame["object"], bare["object"]))
        tag, tags = _clean_tags(*_encode(frame["tag"].astype(object)), name)
        table = pd.DataFrame(
            {"user": user[:len(frame)], "object": obj[:len(frame)], "tag": tag,
             "timestamp": frame["timestamp"].to_numpy()}
        )
        if SOURCE_ORDER in frame:
            table[SOURCE_ORDER] = frame[SOURCE_ORDER].to_numpy(np.int64)
        object_index = pd.Index(objects)
        text_frame = pd.DataFrame(index=pd.RangeIndex(len(objects)))
        if texts is not None:
            aligned = texts[~texts.index.duplicated()].reindex(object_index)
            for column in aligned.columns:
                text_frame[str(column)] = aligned[column].fillna("").astype(str).to_numpy()
        category_names, cat_table = _category_table(categories, object_index)
        extra = {}
        if profiles is not None and len(profiles):
            extra["profiles"] = _profile_table(profiles, object_index)
        untagged = _untagged_codes(bare, user[len(frame):], obj[len(frame):], table)
        if len(untagged):
            extra["untagged_posts"] = untagged
        if test_posts is not None and len(test_posts):
            known = pd.concat([table[["user", "object"]], untagged[["user", "object"]]])
            extra["test_posts"] = _post_codes(test_posts, pd.Index(users), object_index, known)
        return cls(
            assignments=_deduplicate(table),
            users=users,
            objects=objects,
            tags=tags,
            texts=text_frame,
            categories=cat_table,
            category_names=category_names,
            name=name,
            **extra,
        )

    # ------------------------------------------------------------------ sizes
    @property
    def n_users(self) -> int:
        """Number of user codes."""
        return len(self.users)

    @property
    def n_objects(self) -> int:
        """Number of object codes."""
        return len(self.objects)

    @property
    def n_tags(self) -> int:
        """Number of tag codes."""
        return len(self.tags)

    @property
    def n_assignments(self) -> int:
        """Number of (user, object, tag) assignments."""
        return len(self.assignments)

    @property
    def text_fields(self) -> list[str]:
        """Names of the per-object text fields."""
        return list(self.texts.columns)

    # ------------------------------------------------------------ identity
    def fingerprint(self) -> str:
        """A stable SHA-256 hex digest of the folksonomy's content, the key of every cache.

        It covers the assignments (user, object and tag codes and timestamps, in row order),
        the vocabularies those codes name (raw user ids, raw object ids, tag strings), the text
        fields (names and every object's strings), the categories (the (object, category)
        rows and the category names), and the profiles, test posts and untagged posts, when
        there are any; not the dataset's ``name`` (a label for logs) nor ``meta`` (free-form
        source facts). Equal digests mean equal content: the candidate cache, the text cache
        and the evaluation's run pieces key their entries by it; the digest is the same in every
        process and on every run (pandas' value hashing with its fixed key, never Python's
        salted ``hash``). It is computed once per object (transforms return new ones).

        Example:
            >>> frame = pd.DataFrame({"user": ["u", "u"], "object": ["a", "b"],
            ...                       "tag": ["rock", "pop"]})
            >>> one = Folksonomy.from_frame(frame, name="one")
            >>> one.fingerprint() == Folksonomy.from_frame(frame, name="two").fingerprint()
            True
            >>> one.fingerprint() == one.with_tags(np.array(["pop", "jazz"])).fingerprint()
            False
        """
        cached = self.__dict__.get("_fingerprint")
        if cached is not None:
            return cached
        digest = hashlib.sha256()

        def part(label: str, hashes: np.ndarray) -> None:
            # the label and the length separate the parts (no two contents give one stream)
            digest.update(f"{label}:{len(hashes)};".encode())
            digest.update(np.ascontiguousarray(hashes, dtype=np.uint64).tobytes())

        def table(label: str, frame: pd.DataFrame) -> None:
            digest.update(f"{label} columns {list(map(str, frame.columns))!r};".encode())
            part(label, pd.util.hash_pandas_object(frame, index=False).to_numpy())

        def strings(label: str, values: np.ndarray) -> None:
            part(label, pd.util.hash_array(np.asarray(values, dtype=object).astype(str)
                                           .astype(object)))

        table("assignments", self.assignments[list(ASSIGNMENT_COLUMNS)])
        if SOURCE_ORDER in self.assignments:  # absent: the digests of earlier versions
            table("source_order", self.assignments[[SOURCE_ORDER]])
        strings("users", self.users)
        strings("objects", self.objects)
        strings("tags", self.tags)
        table("texts", self.texts)
        weighted = "weight" in self.categories  # unweighted: the digests of earlier versions
        table("categories", self.categories[["object", "category",
                                             *(["weight"] if weighted else [])]])
        strings("category_names", self.category_names)
        if len(self.profiles):  # absent profiles leave the digests of earlier versions
            table("profiles", self.profiles[["object", "key", "weight"]])
        if len(self.test_posts):  # likewise an absent split
            table("test_posts", self.test_posts[["user", "object"]])
        if len(self.untagged_posts):  # and absent untagged posts
            table("untagged_posts", self.untagged_posts)
        value = digest.hexdigest()
        self.__dict__["_fingerprint"] = value  # frozen dataclass: memoized beside the fields
        return value

    # ------------------------------------------------------------------ views
    def is_test_post(self, users: np.ndarray, objects: np.ndarray) -> np.ndarray:
        """Whether each ``(users[i], objects[i])`` is a post the source marked as test."""
        n = np.int64(self.n_objects)
        marked = self.test_posts["user"].to_numpy() * n + self.test_posts["object"].to_numpy()
        return np.isin(np.asarray(users) * n + np.asarray(objects), marked)

    def object_tags(self) -> Ragged:
        """Distinct tags of every object, ascending: a ragged ``[n_objects]`` of tag codes."""
        pairs = self.assignments[["object", "tag"]].drop_duplicates().sort_values(["object", "tag"])
        return Ragged.from_groups(pairs["object"].to_numpy(), pairs["tag"].to_numpy(),
                                  self.n_objects)

    # ------------------------------------------------------------ transforms
    def with_tags(self, tag_strings: np.ndarray) -> Folksonomy:
        """Renames every tag code ``i`` to ``tag_strings[i]`` and merges equal names.

        Tags renamed to the empty string are dropped with their assignments. Used to apply
        text normalization (stemming) to tags, so that "Rock" and "rocks" become one tag.
        """
        tag_strings = np.asarray(tag_strings, dtype=object)
        if len(tag_strings) != self.n_tags:
            raise ValueError(f"expected {self.n_tags} tag strings, got {len(tag_strings)}")
        named = tag_strings != ""
        new_code, new_tags = _encode(pd.Series(tag_strings[named]))
        code_map = np.full(self.n_tags, -1, dtype=np.int64)
        code_map[named] = new_code
        table = self.assignments.assign(tag=code_map[self.assignments["tag"].to_numpy()])
        table = table[table["tag"] >= 0]
        merged = _deduplicate(table)
        dropped = self.n_assignments - len(merged)
        if dropped:
            log.info("%s: %d tags became %d; %d assignments merged or dropped",
                     self.name, self.n_tags, len(new_tags), dropped)
        return replace(self, assignments=merged, tags=new_tags, meta={})

    def with_texts(self, texts: pd.DataFrame) -> Folksonomy:
        """Returns a copy with the given per-object text frame (same row count)."""
        if len(texts) != self.n_objects:
            raise ValueError(f"expected {self.n_objects} text rows, got {len(texts)}")
        return replace(self, texts=texts.reset_index(drop=True))

    def select(self, assignment_mask: np.ndarray) -> Folksonomy:
        """Keeps the masked assignments and re-codes users, objects and tags contiguously.

        Untagged posts and test posts are kept where their user and object keep an assignment.
        """
        table = self.assignments[np.asarray(assignment_mask, dtype=bool)]
        users, user_code = np.unique(table["user"].to_numpy(), return_inverse=True)
        objects, object_code = np.unique(table["object"].to_numpy(), return_inverse=True)
        tags, tag_code = np.unique(table["tag"].to_numpy(), return_inverse=True)
        new = pd.DataFrame({"user": user_code, "object": object_code, "tag": tag_code,
                            "timestamp": table["timestamp"].to_numpy(),
                            **({SOURCE_ORDER: table[SOURCE_ORDER].to_numpy()}
                               if SOURCE_ORDER in table else {})}).astype(np.int64)
        cats = self.categories[self.categories["object"].isin(objects)]
        cats = cats.assign(object=np.searchsorted(objects, cats["object"].to_numpy())
                           ).reset_index(drop=True)
        kept = self.profiles[self.profiles["object"].isin(objects)]
        profiles = kept.assign(object=np.searchsorted(objects, kept["object"].to_numpy()))
        posts = self.test_posts[self.test_posts["user"].isin(users)
                                & self.test_posts["object"].isin(objects)]
        posts = pd.DataFrame({"user": np.searchsorted(users, posts["user"].to_numpy()),
                              "object": np.searchsorted(objects, posts["object"].to_numpy())})
        bare = self.untagged_posts
        bare = bare[np.isin(bare["user"], users) & np.isin(bare["object"], objects)]
        bare = bare.assign(user=np.searchsorted(users, bare["user"].to_numpy()),
                           object=np.searchsorted(objects, bare["object"].to_numpy()))
        kept_posts = posts.merge(pd.concat([new[["user", "object"]], bare[["user", "object"]]])
                                 .drop_duplicates(), how="inner")
        return replace(
            self,
            assignments=new,
            users=self.users[users],
            objects=self.objects[objects],
            tags=self.tags[tags],
            texts=self.texts.iloc[objects].reset_index(drop=True),
            categories=cats,
            profiles=profiles.reset_index(drop=True),
            test_posts=kept_posts.astype(np.int64),
            untagged_posts=bare.reset_index(drop=True),
            meta={},
        )

    def describe(self) -> dict[str, float]:
        """Dataset statistics: sizes, tags per object, objects with at least two tags."""
        per_object = self.object_tags().lengths
        per_object = per_object[per_object > 0]
        return {
            "users": self.n_users,
            "objects": self.n_objects,
            "tags": self.n_tags,
            "assignments": self.n_assignments,
            "categories": len(self.category_names),
            "tags_per_object_mean": float(per_object.mean()) if len(per_object) else 0.0,
            "tags_per_object_median": float(np.median(per_object)) if len(per_object) else 0.0,
            "tags_per_object_max": int(per_object.max()) if len(per_object) else 0,
            "objects_with_1_tag": int((per_object == 1).sum()),
            "objects_with_2plus_tags": int((per_object >= 2).sum()),
        }

    def __repr__(self) -> str:
        return (f"Folksonomy(name={self.name!r}, users={self.n_users}, objects={self.n_objects}, "
                f"tags={self.n_tags}, assignments={self.n_assignments}, "
                f"text_fields={self.text_fields}, categories={len(self.category_names)})")


def _profile_table(profiles: pd.DataFrame, object_index: pd.Index) -> pd.DataFrame:
    """The ``object, key, weight`` codes of raw-id profiles.

    Only known objects and weights > 0 are kept; a repeated (object, key) is summed.
    """
    rows = profiles.assign(weight=pd.to_numeric(profiles["weight"], errors="coerce"))
    rows = rows[rows["object"].isin(object_index) & (rows["weight"] > 0)]
    key, _ = _encode(rows["key"].astype(str))
    return pd.DataFrame({"object": object_index.get_indexer(rows["object"]), "key": key,
                         "weight": rows["weight"].to_numpy(dtype=np.float64)}) \
        .groupby(["object", "key"], as_index=False)["weight"].sum()


def _assignment_frame(assignments: pd.DataFrame, name: str) -> pd.DataFrame:
    """The raw-id assignments with a user, an object and a tag (trimmed), times as integers.

    Raises:
        ValueError: none is left.
    """
    frame = assignments.loc[:, [c for c in (*ASSIGNMENT_COLUMNS, SOURCE_ORDER)
                                if c in assignments]].copy()
    if "timestamp" not in frame:
        frame["timestamp"] = MISSING_TIME
    frame["tag"] = frame["tag"].astype("string").str.strip()
    ok = frame[["user", "object", "tag"]].notna().all(axis=1) & (frame["tag"] != "")
    if (~ok).any():
        log.info("%s: dropped %d assignments with a missing user, object or tag",
                 name, int((~ok).sum()))
    frame = frame[ok]
    if frame.empty:
        raise ValueError(f"{name}: no tag assignments")
    frame["timestamp"] = (
        pd.to_numeric(frame["timestamp"], errors="coerce").fillna(MISSING_TIME).astype(np.int64)
    )
    return frame


def _clean_tags(tag: np.ndarray, tags: np.ndarray, name: str) -> tuple[np.ndarray, np.ndarray]:
    """The codes and vocabulary with :func:`replace_controls` applied, one warning if any."""
    cleaned, changed = replace_controls(tags)
    if not changed.any():
        return tag, tags
    rows = int(np.isin(tag, np.flatnonzero(changed)).sum())
    warnings.warn(f"{name}: {rows} tag assignment(s) hold control characters or line "
                  f"separators, replaced with U+FFFD", stacklevel=3)
    return _encode(pd.Series(cleaned[tag]))


def _with_untagged(ids: pd.Series, untagged: pd.Series) -> pd.Series:
    """The assignments' raw ids, then the untagged posts' (none: the ids as they are)."""
    return pd.concat([ids, untagged], ignore_index=True) if len(untagged) else ids


def _untagged_frame(posts: pd.DataFrame | None) -> pd.DataFrame:
    """Raw-id untagged posts with a user and an object, a ``timestamp`` column filled in."""
    if posts is None or not len(posts):
        return pd.DataFrame({"user": [], "object": [], "timestamp": []})
    columns = [c for c in ("user", "object", "timestamp", SOURCE_ORDER) if c in posts]
    frame = posts.loc[posts[["user", "object"]].notna().all(axis=1), columns]
    stamps = frame["timestamp"] if "timestamp" in frame else pd.Series(MISSING_TIME,
                                                                      index=frame.index)
    return frame.assign(timestamp=pd.to_numeric(stamps, errors="coerce").fillna(MISSING_TIME))


def _untagged_codes(bare: pd.DataFrame, user: np.ndarray, obj: np.ndarray,
                    table: pd.DataFrame) -> pd.DataFrame:
    """The untagged posts' codes: one per (user, object) without an assignment.

    A repeated pair keeps its earliest known time and its first place.
    """
    if not len(bare):
        return pd.DataFrame({c: np.zeros(0, np.int64) for c in ("user", "object", "timestamp")})
    codes = pd.DataFrame({"user": user, "object": obj,
                          "timestamp": bare["timestamp"].to_numpy(np.int64),
                          **({SOURCE_ORDER: bare[SOURCE_ORDER].to_numpy(np.int64)}
                             if SOURCE_ORDER in bare else {})})
    codes = codes.merge(table[["user", "object"]].drop_duplicates(), how="left",
                        indicator=True)
    codes = codes[codes.pop("_merge") == "left_only"]
    known = codes["timestamp"].where(codes["timestamp"] != MISSING_TIME, np.iinfo(np.int64).max)
    merged = codes.assign(timestamp=known).groupby(["user", "object"], as_index=False).min()
    merged.loc[merged["timestamp"] == np.iinfo(np.int64).max, "timestamp"] = MISSING_TIME
    return merged.astype(np.int64)


def _post_codes(posts: pd.DataFrame, user_index: pd.Index, object_index: pd.Index,
                table: pd.DataFrame) -> pd.DataFrame:
    """The ``(user, object)`` codes of raw-id posts that are in ``table``, sorted, unique."""
    codes = pd.DataFrame({"user": user_index.get_indexer(posts["user"]),
                          "object": object_index.get_indexer(posts["object"])})
    codes = codes[(codes >= 0).all(axis=1)].drop_duplicates()
    present = codes.merge(table[["user", "object"]].drop_duplicates(), how="inner")
    return present.sort_values(["user", "object"], ignore_index=True).astype(np.int64)


def _deduplicate(table: pd.DataFrame) -> pd.DataFrame:
    """Drops duplicate ``(user, object, tag)`` rows: the earliest known time, the first place."""
    known = table["timestamp"].where(table["timestamp"] != MISSING_TIME, np.iinfo(np.int64).max)
    order = np.lexsort((known.to_numpy(), table["tag"].to_numpy(), table["object"].to_numpy(),
                        table["user"].to_numpy()))
    table = table.iloc[order]
    if SOURCE_ORDER in table:
        first = table.groupby(["user", "object", "tag"], sort=False)[SOURCE_ORDER]
        table = table.assign(**{SOURCE_ORDER: first.transform("min").to_numpy()})
    table = table[~table.duplicated(["user", "object", "tag"])]
    return table.reset_index(drop=True).astype(np.int64)
