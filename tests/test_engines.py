"""The protocol's parallel jobs on a real local Dask or Ray cluster give the serial results."""

import contextlib
import dataclasses
import gc
import itertools
import socket
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import torch
from joblib import Parallel

from tagtorch.candidates.candidate_set import CandidateSet
from tagtorch.candidates.generator import generate_in_tasks
from tagtorch.candidates.latre import LatreCandidates
from tagtorch.data.synthetic import generate_folksonomy
from tagtorch.data.terms import TermIndex
from tagtorch.data.text import TextProcessor
from tagtorch.engines import HTTP2_PREFACE, check_answers, joblib_engine
from tagtorch.errors import ConfigError
from tagtorch.evaluation.tag_recommendation import TagRecommendationProtocol
from tagtorch.metrics.functional import ndcg_at_k
from tagtorch.rankers.latre import LatreWTS
from tagtorch.rankers.trees import LambdaMARTRanker, MARTRanker, RandomForestRanker

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def folksonomy():
    return TextProcessor(cache=False).apply(generate_folksonomy(n_objects=500, seed=3))


def results(folksonomy, backend: str, n_jobs: int = 1, task_objects: int | None = None):
    protocol = TagRecommendationProtocol(folds=[0, 1], online_objects=0, device="cpu",
                                         backend=backend, n_jobs=n_jobs,
                                         task_objects=task_objects)
    rankers = {"latre": lambda: LatreWTS(),
               "rf": lambda: RandomForestRanker(n_trees=20, n_leaves=50, n_jobs=1, seed=0)}
    frame = protocol.evaluate(folksonomy, LatreCandidates(max_rule_candidates=30),
                              rankers).results
    frame = frame[~frame["metric"].str.contains("ms_|seconds")]  # timings differ, figures not
    return frame.sort_values(["method", "fold", "metric"]).reset_index(drop=True)


@pytest.fixture(scope="module")
def serial(folksonomy):
    return results(folksonomy, "processes")


def test_one_process_holds_one_candidate_set_at_a_time_and_gives_the_parallel_results(
        folksonomy, monkeypatch):
    # in parallel every set is made first and each job fits and tests one method; in one
    # process the fold's methods are all fitted, V's set dropped, then T's set made
    parallel = results(folksonomy, "processes", n_jobs=2)
    made, vals = [], []
    original = TagRecommendationProtocol._candidates

    def tracking(self, generator, fold, split, cache, parallel):
        if split == "test":
            gc.collect()
            made.append([ref() is None for ref in vals])
        candidates = original(self, generator, fold, split, cache, parallel)
        if split == "val":
            vals.append(weakref.ref(candidates))
        return candidates

    monkeypatch.setattr(TagRecommendationProtocol, "_candidates", tracking)
    got = results(folksonomy, "processes")
    assert made == [[True], [True, True]]  # fold 0's V gone before its T; then fold 1's
    assert got[["method", "fold", "metric"]].equals(parallel[["method", "fold", "metric"]])
    np.testing.assert_array_equal(got["value"].to_numpy(), parallel["value"].to_numpy())


@pytest.mark.integration
def test_a_local_dask_cluster_gives_the_serial_results(folksonomy, serial):
    got = results(folksonomy, "dask")
    assert got[["method", "fold", "metric"]].equals(serial[["method", "fold", "metric"]])
    np.testing.assert_array_equal(got["value"].to_numpy(), serial["value"].to_numpy())


@pytest.mark.integration
def test_candidate_tasks_on_a_local_dask_cluster_give_the_serial_results(folksonomy, serial):
    got = results(folksonomy, "dask", task_objects=20)
    np.testing.assert_array_equal(got["value"].to_numpy(), serial["value"].to_numpy())


def assert_same_sets(got: CandidateSet, want: CandidateSet) -> None:
    assert got.feature_names == want.feature_names
    for field in dataclasses.fields(CandidateSet):
        a, b = getattr(got, field.name), getattr(want, field.name)
        if isinstance(b, torch.Tensor):
            assert a.shape == b.shape and a.dtype == b.dtype, field.name
            assert torch.equal(a, b), field.name
        else:
            assert a == b, field.name


