"""The callback base class (tnt.callbacks.Callback): every callback derives
from it, and it wraps user objects that have Keras hook names. Its own
module, so that the modules holding callbacks (callbacks, preemption) and
the list that drives them (callback_list) import it without importing each
other.
"""

_HOOKS = (
    "on_train_begin", "on_train_end", "on_epoch_begin", "on_epoch_end",
    "on_train_batch_begin", "on_train_batch_end", "on_test_begin", "on_test_end",
    "on_test_batch_begin", "on_test_batch_end", "on_predict_begin", "on_predict_end",
    "on_predict_batch_begin", "on_predict_batch_end",
)
_BATCH_HOOKS = ("on_train_batch_begin", "on_train_batch_end", "on_batch_begin", "on_batch_end")


class Callback:
    """Base class of every callback, and the wrapper for user callbacks.

    ``Callback(cb, aggregate_logs=True, run_on_all_ranks=True)`` wraps an
    object ``cb`` with Keras hook names; its hooks are called with the logs
    chosen by ``aggregate_logs`` on the ranks chosen by ``run_on_all_ranks``.
    Subclass it without ``cb`` to write a callback directly (as with
    ``keras.callbacks.Callback``); ``self.model`` is the tnt.Model and
    ``self.params`` holds ``epochs``, ``steps`` and ``verbose``.
    """

    def __init__(self, cb=None, aggregate_logs=True, run_on_all_ranks=True):
        self.callback = cb
        self.aggregate_logs = aggregate_logs
        self.run_on_all_ranks = run_on_all_ranks
        self.model = None
        self.params = {}

    def set_model(self, model):
        self.model = model
        if self.callback is not None and hasattr(self.callback, "set_model"):
            self.callback.set_model(model)
        elif self.callback is not None:
            self.callback.model = model

    def set_params(self, params):
        self.params = params
        if self.callback is not None and hasattr(self.callback, "set_params"):
            self.callback.set_params(params)

    def _forward(self, name, *args):
        fn = getattr(self.callback, name, None) if self.callback is not None else None
        if fn is not None:
            fn(*args)

    def state_dict(self):
        """State that BackupAndRestore saves, or None for none; forwarded
        to a wrapped object that has ``state_dict``. Plain data only
        (tensors, numpy arrays and numbers, Python numbers, strings, None,
        lists, tuples, dicts): backups are loaded without unpickling."""
        fn = getattr(self.callback, "state_dict", None) if self.callback is not None else None
        return fn() if fn is not None else None

    def load_state_dict(self, state):
        """Restores what state_dict returned (called before on_train_begin
        when fit resumes from a backup)."""
        fn = getattr(self.callback, "load_state_dict", None) if self.callback is not None \
            else None
        if fn is not None:
            fn(state)

    def _take_resumed(self):
        # True once after load_state_dict: on_train_begin then keeps state.
        resumed = getattr(self, "_resumed", False)
        self._resumed = False
        return resumed

    def has_batch_hooks(self):
        """True when some train-batch hook does real work; tnt.Model then
        averages batch logs and combines stop requests after every batch."""
        target = self.callback if self.callback is not None else self
        for name in _BATCH_HOOKS:
            fn = getattr(type(target), name, None)
            if fn is None:
                continue
            if fn is not getattr(Callback, name, None):
                return True
        return False

    # Keras aliases: on_batch_* are the train-batch hooks.
    def on_batch_begin(self, batch, logs=None):
        self._forward("on_batch_begin", batch, logs)

    def on_batch_end(self, batch, logs=None):
        self._forward("on_batch_end", batch, logs)

    def on_train_batch_begin(self, batch, logs=None):
        if self.callback is not None:
            self._forward("on_train_batch_begin", batch, logs)
        else:
            self.on_batch_begin(batch, logs)

    def on_train_batch_end(self, batch, logs=None):
        if self.callback is not None:
            self._forward("on_train_batch_end", batch, logs)
        else:
            self.on_batch_end(batch, logs)

    def on_train_begin(self, logs=None):
        self._forward("on_train_begin", logs)

    def on_train_end(self, logs=None):
        self._forward("on_train_end", logs)

    def on_epoch_begin(self, epoch, logs=None):
        self._forward("on_epoch_begin", epoch, logs)

    def on_epoch_end(self, epoch, logs=None):
        self._forward("on_epoch_end", epoch, logs)

    def on_test_begin(self, logs=None):
        self._forward("on_test_begin", logs)

    def on_test_end(self, logs=None):
        self._forward("on_test_end", logs)

    def on_test_batch_begin(self, batch, logs=None):
        self._forward("on_test_batch_begin", batch, logs)

    def on_test_batch_end(self, batch, logs=None):
        self._forward("on_test_batch_end", batch, logs)

    def on_predict_begin(self, logs=None):
        self._forward("on_predict_begin", logs)

    def on_predict_end(self, logs=None):
        self._forward("on_predict_end", logs)

    def on_predict_batch_begin(self, batch, logs=None):
        self._forward("on_predict_batch_begin", batch, logs)

    def on_predict_batch_end(self, batch, logs=None):
        self._forward("on_predict_batch_end", batch, logs)
