"""benchmarks/check_identical.py: identical runs pass, a changed figure or file fails."""

import gzip
import sys
import time
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from check_identical import compare


def _run(folder: Path, ndcg: float, seconds: float, run_line: str) -> Path:
    folder.mkdir()
    pd.DataFrame({"method": ["a", "a", "a"], "fold": [0, 0, 0],
                  "metric": ["ndcg@5", "fit_seconds", "online_ms_median"],
                  "value": [ndcg, seconds, seconds]}).to_csv(folder / "results.csv", index=False)
    (folder / "per_object.csv.gz").write_bytes(gzip.compress(b"method,object,ndcg@5\na,1,0.5\n",
                                                             mtime=time.time()))
    (folder / "run.a.trec").write_text(run_line)
    return folder


def test_timings_and_gzip_stamps_are_ignored_figures_and_files_are_not(tmp_path):
    before = _run(tmp_path / "before", 0.5, 1.0, "1 Q0 t 1 0.9 a\n")
    time.sleep(1.1)  # another gzip time stamp
    same = _run(tmp_path / "same", 0.5, 9.0, "1 Q0 t 1 0.9 a\n")
    assert all(identical for _, identical, _ in compare(before, same))
    figure = _run(tmp_path / "figure", 0.5000001, 1.0, "1 Q0 t 1 0.9 a\n")
    assert not dict((n, s) for n, s, _ in compare(before, figure))["results.csv"]
    ranking = _run(tmp_path / "ranking", 0.5, 1.0, "1 Q0 u 1 0.9 a\n")
    assert not dict((n, s) for n, s, _ in compare(before, ranking))["run.a.trec"]
