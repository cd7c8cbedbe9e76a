"""Every task end to end at growing sizes: seconds per stage, peak memory, growth exponents.

Each (task, size) runs in a fresh process, as a user runs it: the synthetic folksonomy
generated (power-law users, resources and tags, timestamps; ``scaled_config``), its text
normalized, then the task's evaluation of one split (seed 0 or fold 0) with its report, through
:func:`tagtorch.train.run_task`. A size counts posts (``user, resource`` pairs) for the post
tasks, the objects for tag recommendation (the protocol's unit). Per run it prints the seconds
of each stage (generate, text, the split and report as ``rest``, and each method's fit and
scoring), the peak resident memory of the process, and between consecutive sizes the growth
exponent ``log(t2 / t1) / log(n2 / n1)`` of each stage (1: linear; above 1.2 is flagged).

The targets of issues 54 and 73 are checked at their size (a million posts, a million objects): a
measured run there gives PASS or MISS; a run that stops below it extrapolates the last
exponent and says so (``PASS*``/``MISS*``: an estimate, not a measurement).

Usage::

    python benchmarks/bench_scale.py --quick                  # two small sizes, < 15 min
    python benchmarks/bench_scale.py --tasks posts --sizes 10000 100000 1000000
    python benchmarks/bench_scale.py --plot docs/figures/scale.png --json outputs/scale.json

Run it alone: the times are wall-clock seconds on a shared machine.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

POST_BASELINES = "mp,mp_u,mp_r,mp_ur,cf,apr,folkrank,girp,girptm,bll,bll_c"
"""TagRec's baselines but LDA (``conf/model``)."""

TASKS: dict[str, list[str]] = {
    "posts": ["task=posts", "text=none", f"model=[{POST_BASELINES}]"],
    "hybrid": ["task=posts", "text=none", "model=[hybrid_lambdamart]",
               "model.hybrid_lambdamart.local_graph=true"],
    "posts_local": ["task=posts", "text=none", "model=[folkrank_local,apr_local]"],
    "tagrec": ["task=tagrec", "model=[latre_wts,lambdamart]", "task.folds=[0]",
               "task.cache=false"],
    "resources": ["task=resources", "text=none", "model=[smatch,bm25,bayeslm,lda_resources]",
                  "task.min_user_objects=5"],
    "itemrec": ["task=itemrec", "text=none",
                "model=[tag_popularity,two_dimensional,ease_tags,pitf,dorank_plus]"],
    "posts_dask": ["task=posts", "text=none", f"model=[{POST_BASELINES}]", "task.seeds=[0,1]",
                   "task.split=random", "task.backend=dask"],
    "posts_1proc": ["task=posts", "text=none", f"model=[{POST_BASELINES}]", "task.seeds=[0,1]",
                    "task.split=random"],
}
"""The command-line overrides of each task's run (one seed or fold, no TREC files).

``posts_dask`` shards two seeds' (seed, method) fits over a local Dask cluster of two worker
processes (one thread each; each worker reads the data itself), ``posts_1proc`` runs the same in
one process: the side by side of 1 and 2 workers, with each worker's peak memory."""

WORKERS = 2

SEEDED = {"posts", "posts_local", "hybrid", "resources", "itemrec"}
POSTS_PER_OBJECT = 6
"""Distinct posts per object the generator makes at scale (6.0 at 20,000 objects, with 2.3 tags
a post): a size in posts asks for ``size / 6`` objects; the posts made are counted."""


@dataclass(frozen=True)
class Target:
    """A target of issues 54 and 73: a stage of a task under a limit at a size."""

    name: str
    task: str
    size: int
    key: str  # "total", "peak_gb" or "ms_per_query:METHOD"
    limit: float


TARGETS = [
    Target("posts, TagRec's baselines but LDA: < 10 min", "posts", 1_000_000, "total", 600),
    Target("posts, TagRec's baselines: peak < 8 GB", "posts", 1_000_000, "peak_gb", 8),
    Target("posts, FolkRank (exact) <= 15 ms per test post", "posts", 1_000_000,
           "ms_per_query:folkrank", 15),
    Target("posts, APR (exact) <= 15 ms per test post", "posts", 1_000_000,
           "ms_per_query:apr", 15),
    Target("posts, FolkRank (local) <= 2 ms per test post", "posts_local", 1_000_000,
           "ms_per_query:folkrank_local", 2),
    Target("posts, APR (local) <= 2 ms per test post", "posts_local", 1_000_000,
           "ms_per_query:apr_local", 2),
    Target("posts, hybrid_lambdamart (local sources) fit + evaluation < 20 min", "hybrid",
           1_000_000, "total", 1200),
    Target("tagrec, latre_wts + lambdamart, 1 fold < 30 min", "tagrec", 1_000_000, "total",
           1800),
    Target("tagrec, peak < 12 GB", "tagrec", 1_000_000, "peak_gb", 12),
    Target("resources, SMatch/BM25/BayesLM/LDA < 30 min", "resources", 1_000_000, "total", 1800),
]


