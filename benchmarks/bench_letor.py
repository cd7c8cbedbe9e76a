"""Learning to rank on LETOR-format data: tagtorch's rankers against LightGBM and allRank.

On a dataset with MSLR-WEB10K's layout (136 features, grades 0-4) made by the stated generator
:func:`tagtorch.candidates.letor.write_synthetic_letor` (or ``--data FOLDER``: any LETOR folder with
``train.txt``, ``vali.txt``, ``test.txt``, e.g. MSLR-WEB10K's ``Fold1``), read by
:func:`tagtorch.candidates.letor.load_letor`, it prints NDCG@5 and NDCG@10 on the test queries
(tagtorch's metric: linear gain; queries without a relevant document left out) and the training
time of

- **tagtorch's λ-MART** (``LambdaMARTRanker``, LightGBM backend) and **LightGBM's
  ``LGBMRanker(objective="lambdarank")`` called directly** with the same trees, leaves,
  learning rate and truncation, on the same flat arrays and query groups (LightGBM's own
  defaults otherwise: its gains are ``2^grade - 1`` where tagtorch's ranker optimizes the linear
  gain its NDCG reports);
- **the neural losses** RankNet, LambdaRank, NeuralNDCG and ListNet through tagtorch's
  ``NeuralRanker`` (its MLP scorer, Adam, ``--epochs`` epochs, no early stopping), seconds per
  epoch;
- **the same training loop with allRank 1.4.3's loss** in place of tagtorch's (ListNet,
  RankNet, NeuralNDCG; :mod:`allrank_oracle`), on the same batches: a plain loop over the same
  scorer, so the two columns differ only by the loss.

``--scale`` is issue 54's row at MSLR-WEB30K's size: the generator's rows at its shape
(``--queries 18919 --documents 114``: 2.2M training and 1.1M test documents, 136 features) held
in memory, and each of LightGBM's lambdarank called directly (on the flat arrays, as a user of
LightGBM holds them), tagtorch's λ-MART (on the padded lists a tagtorch user holds) and one
epoch of the neural ranker (LambdaRank loss) run in a fresh process: fit seconds, the resident
memory sampled during the fit (the data held included) and the process's peak, test NDCG@10,
and the λ-MART / LightGBM ratios against the targets (time at most 1.2x, peak at most 1.5x).

Usage::

    python benchmarks/bench_letor.py                      # synthetic, 2,000 training queries
    python benchmarks/bench_letor.py --scale --queries 18919 --documents 114 --iterations 100
    python benchmarks/bench_letor.py --data MSLR-WEB10K/Fold1 --epochs 5
    python benchmarks/bench_letor.py --data tests/fixtures/lightgbm_lambdarank \
        --train rank.train --test rank.test      # LightGBM's own example (no vali file)
"""

from __future__ import annotations

import argparse
import functools
import json
import logging
import resource
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import psutil
import pytorch_lightning as pl
import torch

from tagtorch.candidates.candidate_set import CandidateSet
from tagtorch.candidates.letor import (
    LetorData,
    letor_lists,
    load_letor,
    synthetic_letor_parts,
    write_synthetic_letor,
)
from tagtorch.losses import get_loss
from tagtorch.metrics.functional import ndcg_at_k
from tagtorch.rankers.neural import ListScorer, NeuralRanker
from tagtorch.rankers.trees import LambdaMARTRanker

LOSSES = ("ranknet", "lambdarank", "neuralndcg", "listnet")


def ndcg(scores: torch.Tensor, test: CandidateSet) -> tuple[float, float]:
    """Mean NDCG@5 and NDCG@10 over the test queries with a relevant document."""
    return tuple(float(ndcg_at_k(scores.float(), test.labels, test.mask, k).nanmean())
                 for k in (5, 10))  # type: ignore[return-value]


