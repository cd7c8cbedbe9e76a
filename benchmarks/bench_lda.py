"""Benchmark of LDA training speed: our Gibbs samplers against tomotopy (and gensim), side by side.

On the same corpora, measured in one run, it prints the tokens per second of one Gibbs sweep
(one pass over every token) for

- **ours, exact**: the sequential collapsed Gibbs sampler (:mod:`tagtorch.topics.gibbs`,
  numba, one thread);
- **ours, batched**: the approximate block-parallel sampler in torch, on ``--device`` (CUDA
  when available, else the CPU);
- **tomotopy** ``LDAModel`` with ``workers=1`` and with all cores;
- **gensim** ``LdaModel``: online variational Bayes, a different algorithm; its figure is the
  tokens per second of one pass over (a seeded sample of ``--gensim-docs`` documents of) the
  corpus, for orientation only;

and each one's ratio to tomotopy on the same number of threads: the exact sampler and gensim
against ``workers=1``, the batched sampler against tomotopy on as many threads as torch uses
(``--torch-threads``; on a GPU, that ratio compares a GPU with the CPU's cores).

Our sweeps are timed as the difference between a fit of ``1 + n`` sweeps and a fit of one
sweep (the faster of two), so the initialization is excluded and every timed sweep includes the
log-likelihood our fit computes after each sweep (tomotopy computes none while training). The
numba compilation is timed on its own, on a tiny corpus, before anything else. tomotopy runs
one untimed sweep (its initialization) before its ``n`` timed sweeps. ``n`` is ``--iterations``,
or more on a small corpus, so that at least ``--min-tokens`` tokens are timed.

Corpora: (a) HetRec LastFM's artists as documents of their tags, repeats kept (when
``$TAGTORCH_DATA_DIR`` is set), (b) a synthetic LDA corpus of ``--tokens`` tokens (default 10
million, 10,000 words, documents of 100 tokens drawn from 100 true topics).

Usage::

    TAGTORCH_DATA_DIR=/path/to/data python benchmarks/bench_lda.py
    python benchmarks/bench_lda.py --tokens 1000000 --topics 100 --skip-gensim
"""

from __future__ import annotations

import argparse
import os
import time
import warnings
from dataclasses import dataclass

import numpy as np
import torch

from tagtorch.data.ragged import Ragged
from tagtorch.topics import LDA


@dataclass
class Corpus:
    """Documents (rows of word ids) and the vocabulary size."""

    name: str
    documents: Ragged
    n_words: int

    @property
    def n_tokens(self) -> int:
        return int(self.documents.offsets[-1])


def lastfm_corpus(data_dir: str) -> Corpus:
    """LastFM's artists, each a document of its tags with repeats (one token per assignment)."""
    from tagtorch.data.loaders.hetrec import load_lastfm

    folksonomy = load_lastfm(data_dir, download=False)
    table = folksonomy.assignments
    documents = Ragged.from_groups(table["object"].to_numpy(), table["tag"].to_numpy(),
                                   folksonomy.n_objects)
    return Corpus("LastFM", documents, folksonomy.n_tags)


