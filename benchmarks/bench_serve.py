"""Benchmark of serving: in-process ``recommend_tags`` and the HTTP service under load.

For each dataset (HetRec Last.fm from ``$TAGTORCH_DATA_DIR``; a synthetic folksonomy of
``--objects`` objects, default 150,000, the paper's Last.fm size) and each method
(``--methods``, configured as ``conf/model/NAME.yaml``), it:

1. holds out ``--held-out`` random objects (with at least two tags) from the data and fits a
   recommender artifact on the rest (:meth:`TagRecommender.fit`, the ``task=fit`` defaults);
2. times ``recommend_tags`` in process for every held-out object, given its raw title and
   half of its tags (k = 5): median, p95, p99;
3. on ``--http`` datasets: starts ``python -m tagtorch.serve`` on 127.0.0.1 with a write token
   (``--token-file``: authentication on, as deployed) and drives it at each of ``--clients``
   concurrent clients (an async httpx loop, ``--requests`` requests, stopped at
   ``--time-limit`` seconds), and prints requests/s, p50, p95, p99 and errors;
4. on ``--http`` datasets, for the first method: a post flood. ``--flood-clients`` clients
   send authenticated ``POST /v1/posts`` of one new object each (a held-out object's raw tags
   and title) for ``--flood-seconds`` while 1 client (a latency probe), then 8 clients (full
   load) ask for recommendations; it prints the posts acknowledged per second, the
   recommendation p99 meanwhile, errors, and the seconds the service then needs to apply every
   acknowledged post.

A summary table with PASS/MISS per target closes the run. Targets (2 CPU cores):
in-process median under 5 ms and p99 under 30 ms for LATRE+wTS and lambda-MART at 150,000
objects; in-process median at most 2 ms for our deep ranker (``tag_context``) on Last.fm;
HTTP p99 under 50 ms at 8 clients; no errors; a post flood of at least 200 posts/s
with recommendation p99 under 50 ms.

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
    with initialize_config_dir(version_base="1.3", config_dir=str(ROOT / "tagtorch" / "conf")):
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

    from tagtorch.candidates.latre import LatreCandidates
    from tagtorch.serving.tags import TagRecommender, display_names

    cfg = compose(method)
    folksonomy = processor.apply(raw_train)
    candidates = LatreCandidates(**{k: v for k, v in OmegaConf.to_container(
        cfg.candidates, resolve=True).items() if k != "_target_"})
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


TOKEN = "bench-serve-token-" + "0123456789" * 2
AUTH = {"authorization": f"Bearer {TOKEN}"}


async def _requests(http, url: str, path: str, queue: list, deadline: float, times: list,
                    errors: list, headers: dict | None = None) -> None:
    """One client: POSTs the queue's bodies to ``path`` until it is empty or time is up."""
    import httpx

    while queue and time.perf_counter() < deadline:
        body = queue.pop()
        start = time.perf_counter()
        try:
            response = await http.post(f"{url}{path}", json=body, headers=headers)
            if response.status_code != 200:
                errors.append(response.status_code)
        except httpx.HTTPError as error:
            errors.append(type(error).__name__)
        times.append(1000 * (time.perf_counter() - start))


async def drive(url: str, bodies, clients: int, n_requests: int, limit_s: float) -> dict:
    import httpx

    queue = [bodies[i % len(bodies)] for i in range(n_requests)]
    times: list[float] = []
    errors: list = []
    deadline = time.perf_counter() + limit_s
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(timeout=30, limits=limits) as http:
        start = time.perf_counter()
        await asyncio.gather(*(_requests(http, url, "/v1/tags", queue, deadline, times, errors)
                               for _ in range(clients)))
        seconds = time.perf_counter() - start
    return {"requests": len(times), "per_s": len(times) / seconds, "errors": len(errors),
            **percentiles(times)}


