"""Posts taken by the service: journaled at once, applied to D in the background, in batches.

Applying posts mines D again (:meth:`TagRecommender.apply_posts`), which takes a fraction of a
second to seconds whatever the number of posts. :class:`PostQueue` decouples the two: a request
is checked, journaled (fsync) and acknowledged, and one background thread applies every post
waiting since its last pass in one mining pass, at most one pass every ``apply_interval``
seconds. A flood of posts therefore costs one mining pass per interval, not one per post, the
mining takes a bounded share of the CPU, and recommendations go on from the previous state
meanwhile (a post reaches recommendations once its batch is applied: ``pending_posts`` in
``GET /v1/info``).

Bounds (each refused request changes nothing):

- ``max_new_tags_per_request``: tags a request may add to the vocabulary
  (:class:`TooManyNewTagsError`, HTTP 413);
- ``max_new_tags``: tags the service may add to the vocabulary since it started (HTTP 422):
  every new tag grows the vocabulary, the display strings and the rule index for good;
- ``max_pending``: posts waiting to be applied (:class:`QueueFullError`, HTTP 503 with
  ``Retry-After``).

The journal is compacted while the service runs: once ``compact_after`` posts were journaled
since the last compaction, the background thread, after a mining pass, moves the journal
aside (:meth:`~tagtorch.serving.journal.Journal.rotate`, writers kept out for that moment;
the records of posts not applied yet are written again into the fresh journal) and writes the
data with every applied post (:func:`~tagtorch.serving.journal.compact_journal`) while new
posts go on into the fresh journal. The journal, and the time a start takes to replay it, stay
bounded however long the service runs. A mining pass that failed stops the compactions until
the next start (its posts are in the journal only), as does a compaction that cannot write (a
full disk, a file-size limit: logged in one line naming the file and what to do).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from tagtorch.errors import UnreadableFileError
from tagtorch.serving.journal import CompactionError, Journal, JournalWriteError

__all__ = ["PostQueue", "QueueFullError", "TakesPosts", "TooManyNewTagsError"]


class TakesPosts(Protocol):
    """What :class:`PostQueue` needs of a recommender (the tag and the personalized ones)."""

    journal: Journal | None

    def check_posts(self, posts: Sequence[Mapping[str, Any]]
                    ) -> tuple[list[dict[str, Any]], bytes]:
        """The checked posts and their journal record."""
        ...

    def new_tags(self, posts: Sequence[Mapping[str, Any]]) -> set[str]:
        """The normalized tags the vocabulary does not hold yet."""
        ...

    def journal_record(self, record: bytes) -> None:
        """Appends a record to the journal."""
        ...

    def apply_posts(self, posts: Sequence[Mapping[str, Any]]) -> None:
        """Applies checked, journaled posts."""
        ...

    def compact(self, rotate: bool = True) -> bool:
        """Writes the journaled posts into the folder's data."""
        ...

log = logging.getLogger(__name__)

_TOLD = (CompactionError, JournalWriteError, UnreadableFileError, OSError)
"""Errors whose one line says it all (the file, what went wrong): logged without a traceback."""


class TooManyNewTagsError(ValueError):
    """A request would add more new tags than one request may."""


class QueueFullError(RuntimeError):
    """Too many posts wait to be applied; the client should retry later."""


