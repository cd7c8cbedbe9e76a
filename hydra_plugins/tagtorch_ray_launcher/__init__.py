"""Hydra launcher ``hydra/launcher=tagtorch_ray``: the jobs of a sweep as tasks on a Ray cluster."""
