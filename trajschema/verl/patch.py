"""Switching a running verl 0.9.1 trainer to trajschema's padding, batch multiple, advantages and metrics.

[`install`][trajschema.verl.install] replaces five attributes of ``verl.trainer.ppo.v1.trainer_base`` (the
module's ``upsample_batch_to_divisible_size`` and four ``PPOTrainer`` methods) with
wrappers that call verl's own code on the real rows; [`uninstall`][trajschema.verl.uninstall] puts the very
same objects back. verl is imported only by [`install`][trajschema.verl.install].
"""

from __future__ import annotations

import contextvars
import importlib
import math
import os
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import torch

from trajschema.bundle import record_options
from trajschema.check import column_shapes
from trajschema.contract import is_padding
from trajschema.core import check_int, is_int
from trajschema.dropin import DropIn, Target, parameters, real_and_padding
from trajschema.dropin import padding_metrics as shared_padding_metrics
from trajschema.load import ModelConfig, pin_config_dims, read_model_config, schema_for_sample
from trajschema.padding import padding_needed
from trajschema.runtime import AuditMode, audit_mode
from trajschema.schema import Schema
from trajschema.tq import bounded, check_meta, one_row, to_tq_fields
from trajschema.verl.audit import Ledger, LocalStep, audit_padding
from trajschema.verl.config import (
    VerlConfigError,
    _found,
    layout_multiple,
    lookup,
    padding_dims_for,
    required_batch_multiple,
)
from trajschema.verl.loss import SEQ_MEAN_MODES
from trajschema.verl.minibatch import actor_seq_mean_scales
from trajschema.verl.record import record_step
from trajschema.verl.upsample import non_padding_mask, upsample_batch_to_divisible_size

if TYPE_CHECKING:
    from trajschema.bundle import Recorder

__all__ = [
    "MODEL_CONFIG_KEYS",
    "SCALE_MIN",
    "SUPPORTED_VERL_VERSIONS",
    "VERL_SIGNATURES",
    "install",
    "installed",
    "model_config_of",
    "parameters",
    "pinned_schema",
    "uninstall",
]

SUPPORTED_VERL_VERSIONS = ("0.9.1",)

#: The verl attributes install() replaces, with the parameters (annotations aside) it was written against.
VERL_SIGNATURES: dict[str, str] = {
    "upsample_batch_to_divisible_size": "(batch, batch_multiple, eos_token_id)",
    "PPOTrainer._get_required_batch_multiple": "(self, dp_size)",
    "PPOTrainer._balance_batch": "(self, batch, metrics, logging_prefix='global_seqlen', keep_minibatch=False)",
    "PPOTrainer._compute_advantage": "(self, batch, metrics)",
    "PPOTrainer._compute_metrics": "(self, batch, metrics, timing_raw, global_steps, epoch)",
}

#: What verl's ``_compute_advantage`` may write per token; padding rows get exact zeros.
_ADVANTAGE_OUTPUTS = ("advantages", "returns", "token_level_rewards", "rollout_is_weights")
_PADDING_MIN_LEN = 128  # verl's SYNTHETIC_PADDING_SEQ_LEN
_TIMEOUT_S = 60.0

_TRAINER_BASE = "verl.trainer.ppo.v1.trainer_base"
_VERL = DropIn("trajschema.verl", "verl", "verl", SUPPORTED_VERL_VERSIONS, VERL_SIGNATURES, module=_TRAINER_BASE)
#: The trainer whose ``_balance_batch`` is running, for the padding length of its layout.
_trainer: contextvars.ContextVar[Any] = contextvars.ContextVar("trajschema_verl_trainer", default=None)
#: Where the running ``_balance_batch`` collects the padding it wrote: (schema, padding keys).
_padded: contextvars.ContextVar[list[tuple[Schema | None, tuple[str, ...]]] | None] = contextvars.ContextVar(
    "trajschema_verl_padded", default=None
)
#: Each trainer's local steps since its last ``_compute_metrics``, for the step audit.
_ledger = Ledger()


def _trainer_module() -> Any:
    """verl's ``trainer_base``, once the installed verl passed the version gate."""
    _VERL.version()
    return importlib.import_module(_TRAINER_BASE)