class PostQueue:
    """Takes posts for a served tag or personalized recommender (module docstring).

    Args:
        recommender: the recommender (its journal, when it has one, stores every batch).
        max_new_tags_per_request: most new tags in one request.
        max_new_tags: most new tags since the service started.
        max_pending: most posts waiting to be applied.
        apply_interval: fewest seconds from the start of one mining pass to the next.
        compact_after: posts journaled since the last compaction that start the next one.
    """

    def __init__(self, recommender: TakesPosts, max_new_tags_per_request: int = 1000,
                 max_new_tags: int = 100_000, max_pending: int = 100_000,
                 apply_interval: float = 1.0, compact_after: int = 10_000) -> None:
        for name, value in (("max_new_tags_per_request", max_new_tags_per_request),
                            ("max_new_tags", max_new_tags), ("max_pending", max_pending)):
            if value < 0:
                raise ValueError(f"{name} must be >= 0, got {value}")
        if compact_after < 1:
            raise ValueError(f"compact_after must be >= 1, got {compact_after}")
        self.recommender = recommender
        self.max_new_tags_per_request, self.max_new_tags = max_new_tags_per_request, max_new_tags
        self.max_pending, self.apply_interval = max_pending, apply_interval
        self.compact_after = compact_after
        self.compactions = 0
        self._admitted: set[str] = set()  # new tags taken since the start
        self._pending: list[dict[str, Any]] = []
        self._records: list[bytes] = []  # the journal records of the pending posts
        self._journaled = 0  # posts journaled since the last compaction
        self._failed = False  # a mining pass failed: its posts are in the journal only
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._applying = 0
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name="post-queue", daemon=True)
        self._thread.start()

    @property
    def pending(self) -> int:
        """Posts acknowledged and not yet applied."""
        with self._lock:
            return len(self._pending) + self._applying

    def submit(self, posts: Sequence[Mapping[str, Any]]) -> int:
        """Checks, journals and queues a batch; returns the number of posts.

        Raises:
            ValueError: a malformed post, or the service's limit of new tags reached.
            TooManyNewTagsError: more new tags than one request may add.
            QueueFullError: too many posts wait to be applied.
            JournalWriteError: the journal could not store the batch.
        """
        checked, record = self.recommender.check_posts(posts)
        with self._lock:
            if self._stopped:
                raise QueueFullError("the service is stopping")
            new = self.recommender.new_tags(checked) - self._admitted
            if len(new) > self.max_new_tags_per_request:
                raise TooManyNewTagsError(
                    f"{len(new):,} new tags in one request, more than the "
                    f"{self.max_new_tags_per_request:,} accepted (--max-new-tags-per-request)")
            if len(self._admitted) + len(new) > self.max_new_tags:
                raise ValueError(f"the service has taken {len(self._admitted):,} new tags and "
                                 f"takes at most {self.max_new_tags:,} (--max-new-tags); these "
                                 f"posts add {len(new):,} more")
            if len(self._pending) + self._applying + len(checked) > self.max_pending:
                raise QueueFullError(f"{len(self._pending) + self._applying:,} posts wait to "
                                     f"be applied (at most {self.max_pending:,}); retry later")
            self.recommender.journal_record(record)
            self._admitted |= new
            self._pending.extend(checked)
            self._records.append(record)
            self._journaled += len(checked)
            self._wake.notify()
        return len(checked)

    def wait(self, timeout: float = 60.0) -> bool:
        """Waits until every acknowledged post is applied; False if ``timeout`` ran out."""
        deadline = time.monotonic() + timeout
        while self.pending:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.01)
        return True

    def close(self) -> None:
        """Applies what is pending and stops the thread."""
        with self._lock:
            self._stopped = True
            self._wake.notify()
        self._thread.join()

    def _run(self) -> None:
        last = -float("inf")
        while True:
            with self._lock:
                while not self._stopped and (not self._pending or time.monotonic() < last
                                             + self.apply_interval):
                    self._wake.wait(None if not self._pending else
                                    last + self.apply_interval - time.monotonic())
                if not self._pending:
                    return
                batch, self._pending, self._records = self._pending, [], []
                self._applying = len(batch)
            start = time.perf_counter()
            last = time.monotonic()
            try:
                self.recommender.apply_posts(batch)
            except Exception:  # journaled: the next start replays them
                self._failed = True
                log.exception("applying %d journaled posts failed; they are kept in the "
                              "journal", len(batch))
            log.info("%d posts applied in %.2f s", len(batch), time.perf_counter() - start)
            with self._lock:
                self._applying = 0
                rotated = self._rotate_when_due()
            if rotated:
                self._compact()

    def _rotate_when_due(self) -> bool:
        """Moves the journal aside once ``compact_after`` posts were journaled (lock held)."""
        journal = self.recommender.journal
        if journal is None or self._failed or self._journaled < self.compact_after:
            return False
        try:
            journal.rotate(self._records)  # the posts not applied yet stay in the journal
        except Exception as error:  # a segment holds them: the next start replays it
            self._failed = True
            log.error("moving the journal aside failed; it is compacted at the next start: %s",
                      error, exc_info=not isinstance(error, _TOLD))
            return False
        self._journaled = len(self._pending)
        return True

    def _compact(self) -> None:
        """Writes the data with every applied post (the journal moved aside by the caller)."""
        start = time.perf_counter()
        try:
            self.recommender.compact(rotate=False)
        except Exception as error:  # the segments hold the posts: the next start compacts them
            self._failed = True
            log.error("compacting the journal failed: %s", error,
                      exc_info=not isinstance(error, _TOLD))
            return
        self.compactions += 1
        log.info("the journal compacted into the data in %.2f s", time.perf_counter() - start)
