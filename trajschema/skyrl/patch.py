"""Switching a running SkyRL 0.3.0 to trajschema's padding, advantages and metrics.

[`install`][trajschema.skyrl.install] replaces SkyRL's ``pad_training_input_batch`` where
it is defined and in every module that binds it by name, ``MeshDispatch.stage_chunks``,
the workers' micro-batch iterators and ``_forward_backward_micro``
(`trajschema.skyrl.workers`) and six ``RayPPOTrainer`` methods (`trajschema.skyrl.trainer`);
[`uninstall`][trajschema.skyrl.uninstall] puts the very same objects back. SkyRL is
imported only by [`install`][trajschema.skyrl.install].
"""

from __future__ import annotations

import functools
import importlib
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from trajschema.bundle import record_options
from trajschema.core import check_bool, check_int
from trajschema.dropin import DropIn, Target, parameters
from trajschema.runtime import audit_mode
from trajschema.schema import Schema
from trajschema.skyrl.audit import train_step_for
from trajschema.skyrl.pad import pad_training_input_batch, settings, staged_layout
from trajschema.skyrl.trainer import (
    advantages_for,
    convert_for,
    execute_forward_for,
    forward_pass_for,
    kl_penalty_for,
    normalize_for,
)
from trajschema.skyrl.workers import (
    create_padding_microbatch,
    micro_for,
    microbatch_indices_for,
    sample_iter_for,
    stage_chunks_for,
)

if TYPE_CHECKING:
    pass

__all__ = [
    "BINDINGS",
    "SKYRL_SIGNATURES",
    "SUPPORTED_SKYRL_VERSIONS",
    "install",
    "installed",
    "parameters",
    "uninstall",
]

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
    f"{_WORKER_UTILS}:SampleBasedBatchIterator.__iter__": "(self)",
    f"{_WORKER_UTILS}:TokenBasedBatchIterator._create_microbatch_from_indices": "(self, indices)",
    f"{_WORKER_UTILS}:TokenBasedBatchIterator._create_padding_microbatch": "(self)",
    f"{_WORKER}:PolicyWorkerBase._forward_backward_micro": (
        "(self, experience, microbatch_weight, loss_fn=None, loss_fn_config=None)"
    ),
    f"{_WORKER}:CriticWorkerBase._forward_backward_micro": "(self, experience, microbatch_weight=None)",
    f"{_TRAINER}:RayPPOTrainer.convert_to_training_input": "(self, generator_output, uids)",
    f"{_TRAINER}:RayPPOTrainer.fwd_logprobs_values_reward": "(self, training_input)",
    f"{_TRAINER}:RayPPOTrainer._execute_forward_pass": "(self, model, data_fwd_pass, key, mini_batch_boundaries)",
    f"{_TRAINER}:RayPPOTrainer.apply_reward_kl_penalty": "(self, data)",
    f"{_TRAINER}:RayPPOTrainer.compute_advantages_and_returns": "(self, data)",
    f"{_TRAINER}:RayPPOTrainer._normalize_advantages": ("(self, data, mini_batch_boundaries, prompt_boundaries=None)"),
    f"{_TRAINER}:RayPPOTrainer.train_critic_and_policy": "(self, data)",
}

#: The modules that bind SkyRL's ``pad_training_input_batch`` by name (``from ... import``), and
#: whether the batches they pad are slices of a larger one (widths not their own rows' maximum).
BINDINGS: dict[str, bool] = {
    _TRAINER: False,
    _DISPATCH: True,
    "skyrl.backends.skyrl_train_backend": True,
    "skyrl.train.sft_trainer": True,
}

_SKYRL = DropIn(
    "trajschema.skyrl",
    "SkyRL",
    "skyrl",
    SUPPORTED_SKYRL_VERSIONS,
    SKYRL_SIGNATURES,
    bindings={f"{_TB}:pad_training_input_batch": tuple(BINDINGS)},
)