def install(
    *,
    dims: Mapping[str, int] | None = None,
    audit: bool | str = True,
    record: str | os.PathLike[str] | None = None,
    keep: int = 5,
    every: int | None = None,
) -> None:
    """Switch verl 0.9.1's trainer to trajschema: padding, batch multiple, advantages and metrics.

    Call it once in the driver, before ``trainer.fit()``. It replaces, on
    ``verl.trainer.ppo.v1.trainer_base`` (so for the sync and both async trainers):

    - ``upsample_batch_to_divisible_size`` (called by ``_balance_batch``) with the
      schema-driven
      [`upsample_batch_to_divisible_size`][trajschema.verl.upsample_batch_to_divisible_size];
      with ``dims=None`` the padding length follows the trainer's parallel layout
      ([`padding_dims`][trajschema.verl.padding_dims] of
      the Megatron TP x CP (and FP8 padding) or FSDP Ulysses size of its actor, ref and critic). When
      verl's config names a model config found on this machine
      (``actor_rollout_ref.model.hf_config_path``, else ``actor_rollout_ref.model.path``:
      a model directory, a ``config.json``, or a hub id whose ``config.json`` the local
      Hugging Face cache holds), the dims the sample's schema reads from a model config
      (``experts``, ``topk``, ``layers`` of ``moe_routed``) are pinned at that model's
      sizes, so padding routes spread over the real expert count in every padding call;
      nothing is downloaded;
    - ``PPOTrainer._get_required_batch_multiple`` with
      [`required_batch_multiple`][trajschema.verl.required_batch_multiple];
    - ``PPOTrainer._balance_batch`` with verl's own (the trainer made known to the
      padding, for its layout and model), then ``padding/seq_mean_loss_scale_min``
      added: the smallest real rows / ``ppo_mini_batch_size * rollout.n`` over the actor's
      mini-batches as verl's workers split the balanced batch, in a seq-mean
      ``loss_agg_mode`` (1.0 otherwise);
    - ``PPOTrainer._compute_advantage`` with verl's own run on the real rows only, and
      exact zeros written for the padding rows (so no estimator sees padding: GPG's
      batch-size scale and OPO's NaN for the padding group cannot reach real rows);
    - ``PPOTrainer._compute_metrics`` with verl's own run on the real rows only (the
      TransferQueue batch is filtered before the ``DataProto`` is built), then timing
      and throughput recomputed exactly as verl computes them on the padded batch, and
      ``padding/samples``, ``padding/tokens``, ``padding/share`` and
      ``padding/seq_mean_loss_scale`` added;
    - with ``audit=True`` (the default), ``_compute_metrics`` then adds the step audit's
      ``trajschema/*`` figures (`trajschema.runtime.audit_step`: padding rows and tokens,
      padding tokens in a loss mask, padding rows with an advantage, the hottest
      expert's padding load, the worst seq-mean scale, schema violations of the padding
      rows), read from the padding rows alone (see ``docs/verl.md``, "The step audit");
      ``audit="strict"`` then raises `PaddingAuditError` when one is broken, the figures
      already in ``metrics``; ``audit=False`` adds none;
    - with ``record=DIR``, ``_compute_metrics`` then writes the step's whole batch (every
      row and field, read from TransferQueue, with its tags) as a bundle
      ``DIR/step-<global_steps>`` when the audit found a fault, and with ``every=K`` every
      K-th step too, before ``audit="strict"`` raises; the last ``keep`` bundles are kept
      (`trajschema.verl.record`). [`load_bundle`][trajschema.load_bundle] reads one back,
      ``trajschema check DIR/step-...`` checks it. Recording never breaks the step.

    Calling it again re-installs with the new arguments.

    Args:
        dims: the padding's dim sizes (default: from the trainer's parallel layout).
        audit: ``True`` (default), ``"strict"`` or ``False``, as above.
        record: the directory the bundles go to (``None``: nothing is recorded). It needs
            the audit: ``record=`` with ``audit=False`` is refused.
        keep: how many bundles ``record`` keeps (an int >= 1; the newest by step).
        every: also record every ``every``-th step (an int >= 1; needs ``record``).

    Raises:
        TypeError: ``dims`` is not a mapping, ``record`` is not a path.
        ValueError: ``dims`` holds a size that is not an int >= 0, ``audit`` is not
            ``True``, ``False`` or ``"strict"``, ``keep`` or ``every`` is not an int >= 1,
            ``every`` without ``record``, or ``record`` with ``audit=False`` (nothing is
            patched then).
        ImportError: verl is not installed.
        RuntimeError: this verl is not a supported version, or a function to replace
            has another signature; nothing is patched then.

    At the first padding, a local model config that cannot be read, or that lacks a key
    the sample's schema reads from it, raises `trajschema.ModelConfigError` (naming the
    file and the key); a model path that is not a str raises `VerlConfigError`.
    """
    mode = audit_mode(audit)
    tb = _trainer_module()
    fixed = _checked_dims(dims)
    recorder = record_options(record, keep, every, trainer="verl", version=None, audit=mode)

    def replacement(target: Target) -> Any:
        made = {
            "upsample_batch_to_divisible_size": lambda original: _upsample_for(fixed, mode),
            "_get_required_batch_multiple": lambda original: _get_required_batch_multiple,
            "_balance_batch": lambda original: _balance_batch_for(original, tb, mode),
            "_compute_advantage": lambda original: _compute_advantage_for(original, tb),
            "_compute_metrics": lambda original: _compute_metrics_for(original, tb, mode, recorder),
        }
        return made[target.name](target.original)

    _VERL.install(replacement, then=_forget, recorder=recorder)


