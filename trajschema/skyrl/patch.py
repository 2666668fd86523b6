"""Switching a running SkyRL 0.3.0 to trajschema's padding, advantages and metrics.

[`install`][trajschema.skyrl.install] replaces SkyRL's ``pad_training_input_batch`` where
it is defined and in every module that binds it by name, ``MeshDispatch.stage_chunks``,
the token-based micro-batch iterator's padding micro-batch, the workers'
``_forward_backward_micro`` (for their metrics) and two ``RayPPOTrainer`` methods;
[`uninstall`][trajschema.skyrl.uninstall] puts the very same objects back. SkyRL is
imported only by [`install`][trajschema.skyrl.install].
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from typing import Any

import torch

from trajschema._schema import Schema
from trajschema.core import check_int
from trajschema.runtime import Patches
from trajschema.skyrl.pad import (
    PER_ROW_METADATA,
    first_real,
    pad_training_input_batch,
    padded_metadata,
    padding_rows,
    real_rows,
    rows_of,
    settings,
    sliced_layout,
    token_ids,
)

__all__ = ["SKYRL_SIGNATURES", "SUPPORTED_SKYRL_VERSIONS", "install", "installed", "parameters", "uninstall"]

SUPPORTED_SKYRL_VERSIONS = ("0.3.0",)

_TB = "skyrl.backends.skyrl_train.training_batch"
_DISPATCH = "skyrl.backends.skyrl_train.distributed.dispatch"
_WORKER_UTILS = "skyrl.backends.skyrl_train.workers.worker_utils"
_WORKER = "skyrl.backends.skyrl_train.workers.worker"
_TRAINER = "skyrl.train.trainer"

#: What install() replaces (``module:attribute``), with the parameters (annotations aside) it was written against.
SKYRL_SIGNATURES: dict[str, str] = {
    f"{_TB}:pad_training_input_batch": "(unpadded_batch, pad_size)",
    f"{_DISPATCH}:MeshDispatch.stage_chunks": "(cls, dp_size, data, mini_batch_boundaries)",
    f"{_WORKER_UTILS}:TokenBasedBatchIterator._create_padding_microbatch": "(self)",
    f"{_WORKER}:PolicyWorkerBase._forward_backward_micro": (
        "(self, experience, microbatch_weight, loss_fn=None, loss_fn_config=None)"
    ),
    f"{_WORKER}:CriticWorkerBase._forward_backward_micro": "(self, experience, microbatch_weight=None)",
    f"{_TRAINER}:RayPPOTrainer.convert_to_training_input": "(self, generator_output, uids)",
    f"{_TRAINER}:RayPPOTrainer.compute_advantages_and_returns": "(self, data)",
}

#: The modules that bind SkyRL's ``pad_training_input_batch`` by name (``from ... import``), and
#: whether the batches they pad are slices of a larger one (widths not their own rows' maximum).
BINDINGS: dict[str, bool] = {
    _TRAINER: False,
    _DISPATCH: True,
    "skyrl.backends.skyrl_train_backend": True,
    "skyrl.train.sft_trainer": True,
}

#: What SkyRL's advantage step writes per token; padding rows get exact zeros.
_ADVANTAGE_OUTPUTS = ("advantages", "returns")

_patches = Patches()


def parameters(fn: Any) -> str:
    """``fn``'s signature without annotations, e.g. ``(self, data)`` (a classmethod's with ``cls``)."""
    fn = fn.__func__ if isinstance(fn, (classmethod, staticmethod)) else fn
    sig = inspect.signature(fn)
    plain = [p.replace(annotation=inspect.Parameter.empty) for p in sig.parameters.values()]
    return str(sig.replace(parameters=plain, return_annotation=inspect.Signature.empty))


def _skyrl_version() -> str:
    try:
        import skyrl  # type: ignore[import-untyped]
    except ImportError as exc:
        raise ImportError("trajschema.skyrl.install() needs SkyRL 0.3.0 installed (pip install skyrl==0.3.0)") from exc
    version = getattr(skyrl, "__version__", "unknown")
    if version not in SUPPORTED_SKYRL_VERSIONS:
        raise RuntimeError(
            f"trajschema.skyrl.install() supports SkyRL {', '.join(SUPPORTED_SKYRL_VERSIONS)}; this is SkyRL "
            f"{version}, so nothing was patched"
        )
    return version


def _resolve(label: str) -> tuple[Any, str]:
    module, _, qual = label.partition(":")
    owner: Any = importlib.import_module(module)
    *path, name = qual.split(".")
    for part in path:
        owner = getattr(owner, part)
    return owner, name


def _targets() -> list[tuple[str, Any, str]]:
    """Every (label, owner, attribute) install() replaces, signatures checked, bindings unchanged."""
    found = []
    for label, want in SKYRL_SIGNATURES.items():
        owner, name = _resolve(label)
        got = parameters(vars(owner)[name])
        if got != want:
            raise RuntimeError(
                f"SkyRL's {label} has the signature {got}, not the {want} trajschema.skyrl was written "
                "against; nothing was patched"
            )
        found.append((label, owner, name))
    ours = vars(importlib.import_module(_TB))["pad_training_input_batch"]
    for module in BINDINGS:
        mod = importlib.import_module(module)
        if vars(mod).get("pad_training_input_batch") is not ours:
            raise RuntimeError(
                f"{module}.pad_training_input_batch is not SkyRL's {_TB}.pad_training_input_batch "
                "(something else replaced it); nothing was patched"
            )
        found.append((f"{module}:pad_training_input_batch", mod, "pad_training_input_batch"))
    return found


def install(
    *,
    schema: Schema | None = None,
    eos_token_id: int | None = None,
    pad_token_id: int | None = None,
    check: bool = True,
) -> None:
    """Switch SkyRL 0.3.0 to trajschema: padding rows, advantages on the real rows, metrics.

    Call it in the driver before the trainer runs, and in each Ray worker process for the
    worker-side parts (Ray's ``runtime_env={"worker_process_setup_hook": ...}`` runs a
    function in every worker; see ``docs/skyrl.md``). It replaces:

    - ``pad_training_input_batch`` in ``training_batch`` and where ``trainer``,
      ``dispatch``, ``skyrl_train_backend`` and ``sft_trainer`` bind it, with
      [`pad_training_input_batch`][trajschema.skyrl.pad_training_input_batch] (slices of a
      batch are checked with [`sliced_layout`][trajschema.skyrl.sliced_layout]);
    - ``MeshDispatch.stage_chunks``: SkyRL's, with each mini-batch's per-row metadata
      (``uids``, ``is_last_step``, ``is_padding``) cut to its rows before it is padded;
    - ``TokenBasedBatchIterator._create_padding_microbatch``: one schema padding row
      (zero masks, EOS tokens, spread routes) instead of random tokens, a response mask of
      ones and every token on expert 0;
    - ``PolicyWorkerBase._forward_backward_micro`` and ``CriticWorkerBase``'s: SkyRL's own,
      whose scalar metrics are dropped for a padding micro-batch (``is_padding_batch``),
      as SkyRL's Megatron worker already does;
    - ``RayPPOTrainer.convert_to_training_input``: SkyRL's own, with the trainer's
      tokenizer's EOS and pad ids made known to the padding;
    - ``RayPPOTrainer.compute_advantages_and_returns``: SkyRL's own on the real rows only
      (``metadata["is_padding"]``), then written back with exact zeros on the padding
      rows, and ``padding/samples``, ``padding/tokens``, ``padding/share`` added to the
      trainer's metrics.

    Calling it again re-installs with the new arguments.

    Args:
        schema: the schema of the batches (default: chosen per batch by
            [`choose_batch_schema`][trajschema.skyrl.choose_batch_schema]).
        eos_token_id: the EOS id of the padding tokens (default: the trainer's tokenizer,
            else read from the batch).
        pad_token_id: the pad id of their left padding (default: the trainer's tokenizer,
            else read from the batch).
        check: check every batch before padding it (default). ``False`` checks only the
            row the padding is shaped on, for runs whose batches are checked elsewhere:
            see [`pad_training_input_batch`][trajschema.skyrl.pad_training_input_batch].

    Raises:
        TypeError / ValueError: a bad argument.
        ImportError: SkyRL is not installed.
        RuntimeError: this SkyRL is not 0.3.0, a function to replace has another
            signature, or a module's binding was replaced by something else; nothing is
            patched then.
    """
    given = _checked_settings(schema, eos_token_id, pad_token_id, check)
    _skyrl_version()
    with _patches.lock:
        _patches.restore()  # re-installing: start from SkyRL's own functions
        targets = _targets()
        originals = [(owner, name, vars(owner)[name]) for _, owner, name in targets]
        replaced = [_replacement(label, obj) for (label, _, _), (_, _, obj) in zip(targets, originals, strict=True)]
        _patches.replace(originals, replaced)
        settings.clear()
        settings.update(given)


def _checked_settings(schema: Any, eos: Any, pad: Any, check: Any) -> dict[str, Any]:
    if schema is not None and not isinstance(schema, Schema):
        raise TypeError(f"schema must be a trajschema.Schema or None, found {type(schema).__name__}")
    if not isinstance(check, bool):
        raise TypeError(f"check must be a bool, found {type(check).__name__}")
    out: dict[str, Any] = {"schema": schema, "check": check}
    for name, value in (("eos_token_id", eos), ("pad_token_id", pad)):
        out[name] = None if value is None else check_int(name, value, minimum=0)
    return out


def _replacement(label: str, original: Any) -> Any:
    module, _, qual = label.partition(":")
    if qual == "pad_training_input_batch":
        return _pad_for(sliced=BINDINGS.get(module, True))
    if qual == "MeshDispatch.stage_chunks":
        return classmethod(_stage_chunks_for(importlib.import_module(module)))
    if qual.endswith("_create_padding_microbatch"):
        return _create_padding_microbatch
    if qual.endswith("_forward_backward_micro"):
        return _micro_for(original)
    if qual.endswith("convert_to_training_input"):
        return _convert_for(original)
    return _advantages_for(original)


def uninstall() -> bool:
    """Put back every attribute [`install`][trajschema.skyrl.install] replaced (the very same objects).

    ``False`` if none was.
    """
    with _patches.lock:
        settings.clear()
        return _patches.restore()


def installed() -> bool:
    """Whether [`install`][trajschema.skyrl.install] is in effect."""
    return _patches.active


# -- the replacements -------------------------------------------------------------------


def _pad_for(*, sliced: bool) -> Callable[..., Any]:
    def pad_training_input_batch_(unpadded_batch: Any, pad_size: int) -> Any:
        layout = sliced_layout() if sliced else "skyrl"
        return pad_training_input_batch(unpadded_batch, pad_size, layout=layout)

    pad_training_input_batch_.__name__ = "pad_training_input_batch"
    return pad_training_input_batch_


def _stage_chunks_for(dispatch: Any) -> Callable[..., Any]:
    def stage_chunks(cls: Any, dp_size: int, data: Any, mini_batch_boundaries: Any) -> list[list[Any]]:
        refs = []
        for start, end in mini_batch_boundaries:
            mini = rows_of(data, start, end)
            pad = (-(end - start)) % dp_size
            if pad > 0:
                mini = pad_training_input_batch(mini, pad, layout=sliced_layout())
            size = len(mini) // dp_size
            refs.append([dispatch.ray.put(rows_of(mini, i, i + size)) for i in range(0, len(mini), size)])
        return refs

    return stage_chunks


def _create_padding_microbatch(self: Any) -> Any:
    data = self.data
    meta = dict(data.metadata or {})
    n = len(data)
    first = first_real(real_rows(meta, n), n)
    rows = padding_rows(data, 1, first, layout=sliced_layout())
    lists = {k: type(data[k]) for k, v in rows.items() if v is not None and not isinstance(v, torch.Tensor)}
    out = type(data)({k: lists[k](v) if k in lists else v for k, v in rows.items()})
    # SkyRL's padding micro-batch carries the data's metadata; its per-row lists are the padding row's
    per_row: dict[str, list[Any]] = {k: [] for k in PER_ROW_METADATA if k in meta}
    out.metadata = padded_metadata({**meta, **per_row}, 0, 1)
    out.metadata["pad_size"] = meta.get("pad_size", 0)
    out.metadata["is_padding_batch"] = True
    return out


def _micro_for(original: Callable[..., Any]) -> Callable[..., Any]:
    def _forward_backward_micro(self: Any, experience: Any, *args: Any, **kwargs: Any) -> Any:
        metrics = original(self, experience, *args, **kwargs)
        meta = getattr(experience, "metadata", None) or {}
        if meta.get("is_padding_batch") is True and isinstance(metrics, dict):
            # a padding micro-batch's means (entropy 0, clip ratio 0, ...) would drag the reduction
            return {k: v for k, v in metrics.items() if k == "loss_fn_outputs"}
        return metrics

    return _forward_backward_micro


def _convert_for(original: Callable[..., Any]) -> Callable[..., Any]:
    def convert_to_training_input(self: Any, generator_output: Any, uids: Any) -> Any:
        tok = getattr(self, "tokenizer", None)
        ids = {k: getattr(tok, k, None) for k in ("eos_token_id", "pad_token_id")}
        token = token_ids.set({k: v for k, v in ids.items() if isinstance(v, int) and not isinstance(v, bool)})
        try:
            return original(self, generator_output, uids)
        finally:
            token_ids.reset(token)

    return convert_to_training_input


def _advantages_for(original: Callable[..., Any]) -> Callable[..., Any]:
    def compute_advantages_and_returns(self: Any, data: Any) -> Any:
        n = len(data)
        real = real_rows(data.metadata or {}, n)
        first_real(real, n)
        if all(real):
            out = original(self, data)
        else:
            out = _on_real_rows(original, self, data, real)
        self.all_metrics.update(_padding_metrics(out, real))
        return out

    return compute_advantages_and_returns


def _on_real_rows(original: Callable[..., Any], trainer: Any, data: Any, real: list[bool]) -> Any:
    """SkyRL's advantage step on the real rows, written back into the whole batch (zeros on padding)."""
    index = torch.tensor([i for i, r in enumerate(real) if r], dtype=torch.long)
    meta = dict(data.metadata or {})
    sub = type(data)({k: (None if v is None else v[index.to(_device(v))]) for k, v in data.items()})
    sub.metadata = {
        k: ([x for x, r in zip(v, real, strict=True) if r] if k in PER_ROW_METADATA else v) for k, v in meta.items()
    }
    sub.metadata["pad_size"] = 0
    done = original(trainer, sub)
    data = data.to("cpu")  # as SkyRL's returns it (moved in place)
    for key in _ADVANTAGE_OUTPUTS:
        value = done[key]
        full = value.new_zeros((len(real), *value.shape[1:]))
        full[index.to(value.device)] = value
        data[key] = full
    if data.metadata is None:
        data.metadata = meta
    data.metadata["metrics"] = done.metadata["metrics"]
    return data


def _device(value: Any) -> Any:
    return getattr(value, "device", None) or torch.device("cpu")


def _padding_metrics(batch: Any, real: list[bool]) -> dict[str, float]:
    pad = [i for i, r in enumerate(real) if not r]
    mask = batch.get("attention_mask")
    tokens = float(mask[pad].sum()) if pad and isinstance(mask, torch.Tensor) else 0.0
    return {
        "padding/samples": float(len(pad)),
        "padding/tokens": tokens,
        "padding/share": len(pad) / len(real) if real else 0.0,
    }