MIN_OBJECTS = 200
"""The fewest objects a post task's folksonomy is generated with (smaller sizes get these)."""


def objects_of(task: str, size: int) -> int:
    """The objects generated for ``task`` at ``size`` (posts; objects for tagrec).

    Example:
        >>> objects_of("tagrec", 5000), objects_of("posts", 60_000), objects_of("posts", 600)
        (5000, 10000, 200)
    """
    return size if task == "tagrec" else max(MIN_OBJECTS, size // POSTS_PER_OBJECT)


def overrides_of(task: str, size: int, seed: int, models: list[str] | None = None,
                 settings: list[str] | None = None) -> list[str]:
    """The command-line overrides of one (task, size) run (see :func:`run_one`)."""
    from tagtorch.data.synthetic import scaled_config

    n_objects = objects_of(task, size)
    unit = "task.folds=[0]" if task == "tagrec" else f"task.seeds=[{seed}]"
    chosen = [o if not (models and o.startswith("model=")) else f"model=[{','.join(models)}]"
              for o in TASKS[task]]
    overrides = [*chosen, *(settings or []), "task.trec=false", f"data.n_objects={n_objects}",
                 f"data.n_users={scaled_config(n_objects)['n_users']}",
                 f"data.n_tags={scaled_config(n_objects)['n_tags']}",
                 f"data.n_topics={scaled_config(n_objects)['n_topics']}"]
    if not any(o.startswith("task.seeds=") for o in overrides):
        overrides.append(unit)
    return overrides


def run_one(task: str, size: int, seed: int, models: list[str] | None = None,
            settings: list[str] | None = None) -> dict[str, Any]:
    """One (task, size) in this process: stage seconds and the peak memory.

    ``models``: these models instead of the task's (``conf/model`` names); ``settings``: more
    command-line overrides (``model.pitf.loop=lean``).
    """
    from hydra.utils import instantiate
    from omegaconf import open_dict

    from tagtorch.api import compose
    from tagtorch.data.synthetic import generate_folksonomy, scaled_config
    from tagtorch.train import run_task

    n_objects = objects_of(task, size)
    folder = Path(tempfile.mkdtemp(prefix=f"scale_{task}_"))
    overrides = overrides_of(task, size, seed, models, settings)
    cluster = _local_cluster() if task.endswith("_dask") else None
    if cluster is not None:
        overrides.append(f"task.address={cluster.scheduler_address}")
    cfg = compose(overrides, folder)
    stages: dict[str, float] = {}
    start = time.perf_counter()
    raw = generate_folksonomy(**scaled_config(n_objects), seed=seed, progress=True)
    stages["generate"] = time.perf_counter() - start
    start = time.perf_counter()
    data = instantiate(cfg.text).apply(raw) if cfg.get("text") is not None else raw
    stages["text"] = time.perf_counter() - start
    with open_dict(cfg):
        cfg.text = None  # applied above, timed apart
    start = time.perf_counter()
    result = run_task(cfg, raw=data)
    stages["task"] = time.perf_counter() - start
    workers_gb = _worker_peaks(cluster) if cluster is not None else []
    posts = int(raw.assignments[["user", "object"]].drop_duplicates().shape[0])
    return {"workers_peak_gb": workers_gb,
            "task": task, "size": raw.n_objects if task == "tagrec" else posts,
            "asked": size, "objects": raw.n_objects, "posts": posts,
            "assignments": raw.n_assignments, "stages": stages,
            "methods": _method_times(result.results, result.per_object),
            "peak_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20}


def _local_cluster() -> Any:
    """A local Dask cluster of :data:`WORKERS` worker processes, one thread each."""
    from distributed import LocalCluster

    return LocalCluster(n_workers=WORKERS, threads_per_worker=1, processes=True,
                        dashboard_address=None)


def _worker_peaks(cluster: Any) -> list[float]:
    """Each worker process's peak resident memory (GB), then the cluster closed."""
    from distributed import Client

    with Client(cluster) as client:
        peaks = client.run(lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20)
    cluster.close()
    return [round(float(v), 2) for v in peaks.values()]


def _method_times(results: Any, per_object: Any) -> dict[str, dict[str, float]]:
    """Per method: fit seconds, scoring ms per query and the queries scored."""
    times: dict[str, dict[str, float]] = {}
    for method, rows in results.groupby("method", sort=False):
        values = rows.groupby("metric")["value"].mean()
        queries = per_object.loc[per_object["method"] == method, "object"].nunique()
        times[str(method)] = {"fit_s": float(values.get("fit_seconds", math.nan)),
                              "ms_per_query": float(values.get("ms_model", math.nan)),
                              "queries": int(queries)}
    return times


def measured(run: dict[str, Any], key: str) -> float:
    """A run's value of a target key (seconds, GB or ms)."""
    if key == "total":
        return float(sum(run["stages"].values()))
    if key == "peak_gb":
        return float(run["peak_gb"])
    method = key.split(":", 1)[1]
    return float(run["methods"].get(method, {}).get("ms_per_query", math.nan))


def slope(small: dict[str, Any], large: dict[str, Any], a: float, b: float) -> float:
    """``log(b / a) / log(n2 / n1)``: the growth exponent of ``a`` and ``b``, two runs' values.

    ``n1`` and ``n2`` are the runs' sizes. NaN where it is undefined: a value not above 0, or
    two runs of the same size (the same data: nothing grew).
    """
    if not (a > 0 and b > 0) or small["size"] == large["size"]:
        return math.nan
    return math.log(b / a) / math.log(large["size"] / small["size"])


def exponent(small: dict[str, Any], large: dict[str, Any], key: str) -> float:
    """The growth exponent (:func:`slope`) of a target key between two runs of a task."""
    return slope(small, large, measured(small, key), measured(large, key))


def target_lines(runs: list[dict[str, Any]]) -> list[str]:
    """One line per target: PASS or MISS at its size, starred when extrapolated."""
    lines = []
    for target in TARGETS:
        own = sorted((r for r in runs if r["task"] == target.task), key=lambda r: r["size"])
        if not own:
            lines.append(f"SKIP   {target.name} (task not run)")
            continue
        last = own[-1]
        value, star = measured(last, target.key), ""
        if last["size"] < target.size:
            if len(own) < 2:
                lines.append(f"SKIP   {target.name} (one size: no exponent to extrapolate)")
                continue
            power = exponent(own[-2], last, target.key)
            if math.isnan(power):
                lines.append(f"SKIP   {target.name} (no exponent to extrapolate between "
                             f"{own[-2]['size']:,} and {last['size']:,}: the same size or a "
                             "value not above 0)")
                continue
            value *= (target.size / last["size"]) ** power
            star = f"* (extrapolated from {last['size']:,} with exponent {power:.2f})"
        verdict = "PASS" if value <= target.limit else "MISS"
        lines.append(f"{verdict}{star[:1]:<2} {target.name}: {value:,.1f} "
                     f"(limit {target.limit:,g}){star[1:]}")
    return lines


def table(runs: list[dict[str, Any]]) -> str:
    """A markdown table: per run its sizes, stage seconds, peak memory and exponents."""
    lines = ["| task | size | posts | assignments | generate s | text s | task s | peak GB | "
             "exponent (task s) | methods: fit s / ms per query |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    previous: dict[str, dict[str, Any]] = {}
    for run in runs:
        s = run["stages"]
        before = previous.get(run["task"])
        power = exponent_of_stage(before, run, "task") if before else math.nan
        flag = " (superlinear)" if power > 1.2 else ""
        methods = "; ".join(f"{m} {t['fit_s']:.1f} / {t['ms_per_query']:.2f}"
                            for m, t in run["methods"].items())
        workers = run.get("workers_peak_gb") or []
        peak = f"{run['peak_gb']:.2f}" + (f" (workers {', '.join(map(str, workers))})"
                                           if workers else "")
        lines.append(f"| {run['task']} | {run['size']:,} | {run['posts']:,} | "
                     f"{run['assignments']:,} | {s['generate']:.1f} | {s['text']:.1f} | "
                     f"{s['task']:.1f} | {peak} | "
                     f"{'' if math.isnan(power) else f'{power:.2f}'}{flag} | {methods} |")
        previous[run["task"]] = run
    return "\n".join(lines)


def exponent_of_stage(small: dict[str, Any], large: dict[str, Any], stage: str) -> float:
    """The growth exponent (:func:`slope`) of one stage's seconds between two runs."""
    return slope(small, large, small["stages"][stage], large["stages"][stage])


def plot(runs: list[dict[str, Any]], path: Path) -> None:
    """Log-log: each task's seconds against its size, with the linear slope beside."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(7, 4.5))
    for task in dict.fromkeys(r["task"] for r in runs):
        own = sorted((r for r in runs if r["task"] == task), key=lambda r: r["size"])
        axis.plot([r["size"] for r in own], [measured(r, "total") for r in own], "o-",
                  label=task)
    sizes = [r["size"] for r in runs]
    low, high = min(sizes), max(sizes)
    start = min(measured(r, "total") for r in runs if r["size"] == low)
    axis.plot([low, high], [start, start * high / low], "k--", linewidth=0.8,
              label="linear (slope 1)")
    axis.set_xscale("log")
    axis.set_yscale("log")
    axis.set_xlabel("size (posts; objects for tagrec)")
    axis.set_ylabel("seconds, end to end")
    axis.set_title(f"tagtorch end to end by size ({min(sizes):,} to {max(sizes):,})")
    axis.legend()
    figure.tight_layout()
    from tagtorch.storage import atomic_write

    with atomic_write(path) as partial:  # never through a link at the name
        figure.savefig(partial, dpi=120, format=path.suffix[1:].lower())


MAX_SIZE = 100_000_000
"""The largest size taken (100 times the targets' million): a larger one would not fit."""


def _size(text: str) -> int:
    """A size: an integer in [1, :data:`MAX_SIZE`]."""
    value = int(text)  # argparse turns a ValueError into "invalid _size value: 'x'"
    if not 1 <= value <= MAX_SIZE:
        raise argparse.ArgumentTypeError(f"a size is an integer in [1, {MAX_SIZE:,}], got "
                                         f"{text!r}")
    return value


def _seed(text: str) -> int:
    """A seed: an integer in [0, 2**32) (numpy's and the generator's range)."""
    value = int(text)
    if not 0 <= value < 2**32:
        raise argparse.ArgumentTypeError(f"a seed is an integer in [0, 2**32), got {text!r}")
    return value


def _parser() -> argparse.ArgumentParser:
    """The command line's arguments."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     usage="%(prog)s [options] (--help lists them)")
    parser.add_argument("--tasks", nargs="+", choices=list(TASKS),
                        default=["posts", "posts_local", "hybrid", "tagrec", "resources",
                                 "itemrec"],
                        help="default: every task once (posts_1proc and posts_dask, the 1 vs 2 "
                             "workers pair, on request)")
    parser.add_argument("--sizes", type=_size, nargs="+", default=[10_000, 100_000, 1_000_000],
                        help="posts (objects for tagrec); each size must give a task other "
                             f"data (below {MIN_OBJECTS * POSTS_PER_OBJECT:,} posts a post task "
                             f"gets {MIN_OBJECTS} objects)")
    parser.add_argument("--quick", action="store_true",
                        help="two small sizes, every task (10,000 and 100,000 posts; 5,000 "
                             "and 25,000 objects for tagrec): < 15 min")
    parser.add_argument("--seed", type=_seed, default=0)
    parser.add_argument("--models", nargs="*",
                        help="these models instead of each task's (conf/model names)")
    parser.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE",
                        help="more overrides of each run (model.pitf.loop=lean)")
    parser.add_argument("--json", type=Path, help="append each run as a JSON line here")
    parser.add_argument("--plot", type=Path, help="write the log-log figure here")
    parser.add_argument("--one", nargs=2, metavar=("TASK", "SIZE"), help=argparse.SUPPRESS)
    return parser


def sizes_of(task: str, args: argparse.Namespace) -> list[int]:
    """The sizes a task runs at, smallest first."""
    if args.quick:
        return [5_000, 25_000] if task == "tagrec" else [10_000, 100_000]
    return sorted(args.sizes)


def check_arguments(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Ends the script with one line (exit status 2) on an argument no run could use.

    Checked before any run: the hidden ``--one``; two sizes that give a task the same data (a
    growth exponent between them is undefined); ``--json`` and ``--plot`` (a folder, a figure
    format matplotlib lacks); the overrides of ``--models`` and ``--set``, composed and
    checked for each task as a run composes them.
    """
    if args.one is not None:  # a child: one task at one size
        task, size = args.one
        if task not in TASKS or not size.isdigit() or not 1 <= int(size) <= MAX_SIZE:
            parser.error(f"--one takes a task of {list(TASKS)} and a size in [1, "
                         f"{MAX_SIZE:,}], got {args.one}")
        args.tasks, args.sizes, args.quick = [task], [int(size)], False
    for task in args.tasks:
        by_objects: dict[int, int] = {}
        for size in sizes_of(task, args):
            if objects_of(task, size) in by_objects:
                parser.error(f"--sizes {by_objects[objects_of(task, size)]:,} and {size:,} give "
                             f"task {task} the same data ({objects_of(task, size):,} objects): "
                             "a growth exponent between equal sizes is undefined")
            by_objects[objects_of(task, size)] = size
    import matplotlib.figure

    formats = matplotlib.figure.Figure().canvas.get_supported_filetypes()
    if args.plot is not None and (args.plot.is_dir()
                                  or args.plot.suffix[1:].lower() not in formats):
        parser.error(f"--plot {args.plot}: a file whose suffix names a figure format "
                     f"({', '.join(sorted(formats))})")
    if args.json is not None:
        try:
            os.close(_open_to_append(args.json))
        except OSError as error:
            parser.error(f"--json {args.json}: cannot append to it ({error.strerror or error}"
                         f"{'; a link is refused' if args.json.is_symlink() else ''})")
    _check_overrides(parser, args)


def _check_overrides(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Composes and checks each task's overrides as a run does (one line on a refusal)."""
    from tagtorch.api import compose
    from tagtorch.config_checks import check_config

    with tempfile.TemporaryDirectory() as folder:
        for task in args.tasks:
            try:
                check_config(compose(overrides_of(task, sizes_of(task, args)[0], args.seed,
                                                  args.models, args.set), folder))
            except ValueError as error:  # ConfigError, or what Hydra cannot compose
                parser.error(f"task {task} with --models {args.models} --set {args.set}: "
                             f"{str(error).splitlines()[0]}")


def main(argv: list[str] | None = None) -> int:
    """Runs every (task, size) in its own process; returns the exit status."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout
    parser = _parser()
    args = parser.parse_args(argv)
    check_arguments(parser, args)
    if args.one is not None:
        return _run_one_here(args)
    runs = []
    for task in args.tasks:
        for size in sizes_of(task, args):
            command = [sys.executable, __file__, "--one", task, str(size), "--seed",
                       str(args.seed), *(["--models", *args.models] if args.models else []),
                       *(["--set", *args.set] if args.set else [])]
            done = subprocess.run(command, stdout=subprocess.PIPE, text=True)
            if done.returncode != 0:
                print(f"{task} at {size:,}: exit {done.returncode}", flush=True)
                continue
            run = json.loads(done.stdout.strip().splitlines()[-1])
            runs.append(run)
            print(f"{task} at {run['size']:,}: {measured(run, 'total'):.1f} s, peak "
                  f"{run['peak_gb']:.2f} GB", flush=True)
            if args.json is not None:
                _append_line(args.json, json.dumps(run))
    print(table(runs))
    print("\n".join(target_lines(runs)))
    if args.plot is not None and runs:
        plot(runs, args.plot)
    return 0


def _run_one_here(args: argparse.Namespace) -> int:
    """The child's run (``--one``): its JSON line, or one line for the input's error."""
    from tagtorch.train import user_error

    try:
        print(json.dumps(run_one(args.tasks[0], args.sizes[0], args.seed, args.models,
                                 args.set)))
    except Exception as error:
        cause = user_error(error)
        if cause is None:
            raise
        print(f"error: {cause}", file=sys.stderr)
        return 2
    return 0


def _open_to_append(path: Path) -> int:
    """A descriptor appending to ``path`` (created if missing); a link there is refused."""
    path.parent.mkdir(parents=True, exist_ok=True)
    return os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o644)


def _append_line(path: Path, line: str) -> None:
    """Appends ``line`` to a JSON-lines file: each run kept as soon as it ends."""
    handle = _open_to_append(path)
    try:
        os.write(handle, (line + "\n").encode())
    finally:
        os.close(handle)


if __name__ == "__main__":
    sys.exit(main())