def _forget() -> None:
    """A re-install reads the model's config again and starts a new audit ledger."""
    _model_configs.clear()
    _ledger.clear()


def _checked_dims(dims: Mapping[str, int] | None) -> dict[str, int] | None:
    if dims is None:
        return None
    if not isinstance(dims, Mapping):
        raise TypeError(f"dims must be a mapping of dim name to size, found {type(dims).__name__}")
    for name, size in dims.items():
        if not isinstance(name, str):
            raise ValueError(f"dims must map dim names (str) to sizes, found the key {name!r}")
        check_int(f"dims[{name!r}]", size)
    return dict(dims)


def uninstall() -> bool:
    """Put back every attribute [`install`][trajschema.verl.install] replaced (the very same objects).

    ``False`` if none was.
    """
    return _VERL.uninstall()


def installed() -> bool:
    """Whether [`install`][trajschema.verl.install] is in effect."""
    return _VERL.installed()


# -- the replacements -------------------------------------------------------------------


def _upsample_for(dims: dict[str, int] | None, mode: AuditMode = "off") -> Callable[..., Any]:
    def upsample_batch_to_divisible_size_(batch: Any, batch_multiple: int, eos_token_id: int) -> Any:
        pad_dims = dims
        trainer = _trainer.get()
        if pad_dims is None and trainer is not None:
            pad_dims = padding_dims_for(layout_multiple(trainer.config), _PADDING_MIN_LEN)
        model = model_config_of(trainer.config) if trainer is not None else None
        # The audit checks the padding rows against the schema they were made with: choose it here.
        chosen = model is not None or mode != "off"
        schema = pinned_schema(batch, batch_multiple, model) if chosen else None
        out = upsample_batch_to_divisible_size(batch, batch_multiple, eos_token_id, schema=schema, dims=pad_dims)
        padded = _padded.get()
        if padded is not None and out is not batch:
            padded.append((schema, tuple(out.keys[len(batch.keys) :])))
        return out

    upsample_batch_to_divisible_size_.__name__ = "upsample_batch_to_divisible_size"
    return upsample_batch_to_divisible_size_


# -- the actor model's config -----------------------------------------------------------

#: Where verl keeps the actor model's config, in the order verl reads them (hf_config_path defaults to path).
MODEL_CONFIG_KEYS = ("actor_rollout_ref.model.hf_config_path", "actor_rollout_ref.model.path")

#: The model configs read since install(), by path: (mtime_ns, size) of the file, and the config.
_model_configs: dict[str, tuple[tuple[int, int], ModelConfig]] = {}


