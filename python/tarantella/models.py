"""Model I/O: tnt.models.save_model, load_model, clone_model, model_from_config."""
import copy


def clone_model(model):
    """Returns an uncompiled tnt.Model around a deep copy of model's module."""
    from .model import Model
    module = model.module if isinstance(model, Model) else model
    return Model(copy.deepcopy(module))
