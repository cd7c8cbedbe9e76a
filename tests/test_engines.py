"""The protocol's parallel jobs on a real local Dask or Ray cluster give the serial results."""

import numpy as np
import pytest

from tagtorch.candidates.features import LatreCandidates
from tagtorch.data.synthetic import generate_folksonomy
from tagtorch.data.text import TextProcessor
from tagtorch.engines import joblib_engine
from tagtorch.evaluation.tag_recommendation import TagRecommendationProtocol
from tagtorch.rankers.latre import LatreWTS
from tagtorch.rankers.trees import RandomForestRanker


@pytest.fixture(scope="module")
def folksonomy():
    return TextProcessor(cache=False).apply(generate_folksonomy(n_objects=500, seed=3))


def results(folksonomy, backend: str, n_jobs: int = 1):
    protocol = TagRecommendationProtocol(folds=[0, 1], online_objects=0, device="cpu",
                                         backend=backend, n_jobs=n_jobs)
    rankers = {"latre": lambda: LatreWTS(),
               "rf": lambda: RandomForestRanker(n_trees=20, n_leaves=50, n_jobs=1, seed=0)}
    frame = protocol.evaluate(folksonomy, lambda: LatreCandidates(max_rule_candidates=30),
                              rankers).results
    frame = frame[~frame["metric"].str.contains("ms_|seconds")]  # timings differ, figures not
    return frame.sort_values(["method", "fold", "metric"]).reset_index(drop=True)


@pytest.fixture(scope="module")
def serial(folksonomy):
    return results(folksonomy, "processes")


def test_a_local_dask_cluster_gives_the_serial_results(folksonomy, serial):
    got = results(folksonomy, "dask")
    assert got[["method", "fold", "metric"]].equals(serial[["method", "fold", "metric"]])
    np.testing.assert_array_equal(got["value"].to_numpy(), serial["value"].to_numpy())


@pytest.mark.slow
def test_a_local_ray_cluster_gives_the_serial_results(folksonomy, serial):
    got = results(folksonomy, "ray")
    np.testing.assert_array_equal(got["value"].to_numpy(), serial["value"].to_numpy())


def test_an_unknown_engine_is_refused():
    with pytest.raises(ValueError, match="backend"), joblib_engine("spark"):
        pass
    with pytest.raises(ValueError, match="backend"):
        TagRecommendationProtocol(backend="spark")