def model_config_of(config: Any) -> ModelConfig | None:
    """The actor model's config when verl's ``config`` names one on this machine, else ``None``.

    The path is ``actor_rollout_ref.model.hf_config_path`` when set, else
    ``actor_rollout_ref.model.path`` (``~`` expanded): a model directory or a
    ``config.json``. A hub id (``Qwen/Qwen3-30B-A3B``) is read from the local Hugging Face
    cache, where ``transformers`` keeps what it downloaded (``main`` revision), when
    ``huggingface_hub`` is installed and the cache holds its ``config.json``. Anything
    else (an ``hdfs://`` path, a hub id not in the cache) gives ``None``: nothing is
    downloaded. A file read once is read again only when it changes.

    Raises:
        VerlConfigError: the key holds something other than a str.
        ModelConfigError: the local config cannot be read (naming the file).
    """
    for key in MODEL_CONFIG_KEYS:
        path = lookup(config, key, None)
        if path is None:
            continue
        if not isinstance(path, str):
            raise VerlConfigError(f"config.{key} must be a path (a str), found {_found(path)}")
        local = os.path.expanduser(path)
        if not os.path.lexists(local):
            cached = _hub_cached_config(path)
            if cached is None:
                return None  # a remote path, or a hub id not downloaded here: trajschema downloads nothing
            local = cached
        target = os.path.join(local, "config.json") if os.path.isdir(local) else local
        try:
            st = os.stat(target)
            stamp = (st.st_mtime_ns, st.st_size)
        except (OSError, ValueError):
            stamp = (-1, -1)  # read_model_config names what is wrong with it
        hit = _model_configs.get(target)
        if hit is not None and hit[0] == stamp:
            return hit[1]
        model = read_model_config(local)
        _model_configs[target] = (stamp, model)
        return model
    return None


def _hub_cached_config(repo_id: str) -> str | None:
    """The ``config.json`` of the hub model ``repo_id`` in the local Hugging Face cache, or ``None``."""
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        return None
    try:
        found = try_to_load_from_cache(repo_id, "config.json")
    except ValueError:  # not a repo id at all (hdfs://..., a missing absolute path): HFValidationError
        return None
    return found if isinstance(found, str) else None


def pinned_schema(batch: Any, batch_multiple: Any, model: ModelConfig | None) -> Schema | None:
    """The schema of the batch's first real sample with the dims ``model`` gives pinned, or ``None``.

    ``model=None`` gives the sample's schema as it is.

    ``None`` when no padding is needed or the batch is not one this can read:
    `upsample_batch_to_divisible_size` then decides (and refuses a bad batch in its own
    words). The sample is read as that function reads it; the schema is chosen for it as
    that function chooses, so only the pinned sizes differ.

    Raises:
        ModelConfigError: the sample's schema reads a dim the model config does not give.
    """
    try:
        view = check_meta(batch, "batch")
        if padding_needed(len(view.keys), batch_multiple) == 0 or not view.partition_id:
            return None
        ref = next(((k, t) for k, t in zip(view.keys, view.tags, strict=True) if not is_padding(t)), None)
    except (TypeError, ValueError):
        return None
    if ref is None:
        return None
    try:
        import transfer_queue  # the client upsample_batch_to_divisible_size uses, as verl does
    except ImportError:
        return None  # upsample_batch_to_divisible_size says what is missing

    key, tag = ref
    got = bounded(
        lambda: transfer_queue.kv_batch_get(keys=[key], partition_id=view.partition_id), _TIMEOUT_S, "kv_batch_get"
    )
    schema = schema_for_sample(one_row(got, key), tag)
    return pin_config_dims(schema, model) if model is not None else schema


def _get_required_batch_multiple(self: Any, dp_size: int) -> int:
    return required_batch_multiple(self.config, dp_size, global_steps=self.global_steps)


