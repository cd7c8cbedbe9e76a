"""Optional extras: with a dependency missing, a feature says in one line which extra to install.

Each case runs a fresh Python process in which importing the extra's modules fails (an import
hook raises ``ModuleNotFoundError`` for them, as on a machine without them installed).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

BLOCK = textwrap.dedent("""
    import importlib.abc, sys
    class Missing(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in BLOCKED:
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
    sys.meta_path.insert(0, Missing())
""")


def run_without(modules: list[str], code: str) -> subprocess.CompletedProcess:
    script = f"BLOCKED = {modules!r}\n{BLOCK}\n{textwrap.dedent(code)}"
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=180)


def test_serve_without_its_extra_says_so_in_one_line(tmp_path):
    done = run_without(["fastapi", "starlette", "uvicorn"], f"""
        import runpy, sys
        sys.argv = ["tagtorch.serve", {str(tmp_path)!r}]
        runpy.run_module("tagtorch.serve", run_name="__main__")
    """)
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stderr.strip().splitlines() == [
        "error: python -m tagtorch.serve needs the [serve] extra (fastapi is not installed): "
        "pip install 'tagtorch[serve]' (it installs fastapi, uvicorn)"]


def test_configs_compose_without_optuna_and_the_sweeper_names_its_extra():
    done = run_without(["optuna", "sqlalchemy"], """
        import warnings
        warnings.simplefilter("error")  # Hydra's plugin scanner warns on a failing import
        from tagtorch.api import compose
        compose(["data.n_objects=50"])
        from hydra_plugins.tagtorch_sweeper import sweeper
        from tagtorch.extras import MissingExtraError
        try:
            sweeper.finished_states()
        except MissingExtraError as error:
            print(error)
    """)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Error importing" not in done.stderr
    assert "pip install 'tagtorch[sweep]'" in done.stdout


def test_a_dask_backend_without_its_extra_names_it():
    done = run_without(["distributed", "dask"], """
        from tagtorch.engines import dask_client
        from tagtorch.extras import MissingExtraError
        try:
            with dask_client(None, 1):
                pass
        except MissingExtraError as error:
            print(error)
    """)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "pip install 'tagtorch[scale]'" in done.stdout
