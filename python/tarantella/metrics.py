"""Metrics for tnt.Model: every metric, and the loss, is kept as a sum over
samples and a count of samples, so that ranks and batches combine exactly
(accuracy bit for bit, the loss up to float rounding) into the serial value.
"""
import numpy as np
import torch

__all__ = ["Metric", "Stats"]


class Metric:
    """A metric as (sum over samples, number of samples) of one batch, so
    that ranks and batches combine exactly."""

    def __init__(self, spec, binary_threshold):
        self.spec = spec
        self.threshold = binary_threshold
        if isinstance(spec, str):
            name = spec.lower()
            kinds = {
                "accuracy": "accuracy", "acc": "accuracy",
                "sparse_categorical_accuracy": "sparse_categorical_accuracy",
                "categorical_accuracy": "categorical_accuracy",
                "binary_accuracy": "binary_accuracy",
                "mse": "mse", "mean_squared_error": "mse",
                "mae": "mae", "mean_absolute_error": "mae",
            }
            if name not in kinds:
                raise ValueError("compile: unknown metric %r; use one of %s or a callable"
                                 % (spec, ", ".join(sorted(kinds))))
            self.kind = kinds[name]
            self.name = "accuracy" if name in ("accuracy", "acc") else spec
        elif callable(spec):
            self.kind = "callable"
            self.name = getattr(spec, "__name__", None) or type(spec).__name__.lower()
        else:
            raise TypeError("compile: a metric must be a name or a callable, got %r" % (spec,))

    @torch.no_grad()
    def __call__(self, y_pred, y_true):
        kind = self.kind
        if kind == "callable":
            if isinstance(self.spec, torch.nn.Module):
                value = self.spec(y_pred, y_true)  # torch order, like losses
            else:
                value = self.spec(y_true, y_pred)  # Keras order: fn(y_true, y_pred)
            value = torch.as_tensor(value, dtype=torch.float64)
            n = y_pred.shape[0] if y_pred.ndim else 1
            if value.ndim == 0:
                return float(value) * n, n
            return float(value.sum()), value.numel()
        if kind == "accuracy":
            if y_pred.ndim >= 2 and y_pred.shape[-1] > 1:
                kind = "categorical_accuracy" if y_true.shape == y_pred.shape \
                    else "sparse_categorical_accuracy"
            else:
                kind = "binary_accuracy"
        if kind == "sparse_categorical_accuracy":
            pred = y_pred.argmax(dim=-1)
            correct = pred == y_true.reshape(pred.shape).to(pred.dtype)
            return float(correct.sum()), correct.numel()
        if kind == "categorical_accuracy":
            correct = y_pred.argmax(dim=-1) == y_true.argmax(dim=-1)
            return float(correct.sum()), correct.numel()
        if kind == "binary_accuracy":
            pred = (y_pred > self.threshold).reshape(-1)
            correct = pred == (y_true.reshape(-1) > 0.5)
            return float(correct.sum()), correct.numel()
        diff = y_pred.double() - y_true.double().reshape(y_pred.shape)
        per_sample = diff.abs() if kind == "mae" else diff * diff
        return float(per_sample.sum()), per_sample.numel()


class Stats:
    """Running sums of one epoch (this rank): loss * samples, samples, and a
    (sum, count) pair per metric. ``values`` is what ranks combine."""

    def __init__(self, metrics):
        self.metrics = metrics
        self.values = np.zeros(2 + 2 * len(metrics), dtype=np.float64)

    def add(self, loss_sum, n, metric_pairs):
        self.values[0] += loss_sum
        self.values[1] += n
        for i, (s, c) in enumerate(metric_pairs):
            self.values[2 + 2 * i] += s
            self.values[3 + 2 * i] += c

    def logs(self, values=None, prefix=""):
        v = self.values if values is None else values
        logs = {prefix + "loss": float(v[0] / v[1]) if v[1] > 0 else float("nan")}
        for i, m in enumerate(self.metrics):
            c = v[3 + 2 * i]
            logs[prefix + m.name] = float(v[2 + 2 * i] / c) if c > 0 else float("nan")
        return logs