def synthetic_corpus(n_tokens: int, n_words: int = 10_000, length: int = 100,
                     true_topics: int = 100, seed: int = 0) -> Corpus:
    """An LDA corpus: Dirichlet(0.1) mixtures of Dirichlet(0.05) topics, ``length``-token docs."""
    rng = np.random.default_rng(seed)
    n_docs = max(1, n_tokens // length)
    phi_cum = np.cumsum(rng.dirichlet(np.full(n_words, 0.05), size=true_topics), axis=1)
    theta_cum = np.cumsum(rng.dirichlet(np.full(true_topics, 0.1), size=n_docs), axis=1)
    docs = np.repeat(np.arange(n_docs), length)
    topics = np.empty(len(docs), dtype=np.int64)
    for lo in range(0, n_docs, 10_000):  # bounded memory
        rows = np.arange(lo, min(n_docs, lo + 10_000))
        u = rng.random((len(rows), length))
        drawn = np.stack([np.searchsorted(theta_cum[r], u[i]) for i, r in enumerate(rows)])
        topics[lo * length:(lo + len(rows)) * length] = drawn.ravel()
    words = np.empty(len(docs), dtype=np.int64)
    u = rng.random(len(docs))
    for k in range(true_topics):
        at = np.flatnonzero(topics == k)
        words[at] = np.searchsorted(phi_cum[k], u[at])
    words = np.minimum(words, n_words - 1)
    offsets = np.arange(n_docs + 1, dtype=np.int64) * length
    return Corpus(f"synthetic {len(words) / 1e6:g}M", Ragged(offsets, words), n_words)


def timed_sweeps(corpus: Corpus, args: argparse.Namespace) -> int:
    """``--iterations``, or more on a small corpus: at least ``--min-tokens`` tokens timed."""
    return max(args.iterations, -(-args.min_tokens // max(corpus.n_tokens, 1)))


def ours_seconds_per_sweep(corpus: Corpus, args: argparse.Namespace, sampler: str,
                           device: str) -> float:
    """Seconds of one sweep of our sampler: (fit of 1 + n sweeps - fit of 1 sweep) / n."""

    def fit_seconds(iterations: int) -> float:
        model = LDA(n_topics=args.topics, iterations=iterations, burn_in=iterations - 1,
                    sampler=sampler, device=device, block_tokens=args.block_tokens,
                    progress=False)
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        start = time.perf_counter()
        model.fit(corpus.documents, corpus.n_words)
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        return time.perf_counter() - start

    sweeps = timed_sweeps(corpus, args)
    one = min(fit_seconds(1), fit_seconds(1))  # the fixed costs, twice: the less disturbed
    return max(fit_seconds(1 + sweeps) - one, 1e-9) / sweeps


def tomotopy_seconds_per_sweep(corpus: Corpus, args: argparse.Namespace, workers: int) -> float:
    """Seconds of one tomotopy sweep (after one untimed sweep)."""
    import tomotopy

    model = tomotopy.LDAModel(k=args.topics, alpha=25.0 / args.topics, eta=0.1, seed=0,
                              tw=tomotopy.TermWeight.ONE)
    model.optim_interval = 0
    vocabulary = [str(w) for w in range(corpus.n_words)]
    for row in corpus.documents:
        if len(row):
            model.add_doc([vocabulary[w] for w in row])
    model.train(1, workers=workers)
    sweeps = timed_sweeps(corpus, args)
    start = time.perf_counter()
    model.train(sweeps, workers=workers)
    return (time.perf_counter() - start) / sweeps


def gensim_tokens_per_second(corpus: Corpus, args: argparse.Namespace) -> tuple[float, int]:
    """Tokens per second of one online-VB pass of gensim's LdaModel over a document sample."""
    from gensim.models import LdaModel

    rng = np.random.default_rng(0)
    n_docs = len(corpus.documents)
    rows = np.sort(rng.choice(n_docs, size=min(n_docs, args.gensim_docs), replace=False))
    bows = []
    for r in rows:
        ids, counts = np.unique(corpus.documents[r], return_counts=True)
        if len(ids):
            bows.append(list(zip(ids.tolist(), counts.tolist(), strict=True)))
    tokens = sum(c for bow in bows for _, c in bow)
    start = time.perf_counter()
    LdaModel(bows, num_topics=args.topics, id2word={w: str(w) for w in range(corpus.n_words)},
             passes=1, alpha=25.0 / args.topics, eta=0.1, random_state=0)
    return tokens / (time.perf_counter() - start), tokens


def compile_seconds() -> float:
    """Seconds of the first tiny fit (numba compiles the exact sampler's kernels)."""
    docs = Ragged.from_lists([[0, 1, 2], [2, 3]])
    start = time.perf_counter()
    model = LDA(n_topics=2, iterations=2, burn_in=1, progress=False).fit(docs, 4)
    model.perplexity(Ragged.from_lists([[0, 1, 2, 3]]))
    return time.perf_counter() - start


def bench(corpus: Corpus, args: argparse.Namespace) -> None:
    """Prints the table of one corpus."""
    cores = os.cpu_count() or 1
    n = corpus.n_tokens
    print(f"\n{corpus.name}: {len(corpus.documents)} documents, {n} tokens, "
          f"{corpus.n_words} words; Z = {args.topics}; {timed_sweeps(corpus, args)} timed sweeps")
    rows: list[tuple[str, float, str]] = []
    tt1 = n / tomotopy_seconds_per_sweep(corpus, args, 1)
    ttn = n / tomotopy_seconds_per_sweep(corpus, args, cores) if cores > 1 else tt1
    exact = n / ours_seconds_per_sweep(corpus, args, "exact", "cpu")
    rows.append(("ours, exact (numba, 1 thread)", exact, f"{exact / tt1:.2f}x tomotopy 1"))
    batched = n / ours_seconds_per_sweep(corpus, args, "batched", args.device)
    threads = torch.get_num_threads()
    reference, label = (tt1, "1") if threads == 1 else (ttn, str(cores))
    rows.append((f"ours, batched (torch, {args.device}, {threads} threads)",
                 batched, f"{batched / reference:.2f}x tomotopy {label}"))
    rows.append(("tomotopy, workers=1", tt1, "reference"))
    rows.append((f"tomotopy, workers={cores}", ttn, f"{ttn / tt1:.2f}x tomotopy 1"))
    if not args.skip_gensim:
        speed, tokens = gensim_tokens_per_second(corpus, args)
        rows.append((f"gensim LdaModel (online VB, 1 pass, {tokens} tokens)", speed,
                     f"{speed / tt1:.2f}x tomotopy 1"))
    width = max(len(name) for name, _, _ in rows)
    header = f"{'method':<{width}} {'tokens/s per sweep':>19} {'ratio':>18}"
    print(header)
    print("-" * len(header))
    for name, speed, ratio in rows:
        print(f"{name:<{width}} {speed:>19,.0f} {ratio:>18}")


def main() -> None:
    """Parses the options and prints one table per corpus."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tokens", type=int, default=10_000_000,
                        help="tokens of the synthetic corpus (0: skip it)")
    parser.add_argument("--topics", type=int, default=250)
    parser.add_argument("--iterations", type=int, default=3, help="timed sweeps")
    parser.add_argument("--min-tokens", type=int, default=10_000_000,
                        help="on a small corpus, more sweeps are timed: at least this many tokens")
    parser.add_argument("--block-tokens", type=int, default=1_000_000,
                        help="batched sampler: tokens per block")
    parser.add_argument("--gensim-docs", type=int, default=20_000,
                        help="documents of gensim's timed pass (a seeded sample)")
    parser.add_argument("--skip-gensim", action="store_true")
    parser.add_argument("--torch-threads", type=int, default=None,
                        help="CPU threads of torch (default: torch's own choice)")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = parser.parse_args()
    if args.torch_threads:
        torch.set_num_threads(args.torch_threads)
    warnings.filterwarnings("ignore", message="The training result may differ")  # workers > 1
    print(f"torch {torch.__version__}, {torch.get_num_threads()} torch threads, "
          f"{os.cpu_count()} cores; batched sampler on {args.device}")
    print(f"numba compilation of the exact sampler (first tiny fit): {compile_seconds():.1f} s")
    data_dir = os.environ.get("TAGTORCH_DATA_DIR")
    if data_dir:
        bench(lastfm_corpus(data_dir), args)
    if args.tokens:
        bench(synthetic_corpus(args.tokens), args)


if __name__ == "__main__":
    main()
