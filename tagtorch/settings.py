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

Each setting also becomes an attribute of the same name once the constructor has returned,
unless the constructor stored that attribute itself (a converted value, for example
``self.c = float(c)``), the class defines the name as a method or property (Lightning's
``trainer``) or registers it as a submodule: constructors check their arguments and keep only
what they transform, instead of copying every argument by hand.

Layer 1 (:mod:`tagtorch.storage` below it): ``candidates``, ``rankers`` and ``itemrec`` build on
it.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any, Literal, Self

from tagtorch.storage import plain_json

__all__ = ["MODEL_TASKS", "ModelTask", "SignatureSettings"]

ModelTask = Literal["tagrec", "itemrec", "resources", "posts"]
"""The task a model class serves, stated by the class itself (``task: ClassVar[ModelTask]``):
``tagrec`` ranks candidate tags of objects, ``itemrec`` ranks items for users and tags,
``resources`` ranks resources for tag queries, ``posts`` ranks tags for a user's new post of a
resource (personalized tag recommendation)."""

MODEL_TASKS: tuple[ModelTask, ...] = ("tagrec", "itemrec", "resources", "posts")


def _free_attribute(obj: object, name: str) -> bool:
    """Whether a setting may become ``obj``'s attribute: not set yet, no method, no module."""
    defined = inspect.getattr_static(type(obj), name, None)
    if name in vars(obj) or isinstance(defined, property | staticmethod | classmethod) \
            or inspect.isfunction(defined):
        return False
    registered = ("_modules", "_parameters", "_buffers")  # torch.nn.Module's own stores
    return not any(name in vars(obj).get(store, {}) for store in registered)


class SignatureSettings:
    """Records the constructor's arguments of every subclass instance (see the module docstring).

    Example:
        >>> class Model(SignatureSettings):
        ...     def __init__(self, rank: int = 8, name: str | None = None) -> None:
        ...         self.rank = rank
        >>> model = Model(rank=4)
        >>> model.settings(), model.name
        ({'rank': 4, 'name': None}, None)
    """

    _init_args: dict[str, Any]
    #: whether a constructor may take ``**kwargs`` (passed on to the parent's constructor)
    _forwards_kwargs: bool = False

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
            for name, value in own.items():
                if _free_attribute(self, name):
                    setattr(self, name, value)

        cls.__init__ = capture  # type: ignore[method-assign,assignment]

    @property
    def init_args(self) -> dict[str, Any]:
        """The constructor arguments as given (factories as callables)."""
        return self._init_args

    def settings(self) -> dict[str, Any]:
        """The constructor arguments (containers made plain): ``type(self)(**settings())``."""
        return {name: plain_json(value) for name, value in self._init_args.items()}

    def config(self) -> dict[str, Any]:
        """The config that builds an unfitted copy: ``{"_target_": "module.Class", **settings()}``.

        ``hydra.utils.instantiate`` builds it; it also keys what the settings shape (caches).

        Example:
            >>> from tagtorch.rankers.latre import LatreWTS
            >>> config = LatreWTS(alpha=0.8).config()
            >>> config["_target_"], config["alpha"]
            ('tagtorch.rankers.latre.LatreWTS', 0.8)
        """
        cls = type(self)
        return {"_target_": f"{cls.__module__}.{cls.__qualname__}", **self.settings()}

    def unfitted(self, **changes: Any) -> Self:
        """A new, unfitted instance with the same settings as given, ``changes`` on top."""
        return type(self)(**{**self._init_args, **changes})
