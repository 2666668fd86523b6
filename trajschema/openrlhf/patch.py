"""Switching a running OpenRLHF 0.11.2 to trajschema's padding, advantages and metrics.

[`install`][trajschema.openrlhf.install] replaces ``RemoteExperienceMaker.split_rollout_samples``
and ``compute_advantages_and_returns``, ``BasePPOTrainer._compute_rollout_stats``, and
``balance_experiences`` where it is defined and where ``ppo_trainer`` binds it by name
(`trajschema.openrlhf.trainer`); [`uninstall`][trajschema.openrlhf.uninstall] puts the very
same objects back. OpenRLHF is imported only by [`install`][trajschema.openrlhf.install].
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, Literal

from trajschema.bundle import record_options
from trajschema.core import DEPTHS, check_bool, check_int
from trajschema.dropin import DropIn, Target
from trajschema.load import resolve_schema
from trajschema.openrlhf.actor import training_step_for
from trajschema.openrlhf.experience import settings
from trajschema.openrlhf.trainer import advantages_for, balance_for, rollout_stats_for, split_for
from trajschema.runtime import audit_mode, checks
from trajschema.schema import Schema

__all__ = ["OPENRLHF_SIGNATURES", "SUPPORTED_OPENRLHF_VERSIONS", "install", "installed", "uninstall"]

SUPPORTED_OPENRLHF_VERSIONS = ("0.11.2",)

_EXPERIENCE = "openrlhf.trainer.ppo_utils.experience"
_MAKER = "openrlhf.trainer.ppo_utils.experience_maker"
_TRAINER = "openrlhf.trainer.ppo_trainer"
_ACTOR = "openrlhf.trainer.ray.ppo_actor"

#: What install() replaces (``module:attribute``), with the parameters (annotations aside) it was written against.
OPENRLHF_SIGNATURES: dict[str, str] = {
    f"{_EXPERIENCE}:balance_experiences": "(experiences, args)",
    f"{_MAKER}:RemoteExperienceMaker.split_rollout_samples": "(self, rollout_samples)",
    f"{_MAKER}:RemoteExperienceMaker.compute_advantages_and_returns": "(self, experiences)",
    # Ray's @ray.remote on PPOTrainer gives the methods of its bases a tracing keyword at import.
    f"{_TRAINER}:BasePPOTrainer._compute_rollout_stats": "(self, experiences, *, _ray_trace_ctx=None)",
    f"{_ACTOR}:ActorPPOTrainer.training_step": "(self, experience, kl_ctl, step, loss_batch_info=None)",
}

_OPENRLHF = DropIn(
    "trajschema.openrlhf",
    "OpenRLHF",
    "openrlhf",
    SUPPORTED_OPENRLHF_VERSIONS,
    OPENRLHF_SIGNATURES,
    bindings={f"{_EXPERIENCE}:balance_experiences": (_TRAINER,)},
)

#: How each replaced attribute (by its qualified name) is made from OpenRLHF's own.
_REPLACEMENTS: dict[str, Callable[[Any], Any]] = {
    "balance_experiences": balance_for,
    "RemoteExperienceMaker.split_rollout_samples": split_for,
    "RemoteExperienceMaker.compute_advantages_and_returns": advantages_for,
    "BasePPOTrainer._compute_rollout_stats": rollout_stats_for,
    "ActorPPOTrainer.training_step": training_step_for,
}


def install(
    *,
    schema: Schema | str | None = None,
    eos_token_id: int | None = None,
    audit: bool | str = True,
    mode: Literal["always", "once", "never"] | None = None,
    strict: bool = False,
    depth: str = "shapes",
    record: str | os.PathLike[str] | None = None,
    keep: int = 5,
    every: int | None = None,
) -> None:
    """Switch OpenRLHF 0.11.2 to trajschema: padding experiences, advantages and metrics on the real rows.

    Call it in the process that runs the PPO trainer (the ``PPOTrainer`` Ray actor: e.g. at
    the top of your launch script's trainer module, or through Ray's
    ``runtime_env={"worker_process_setup_hook": ...}``), before ``fit``. It replaces:

    - ``RemoteExperienceMaker.split_rollout_samples``: the rollout checked against the schema
      in OpenRLHF's layout ([`experience_violations`][trajschema.openrlhf.experience_violations])
      when ``mode`` makes a check due, then padded with padding
      experiences ([`pad_rollout_samples`][trajschema.openrlhf.pad_rollout_samples]) to the
      multiple ([`pad_multiple`][trajschema.openrlhf.pad_multiple]) that gives every actor,
      critic, reference and reward model the same number of whole micro-batches, then
      OpenRLHF's own split;
    - ``RemoteExperienceMaker.compute_advantages_and_returns``: OpenRLHF's own on the real
      rows, exact zeros on the padding rows;
    - ``BasePPOTrainer._compute_rollout_stats``: OpenRLHF's own on the real rows, with
      ``padding/samples``, ``padding/tokens``, ``padding/share`` and the step audit's
      ``trajschema/*`` figures added;
    - ``balance_experiences`` (``train.dynamic_batch_enable``), where it is defined and where
      ``ppo_trainer`` binds it: OpenRLHF's own, after padding an unpadded rollout to a
      multiple of the actors;
    - ``ActorPPOTrainer.training_step`` (in the actor processes): OpenRLHF's own, its
      metrics read on the real rows and a window without action tokens normalised by 1
      (`trajschema.openrlhf.actor`). The actors run in their own Ray processes: call
      ``install()`` there too, e.g. through
      ``runtime_env={"worker_process_setup_hook": "my_module.setup"}``.

    Calling it again re-installs with the new arguments.

    Args:
        schema: the schema (or its name) the rollout is checked against and the padding
            samples come from (default ``text``).
        eos_token_id: the EOS id of the padding tokens (default: the trainer's tokenizer,
            else the last token of the first real sample).
        audit: ``True`` (default): the ``trajschema/*`` figures in each step's status;
            ``"strict"``: a step whose padding was not inert raises
            [`PaddingAuditError`][trajschema.PaddingAuditError]; ``False``: no audit.
        mode: when the rollout is checked: ``"always"``, ``"once"`` (until one check made in
            that mode passes) or ``"never"``; ``None`` (default): the check mode in force at
            each step ([`checks`][trajschema.checks], ``TRAJSCHEMA_CHECKS``), as for
            [`checked`][trajschema.checked]. Its figures (``trajschema/violations``,
            ``trajschema/bad_samples``, ``trajschema/check_ms``, ``trajschema/violations/<code>``)
            join the step's status; a rollout with violations is logged as a warning
            (logger ``trajschema.openrlhf``).
        strict: a rollout with violations raises [`SchemaError`][trajschema.SchemaError]
            before anything is padded.
        depth: ``"shapes"`` (default) or ``"values"``, as for [`Schema.violations`][trajschema.Schema.violations].
        record: a directory: a step whose rollout check or audit finds something wrong is
            written there as a bundle (``step-NNNNNNNN``, numbered by the steps this process
            saw; [`load_bundle`][trajschema.load_bundle] reads it, ``trajschema check``
            checks it): its rows as the schema's samples, the raw experiences beside them
            (``bundle.extras["experiences"]``), before a strict audit raises.
        keep: how many bundles ``record`` keeps (the newest).
        every: also record every ``every``-th step (needs ``record``).

    Raises:
        TypeError / ValueError: a bad argument.
        ImportError: OpenRLHF is not installed.
        RuntimeError: this OpenRLHF is not 0.11.2, a function to replace has another
            signature, or ``ppo_trainer``'s binding was replaced by something else; nothing
            is patched then.
    """
    if depth not in DEPTHS:
        raise ValueError(f"depth must be one of {', '.join(map(repr, DEPTHS))}, found {depth!r}")
    given = {
        "schema": None if schema is None else resolve_schema(schema),
        "eos_token_id": None if eos_token_id is None else check_int("eos_token_id", eos_token_id, maximum=2**63 - 1),
        "audit": audit_mode(audit),
        "mode": None if mode is None else checks(mode).mode,  # validated where check modes are
        "strict": check_bool("strict", strict),
        "depth": depth,
        "passed": False,
        "recorder": record_options(record, keep, every, trainer="OpenRLHF", version=None),
    }
    _OPENRLHF.install(_replacement, then=lambda: _settle(given), recorder=given["recorder"])


def _settle(given: dict[str, Any]) -> None:
    settings.clear()
    settings.update(given)


def _replacement(target: Target) -> Any:
    qual = target.label.partition(":")[2]
    return _REPLACEMENTS[qual](target.original)


def uninstall() -> bool:
    """Put back every attribute [`install`][trajschema.openrlhf.install] replaced (the very same objects).

    ``False`` if none was.
    """
    return _OPENRLHF.uninstall(then=settings.clear)


def installed() -> bool:
    """Whether [`install`][trajschema.openrlhf.install] is in effect."""
    return _OPENRLHF.installed()
