"""tagtorch: ranking in social tagging systems with PyTorch."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("tagtorch")
except PackageNotFoundError:  # a source tree that was never installed
    __version__ = "0+unknown"