def install(
    *,
    schema: Schema | None = None,
    eos_token_id: int | None = None,
    pad_token_id: int | None = None,
    check: bool = True,
    audit: bool | str = True,
    record: str | os.PathLike[str] | None = None,
    keep: int = 5,
    every: int | None = None,
) -> None:
    """Switch SkyRL 0.3.0 to trajschema: padding rows, advantages on the real rows, metrics.

    Call it in the driver before the trainer runs, and in each Ray worker process for the
    worker-side parts (Ray's ``runtime_env={"worker_process_setup_hook": ...}`` runs a
    function in every worker; see ``docs/skyrl.md``). It replaces:

    - ``pad_training_input_batch`` in ``training_batch`` and where ``trainer``,
      ``dispatch``, ``skyrl_train_backend`` and ``sft_trainer`` bind it, with
      [`pad_training_input_batch`][trajschema.skyrl.pad_training_input_batch] (slices of a
      batch are checked with [`sliced_layout`][trajschema.skyrl.sliced_layout], without uids
      where the batch has none);
    - ``MeshDispatch.stage_chunks``: SkyRL's, with each mini-batch's per-row metadata
      (``uids``, ``is_last_step``, ``is_padding``) cut to its rows before it is padded
      (with no uids once SkyRL has removed them), and how the mini-batch lies over the
      ranks recorded for the workers;
    - the workers' micro-batch iterators (``SampleBasedBatchIterator.__iter__``,
      ``TokenBasedBatchIterator._create_microbatch_from_indices``): SkyRL's micro-batches,
      each tagged with its real rows, weight and metric scale;
      ``TokenBasedBatchIterator._create_padding_microbatch``: one schema padding row (zero
      masks, EOS tokens, spread routes) instead of random tokens, a response mask of ones
      and every token on expert 0;
    - ``PolicyWorkerBase._forward_backward_micro`` and ``CriticWorkerBase``'s: SkyRL's own
      on the real rows of each micro-batch, weighted and with its metrics scaled as a
      never-padded run would weigh and average them (`trajschema.skyrl.workers`);
    - ``RayPPOTrainer.convert_to_training_input``: SkyRL's own, with the trainer's
      tokenizer's EOS and pad ids made known to the padding;
    - ``RayPPOTrainer.fwd_logprobs_values_reward`` and ``_execute_forward_pass``: SkyRL's
      own, the forward passes' mini-batches padded with the batch's padding rows and their
      outputs put back on their own rows;
    - ``RayPPOTrainer.apply_reward_kl_penalty``, ``compute_advantages_and_returns`` and
      ``_normalize_advantages``: SkyRL's own on the real rows only
      (``metadata["is_padding"]``), written back with exact zeros on the padding rows;
      ``padding/samples``, ``padding/tokens``, ``padding/share`` added to the trainer's
      metrics (`trajschema.skyrl.trainer`);
    - ``RayPPOTrainer.train_critic_and_policy``: SkyRL's own, then the step audit
      (`trajschema.skyrl.audit`): the ``trajschema/*`` figures of the padding rows of the
      batch and of every mini-batch staged, in the trainer's metrics; with ``record=DIR``,
      the batch whose padding broke (the trainer's batch, else the first padded mini-batch
      that broke), and with ``every=K`` the trainer's batch of every K-th step, written
      as a bundle ``DIR/step-<global_step>`` before ``audit="strict"`` raises, the last
      ``keep`` kept (`trajschema.skyrl.record`). [`load_bundle`][trajschema.load_bundle]
      reads one back, ``trajschema check DIR/step-...`` checks it. Recording never breaks
      the step.

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
        audit: ``True`` (default): each step's metrics gain the ``trajschema/*`` figures
            of [`audit_step`][trajschema.audit_step]; ``"strict"``: a step whose padding was
            not inert raises [`PaddingAuditError`][trajschema.PaddingAuditError] after
            SkyRL's training step (its figures in the metrics); ``False``: no audit.
        record: the directory the bundles go to (``None``: nothing is recorded), in the
            driver. It needs the audit: ``record=`` with ``audit=False`` is refused.
        keep: how many bundles ``record`` keeps (an int >= 1; the newest by step).
        every: also record every ``every``-th step (an int >= 1; needs ``record``).

    Raises:
        TypeError / ValueError: a bad argument.
        ImportError: SkyRL is not installed.
        RuntimeError: this SkyRL is not 0.3.0, a function to replace has another
            signature, or a module's binding was replaced by something else; nothing is
            patched then.
    """
    given = _checked_settings(schema, eos_token_id, pad_token_id, check)
    given["audit"] = audit_mode(audit)
    given["recorder"] = record_options(record, keep, every, trainer="SkyRL", version=None, audit=given["audit"])
    _SKYRL.install(_replacement, then=lambda: _settle(given), recorder=given["recorder"])


