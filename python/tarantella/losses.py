"""Losses for tnt.Model.compile: Keras names mapped onto torch loss modules,
and how a batch loss scales with the batch, which decides each rank's
gradient weight.
"""
import torch

__all__ = ["make_loss", "loss_reduction"]

_LOSSES = {
    # Torch modules output logits, so the Keras names map to the logit forms.
    "sparse_categorical_crossentropy": lambda: torch.nn.CrossEntropyLoss(),
    "categorical_crossentropy": lambda: torch.nn.CrossEntropyLoss(),
    "binary_crossentropy": lambda: torch.nn.BCEWithLogitsLoss(),
    "mse": lambda: torch.nn.MSELoss(),
    "mean_squared_error": lambda: torch.nn.MSELoss(),
    "mae": lambda: torch.nn.L1Loss(),
    "mean_absolute_error": lambda: torch.nn.L1Loss(),
    "huber": lambda: torch.nn.HuberLoss(),
    "nll": lambda: torch.nn.NLLLoss(),
}


def make_loss(loss):
    """The loss callable(y_pred, y_true) for compile's ``loss``: a Keras name,
    a torch.nn loss module or any callable."""
    if isinstance(loss, str):
        try:
            return _LOSSES[loss.lower()]()
        except KeyError:
            raise ValueError("compile: unknown loss %r; use one of %s, a torch.nn loss module "
                             "or a callable(y_pred, y_true)" % (loss, ", ".join(sorted(_LOSSES))))
    if callable(loss):
        return loss
    raise TypeError("compile: loss must be a name, a torch.nn loss module or a callable")


def loss_reduction(loss_fn):
    """'mean' or 'sum': how a batch loss scales with the batch. Decides the
    per-rank gradient weight (share of the batch for 'mean', 1 for 'sum')."""
    reduction = getattr(loss_fn, "reduction", "mean")
    if reduction not in ("mean", "sum"):
        raise ValueError("compile: the loss must reduce to a scalar ('mean' or 'sum'), "
                         "not reduction=%r" % reduction)
    return reduction
