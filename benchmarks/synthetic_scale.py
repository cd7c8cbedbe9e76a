"""Scale benchmark of the synthetic folksonomy generator.

Generates folksonomies of growing size and prints, for each, the generation time, the number of
assignments and the peak resident memory. Every size runs in its own subprocess, so that the
peak memory (``resource.getrusage(...).ru_maxrss``) is that of one generation.

Usage::

    python benchmarks/synthetic_scale.py --objects 1000000
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path


def run_one(n_objects: int, seed: int, progress: bool) -> dict[str, float]:
    """Generates one folksonomy in this process and measures it."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout
    from tagtorch.data.synthetic import generate_folksonomy, scaled_config

    config = scaled_config(n_objects)
    start = time.perf_counter()
    folksonomy = generate_folksonomy(**config, seed=seed, progress=progress)
    seconds = time.perf_counter() - start
    maxrss_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    text_mb = sum(folksonomy.texts[c].str.len().sum() for c in folksonomy.text_fields) / 1e6
    return {
        **config,
        "seconds": round(seconds, 2),
        "assignments": folksonomy.n_assignments,
        "users_used": folksonomy.n_users,
        "tags_used": folksonomy.n_tags,
        "text_mchars": round(text_mb, 1),
        "peak_rss_mb": round(maxrss_kb / 1024, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--objects", type=int, default=1_000_000, help="largest size")
    parser.add_argument("--sizes", type=int, nargs="*", default=[10_000, 100_000],
                        help="smaller sizes run first")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--one", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--progress", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.one is not None:
        print(json.dumps(run_one(args.one, args.seed, args.progress)))
        return

    sizes = sorted({*args.sizes, args.objects})
    header = (f"{'objects':>10} {'users':>8} {'tags':>7} {'assignments':>12} {'seconds':>8} "
              f"{'peak MB':>8} {'text Mchar':>10}")
    print(header)
    for n_objects in sizes:
        command = [sys.executable, __file__, "--one", str(n_objects), "--seed", str(args.seed)]
        if n_objects >= 200_000:
            command.append("--progress")
        result = subprocess.run(command, check=True, stdout=subprocess.PIPE, text=True)
        r = json.loads(result.stdout.strip().splitlines()[-1])
        print(f"{r['n_objects']:>10,} {r['users_used']:>8,} {r['tags_used']:>7,} "
              f"{r['assignments']:>12,} {r['seconds']:>8.2f} {r['peak_rss_mb']:>8.0f} "
              f"{r['text_mchars']:>10.1f}", flush=True)


if __name__ == "__main__":
    main()
