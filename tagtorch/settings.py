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

A config node (``_target_`` and settings) is built by :func:`build_trusted`, never by Hydra's
generic factory when the node may come from a file (a saved model's manifest): the class must
come from the caller's trusted modules and be of the caller's kinds, and nothing nested is
built but what the class declares: its ``factory_settings`` (``functools.partial`` of a class
of the stated kinds, from :data:`FACTORY_MODULES`, keyword arguments plain data) and its
``config_settings`` (a model config the class builds itself, through this function in turn).

Layer 1 (:mod:`tagtorch.storage` below it): ``candidates``, ``rankers`` and ``itemrec`` build on
it.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, ClassVar, Literal, Self

from tagtorch.storage import CONFIG_KEYS, plain_json, refuse_config_nodes, trusted_class

__all__ = ["FACTORY_MODULES", "MODEL_TASKS", "ModelTask", "SignatureSettings", "build_trusted",
           "checked_settings", "trusted_config", "trusted_partial"]

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

    factory_settings: ClassVar[Mapping[str, tuple[type, ...]]] = MappingProxyType({})
    """Settings that are a ``functools.partial`` of a class of the given kinds (an optimizer),
    written as a ``_partial_`` config; :func:`checked_settings` rebuilds them."""

    config_settings: ClassVar[frozenset[str]] = frozenset()
    """Settings that hold the config of a model the class builds itself with
    :func:`build_trusted` (xTReD's base ranker, the hybrid's ranker, an ensemble's members)."""

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


FACTORY_MODULES = ("tagtorch.", "torch.", "pytorch_lightning.", "lightning.")
"""The packages whose classes a ``factory_settings`` config may name (nothing else is imported)."""


def trusted_partial(config: Any, kinds: tuple[type, ...], what: str) -> functools.partial[Any]:
    """The ``functools.partial`` of a ``_partial_`` config of a class of ``kinds``.

    Only classes of :data:`FACTORY_MODULES` are imported; the keyword arguments must be plain
    data (nothing nested is built).

    Raises:
        ValueError: naming ``what``, for anything else.

    Example:
        >>> import torch
        >>> trusted_partial({"_target_": "torch.optim.SGD", "_partial_": True, "lr": 0.1},
        ...                 (torch.optim.Optimizer,), "optimizer").keywords
        {'lr': 0.1}
    """
    config = plain_json(config)
    target = config.get("_target_") if isinstance(config, dict) else None
    if not isinstance(target, str) or config.get("_partial_") is not True:
        raise ValueError(f"{what}: expected a `_partial_` config with a `_target_`, got "
                         f"{config!r:.200}")
    keywords = {k: v for k, v in config.items() if k not in ("_target_", "_partial_")}
    refuse_config_nodes(keywords, what)
    return functools.partial(trusted_class(target, FACTORY_MODULES, kinds, what), **keywords)


def checked_settings(kind: type, settings: Mapping[str, Any], what: str) -> dict[str, Any]:
    """``kind``'s constructor arguments from config or manifest ``settings``, nothing built blindly.

    A ``factory_settings`` entry given as a config becomes its :func:`trusted_partial`; a
    ``config_settings`` entry is left to the class (which builds it with :func:`build_trusted`);
    a config node anywhere else is refused.

    Raises:
        ValueError: naming ``what`` and the setting.
    """
    factories: Mapping[str, tuple[type, ...]] = getattr(kind, "factory_settings", {})
    built: frozenset[str] = getattr(kind, "config_settings", frozenset())
    out = {}
    for name, value in settings.items():
        if name in factories and isinstance(value, Mapping):
            out[name] = trusted_partial(value, factories[name], f"{what}.{name}")
            continue
        if name not in built:
            refuse_config_nodes(value, f"{what}.{name}")
        out[name] = value
    return out


def trusted_config(config: Any, modules: tuple[str, ...], kinds: tuple[type, ...],
                   what: str) -> tuple[type, dict[str, Any]]:
    """The class a config node names and its constructor arguments, checked, nothing built.

    Args:
        config: ``{"_target_": "package.module.Class", **settings}`` (a dict or a DictConfig;
            ``_recursive_`` is ignored: nothing nested is built but what the class declares).
        modules: the module prefixes the class may come from.
        kinds: the classes it must subclass (one of them).
        what: the setting or file the config was read from, for the messages.

    Raises:
        ValueError: naming ``what``: no ``_target_``, a class outside ``modules`` or of
            another kind, another of Hydra's keys, or a config node where plain data belongs.
    """
    config = plain_json(config)
    target = config.get("_target_") if isinstance(config, dict) else None
    if not isinstance(target, str):
        raise ValueError(f"{what}: expected a config with a `_target_`, got {config!r:.200}")
    extra = sorted(set(config) & CONFIG_KEYS - {"_target_", "_recursive_"})
    if extra:
        raise ValueError(f"{what}: {extra[0]!r} is not allowed in a model config")
    kind = trusted_class(target, modules, kinds, what)
    settings = {k: v for k, v in config.items() if k not in CONFIG_KEYS}
    return kind, checked_settings(kind, settings, what)


def build_trusted(config: Any, modules: tuple[str, ...], kinds: tuple[type, ...],
                  what: str) -> Any:
    """The object a config node describes (:func:`trusted_config`), without Hydra's factory.

    Raises:
        ValueError: naming ``what``: what :func:`trusted_config` refuses, or settings the
            class refuses (``TypeError`` of an unknown setting included).

    Example:
        >>> build_trusted({"_target_": "tagtorch.rankers.latre.LatreWTS", "alpha": 0.8},
        ...               ("tagtorch.rankers.",), (SignatureSettings,), "model").alpha
        0.8
    """
    kind, settings = trusted_config(config, modules, kinds, what)
    try:
        return kind(**settings)
    except TypeError as error:
        raise ValueError(f"{what}: {error}") from None
