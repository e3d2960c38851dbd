"""Model I/O: ``tnt.models.save_model``, ``load_model``, ``clone_model``,
``model_from_config``.

A saved model is one ``torch.save`` file holding a dict:

``format``/``version``/``name``
    ``"tarantella.model"``, 2, the model's name.
``state_dict``
    the weights, as tensors (``load_weights`` reads only these).
``pickled``
    a uint8 tensor: the ``torch.save`` bytes of ``{"module", "compile"}``.
    ``module`` is the pickled ``torch.nn.Module`` (its class must be
    importable when loading, as with any pickle). ``compile`` is None when
    the model was not compiled, else what rebuilds it: the optimizer class,
    its parameter groups (hyper-parameters and the indices of their
    parameters in ``module.parameters()`` order), its state, the loss (a
    name or the pickled loss object) and the metric specs.

Unpickling runs whatever code a file names, so everything but ``pickled``
is plain data that torch's weights-only unpickler reads, and ``pickled`` is
unpickled only by ``load_model(..., trusted=True)`` (and version 1 files,
which kept module and compile state inline, only that way too).

Saving is collective: every rank calls it, the master writes atomically
(temp file, fsync, rename), the others wait. Loading is collective too: the
master reads the file and broadcasts its bytes, so other ranks need not see
the file system the master wrote to.
"""
import copy
import importlib
import io
import os
import pickle
import types

import torch

from ._model_file import FORMAT, VERSION, compile_state, write_model
from .model import Model
from .saving import collective_read

__all__ = ["save_model", "load_model", "clone_model", "model_from_config"]

def _unwrap(model):
    if isinstance(model, Model):
        return model, model.module
    if isinstance(model, torch.nn.Module):
        return None, model
    raise TypeError("expected a tnt.Model or a torch.nn.Module, got %s" % type(model).__name__)


def save_model(model, filepath, overwrite=True, include_optimizer=True,
               tnt_save_all_devices=False):
    """Saves ``model`` (a tnt.Model, or a torch.nn.Module) to ``filepath``.
    Collective: call it on every rank. The master writes (every rank with
    ``tnt_save_all_devices``); the write is atomic, so a crash leaves the
    previous file intact; all ranks return once the file is complete."""
    tnt_model, module = _unwrap(model)
    name = tnt_model.name if tnt_model is not None else type(module).__name__
    write_model(filepath, name, module, compile_state(tnt_model, include_optimizer),
                overwrite=overwrite, all_devices=tnt_save_all_devices)


def _unpickle(data, custom_objects=None):
    """Full unpickling of torch.save bytes, which runs any code the bytes
    name: only behind the caller's ``trusted=True``."""
    if custom_objects:
        return _load_with_custom_objects(data, custom_objects)
    return torch.load(io.BytesIO(data), map_location="cpu", weights_only=False)


def _untrusted(what, holds, alternative):
    return ValueError("%s holds %s, and unpickling can run any code the file names; pass "
                      "trusted=True if you trust whoever wrote it, or %s" % (what, holds,
                                                                               alternative))


def load_model(filepath, custom_objects=None, compile=True, trusted=False):
    """Loads a model written by save_model and returns a tnt.Model, compiled
    with the saved optimizer (and its state), loss and metrics when it was
    saved compiled and ``compile`` is True. Collective: call it on every
    rank. ``custom_objects`` maps names to classes/functions for modules
    whose classes were renamed since saving.

    A model file holds the pickled module and compile state, and
    unpickling runs whatever code the file names: pass ``trusted=True`` to
    say that the file comes from someone you trust; without it load_model
    raises ValueError and reads nothing. To load the weights of a file you
    do not trust, build the module in code and call ``Model.load_weights``,
    which reads tensors only."""
    if not trusted:
        raise _untrusted("load_model(%r): a model file" % os.fspath(filepath),
                         "the pickled module and compile state",
                         "build the module in code and load the weights only with "
                         "tnt.Model(module).load_weights(path), which never runs code from "
                         "the file")
    data = collective_read(filepath, what="load_model")
    payload = _unpickle(data, custom_objects)
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise ValueError("load_model: %s is not a tarantella model file (use load_weights for "
                         "a state_dict)" % os.fspath(filepath))
    if payload.get("version", 0) > VERSION:
        raise ValueError("load_model: %s has format version %s; this tarantella reads up to %d"
                         % (os.fspath(filepath), payload.get("version"), VERSION))
    if "pickled" in payload:
        payload.update(_unpickle(payload["pickled"].numpy().tobytes(), custom_objects))
    module = payload["module"]
    module.load_state_dict(payload["state_dict"])
    model = Model(module, name=payload.get("name"))
    state = payload.get("compile")
    if compile and state is not None:
        params = list(module.parameters())
        groups = [dict(g["hyper"], params=[params[i] for i in g["params"]])
                  for g in state["param_groups"]]
        optimizer = state["optimizer_class"](groups)
        if state.get("optimizer_state") is not None:
            optimizer.load_state_dict(state["optimizer_state"])
        model.compile(optimizer=optimizer, loss=state["loss"], metrics=state["metrics"],
                      tnt_fusion_threshold_kb=state.get("fusion_threshold_kb"),
                      compression=state.get("compression"),
                      clipnorm=state.get("clipnorm"), clipvalue=state.get("clipvalue"))
    return model


