"""The installed tagtorch's version, in a module of layer 0 that every layer may read.

``tagtorch.__version__`` is this value; modules inside tagtorch import it from here, never from
the package root (whose lazy exports reach the top layers).
"""

from importlib.metadata import PackageNotFoundError, version

__all__ = ["__version__"]

try:
    __version__ = version("tagtorch")
except PackageNotFoundError:  # a source tree that was never installed
    __version__ = "0+unknown"