@pytest.mark.integration
@pytest.mark.parametrize("backend", ["processes", "dask"])
def test_generating_in_tasks_equals_one_call(folksonomy, backend):
    """Every field equal to the last bit, topics (fold-in seeded per chunk) and distances too."""
    fold = TagRecommendationProtocol(device="cpu").splits(folksonomy)[0]
    lda = {"n_topics": 4, "iterations": 20, "burn_in": 10}
    generator = LatreCandidates(device="cpu", chunk_size=16, distances=True,
                                diversity={"source": "lda", "lda": lda})
    generator.fit(fold.train_objects, fold.train_tags, TermIndex.from_folksonomy(folksonomy))
    want = generator(fold.test)
    before = dict(generator.stage_seconds)
    with joblib_engine(backend, n_workers=2):
        got = generate_in_tasks(generator, fold.test, 20, Parallel(n_jobs=2))  # 20 -> 32
    assert_same_sets(got, want)
    assert generator.stage_seconds["rules"] > before["rules"]  # the tasks' seconds are added


def test_concatenated_sets_pad_like_one_set():
    def one(objects, rows, tags):
        n = len(rows)
        return CandidateSet.from_flat(torch.tensor(objects), torch.tensor(rows),
                                      torch.tensor(tags), torch.arange(2.0 * n).view(n, 2),
                                      torch.ones(n), torch.ones(len(objects), dtype=torch.long),
                                      ("a", "b"))

    parts = [one([1], [0], [5]), one([2, 3], [0, 0, 0, 1], [6, 7, 8, 9])]
    whole = one([1, 2, 3], [0, 1, 1, 1, 2], [5, 6, 7, 8, 9])
    got = CandidateSet.concat(parts)
    assert parts == []  # emptied as copied
    assert got.tags.tolist() == [[5, -1, -1], [6, 7, 8], [9, -1, -1]]
    assert got.mask.tolist() == whole.mask.tolist()
    assert got.features[1].tolist() == [[0, 1], [2, 3], [4, 5]]
    assert got.features[0, 1:].abs().sum() == 0
    with pytest.raises(ValueError, match="feature names"):
        CandidateSet.concat([one([1], [0], [5]), dataclasses.replace(one([1], [0], [5]),
                                                                     feature_names=("c", "d"))])
    with pytest.raises(ValueError, match="nothing"):
        CandidateSet.concat([])


@pytest.fixture(scope="module")
def lists(folksonomy):
    fold = TagRecommendationProtocol(device="cpu").splits(folksonomy)[0]
    generator = LatreCandidates(device="cpu", max_rule_candidates=30).fit(
        fold.train_objects, fold.train_tags, TermIndex.from_folksonomy(folksonomy))
    return generator(fold.val), generator(fold.test)


@pytest.mark.integration
@pytest.mark.parametrize("cls", [LambdaMARTRanker, MARTRanker])
def test_lightgbm_on_a_local_dask_cluster_ranks_like_one_process(cls, lists, monkeypatch):
    import lightgbm

    val, test = lists
    seen = []
    model_class = lightgbm.DaskLGBMRanker if cls is LambdaMARTRanker else lightgbm.DaskLGBMRegressor
    fit = model_class.fit

    def spy(self, X, y, **kwargs):  # noqa: N803 (scikit-learn's names)
        seen.append((X.chunks[0], y.chunks[0], kwargs.get("group")))
        return fit(self, X, y, **kwargs)

    monkeypatch.setattr(model_class, "fit", spy)
    settings = {"n_iterations": 100, "n_jobs": 1, "seed": 0}
    local = cls(**settings).fit(val)
    remote = cls(**settings, dask={"n_workers": 2, "partitions": 3}).fit(val)
    (rows, label_rows, group), = seen
    assert len(rows) == 3 and rows == label_rows and sum(rows) == int(val.mask.sum())
    if cls is LambdaMARTRanker:  # every partition holds whole lists
        sizes = group.compute()
        cuts = np.cumsum([0, *group.chunks[0]])
        assert [int(sizes[a:b].sum()) for a, b in itertools.pairwise(cuts)] == \
            list(rows)
    assert remote.model_.num_trees() == 100

    def ndcg(ranker) -> float:
        return float(ndcg_at_k(ranker.score(test), test.labels, test.mask, 5,
                               n_relevant=test.n_relevant).nanmean())

    assert abs(ndcg(remote) - ndcg(local)) < 0.03, (ndcg(remote), ndcg(local))
    with pytest.raises(ValueError, match="early stopping"):
        cls(early_stopping_rounds=5, dask={"n_workers": 2})
    with pytest.raises(ValueError, match="dask settings"):
        cls(dask={"workers": 2})