def _load_with_custom_objects(data, custom_objects):
    class _Unpickler(pickle.Unpickler):
        def find_class(self, mod, name):
            if name in custom_objects:
                return custom_objects[name]
            if "%s.%s" % (mod, name) in custom_objects:
                return custom_objects["%s.%s" % (mod, name)]
            return super().find_class(mod, name)

    # torch 1.13's torch.load replaces any pickle_module argument by the
    # global `pickle` of torch.serialization (a bug fixed in later torch), so
    # a pickle module with our Unpickler is swapped in for this one load.
    shim = types.ModuleType("pickle")
    shim.__dict__.update(pickle.__dict__)
    shim.Unpickler = _Unpickler
    serialization = torch.serialization
    saved = serialization.pickle
    serialization.pickle = shim
    try:
        return torch.load(io.BytesIO(data), map_location="cpu", pickle_module=shim,
                          weights_only=False)
    finally:
        serialization.pickle = saved


def _reset_parameters(module):
    """Re-initialises every submodule that knows how (reset_parameters), as
    Keras's clone_model gives fresh weights."""
    for sub in module.modules():
        reset = getattr(sub, "reset_parameters", None)
        if callable(reset):
            reset()


def clone_model(model, clone_function=None):
    """A new, uncompiled tnt.Model with the same architecture and freshly
    initialised weights (Keras semantics; the master's fresh weights are
    broadcast). ``clone_function(module)`` may build the copy instead.
    Collective."""
    _, module = _unwrap(model)
    if clone_function is not None:
        new = clone_function(module)
    else:
        new = copy.deepcopy(module)
        _reset_parameters(new)
    return Model(new)


def _import_class(path, custom_objects):
    short = path.rsplit(".", 1)[-1]
    if custom_objects and short in custom_objects:
        return custom_objects[short]
    if custom_objects and path in custom_objects:
        return custom_objects[path]
    mod, _, name = path.rpartition(".")
    obj = importlib.import_module(mod)
    for part in name.split("."):
        obj = getattr(obj, part)
    return obj


def model_from_config(config, custom_objects=None, trusted=False):
    """Rebuilds an uncompiled tnt.Model from ``Model.get_config()``: with
    ``cls.from_config(cfg)`` or ``cls(**cfg)`` when the module class has a
    get_config, else from the pickled architecture with re-initialised
    weights, which needs ``trusted=True`` (as load_model: unpickling runs
    code). Collective (the new weights are broadcast from the master)."""
    if "config" in config:
        cls = _import_class(config["class_name"], custom_objects)
        from_config = getattr(cls, "from_config", None)
        module = from_config(config["config"]) if callable(from_config) else cls(**config["config"])
    elif "pickled_module" in config:
        if not trusted:
            raise _untrusted("model_from_config: the config of a module class without "
                             "get_config", "the pickled module ('pickled_module')",
                             "give the module class get_config (the Keras protocol)")
        module = _unpickle(config["pickled_module"])
        _reset_parameters(module)
    else:
        raise ValueError("model_from_config: the config has neither 'config' nor "
                         "'pickled_module' (was it made by tnt.Model.get_config?)")
    return Model(module)
