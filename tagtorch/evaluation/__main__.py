"""``python -m tagtorch.evaluation QRELS RUN [RUN ...]``: :mod:`tagtorch.evaluation.score_runs`."""

from tagtorch.evaluation.score_runs import main

if __name__ == "__main__":
    main()
