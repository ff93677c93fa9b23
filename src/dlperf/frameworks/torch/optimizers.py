"""An optimizer rebuilt, still without state, over other parameters: fake tensors (the operator count), sharded or
staged ones (FSDP, tensor parallelism, a pipeline stage), or with its foreach or fused implementation.

`type(opt)(params, **opt.defaults)` is not a rebuild: `defaults` may hold keys the constructor does not take (AdamW's
`decoupled_weight_decay`, a custom optimizer's internal flags). The constructor is given what its signature accepts,
with the values the user's factory chose.

Part of the PyTorch backend (`backend.py`), imported only in child processes.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable
from typing import Any

import torch


class NoSuchArgument(NotImplementedError):
    """The optimizer's constructor takes no such argument (ASGD has no `fused`, LBFGS no `foreach`):
    the optimizer has no such implementation, as opposed to a constructor that refused the value."""


def rebuild_optimizer(opt: torch.optim.Optimizer, params: Iterable[Any], **overrides: Any) -> torch.optim.Optimizer:
    """A new optimizer of `opt`'s class over `params` (tensors, or param groups: a group's own values stay), built
    from the keyword arguments its constructor accepts, `opt.defaults`' values, then `overrides` (e.g. fused=True).
    An override the constructor does not take raises NoSuchArgument; one whose value is None is left out instead,
    as "not asked". Whatever the constructor itself raises is let through."""
    cls = type(opt)
    accepted, open_kwargs = constructor_keywords(cls)
    missing = [k for k, v in overrides.items() if v is not None and not open_kwargs and k not in accepted]
    if missing:
        name = missing[0]
        raise NoSuchArgument(f"{cls.__name__} has no {name} implementation (its constructor takes no {name}=)")
    overrides = {k: v for k, v in overrides.items() if open_kwargs or k in accepted}
    kwargs = {k: v for k, v in opt.defaults.items() if open_kwargs or k in accepted}
    groups = [_without(p, overrides) if isinstance(p, dict) else p for p in params]
    return cls(groups, **{**kwargs, **overrides})


def constructor_keywords(cls: type) -> tuple[set[str], bool]:
    """The names `cls(params, ...)` takes by keyword, and whether it takes any (**kwargs)."""
    parameters = list(inspect.signature(cls).parameters.values())[1:]  # the first is the parameters
    named = {p.name for p in parameters if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    return named, any(p.kind is p.VAR_KEYWORD for p in parameters)


def _without(group: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """A param group without the overridden keys: a group's value would win over the constructor's."""
    return {k: v for k, v in group.items() if k not in overrides}


def parameter_names(model: torch.nn.Module) -> dict[int, tuple[str, ...]]:
    """Each parameter's names in `model`, by the parameter's id (every name of a tied one: an embedding's weight is
    also its decoder's): what `regrouped` finds it by once it was replaced."""
    names: dict[int, tuple[str, ...]] = {}
    for name, p in model.named_parameters(remove_duplicate=False):
        names[id(p)] = (*names.get(id(p), ()), name)
    return names


def regrouped(opt: torch.optim.Optimizer, names: dict[int, tuple[str, ...]], model: torch.nn.Module
              ) -> list[dict[str, Any]]:  # fmt: skip
    """`opt`'s parameter groups over the parameters of `model` in their places (sharding and parallelizing replace
    each nn.Parameter; a pipeline stage holds some of them), matched by name (`names`: `parameter_names` of the
    model `opt` was built for; a tied parameter by any of its names, as a stage may hold it under its decoder's
    alone): each group keeps its own values, a user's weight decay of 0 for the biases or a learning rate of its own.
    A parameter `model` does not hold is left out, and a group left without any."""
    now = dict(model.named_parameters(remove_duplicate=False))
    kept, seen = [], set()
    for group in opt.param_groups:
        params = []
        for p in group["params"]:
            held = next((now[n] for n in names.get(id(p), ()) if n in now), None)
            if held is not None and id(held) not in seen:  # a tied one once
                seen.add(id(held))
                params.append(held)
        if params:
            kept.append({**{k: v for k, v in group.items() if k != "params"}, "params": params})
    return kept
