"""Benchmark of serving: in-process ``recommend_tags`` and the HTTP service under load.

For each dataset (HetRec Last.fm from ``$TAGTORCH_DATA_DIR``; a synthetic folksonomy of
``--objects`` objects, default 150,000, the paper's Last.fm size) and each method
(``--methods``, configured as ``conf/model/NAME.yaml``), it:

1. holds out ``--held-out`` random objects (with at least two tags) from the data and fits a
   recommender artifact on the rest (:meth:`TagRecommender.fit`, the ``task=fit`` defaults);
2. times ``recommend_tags`` in process for every held-out object, given its raw title and
   half of its tags (k = 5): median, p95, p99;
3. on ``--http`` datasets: starts ``python -m tagtorch.serve`` on 127.0.0.1 and drives it at
   each of ``--clients`` concurrent clients (an async httpx loop, ``--requests`` requests,
   stopped at ``--time-limit`` seconds), and prints requests/s, p50, p95, p99 and errors.

A summary table with PASS/MISS per target closes the run. Targets (2 CPU cores):
in-process median under 5 ms and p99 under 30 ms for LATRE+wTS and lambda-MART at 150,000
objects; HTTP p99 under 50 ms at 8 clients; no errors.

Usage::

    TAGTORCH_DATA_DIR=/path/to/data python benchmarks/bench_serve.py
    python benchmarks/bench_serve.py --skip-lastfm --objects 20000 --methods latre_wts
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def say(text: str = "") -> None:
    print(text, flush=True)


def percentiles(ms: list[float]) -> dict[str, float]:
    values = np.asarray(ms)
    return {"p50": float(np.median(values)), "p95": float(np.percentile(values, 95)),
            "p99": float(np.percentile(values, 99)), "max": float(values.max())}


def compose(method: str):
    """The default configuration with ``model=method`` (as ``python -m tagtorch.train``)."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import open_dict

    GlobalHydra.instance().clear()
    with initialize_config_dir(version_base="1.3", config_dir=str(ROOT / "conf")):
        cfg = hydra_compose("train", overrides=[f"model={method}", "task=fit", "logger=none"],
                            return_hydra_config=True)
    HydraConfig().set_config(cfg)
    with open_dict(cfg):
        cfg.paths.output_dir = tempfile.mkdtemp(prefix="bench_serve_")
        del cfg.hydra  # as in a real run
    return cfg


def load(name: str, args: argparse.Namespace):
    from tagtorch.data.text import TextProcessor

    if name == "lastfm":
        from tagtorch.data.loaders.hetrec import load_lastfm

        raw = load_lastfm(os.environ["TAGTORCH_DATA_DIR"], download=False)
    else:
        from tagtorch.data.synthetic import generate_folksonomy, scaled_config

        raw = generate_folksonomy(**scaled_config(args.objects), seed=args.seed)
    return raw, TextProcessor()