@pytest.mark.slow
def test_a_local_ray_cluster_gives_the_serial_results(folksonomy, serial):
    got = results(folksonomy, "ray")
    np.testing.assert_array_equal(got["value"].to_numpy(), serial["value"].to_numpy())


def test_an_unknown_engine_is_refused():
    with pytest.raises(ValueError, match="backend"), joblib_engine("spark"):
        pass
    with pytest.raises(ValueError, match="backend"):
        TagRecommendationProtocol(backend="spark")


def free_port() -> int:
    """A port on 127.0.0.1 where nothing listens (bound, then closed)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.mark.parametrize("backend, scheme", [("dask", "tcp://"), ("ray", ""), ("ray", "ray://")])
def test_an_address_where_no_cluster_listens_is_a_config_error_within_its_timeout(backend,
                                                                                  scheme):
    address = f"{scheme}127.0.0.1:{free_port()}"
    start = time.monotonic()
    with pytest.raises(ConfigError) as info, joblib_engine(backend, address, connect_timeout=1):
        pass
    assert time.monotonic() - start < 10
    message = str(info.value)
    assert message.startswith(f"config key task.address={address!r}: expected"), message
    assert "answers within 1 s" in message and "\n" not in message


@contextlib.contextmanager
def silent_listener(closes: bool = False) -> Iterator[int]:
    """A port on 127.0.0.1 that accepts connections, then says nothing (or closes them)."""
    accepted: list[socket.socket] = []
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(16)
        server.settimeout(0.2)
        stop = threading.Event()

        def accept() -> None:
            while not stop.is_set():
                with contextlib.suppress(OSError):
                    connection = server.accept()[0]
                    connection.close() if closes else accepted.append(connection)

        worker = threading.Thread(target=accept, daemon=True)
        worker.start()
        try:
            yield server.getsockname()[1]
        finally:
            stop.set()
            worker.join(5)
            for connection in accepted:
                connection.close()


@pytest.mark.parametrize("backend, scheme, closes", [
    ("dask", "tcp://", False), ("ray", "", False), ("dask", "tcp://", True),
    ("ray", "ray://", True)])
def test_an_address_that_accepts_and_never_answers_is_a_config_error_in_time(backend, scheme,
                                                                             closes):
    """A listener that accepts and then says nothing held Dask and Ray for minutes."""
    with silent_listener(closes) as port:
        address = f"{scheme}127.0.0.1:{port}"
        start = time.monotonic()
        with pytest.raises(ConfigError) as info, \
                joblib_engine(backend, address, connect_timeout=1):
            pass
    assert time.monotonic() - start < 10
    message = str(info.value)
    assert message.startswith(f"config key task.address={address!r}: expected"), message
    assert "answers within 1 s" in message and "\n" not in message


def test_a_grpc_server_answers_the_probe():
    """The probe reads a real HTTP/2 server's SETTINGS frame: a minimal one on 127.0.0.1."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)

        def answer() -> None:
            connection = server.accept()[0]
            with connection:
                connection.recv(len(HTTP2_PREFACE))
                connection.sendall(bytes([0, 0, 0, 4, 0, 0, 0, 0, 0]))  # empty SETTINGS
                connection.recv(1)

        threading.Thread(target=answer, daemon=True).start()
        check_answers(f"127.0.0.1:{server.getsockname()[1]}", "a gRPC server", timeout=2)


@pytest.mark.integration
@pytest.mark.parametrize("backend", ["dask", "ray"])
def test_the_command_line_names_an_unreachable_cluster_in_one_line(tmp_path, backend):
    """Within the default 5-second timeout (Dask alone took 30 s and a traceback, Ray minutes)."""
    address = f"{'tcp://' if backend == 'dask' else ''}127.0.0.1:{free_port()}"
    done = subprocess.run(
        [sys.executable, "-m", "tagtorch.train", "logger=none", f"hydra.run.dir={tmp_path}",
         "data.n_objects=300", "task.folds=[0]", f"task.backend={backend}",
         f"task.address={address}"],
        cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    assert done.stderr.splitlines()[-1].startswith(
        f"error: config key task.address='{address}': expected the address of a")