async def flood(url: str, bodies, args: argparse.Namespace, askers: int) -> dict:
    """Posts from ``--flood-clients`` clients while ``askers`` clients ask for recommendations
    (1: a latency probe; 8: recommendations at full load too)."""
    import httpx

    n_posts = 1_000_000
    posts = [{"posts": [{"user": f"flood-user-{i % 97}", "object": f"flood{askers}-{i}",
                         "tags": bodies[i % len(bodies)]["tags"],
                         "title": bodies[i % len(bodies)].get("title") or ""}]}
             for i in range(min(n_posts, 3000 * int(args.flood_seconds)))]
    asks = [bodies[i % len(bodies)] for i in range(n_posts)]
    post_times: list[float] = []
    ask_times: list[float] = []
    post_errors: list = []
    ask_errors: list = []
    clients = args.flood_clients + askers
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    deadline = time.perf_counter() + args.flood_seconds
    async with httpx.AsyncClient(timeout=30, limits=limits) as http:
        start = time.perf_counter()
        await asyncio.gather(
            *(_requests(http, url, "/v1/posts", posts, deadline, post_times, post_errors, AUTH)
              for _ in range(args.flood_clients)),
            *(_requests(http, url, "/v1/tags", asks, deadline, ask_times, ask_errors)
              for _ in range(askers)))
        seconds = time.perf_counter() - start
        start = time.perf_counter()
        while (await http.get(f"{url}/v1/info")).json()["pending_posts"]:
            await asyncio.sleep(0.05)
        drain = time.perf_counter() - start
    acknowledged = len(post_times) - len(post_errors)
    return {"posts_per_s": acknowledged / seconds, "posts": acknowledged,
            "post_errors": len(post_errors), "asks": len(ask_times),
            "ask_errors": len(ask_errors), "drain_s": drain, **percentiles(ask_times)}


def over_http(recommender, bodies, args: argparse.Namespace, with_flood: bool
              ) -> dict[int | str, dict]:
    from tagtorch.serve import start_service
    from tagtorch.storage import atomic_write

    out: dict[int | str, dict] = {}
    with tempfile.TemporaryDirectory() as tmp:
        folder = recommender.save(Path(tmp) / "artifact")
        with atomic_write(Path(tmp) / "token") as partial:
            partial.write_text(TOKEN)
        server, url = start_service(folder, "--token-file", str(Path(tmp) / "token"),
                                    timeout=300)
        try:
            for clients in args.clients:
                out[clients] = asyncio.run(drive(url, bodies, clients, args.requests,
                                                 args.time_limit))
            if with_flood:
                for askers in (1, 8):
                    out[f"flood {askers}"] = asyncio.run(flood(url, bodies, args, askers))
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
    parser.add_argument("--flood-seconds", type=float, default=30.0)
    parser.add_argument("--flood-clients", type=int, default=8)
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
                results = over_http(recommender, bodies, args, with_flood=method == methods[0])
                for askers in (1, 8):
                    figures = results.pop(f"flood {askers}", None)
                    if figures is None:
                        continue
                    say(f"  post flood, {args.flood_clients} posting and {askers} asking clients: "
                        f"{figures['posts_per_s']:,.0f} posts/s acknowledged "
                        f"({figures['posts']:,}, errors {figures['post_errors']}), "
                        f"recommendations meanwhile p50 {figures['p50']:.1f} ms, p99 "
                        f"{figures['p99']:.1f} ms (errors {figures['ask_errors']} of "
                        f"{figures['asks']}); all applied {figures['drain_s']:.1f} s later")
                    rows.append((name, method, f"flood {askers}", figures,
                                 figures["post_errors"] + figures["ask_errors"],
                                 figures["posts_per_s"]))
                for clients, figures in results.items():
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
        if name == "lastfm" and mode == "in process" and method == "tag_context":
            ok = lat["p50"] <= 2 and errors == 0
            target = f"{'PASS' if ok else 'MISS'} p50 <= 2 (our deep ranker)"
        if mode == "HTTP 8":
            ok = lat["p99"] < 50 and errors == 0
            target = f"{'PASS' if ok else 'MISS'} p99 < 50, 0 errors"
        if mode.startswith("flood"):
            ok = per_s >= 200 and lat["p99"] < 50 and errors == 0
            target = f"{'PASS' if ok else 'MISS'} >= 200 posts/s, p99 < 50, 0 errors"
        rate = f"{per_s:,.0f}" if per_s else "-"
        say(f"{name:<10} {method:<11} {mode:<11} {rate:>7} {lat['p50']:>7.2f} {lat['p95']:>7.2f} "
            f"{lat['p99']:>7.2f} {errors:>6}  {target}")


if __name__ == "__main__":
    main()