def held_out(raw, n: int, seed: int):
    """``(training folksonomy, [request body])``: n objects with >= 2 tags set apart."""
    rng = np.random.default_rng(seed)
    tags_of = raw.object_tags()
    chosen = rng.choice(np.flatnonzero(tags_of.lengths >= 2), n, replace=False)
    keep = ~np.isin(raw.assignments["object"].to_numpy(), chosen)
    bodies = []
    for obj in chosen:
        tags = [str(raw.tags[t]) for t in np.unique(tags_of[obj])]
        body = {"tags": tags[: max(1, len(tags) // 2)], "k": 5}
        if "title" in raw.text_fields:
            body["title"] = str(raw.texts["title"].iloc[obj] or "")
        bodies.append(body)
    return raw.select(keep), bodies


def fit(raw_train, processor, method: str):
    from hydra.utils import instantiate
    from omegaconf import OmegaConf

    from tagtorch.serving.tags import TagRecommender, display_names

    cfg = compose(method)
    folksonomy = processor.apply(raw_train)
    candidates = {k: v for k, v in OmegaConf.to_container(cfg.candidates, resolve=True).items()
                  if k != "_target_"}
    ranker = instantiate(next(iter(cfg.model.values())))
    return TagRecommender.fit(folksonomy, processor, candidates, ranker,
                              display=display_names(raw_train, processor, folksonomy),
                              val_fraction=cfg.task.val_fraction, seed=cfg.task.seed)


def in_process(recommender, bodies) -> tuple[dict[str, float], int]:
    recommender.recommend_tags(**bodies[0])  # warm-up (compilation)
    times, errors = [], 0
    for body in bodies:
        start = time.perf_counter()
        try:
            recommender.recommend_tags(**body)
        except ValueError:
            errors += 1
        times.append(1000 * (time.perf_counter() - start))
    return percentiles(times), errors


async def drive(url: str, bodies, clients: int, n_requests: int, limit_s: float) -> dict:
    import httpx

    queue = [bodies[i % len(bodies)] for i in range(n_requests)]
    times: list[float] = []
    errors = 0
    deadline = time.perf_counter() + limit_s

    async def client(http: httpx.AsyncClient) -> None:
        nonlocal errors
        while queue and time.perf_counter() < deadline:
            body = queue.pop()
            start = time.perf_counter()
            try:
                response = await http.post(f"{url}/v1/tags", json=body)
                if response.status_code != 200:
                    errors += 1
            except httpx.HTTPError:
                errors += 1
            times.append(1000 * (time.perf_counter() - start))

    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(timeout=30, limits=limits) as http:
        start = time.perf_counter()
        await asyncio.gather(*(client(http) for _ in range(clients)))
        seconds = time.perf_counter() - start
    return {"requests": len(times), "per_s": len(times) / seconds, "errors": errors,
            **percentiles(times)}


def over_http(recommender, bodies, args: argparse.Namespace) -> dict[int, dict]:
    from tagtorch.serve import start_service

    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        folder = recommender.save(Path(tmp) / "artifact")
        server, url = start_service(folder, timeout=300)
        try:
            for clients in args.clients:
                out[clients] = asyncio.run(drive(url, bodies, clients, args.requests,
                                                 args.time_limit))
        finally:
            server.terminate()
            server.wait(timeout=30)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--objects", type=int, default=150_000)
    parser.add_argument("--methods", default="latre_wts,lambdamart,lambdarank")
    parser.add_argument("--synthetic-methods", default="latre_wts,lambdamart",
                        help="methods fitted at --objects (the in-process targets)")
    parser.add_argument("--held-out", type=int, default=300)
    parser.add_argument("--clients", default="1,8,32")
    parser.add_argument("--requests", type=int, default=600)
    parser.add_argument("--time-limit", type=float, default=60.0)
    parser.add_argument("--skip-lastfm", action="store_true")
    parser.add_argument("--skip-synthetic", action="store_true")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    args.clients = [int(c) for c in args.clients.split(",")]
    plan = []
    if not args.skip_lastfm and os.environ.get("TAGTORCH_DATA_DIR"):
        plan.append(("lastfm", args.methods.split(","), True))
    if not args.skip_synthetic:
        plan.append(("synthetic", args.synthetic_methods.split(","), False))
    rows = []
    for name, methods, http in plan:
        raw, processor = load(name, args)
        raw_train, bodies = held_out(raw, args.held_out, args.seed)
        say(f"\n=== {name}: {raw.n_objects:,} objects, {len(bodies)} held out ===")
        for method in methods:
            start = time.perf_counter()
            recommender = fit(raw_train, processor, method)
            say(f"[{method}] fitted in {time.perf_counter() - start:.1f} s "
                f"(D {recommender.info['d_objects']:,}, V {recommender.info['v_objects']:,})")
            lat, errors = in_process(recommender, bodies)
            say(f"  in process: p50 {lat['p50']:.2f} ms, p95 {lat['p95']:.2f} ms, p99 "
                f"{lat['p99']:.2f} ms, max {lat['max']:.1f} ms, errors {errors}")
            rows.append((name, method, "in process", lat, errors, None))
            if http:
                for clients, figures in over_http(recommender, bodies, args).items():
                    say(f"  HTTP, {clients:>2} clients: {figures['per_s']:,.0f} requests/s, "
                        f"p50 {figures['p50']:.1f} ms, p95 {figures['p95']:.1f} ms, p99 "
                        f"{figures['p99']:.1f} ms, errors {figures['errors']} of "
                        f"{figures['requests']}")
                    rows.append((name, method, f"HTTP {clients}", figures, figures["errors"],
                                 figures["per_s"]))
    say("\n=== summary " + "=" * 60)
    say(f"{'data':<10} {'method':<11} {'mode':<11} {'req/s':>7} {'p50 ms':>7} {'p95 ms':>7} "
        f"{'p99 ms':>7} {'errors':>6}  target")
    for name, method, mode, lat, errors, per_s in rows:
        target = ""
        if name == "synthetic" and mode == "in process" and method in ("latre_wts",
                                                                       "lambdamart"):
            ok = lat["p50"] < 5 and lat["p99"] < 30 and errors == 0
            target = f"{'PASS' if ok else 'MISS'} p50 < 5, p99 < 30"
        if mode == "HTTP 8":
            ok = lat["p99"] < 50 and errors == 0
            target = f"{'PASS' if ok else 'MISS'} p99 < 50, 0 errors"
        rate = f"{per_s:,.0f}" if per_s else "-"
        say(f"{name:<10} {method:<11} {mode:<11} {rate:>7} {lat['p50']:>7.2f} {lat['p95']:>7.2f} "
            f"{lat['p99']:>7.2f} {errors:>6}  {target}")


if __name__ == "__main__":
    main()
