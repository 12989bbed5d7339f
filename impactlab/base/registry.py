"""The policy registry: names (and ``"module:Class"`` specs) to policy classes.

Built-in policies are listed by import path and imported on first use, so this module sits at
the bottom of the package with the configuration that validates against it. A researcher's
policy joins with ``register_policy(name, cls)``, or without registering at all by naming it
``"my_module:MyPolicy"`` wherever a policy name is accepted (config, CLI, sweeps: a spec also
works in worker processes, where an interactive registration does not exist).

The registry is the one piece of process-wide state in impactlab, as plug-in registries are.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Iterator, Mapping
from typing import Any

from .params import Param, ParamError, declared

BUILTIN = {
    "fifo": "impactlab.policies.fifo:Fifo",
    "legacy": "impactlab.policies.legacy:Legacy",
    "fairshare": "impactlab.policies.fairshare:FairShare",
    "impactful": "impactlab.policies.impactful:Impactful",
}
_registered: dict[str, type | str] = dict(BUILTIN)


def register_policy(name: str, cls: type | str) -> None:
    """Make a policy class (or a ``"module:Class"`` spec) available under ``name``."""
    if not name or ":" in name:
        raise ValueError(f"a policy name is a plain word, got {name!r}")
    if isinstance(cls, type) and not dataclasses.is_dataclass(cls):
        raise TypeError(f"{cls.__name__}: a policy is a dataclass whose fields are its knobs")
    _registered[name] = cls


def unregister_policy(name: str) -> None:
    """Remove a registered policy (built-ins cannot be removed)."""
    if name in BUILTIN:
        raise ValueError(f"{name!r} is built in")
    _registered.pop(name, None)


def policy_names() -> list[str]:
    """Registered policy names, built-ins first."""
    return list(_registered)


def policy_class(name: str) -> type[Any]:
    """The class a policy name or ``"module:Class"`` spec stands for."""
    target = _registered.get(name)
    if target is None and ":" not in name:
        raise ParamError(
            f"unknown policy {name!r}; choose from {sorted(_registered)} "
            "or give a 'module:Class' spec"
        )
    target = target or name
    if isinstance(target, str):
        target = _import(target)
        if name in _registered:
            _registered[name] = target
    return target


def _import(spec: str) -> type:
    module, _, attr = spec.partition(":")
    try:
        cls = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as err:
        raise ParamError(f"cannot load policy {spec!r}: {err}") from None
    if not isinstance(cls, type) or not dataclasses.is_dataclass(cls):
        raise ParamError(f"policy {spec!r} is not a dataclass (a policy's fields are its knobs)")
    return cls


def policy_params(name: str) -> list[Param]:
    """The knobs of a policy: its dataclass fields, with their declarations where present."""
    cls = policy_class(name)
    known = {p.name: p for p in declared(cls)}
    out = []
    for f in dataclasses.fields(cls):
        if f.name in known:
            out.append(dataclasses.replace(known[f.name], group=name, policies=(name,)))
        elif f.init and f.default is not dataclasses.MISSING:
            kind = type(f.default) if f.default is not None else str
            out.append(
                Param(
                    f.name,
                    f.default,
                    kind,
                    name,
                    f"{name} knob (not declared)",
                    nullable=f.default is None,
                    policies=(name,),
                )
            )
    return out


def check_knobs(name: str, knobs: Mapping[str, Any]) -> dict[str, Any]:
    """Knob overrides for policy ``name``, each checked against its declaration."""
    params = {p.name: p for p in policy_params(name)}
    out = {}
    for key, value in knobs.items():
        if key not in params:
            raise ParamError(
                f"policy {name!r} has no knob {key!r}; its knobs: {sorted(params) or 'none'}"
            )
        out[key] = params[key].check(value)
    return out


class Registry(Mapping[str, type]):
    """A read-only view of the registry: name -> policy class (imported on access)."""

    def __getitem__(self, name: str) -> type:
        if name not in _registered:
            raise KeyError(name)
        return policy_class(name)

    def __iter__(self) -> Iterator[str]:
        return iter(list(_registered))

    def __len__(self) -> int:
        return len(_registered)


REGISTRY = Registry()
