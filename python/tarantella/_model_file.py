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
# 2: the module and compile state in the "pickled" blob, the rest plain.
# 1: the module and compile state pickled inline (load_model(trusted=True)
#    still reads it; load_weights cannot, it unpickles nothing).
VERSION = 2


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
        "compression": model._compression,
        "clipnorm": model.clipnorm,
        "clipvalue": model.clipvalue,
    }



def write_model(filepath, name, module, compile_state, overwrite=True, all_devices=False,
                what="save_model"):
    """Writes a model file: architecture (the pickled module), weights and
    compile state. Collective; the master writes atomically (every rank
    with ``all_devices``).

    The module and the compile state (optimizer class, loss objects) can
    only be stored pickled, and unpickling runs whatever code the file
    names. They go into one opaque blob, ``pickled`` (a uint8 tensor), so
    that everything else in the file (format, version, name, the weights)
    loads with torch's weights-only unpickler: load_weights reads any model
    file without running code from it, and only
    ``load_model(..., trusted=True)`` unpickles the blob."""
    filepath = os.fspath(filepath)
    if not overwrite and os.path.exists(filepath):
        raise FileExistsError("%s: %s exists and overwrite=False" % (what, filepath))
    # Serialise before the collective part, so that an unpicklable module
    # (e.g. a lambda attribute) fails on every rank alike and nobody waits.
    buf = io.BytesIO()
    try:
        torch.save({"module": module, "compile": compile_state}, buf)
    except (pickle.PicklingError, AttributeError, TypeError) as e:
        raise TypeError("%s: the model cannot be pickled (%s); define the module, loss "
                        "and metric classes/functions at module level, or use save_weights"
                        % (what, e)) from e
    payload = {
        "format": FORMAT,
        "version": VERSION,
        "name": str(name),
        "state_dict": {k: v.detach().cpu().clone() for k, v in module.state_dict().items()},
        "pickled": torch.frombuffer(bytearray(buf.getvalue()), dtype=torch.uint8),
    }
    buf = io.BytesIO()
    torch.save(payload, buf)
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
