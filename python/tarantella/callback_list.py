"""CallbackList: drives tnt.Model's callbacks, on the ranks each one runs
on and with the logs (global or local) each one receives."""
from .callback import Callback, _HOOKS


def _wrap(cb):
    if isinstance(cb, Callback):
        return cb
    if not any(hasattr(cb, h) for h in _HOOKS):
        raise TypeError("tnt: %r is not a callback (it has none of the Keras hook methods)" % (cb,))
    return Callback(cb)


class CallbackList:
    """Drives a list of callbacks for tnt.Model: picks the ranks each one
    runs on and the logs (global or local) each one receives. The list and
    the decision of which hooks need synchronised logs are the same on every
    rank, so the collectives tnt.Model issues for them always match."""

    def __init__(self, callbacks, model, params, is_master, output_rank):
        self.callbacks = [_wrap(cb) for cb in (callbacks or [])]
        self.model = model
        self.params = params
        self.is_master = is_master
        self.output_rank = output_rank
        for cb in self.callbacks:
            cb.set_model(model)
            cb.set_params(params)

    def _runs_here(self, cb):
        if getattr(cb, "runs_on_output_rank", False):
            return self.output_rank
        return getattr(cb, "run_on_all_ranks", True) or self.is_master

    def add(self, cb, first=False):
        cb = _wrap(cb)
        cb.set_model(self.model)
        cb.set_params(self.params)
        if first:
            self.callbacks.insert(0, cb)
        else:
            self.callbacks.append(cb)
        return cb

    def set_params(self, params):
        self.params = params
        for cb in self.callbacks:
            cb.set_params(params)

    def find(self, cls):
        for cb in self.callbacks:
            if isinstance(cb, cls):
                return cb
        return None

    def needs_batch_sync(self):
        """True when some callback has train-batch hooks: batch logs are then
        averaged over ranks and stop requests combined after every batch."""
        return any(cb.has_batch_hooks() for cb in self.callbacks
                   if not getattr(cb, "runs_on_output_rank", False))

    def call(self, hook, *args, global_logs=None, local_logs=None, skip=()):
        """Calls ``hook`` on every callback that runs on this rank. Callbacks
        with aggregate_logs get ``global_logs`` (the same dict for all, so
        that one may add entries such as 'lr' for the next, as in Keras),
        the others a copy of ``local_logs``."""
        for cb in self.callbacks:
            if isinstance(cb, skip) or not self._runs_here(cb):
                continue
            if getattr(cb, "aggregate_logs", True):
                logs = global_logs
            else:
                logs = dict(local_logs) if local_logs is not None else None
            getattr(cb, hook)(*args, logs)
