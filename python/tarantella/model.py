"""tnt.Model: a Keras-like training front end for a torch.nn.Module.

This first version trains, evaluates and predicts in one process; the
distributed parts (sharding, fused gradient allreduce, log averaging) are
added on top of tarantella.optimizers / tarantella.data.
"""
import torch


class Model:
    """Wraps a ``torch.nn.Module`` with compile/fit/evaluate/predict."""

    def __init__(self, module):
        if not isinstance(module, torch.nn.Module):
            raise TypeError("tnt.Model expects a torch.nn.Module, got %r" % type(module))
        self.module = module
        self.optimizer = None
        self.loss_fn = None
        self.metrics = []
        self.compiled = False
        self.stop_training = False

    def compile(self, optimizer, loss, metrics=None):
        self.optimizer = optimizer
        self.loss_fn = loss
        self.metrics = list(metrics or [])
        self.compiled = True

    def get_weights(self):
        return [p.detach().cpu().numpy().copy() for p in self.module.state_dict().values()]

    def set_weights(self, weights):
        state = self.module.state_dict()
        if len(weights) != len(state):
            raise ValueError("set_weights: expected %d arrays, got %d" % (len(state), len(weights)))
        for (name, t), w in zip(state.items(), weights):
            t.copy_(torch.as_tensor(w).reshape(t.shape))
