"""``--compile-scope``: what ``--compile`` hands to torch.compile.

``model`` (the default): the whole model (DDP wrapper included) in one ``torch.compile``. AOTAutograd then makes
the whole backward one autograd node, which hands out every parameter's gradient at its end: the post-accumulate-
grad hooks of graph mode's bucketed reducer (flatreduce.BucketedAllReduce) all fire after the whole backward, so
no bucket all-reduce overlaps it.

``blocks``: each *compile unit* of the model compiled on its own, in place. A model names its units with a
``compile_units()`` method returning dotted names (ddp_train.model.networks: the stem, every residual block, the head):
a name that resolves to a submodule is compiled with ``module.compile()`` (in place, so the state_dict keys, and
so the checkpoints, are those of the uncompiled model); a name that resolves to a method of the model (``stem``,
``head``: code in ``forward`` around the blocks, whose parameters are the model's own) is replaced, on the
instance, by its compiled version. Each unit's compiled backward is then its own autograd node, so the hooks of
a block's parameters fire as soon as that block's backward ends and their bucket goes out while the earlier
blocks' backward runs; inductor still fuses BatchNorm, ReLU and the residual add inside each block. What lies
between units (nn.Sequential's loop, a max-pool between blocks) runs eagerly.

A model without ``compile_units()`` (mnist-cnn, torchvision-*) is refused with ``blocks`` (config.parse_args).
A submodule unit must have a ``forward`` of its own: torch.compile skips frames of torch.nn's own code, so an
in-place compiled plain ``nn.Sequential`` would compile nothing (models.ConvBNReLU exists for that).

Units of one class share one code object, and dynamo keeps at most ``recompile_limit`` (8) compiled versions of
a code object before it falls back to eager: ResNet-18's blocks come in 7 shapes, PyramidNet-110's in dozens.
So the limit is raised to the number of units. Evaluation runs the units eagerly (``eval_eager``), as the
``model`` scope evaluates the uncompiled model: no second compilation for eval mode under ``no_grad``.
"""

from __future__ import annotations

import contextlib

import torch
from torch import nn

from ddp_train.errors import EXIT_USAGE, TrainError

SCOPES = ("model", "blocks")


def resolve_units(model: nn.Module) -> list[tuple[str, object, str]]:
    """(name, owner, attribute) of each of ``model.compile_units()``; a bad name is a TrainError."""
    names = getattr(model, "compile_units", None)
    if names is None:
        raise TrainError(f"--compile-scope blocks: {type(model).__name__} names no compile units (no "
                         "compile_units()); use --compile-scope model", EXIT_USAGE)
    out = []
    for name in names():
        *path, attr = name.split(".")
        owner = model
        for part in path:
            owner = getattr(owner, part, None) if not part.isdigit() or not isinstance(owner, nn.Sequential) \
                else owner[int(part)]
        target = getattr(owner, attr, None) if not attr.isdigit() else owner[int(attr)]
        if isinstance(target, nn.Module):
            fwd = type(target).forward
            if getattr(fwd, "__module__", "").startswith("torch."):
                raise TrainError(f"compile unit {name!r} of {type(model).__name__} is a {type(target).__name__}, "
                                 "whose forward is torch.nn's own code, which torch.compile skips; give it a forward "
                                 "of its own (as models.ConvBNReLU) or name its parent", EXIT_USAGE)
        elif not (callable(target) and getattr(target, "__self__", None) is owner):
            raise TrainError(f"compile unit {name!r} of {type(model).__name__} is neither a submodule nor a method",
                             EXIT_USAGE)
        out.append((name, owner, attr))
    if not out:
        raise TrainError(f"--compile-scope blocks: {type(model).__name__} names no compile units; "
                         "use --compile-scope model", EXIT_USAGE)
    return out


def compile_units(model: nn.Module, **compile_kwargs) -> list[str]:
    """Compile each unit of ``model`` in place (see the module doc); returns the units' names."""
    units = resolve_units(model)
    cfg = torch._dynamo.config
    key = "recompile_limit" if hasattr(cfg, "recompile_limit") else "cache_size_limit"
    setattr(cfg, key, max(getattr(cfg, key), len(units)))
    for _name, owner, attr in units:
        if attr.isdigit():
            owner[int(attr)].compile(**compile_kwargs)
            continue
        target = getattr(owner, attr)
        if isinstance(target, nn.Module):
            target.compile(**compile_kwargs)
        else:  # a method: its compiled version on the instance (not a module or tensor: not in the state_dict)
            object.__setattr__(owner, attr, torch.compile(target, **compile_kwargs))
    return [name for name, _, _ in units]


def eval_eager():
    """A context in which compiled code runs eagerly (evaluation with ``--compile-scope blocks``)."""
    set_stance = getattr(torch.compiler, "set_stance", None)
    return set_stance("force_eager") if set_stance is not None else contextlib.nullcontext()