def flat(lists: CandidateSet) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(features [N, F], labels [N], group sizes)`` of the real candidates, list by list."""
    return (lists.features[lists.mask].numpy(), lists.labels[lists.mask].numpy(),
            lists.mask.sum(1).numpy())


def trees(data: LetorData, iterations: int) -> list[tuple[str, float, tuple[float, float]]]:
    """tagtorch's λ-MART and LightGBM's lambdarank with the same settings."""
    import lightgbm

    rows = []
    start = time.perf_counter()
    ours = LambdaMARTRanker(n_iterations=iterations, n_leaves=31, learning_rate=0.1,
                            min_leaf_size=20).fit(data.train, data.vali)
    seconds = time.perf_counter() - start
    rows.append(("tagtorch λ-MART (LightGBM)", seconds, ndcg(ours.score(data.test), data.test)))
    x, y, groups = flat(data.train)
    reference = lightgbm.LGBMRanker(objective="lambdarank", n_estimators=iterations,
                                    num_leaves=31, learning_rate=0.1, min_child_samples=20,
                                    lambdarank_truncation_level=10, verbose=-1, random_state=0)
    start = time.perf_counter()
    reference.fit(x, y, group=groups)
    seconds = time.perf_counter() - start
    test = data.test
    scores = torch.zeros(test.mask.shape)
    scores[test.mask] = torch.from_numpy(reference.predict(test.features[test.mask].numpy())
                                         ).float()
    rows.append(("LightGBM LGBMRanker lambdarank, direct", seconds, ndcg(scores, test)))
    return rows


def neural(data: LetorData, epochs: int) -> list[tuple[str, float, tuple[float, float]]]:
    """tagtorch's NeuralRanker with each loss: seconds per epoch and test NDCG."""
    rows = []
    for loss in LOSSES:
        trainer = functools.partial(pl.Trainer, max_epochs=epochs, accelerator="cpu",
                                    enable_progress_bar=False, logger=False,
                                    enable_model_summary=False, enable_checkpointing=False)
        ranker = NeuralRanker(loss=loss, trainer=trainer, patience=None, batch_size=64)
        start = time.perf_counter()
        ranker.fit(data.train, data.vali)
        per_epoch = (time.perf_counter() - start) / epochs
        rows.append((f"tagtorch NeuralRanker, {loss}", per_epoch,
                     ndcg(ranker.score(data.test), data.test)))
    return rows


def plain_loop(data: LetorData, loss: Callable[..., torch.Tensor], epochs: int,
               allrank: bool) -> tuple[float, tuple[float, float]]:
    """Seconds per epoch and test NDCG of a plain loop: MLP scorer, Adam, batches of 64 lists."""
    torch.manual_seed(0)
    train = data.train
    scorer = ListScorer(train.features.shape[-1])
    mean = train.features[train.mask].mean(0)
    std = train.features[train.mask].std(0).clamp_min(1e-6)
    optimizer = torch.optim.Adam(scorer.parameters(), lr=1e-3)
    order = torch.randperm(len(train), generator=torch.Generator().manual_seed(0))
    start = time.perf_counter()
    for _ in range(epochs):
        for begin in range(0, len(order), 64):
            rows = order[begin : begin + 64]
            mask, labels = train.mask[rows], train.labels[rows]
            scores = scorer((train.features[rows] - mean) / std, mask)
            if allrank:
                value = loss(scores, labels.masked_fill(~mask, -1.0))
            else:
                value = loss(scores, labels, mask)
            optimizer.zero_grad()
            value.backward()
            optimizer.step()
    per_epoch = (time.perf_counter() - start) / epochs
    with torch.no_grad():
        test = data.test
        scores = scorer((test.features - mean) / std, test.mask)
    return per_epoch, ndcg(scores, test)


def against_allrank(data: LetorData, epochs: int) -> list[tuple[str, float, tuple[float, float]]]:
    """The plain loop with tagtorch's loss, then with allRank's (where allRank is installed)."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from allrank_oracle import load_allrank_losses

    theirs = load_allrank_losses()
    rows = []
    for loss in ("listnet", "ranknet", "neuralndcg"):
        seconds, values = plain_loop(data, get_loss(loss), epochs, allrank=False)
        rows.append((f"plain loop, tagtorch {loss}", seconds, values))
        if theirs is not None:
            seconds, values = plain_loop(data, theirs[loss], epochs, allrank=True)
            rows.append((f"plain loop, allRank {loss}", seconds, values))
    return rows


SCALE_JOBS = ("lightgbm", "lambdamart", "neural")
"""``--scale``'s fits, each in a fresh process."""


class RssPeak:
    """The largest resident memory of this process sampled every 20 ms inside ``with``."""

    def __init__(self) -> None:
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        process = psutil.Process()
        while not self._stop.is_set():
            self.peak = max(self.peak, process.memory_info().rss)
            self._stop.wait(0.02)

    def __enter__(self) -> RssPeak:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()


