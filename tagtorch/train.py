"""``python -m tagtorch.train``: the one Hydra entry point for every task and ranker.

Examples:
    python -m tagtorch.train                          # Sum baseline on synthetic data
    python -m tagtorch.train +experiment=lastfm_sum   # the same on HetRec LastFM-2k
    python -m tagtorch.train data=movielens task=describe
    python -m tagtorch.train logger=csv task.protocol.folds=[0]

The composed configuration is checked before any work (:mod:`tagtorch.config_checks`). A bad
setting, a malformed data file, a missing or unreadable file ends the run with one line on
standard error naming the key or the file, and exit status 2; other errors keep their
traceback (they are bugs to report).
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any

import hydra
import pytorch_lightning as pl
from hydra.core.hydra_config import HydraConfig
from hydra.errors import InstantiationException
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from tagtorch.config_checks import ConfigError, check_config
from tagtorch.data.loaders.errors import DataFormatError
from tagtorch.storage import UnreadableFileError

log = logging.getLogger(__name__)

#: Errors that are the input's fault, not tagtorch's: shown as one line, without a traceback.
USER_ERRORS: tuple[type[BaseException], ...] = (ConfigError, DataFormatError, UnreadableFileError,
                                                 FileNotFoundError, PermissionError,
                                                 IsADirectoryError)


def user_error(error: BaseException) -> BaseException | None:
    """The input error behind ``error`` (Hydra wraps errors raised while instantiating)."""
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, USER_ERRORS):
            return seen
        if not isinstance(seen, InstantiationException):
            return None
        seen = seen.__cause__
    return None


def train(cfg: DictConfig) -> Any:
    """Loads the data, normalizes its text, and runs the configured task.

    Args:
        cfg: the composed configuration (``conf/train.yaml``).

    Returns:
        What the task returns (an :class:`~tagtorch.evaluation.protocol.EvaluationResult`
        for tag recommendation).
    """
    check_config(cfg)
    pl.seed_everything(cfg.seed, workers=True, verbose=False)
    output_dir = Path(cfg.paths.output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    OmegaConf.save(cfg, output_dir / "config.yaml", resolve=True)

    log.info("loading data: %s", cfg.data._target_)
    folksonomy = instantiate(cfg.data)
    if cfg.get("text") is not None:
        folksonomy = instantiate(cfg.text).apply(folksonomy)
    log.info("%r", folksonomy)

    loggers = [instantiate(c) for c in (cfg.get("logger") or {}).values()]
    params = OmegaConf.to_container(cfg, resolve=True)
    for logger in loggers:
        logger.log_hyperparams(params)

    task = instantiate(cfg.task, _convert_="all")
    try:
        return task.run(folksonomy, cfg, output_dir, loggers)
    finally:
        for logger in loggers:
            logger.finalize("success")
            finish = getattr(getattr(logger, "experiment", None), "finish", None)
            if finish is not None:  # a wandb run: close it so its files are complete
                finish()


@hydra.main(version_base="1.3", config_path="../conf", config_name="train")
def main(cfg: DictConfig) -> None:
    """Hydra entry point; the output folder is ``cfg.paths.output_dir``."""
    log.info("output folder: %s", HydraConfig.get().runtime.output_dir)
    try:
        train(cfg)
    except Exception as error:
        cause = user_error(error)
        if cause is None:
            raise
        print(f"error: {cause}", file=sys.stderr)
        raise SystemExit(2) from None


if __name__ == "__main__":
    main()
