"""Scale-out benchmark: one split's LATRE candidates, serial against tasks on a local Dask cluster.

On a synthetic folksonomy of ``--objects`` objects (default 1,000,000; the generator's
``scaled_config``), fold 0 of the D/V/T protocol: the generator
(:class:`tagtorch.candidates.latre.LatreCandidates`, default settings) is fitted on D, then the
candidate sets of T are generated

- **serial**: one call, ``generator(T)``, in one process;
- **cluster**: :func:`tagtorch.candidates.generator.generate_in_tasks` with ``--task-objects``
  objects per task on a local Dask cluster of ``--workers`` worker processes (one thread each),
  through :func:`tagtorch.engines.joblib_engine`; the driver ships the fitted generator to the
  workers and assembles their blocks.

Each mode runs in its own subprocess that synthesizes the data and fits the generator anew (the
same seeds), so that its peak memory (``ru_maxrss``) is its own; the workers' peaks are read from
the workers before the cluster closes. Printed per mode: the fit time, the generation wall time,
objects/s, the warm-up call before (a few chunks: compiling the numba kernels in each process,
and shipping the generator to the workers), the peak resident memory of the driver and of
every worker, and a SHA-256 of every field of the candidate set; the closing table says whether
the cluster's candidate sets are identical to the serial ones and the speed-up.

The workers run without Dask's memory limit (``memory_limit=0``): a limit below a worker's
peak would pause or restart it, and the point is to measure the peak.

Usage::

    python benchmarks/bench_scaleout.py                     # 1,000,000 objects, 2 workers
    python benchmarks/bench_scaleout.py --objects 100000 --task-objects 8192
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any


def peak_mb() -> float:
    """Peak resident memory of the calling process so far, in MB.

    Linux's ``VmHWM`` (the high-water mark of this process's own memory map), not
    ``ru_maxrss``: a Dask worker is forked from the driver, and its ``ru_maxrss`` starts at the
    driver's peak at the fork, which would hide the worker's own.
    """
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024  # kB
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def fingerprint(candidates: Any) -> str:
    """SHA-256 over every tensor field of a candidate set (shape, dtype and bytes)."""
    import torch

    digest = hashlib.sha256()
    for field in dataclasses.fields(candidates):
        value = getattr(candidates, field.name)
        if isinstance(value, torch.Tensor):
            digest.update(f"{field.name}{tuple(value.shape)}{value.dtype}".encode())
            digest.update(value.contiguous().numpy().tobytes())
        else:
            digest.update(repr(value).encode())
    return digest.hexdigest()


def run_one(mode: str, args: argparse.Namespace) -> dict[str, Any]:
    """Synthesizes, fits on fold 0's D and generates T's candidates in ``mode``."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout
    import numpy as np
    import torch
    from joblib import Parallel

    from tagtorch.candidates.generator import generate_in_tasks
    from tagtorch.candidates.latre import LatreCandidates
    from tagtorch.data.splits import tag_recommendation_folds
    from tagtorch.data.synthetic import generate_folksonomy, scaled_config
    from tagtorch.data.terms import TermIndex
    from tagtorch.data.text import TextProcessor
    from tagtorch.engines import joblib_engine

    torch.set_num_threads(1)  # the serial run and each worker: one core each
    start = time.perf_counter()
    folksonomy = TextProcessor(cache=False).apply(
        generate_folksonomy(**scaled_config(args.objects), seed=args.seed, progress=False))
    fold = tag_recommendation_folds(folksonomy, seed=args.seed)[0]
    terms = TermIndex.from_folksonomy(folksonomy)
    data_seconds = time.perf_counter() - start
    start = time.perf_counter()
    generator = LatreCandidates(device="cpu").fit(fold.train_objects, fold.train_tags, terms)
    fit_seconds = time.perf_counter() - start
    before_mb = peak_mb()
    workers: dict[str, float] = {}
    # warm-up: the first call in a process compiles the numba kernels (a worker: each worker)
    warm = fold.test.take(np.arange(min(len(fold.test), 4 * args.workers * generator.chunk_size)))
    if mode == "serial":
        start = time.perf_counter()
        generator(warm)
        warm_seconds = time.perf_counter() - start
        start = time.perf_counter()
        candidates = generator(fold.test)
        seconds = time.perf_counter() - start
    else:
        from distributed import Client, LocalCluster

        with LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True,
                          dashboard_address=None, memory_limit=0) as cluster, \
                Client(cluster) as client:
            client.run(torch.set_num_threads, 1)
            with joblib_engine("dask", address=cluster.scheduler_address):
                start = time.perf_counter()
                generate_in_tasks(generator, warm, generator.chunk_size, Parallel(n_jobs=-1))
                warm_seconds = time.perf_counter() - start
                start = time.perf_counter()
                candidates = generate_in_tasks(generator, fold.test, args.task_objects,
                                               Parallel(n_jobs=-1))
                seconds = time.perf_counter() - start
            workers = client.run(peak_mb)
    return {
        "mode": mode, "objects": args.objects, "D": len(fold.train_objects),
        "T": len(fold.test), "data_s": round(data_seconds, 1), "fit_s": round(fit_seconds, 1),
        "warm_up_s": round(warm_seconds, 1), "generate_s": round(seconds, 1),
        "objects_per_s": round(len(fold.test) / seconds, 1),
        "candidates_per_object": round(float(candidates.mask.sum()) / len(candidates), 1),
        "driver_peak_mb": round(peak_mb()), "driver_before_generate_mb": round(before_mb),
        "worker_peak_mb": [round(mb) for mb in workers.values()],
        "sha256": fingerprint(candidates),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--objects", type=int, default=1_000_000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--task-objects", type=int, default=16_384,
                        help="objects per task (rounded up to a multiple of chunk_size)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--one", choices=["serial", "cluster"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(run_one(args.one, args)), flush=True)
        return

    rows = []
    for mode in ("serial", "cluster"):
        command = [sys.executable, __file__, "--one", mode, *sys.argv[1:]]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode:
            sys.exit(f"{mode} run failed:\n{done.stderr[-4000:]}")
        row = json.loads(done.stdout.strip().splitlines()[-1])
        print(json.dumps(row), flush=True)
        rows.append(row)
    serial, cluster = rows
    print(f"\nsynthetic folksonomy, {args.objects:,} objects; fold 0: D {serial['D']:,}, "
          f"T {serial['T']:,} objects, {serial['candidates_per_object']} candidates per object")
    print(f"{'mode':<28} {'fit s':>7} {'warm-up s':>10} {'generate s':>11} {'objects/s':>10} "
          f"{'driver peak MB':>15} {'worker peak MB':>20}")
    for row in rows:
        name = ("serial (1 process)" if row["mode"] == "serial"
                else f"Dask, {args.workers} workers x 1 thread")
        peaks = ", ".join(f"{mb:,}" for mb in row["worker_peak_mb"]) or "-"
        print(f"{name:<28} {row['fit_s']:>7.1f} {row['warm_up_s']:>10.1f} "
              f"{row['generate_s']:>11.1f} "
              f"{row['objects_per_s']:>10,.0f} {row['driver_peak_mb']:>15,} {peaks:>20}")
    same = serial["sha256"] == cluster["sha256"]
    print(f"\nspeed-up of generation: {serial['generate_s'] / cluster['generate_s']:.2f}x; "
          f"candidate sets identical (SHA-256 of every field): {'yes' if same else 'NO'}")


if __name__ == "__main__":
    main()