def scale_job(job: str, queries: int, documents: int, iterations: int) -> dict[str, float]:
    """One of :data:`SCALE_JOBS` in this process: fit seconds, fit and process peak, NDCG@10."""
    import lightgbm

    start = time.perf_counter()
    parts = {part: (qids, grades, x) for part, qids, grades, x
             in synthetic_letor_parts(queries, 136, documents) if part != "vali"}
    made = time.perf_counter() - start
    (qids, grades, x), test_rows = parts.pop("train"), parts.pop("test")
    test = letor_lists(*test_rows)
    if job == "lightgbm":
        model = lightgbm.LGBMRanker(objective="lambdarank", n_estimators=iterations, num_leaves=31,
                                    learning_rate=0.1, min_child_samples=20, verbose=-1,
                                    lambdarank_truncation_level=10, random_state=0)
        group = np.unique(qids, return_counts=True)[1]
        with RssPeak() as memory:
            start = time.perf_counter()
            model.fit(x, grades, group=group)
            seconds = time.perf_counter() - start
        scores = torch.zeros(test.mask.shape)
        scores[test.mask] = torch.from_numpy(model.predict(test.features[test.mask].numpy())
                                             ).float()
    else:
        train = letor_lists(qids, grades, x)
        del qids, grades, x
        ranker: LambdaMARTRanker | NeuralRanker = LambdaMARTRanker(
            n_iterations=iterations, n_leaves=31, learning_rate=0.1, min_leaf_size=20)
        if job == "neural":
            trainer = functools.partial(pl.Trainer, max_epochs=1, accelerator="cpu",
                                        enable_progress_bar=False, logger=False,
                                        enable_model_summary=False, enable_checkpointing=False)
            ranker = NeuralRanker(loss="lambdarank", trainer=trainer, patience=None, batch_size=64)
        with RssPeak() as memory:
            start = time.perf_counter()
            ranker.fit(train)
            seconds = time.perf_counter() - start
        scores = ranker.score(test)
    return {"generate_s": made, "fit_s": seconds, "fit_peak_gb": memory.peak / 2**30,
            "peak_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
            "ndcg@10": ndcg(scores, test)[1]}


def scale_table(queries: int, documents: int, iterations: int) -> None:
    """Runs each of :data:`SCALE_JOBS` in a fresh process and prints the row and its ratios."""
    print(f"synthetic LETOR, {queries} training and {queries // 2} test queries, "
          f"{documents} documents a query on average, 136 features; {iterations} trees\n")
    header = f"{'fit':<36} {'seconds':>9} {'fit peak GB':>12} {'peak GB':>8} {'NDCG@10':>8}"
    print(header)
    print("-" * len(header))
    runs = {}
    for job in SCALE_JOBS:
        done = subprocess.run([sys.executable, __file__, "--job", job, "--queries", str(queries),
                               "--documents", str(documents), "--iterations", str(iterations)],
                              check=True, capture_output=True, text=True)
        runs[job] = json.loads(done.stdout.strip().splitlines()[-1])
        name = {"lightgbm": "LightGBM lambdarank, direct", "lambdamart": "tagtorch λ-MART",
                "neural": "tagtorch NeuralRanker, 1 epoch"}[job]
        row = runs[job]
        print(f"{name:<36} {row['fit_s']:>9.1f} {row['fit_peak_gb']:>12.2f} "
              f"{row['peak_gb']:>8.2f} {row['ndcg@10']:>8.4f}", flush=True)
    ours, theirs = runs["lambdamart"], runs["lightgbm"]
    for what, key, limit in (("time", "fit_s", 1.2), ("fit peak", "fit_peak_gb", 1.5)):
        ratio = ours[key] / theirs[key]
        print(f"{'PASS' if ratio <= limit else 'MISS'}  λ-MART / LightGBM {what}: "
              f"{ratio:.2f}x (target <= {limit}x)")


def main() -> None:
    """Prints the table (module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, help="a LETOR folder (default: synthetic)")
    parser.add_argument("--train", default="train.txt", help="--data's training file")
    parser.add_argument("--vali", default="vali.txt", help="--data's validation file, if any")
    parser.add_argument("--test", default="test.txt", help="--data's test file")
    parser.add_argument("--queries", type=int, default=2000, help="synthetic training queries")
    parser.add_argument("--documents", type=int, default=60, help="synthetic mean list length")
    parser.add_argument("--iterations", type=int, default=300, help="boosting iterations")
    parser.add_argument("--epochs", type=int, default=5, help="neural epochs")
    parser.add_argument("--scale", action="store_true",
                        help="the fresh-process row at --queries/--documents (module docstring)")
    parser.add_argument("--job", choices=SCALE_JOBS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.job:
        print(json.dumps(scale_job(args.job, args.queries, args.documents, args.iterations)))
        return
    if args.scale:
        scale_table(args.queries, args.documents, args.iterations)
        return
    logging.getLogger("pytorch_lightning").setLevel(logging.ERROR)
    logging.getLogger("lightning.pytorch").setLevel(logging.ERROR)
    with tempfile.TemporaryDirectory() as scratch:
        folder = args.data or write_synthetic_letor(Path(scratch) / "synthetic",
                                                    queries=args.queries,
                                                    mean_documents=args.documents)
        data = load_letor(folder, train=args.train, test=args.test, vali=args.vali)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; {data!r}\n")
    header = f"{'method':<44} {'seconds':>12} {'NDCG@5':>8} {'NDCG@10':>8}"
    print(header)
    print("-" * len(header))
    for rows, unit in ((trees(data, args.iterations), "fit"), (neural(data, args.epochs),
                                                                "per epoch"),
                       (against_allrank(data, args.epochs), "per epoch")):
        for name, seconds, (at5, at10) in rows:
            print(f"{name:<44} {seconds:>8.2f} {unit[:3]:>3} {at5:>8.4f} {at10:>8.4f}",
                  flush=True)


if __name__ == "__main__":
    main()