def _balance_batch_for(original: Callable[..., Any], tb: Any, mode: AuditMode = "off") -> Callable[..., Any]:
    def _balance_batch(self: Any, batch: Any, metrics: Any, *args: Any, **kwargs: Any) -> Any:
        padded: list[tuple[Schema | None, tuple[str, ...]]] = []
        token, collecting = _trainer.set(self), _padded.set(padded)
        try:
            balanced = original(self, batch, metrics, *args, **kwargs)
        finally:
            _padded.reset(collecting)
            _trainer.reset(token)
        # Here, not in _compute_metrics: the order is final for this batch, and with
        # parameter_sync_step > 1 verl's MetricsAggregator reduces a "*_min" metric by min.
        scales = _actor_scales(self, tb, balanced)
        metrics[SCALE_MIN] = min(scales, default=1.0)
        if mode != "off":
            schema, keys = padded[-1] if padded else (None, ())
            anchor = balanced.keys[0] if len(balanced.keys) else None
            _ledger.add(self, LocalStep(anchor, tuple(scales), schema, keys))
        return balanced

    return _balance_batch


#: The worst actor mini-batch's seq-mean loss scale, beside the step's mean (padding/seq_mean_loss_scale).
SCALE_MIN = "padding/seq_mean_loss_scale_min"


def _actor_scales(trainer: Any, tb: Any, batch: Any) -> list[float]:
    """The seq-mean loss scale of each actor mini-batch of the balanced ``batch`` (see `trajschema.verl.minibatch`)."""
    # verl's _balance_batch and the actor's update dispatch both read this mapping (mesh "actor").
    info = getattr(getattr(trainer, "actor_rollout_wg", None), "_dispatch_info", None)
    ranks = info.get("actor") if isinstance(info, Mapping) else None
    if not ranks:
        return [math.nan]
    real = non_padding_mask(batch.tags).tolist()
    return actor_seq_mean_scales(trainer.config, real, max(ranks) + 1, tb.tu.make_iterator)


def _split(batch: Any) -> tuple[list[str], list[str]]:
    real, pad = real_and_padding((~non_padding_mask(batch.tags)).tolist())
    return [batch.keys[i] for i in real], [batch.keys[i] for i in pad]


def _compute_advantage_for(original: Callable[..., Any], tb: Any) -> Callable[..., Any]:
    def _compute_advantage(self: Any, batch: Any, metrics: dict[str, Any]) -> Any:
        real, pad = _split(batch)
        if not pad:
            return original(self, batch, metrics)
        out = original(self, batch.select_keys(real), metrics)
        stored = out.fields if out.fields is not None else _stored_fields(tb.tq, batch.partition_id, real[0])
        written = [f for f in _ADVANTAGE_OUTPUTS if f in stored]
        if written:
            _write_zeros(tb.tq, batch.partition_id, real[0], pad, written)
        tags = dict(zip(out.keys, out.tags, strict=True))
        return type(batch)(
            keys=list(batch.keys),
            tags=[tags.get(k, t) for k, t in zip(batch.keys, batch.tags, strict=True)],
            partition_id=batch.partition_id,
            fields=out.fields,
            extra_info=out.extra_info,
        )

    return _compute_advantage


def _stored_fields(tq: Any, partition: str, key: str) -> list[str]:
    got = bounded(lambda: tq.kv_batch_get(keys=[key], partition_id=partition), _TIMEOUT_S, "kv_batch_get")
    return list(got.keys())


def _write_zeros(tq: Any, partition: str, real_key: str, pad: list[str], names: list[str]) -> None:
    """Exact zeros for ``names`` on the padding rows, shaped per token like each row's ``response_mask``."""
    like = bounded(
        lambda: tq.kv_batch_get(keys=[real_key], partition_id=partition, select_fields=names),
        _TIMEOUT_S,
        "kv_batch_get",
    )
    masks = bounded(
        lambda: tq.kv_batch_get(keys=pad, partition_id=partition, select_fields=["response_mask"]),
        _TIMEOUT_S,
        "kv_batch_get",
    )
    shapes = column_shapes(masks["response_mask"], len(pad))
    lengths = [int(n) for n in shapes[:, 0].tolist()] if shapes is not None else [1] * len(pad)
    rows = []
    for n in lengths:
        row = {}
        for name in names:
            ref = like[name][0]
            row[name] = torch.zeros((n, *ref.shape[1:]), dtype=ref.dtype, device=ref.device)
        rows.append(row)
    fields = to_tq_fields(rows)
    bounded(lambda: tq.kv_batch_put(keys=pad, partition_id=partition, fields=fields), _TIMEOUT_S, "kv_batch_put")


