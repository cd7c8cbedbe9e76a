"""Settings captured from the constructor signature: one mechanism for tag rankers and item models.

A class that derives from :class:`SignatureSettings` records the arguments of each instance's
constructor, bound to the constructor's signature with its defaults filled in, in
``_init_args``; :attr:`SignatureSettings.init_args` returns them as given (factories as
callables), :meth:`SignatureSettings.settings` as plain containers, and
``type(obj)(**obj.settings())`` builds an unfitted copy.

The settings are those of the outermost constructor. A constructor that takes ``**kwargs``
(allowed only where the class sets ``_forwards_kwargs = True``, as the item models do) passes
them on to its parent's constructor, whose captured settings (the parent's defaults included,
and whatever the subclass set as its own defaults) are merged under the subclass's named
arguments. ``*args`` are never allowed: settings are named.

A class that sets ``_settings_as_attributes = True`` also gets each setting as an attribute of
the same name, once its constructor has returned, unless the constructor stored that attribute
itself (a converted value, for example ``self.c = float(c)``): constructors then check their
arguments and keep only what they transform, instead of copying every argument by hand.

Layer 1 (:mod:`tagtorch.storage` below it): ``rankers`` and ``itemrec`` both build on it.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any

from tagtorch.storage import plain_json

__all__ = ["SignatureSettings"]


class SignatureSettings:
    """Records the constructor's arguments of every subclass instance (see the module docstring).

    Example:
        >>> class Model(SignatureSettings):
        ...     def __init__(self, rank: int = 8, name: str | None = None) -> None:
        ...         self.rank = rank
        >>> Model(rank=4).settings()
        {'rank': 4, 'name': None}
    """

    _init_args: dict[str, Any]
    #: whether a constructor may take ``**kwargs`` (passed on to the parent's constructor)
    _forwards_kwargs: bool = False
    #: whether the settings become attributes (those the constructor did not set itself)
    _settings_as_attributes: bool = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Wraps a subclass's own ``__init__`` to record its arguments, bound to its signature."""
        super().__init_subclass__(**kwargs)
        init = cls.__dict__.get("__init__")
        if init is None:
            return
        signature = inspect.signature(init)
        kinds = {p.name: p.kind for p in signature.parameters.values()}
        refused = [name for name, kind in kinds.items()
                   if kind == inspect.Parameter.VAR_POSITIONAL
                   or (kind == inspect.Parameter.VAR_KEYWORD and not cls._forwards_kwargs)]
        if refused:
            raise TypeError(f"{cls.__name__}.__init__ takes {refused}: settings must be named "
                            "constructor arguments")
        forwards = inspect.Parameter.VAR_KEYWORD in kinds.values()

        @functools.wraps(init)
        def capture(self: SignatureSettings, *args: Any, **kwargs: Any) -> None:
            init(self, *args, **kwargs)
            bound = signature.bind(self, *args, **kwargs)
            bound.apply_defaults()
            own = {name: value for name, value in list(bound.arguments.items())[1:]
                   if kinds[name] != inspect.Parameter.VAR_KEYWORD}  # without self, **kwargs
            inherited = getattr(self, "_init_args", {}) if forwards else {}
            self._init_args = {**inherited, **own}
            if self._settings_as_attributes:
                for name, value in own.items():
                    if name not in vars(self):
                        setattr(self, name, value)

        cls.__init__ = capture  # type: ignore[method-assign,assignment]

    @property
    def init_args(self) -> dict[str, Any]:
        """The constructor arguments as given (factories as callables)."""
        return self._init_args

    def settings(self) -> dict[str, Any]:
        """The constructor arguments (containers made plain): ``type(self)(**settings())``."""
        return {name: plain_json(value) for name, value in self._init_args.items()}