def _settle(given: dict[str, Any]) -> None:
    settings.clear()
    settings.update(given)


def _checked_settings(schema: Any, eos: Any, pad: Any, check: Any) -> dict[str, Any]:
    if schema is not None and not isinstance(schema, Schema):
        raise TypeError(f"schema must be a trajschema.Schema or None, found {type(schema).__name__}")
    check_bool("check", check)
    out: dict[str, Any] = {"schema": schema, "check": check}
    for name, value in (("eos_token_id", eos), ("pad_token_id", pad)):
        out[name] = None if value is None else check_int(name, value, minimum=0)
    return out


#: How each replaced method (by its qualified name) is made from SkyRL's own.
_REPLACEMENTS: dict[str, Callable[[Any], Any]] = {
    "SampleBasedBatchIterator.__iter__": sample_iter_for,
    "TokenBasedBatchIterator._create_microbatch_from_indices": microbatch_indices_for,
    "TokenBasedBatchIterator._create_padding_microbatch": lambda original: create_padding_microbatch,
    "PolicyWorkerBase._forward_backward_micro": functools.partial(micro_for, critic=False),
    "CriticWorkerBase._forward_backward_micro": functools.partial(micro_for, critic=True),
    "RayPPOTrainer.convert_to_training_input": convert_for,
    "RayPPOTrainer.fwd_logprobs_values_reward": forward_pass_for,
    "RayPPOTrainer._execute_forward_pass": execute_forward_for,
    "RayPPOTrainer.apply_reward_kl_penalty": kl_penalty_for,
    "RayPPOTrainer.compute_advantages_and_returns": advantages_for,
    "RayPPOTrainer._normalize_advantages": normalize_for,
    "RayPPOTrainer.train_critic_and_policy": train_step_for,
}


def _replacement(target: Target) -> Any:
    module, _, qual = target.label.partition(":")
    if qual == "pad_training_input_batch":
        return _pad_for(sliced=BINDINGS.get(module, True))
    if qual == "MeshDispatch.stage_chunks":
        return classmethod(stage_chunks_for(importlib.import_module(module)))
    return _REPLACEMENTS[qual](target.original)


def uninstall() -> bool:
    """Put back every attribute [`install`][trajschema.skyrl.install] replaced (the very same objects).

    ``False`` if none was.
    """
    return _SKYRL.uninstall(then=settings.clear)


def installed() -> bool:
    """Whether [`install`][trajschema.skyrl.install] is in effect."""
    return _SKYRL.installed()


# -- the replacements -------------------------------------------------------------------


def _pad_for(*, sliced: bool) -> Callable[..., Any]:
    def pad_training_input_batch_(unpadded_batch: Any, pad_size: int) -> Any:
        meta = getattr(unpadded_batch, "metadata", None)
        layout = staged_layout(meta if isinstance(meta, dict) else {}) if sliced else "skyrl"
        return pad_training_input_batch(unpadded_batch, pad_size, layout=layout)

    pad_training_input_batch_.__name__ = "pad_training_input_batch"
    return pad_training_input_batch_
