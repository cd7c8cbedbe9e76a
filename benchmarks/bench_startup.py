"""Benchmark of start-up: ``python -m tagtorch.serve`` until it answers, and a Dask worker's
first task, with numba's kernel cache cold (every kernel compiled, as before the kernels were
cached) and warm (kernels read from the cache), side by side in one run.

numba keeps compiled kernels beside the code (``tagtorch/**/__pycache__/*.nbi|*.nbc``, or its
user cache folder where the package is read-only); ``NUMBA_CACHE_DIR`` moves them. Each "cold"
start gets a new, empty ``NUMBA_CACHE_DIR``; each "warm" start shares one that a first start
filled. Both start fresh processes, so the difference is the kernels' compile time.

- serve: fits a small LATRE+wTS artifact on the synthetic generator, then times
  ``start_service`` (process start, imports, loading, warm-up, until ``GET /health`` answers).
- dask: a ``LocalCluster`` of one worker process; the first task builds LATRE candidates for
  30 objects of a synthetic folksonomy (the rule-mining kernels), timed from submission.

Usage::

    python benchmarks/bench_startup.py --repeats 3
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any


def say(text: str = "") -> None:
    print(text, flush=True)


def fit_artifact(folder: Path) -> Path:
    """A LATRE+wTS recommender of a small synthetic folksonomy, saved under ``folder``."""
    from tagtorch.candidates.latre import LatreCandidates
    from tagtorch.data.synthetic import generate_folksonomy
    from tagtorch.data.text import TextProcessor
    from tagtorch.rankers.latre import LatreWTS
    from tagtorch.serving.tags import TagRecommender, display_names

    raw = generate_folksonomy(n_objects=400, seed=3)
    processor = TextProcessor(cache=False)
    folksonomy = processor.apply(raw)
    recommender = TagRecommender.fit(folksonomy, processor, LatreCandidates(), LatreWTS(),
                                     display=display_names(raw, processor, folksonomy))
    path = folder / "artifact"
    recommender.save(path)
    return path


def serve_start(artifact: Path) -> float:
    """Seconds from ``python -m tagtorch.serve`` to its first ``GET /health`` answer."""
    from tagtorch.serve import start_service

    start = time.perf_counter()
    process, _ = start_service(artifact, timeout=300)
    seconds = time.perf_counter() - start
    process.terminate()
    process.wait(timeout=30)
    return seconds


def candidate_task() -> float:
    """A worker's task: LATRE candidates of 30 objects (seconds inside the task)."""
    import numpy as np

    from tagtorch.candidates.latre import LatreCandidates
    from tagtorch.data.splits import TagQueries, tag_recommendation_folds
    from tagtorch.data.synthetic import generate_folksonomy
    from tagtorch.data.terms import TermIndex
    from tagtorch.data.text import TextProcessor

    start = time.perf_counter()
    folksonomy = TextProcessor(cache=False).apply(generate_folksonomy(n_objects=400, seed=3))
    terms = TermIndex.from_folksonomy(folksonomy)
    fold = tag_recommendation_folds(folksonomy, seed=0)[0]
    rows = np.arange(30)
    queries = TagQueries(fold.test.objects[rows], fold.test.input_tags.take(rows),
                         fold.test.gold_tags.take(rows))
    LatreCandidates(device="cpu").fit(fold.train_objects, fold.train_tags, terms)(queries)
    return time.perf_counter() - start


def dask_first_task() -> float:
    """Seconds from submitting the first task to a new one-worker cluster to its result."""
    from dask.distributed import Client, LocalCluster

    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        client.wait_for_workers(1)
        start = time.perf_counter()
        client.submit(candidate_task, pure=False).result()
        return time.perf_counter() - start


def timed(measure: Any, cache: str | None) -> float:
    """One measurement with ``NUMBA_CACHE_DIR`` set for the processes it starts."""
    previous = os.environ.get("NUMBA_CACHE_DIR")
    with tempfile.TemporaryDirectory(prefix="numba_cold_") as cold:
        os.environ["NUMBA_CACHE_DIR"] = cache or cold
        try:
            return measure()
        finally:
            if previous is None:
                del os.environ["NUMBA_CACHE_DIR"]
            else:
                os.environ["NUMBA_CACHE_DIR"] = previous


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench_startup_") as folder:
        artifact = fit_artifact(Path(folder))
        for name, measure in (("serve start", lambda: serve_start(artifact)),
                              ("dask first task", dask_first_task)):
            warm_cache = str(Path(folder) / f"numba_warm_{len(rows)}")
            timed(measure, warm_cache)  # fills the warm cache
            cold = [timed(measure, None) for _ in range(args.repeats)]
            warm = [timed(measure, warm_cache) for _ in range(args.repeats)]
            rows.append((name, statistics.median(cold), statistics.median(warm)))
            say(f"{name}: cold {[round(s, 2) for s in cold]} s, "
                f"warm {[round(s, 2) for s in warm]} s")
    say()
    say(f"{'start':<16} {'cold cache s':>13} {'warm cache s':>13} {'saved s':>8} {'ratio':>6}")
    for name, cold_s, warm_s in rows:
        say(f"{name:<16} {cold_s:>13.2f} {warm_s:>13.2f} {cold_s - warm_s:>8.2f} "
            f"{cold_s / warm_s:>5.2f}x")
    say(f"(medians of {args.repeats}; cold: an empty NUMBA_CACHE_DIR per start, as before the "
        "kernels were cached)")


if __name__ == "__main__":
    main()
