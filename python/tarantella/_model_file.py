"""The whole-model file format (``tnt.Model.save``, ``tnt.models.save_model``)
and the pieces of a model it records, with no dependency on tnt.Model
itself: model.py and models.py both build on it.
"""
import io
import os
import pickle

import torch

from .saving import collective_save

FORMAT = "tarantella.model"
VERSION = 1


def compile_state(model, include_optimizer):
    """What ``compile`` set on a tnt.Model (None when not compiled)."""
    if model is None or not model.compiled:
        return None
    opt = model.optimizer
    index = {id(p): i for i, p in enumerate(model.module.parameters())}
    groups = []
    for group in opt.param_groups:
        hyper = {k: v for k, v in group.items() if k != "params"}
        groups.append({"hyper": hyper, "params": [index[id(p)] for p in group["params"]]})
    return {
        "optimizer_class": type(opt),
        "param_groups": groups,
        "optimizer_state": opt.state_dict() if include_optimizer else None,
        "loss": model.loss,
        "metrics": list(model._metric_specs),
        "fusion_threshold_kb": model._fusion_threshold_kb,
        "clipnorm": model.clipnorm,
        "clipvalue": model.clipvalue,
    }



def write_model(filepath, name, module, compile_state, overwrite=True, all_devices=False,
                what="save_model"):
    """Writes a model file: architecture (the pickled module), weights and
    compile state. Collective; the master writes atomically (every rank
    with ``all_devices``)."""
    filepath = os.fspath(filepath)
    if not overwrite and os.path.exists(filepath):
        raise FileExistsError("%s: %s exists and overwrite=False" % (what, filepath))
    payload = {
        "format": FORMAT,
        "version": VERSION,
        "name": name,
        "module": module,
        "state_dict": {k: v.detach().cpu().clone() for k, v in module.state_dict().items()},
        "compile": compile_state,
    }
    # Serialise before the collective part, so that an unpicklable module
    # (e.g. a lambda attribute) fails on every rank alike and nobody waits.
    buf = io.BytesIO()
    try:
        torch.save(payload, buf)
    except (pickle.PicklingError, AttributeError, TypeError) as e:
        raise TypeError("%s: the model cannot be pickled (%s); define the module, loss "
                        "and metric classes/functions at module level, or use save_weights"
                        % (what, e)) from e
    data = buf.getvalue()
    collective_save(filepath, lambda f: f.write(data), all_devices=all_devices, what=what)


def is_model_file(obj):
    """True for the loaded contents of a model file (not a bare state_dict)."""
    return isinstance(obj, dict) and obj.get("format") == FORMAT


def module_config(module):
    """Config from which model_from_config rebuilds the architecture:
    the class path plus ``module.get_config()`` when the class defines it
    (the Keras protocol); otherwise the pickled module, whose parameters
    are re-initialised when rebuilt."""
    cls = type(module)
    config = {"class_name": "%s.%s" % (cls.__module__, cls.__qualname__)}
    get_config = getattr(module, "get_config", None)
    if callable(get_config):
        config["config"] = get_config()
    else:
        buf = io.BytesIO()
        torch.save(module, buf)
        config["pickled_module"] = buf.getvalue()
    return config
