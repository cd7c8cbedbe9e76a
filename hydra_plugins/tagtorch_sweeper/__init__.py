"""tagtorch's Optuna sweeper for Hydra: ``hydra/sweeper=tagtorch_optuna`` (see ``sweeper.py``)."""