def _compute_metrics_for(
    original: Callable[..., Any], tb: Any, mode: AuditMode = "off", recorder: Recorder | None = None
) -> Callable[..., Any]:
    def _compute_metrics(
        self: Any, batch: Any, metrics: dict[str, Any], timing_raw: Any, global_steps: Any, epoch: Any
    ):
        real, pad = _split(batch)
        if not pad:
            original(self, batch, metrics, timing_raw, global_steps, epoch)
        else:
            original(self, batch.select_keys(real), metrics, timing_raw, global_steps, epoch)
            metrics.update(_padded_timing(self, tb, batch, timing_raw))
        metrics.update(_padding_metrics(self.config, batch))
        if mode != "off":
            steps = _ledger.take(self, set(batch.keys))
            found = audit_padding(tb.tq, batch, steps, timeout_s=_TIMEOUT_S)
            metrics.update(found.figures)
            if recorder is not None:  # before strict raises: a failing step leaves its bundle
                schema = next((s.schema for s in steps if s.schema is not None), None)
                record_step(recorder, tb.tq, batch, found, step=global_steps, schema=schema, timeout_s=_TIMEOUT_S)
            if mode == "strict":
                found.raise_if_broken()

    return _compute_metrics


def _padded_timing(trainer: Any, tb: Any, batch: Any, timing_raw: Any) -> dict[str, Any]:
    """verl's timing and throughput metrics of the whole padded batch, as its ``_compute_metrics`` computes them."""
    got = bounded(
        lambda: tb.tq.kv_batch_get(
            keys=batch.keys, partition_id=batch.partition_id, select_fields=["prompts", "responses"]
        ),
        _TIMEOUT_S,
        "kv_batch_get",
    )
    n = len(batch.keys)
    prompt_length = _lengths(got["prompts"], n)
    response_length = _lengths(got["responses"], n)
    lengths = tb.TensorDict(
        {"prompt_length": prompt_length.float(), "response_length": response_length.float()}, batch_size=[n]
    )
    data = tb.DataProto(batch=lengths, meta_info={"global_token_num": (prompt_length + response_length).tolist()})
    found = dict(tb.compute_timing_metrics(batch=data, timing_raw=timing_raw))
    found.update(
        tb.compute_throughout_metrics(batch=data, timing_raw=timing_raw, n_gpus=trainer._get_n_gpus_for_throughput())
    )
    return found


def _lengths(col: Any, n: int) -> torch.Tensor:
    shapes = column_shapes(col, n)
    if shapes is None or shapes.shape[1] < 1:
        raise ValueError(f"expected a per-token tensor column, found {type(col).__name__}")
    return shapes[:, 0]


def _padding_metrics(config: Any, batch: Any) -> dict[str, float]:
    """The ``padding/*`` metrics of every drop-in (`trajschema.dropin.padding_metrics`), and
    ``padding/seq_mean_loss_scale``."""
    flags = [is_padding(t) for t in batch.tags]
    padding = [t for t, f in zip(batch.tags, flags, strict=True) if f]
    total, real = len(flags), flags.count(False)
    mode = lookup(config, "actor_rollout_ref.actor.loss_agg_mode", "token-mean")
    return {
        **shared_padding_metrics(flags, _padding_tokens(padding)),
        # verl's seq-mean modes divide by the padded mini-batch size in its workers, where
        # install() cannot reach (see docs/verl.md): their loss is scaled by real / total.
        "padding/seq_mean_loss_scale": real / total if total and mode in SEQ_MEAN_MODES else 1.0,
    }


def _padding_tokens(padding: list[Any]) -> float:
    """The padding rows' attended tokens: a TransferQueue sample holds no pad positions and
    trajschema's padding attends every one (``attention_mask`` pads with 1), so each row's
    ``seq_len`` tag; NaN, not an undercount, when a tag lacks it (not padding trajschema made)."""
    lengths = [t.get("seq_len") for t in padding]
    if not all(is_int(n) for n in lengths):
        return float("nan")
    return float(sum(lengths))
