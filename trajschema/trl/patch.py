"""Checking every batch a running TRL 1.16.0 GRPO trainer builds.

[`install`][trajschema.trl.install] wraps ``GRPOTrainer._generate_and_score_completions``
(the step that generates, scores and pads one generation batch into the dict the loss
reads): TRL's own runs, then its dict is checked against a schema in the
[`grpo_layout`][trajschema.trl.grpo_layout] of that trainer, and the figures of
[`check_metrics`][trajschema.trl.check_metrics] go into the trainer's ``_metrics``, which
``GRPOTrainer.log`` averages into every logged step. Only ``strict=True`` raises: without
it the check never breaks the trainer's step (a failure of the check itself is logged).
[`uninstall`][trajschema.trl.uninstall] puts TRL's own function back. TRL is imported only
by [`install`][trajschema.trl.install].
"""

from __future__ import annotations

import functools
import logging
import operator
import os
import time
from typing import Any, Literal

from trajschema.bundle import broken_reason, record_options
from trajschema.core import DEPTHS, SchemaError, check_bool
from trajschema.dropin import DropIn, Target
from trajschema.load import resolve_schema
from trajschema.runtime import check_metrics, checks, due_mode
from trajschema.schema import Schema
from trajschema.trl.check import grpo_layout

__all__ = ["SUPPORTED_TRL_VERSIONS", "TRL_SIGNATURES", "install", "installed", "uninstall"]

SUPPORTED_TRL_VERSIONS = ("1.16.0",)

_GRPO = "trl.trainer.grpo_trainer"

#: What install() replaces (``module:attribute``), with the parameters (annotations aside) it was written against.
TRL_SIGNATURES: dict[str, str] = {
    f"{_GRPO}:GRPOTrainer._generate_and_score_completions": "(self, inputs)",
}

_TRL = DropIn("trajschema.trl", "TRL", "trl", SUPPORTED_TRL_VERSIONS, TRL_SIGNATURES)

#: What the installed check reads: the schema, the fixed mode (``None``: the check mode in
#: force at each call), strictness, depth, and whether a check made in ``"once"`` mode passed.
settings: dict[str, Any] = {}

_LOG = logging.getLogger("trajschema.trl")


def install(
    schema: Schema | str = "text",
    *,
    mode: Literal["always", "once", "never"] | None = None,
    strict: bool = False,
    depth: str = "shapes",
    record: str | os.PathLike[str] | None = None,
    keep: int = 5,
    every: int | None = None,
) -> None:
    """Check every batch TRL 1.16.0's ``GRPOTrainer`` builds, reporting through TRL's metrics.

    Call it before ``trainer.train()`` (any ``GRPOTrainer`` subclass that inherits the
    step is covered). Each call of ``_generate_and_score_completions`` then runs TRL's own
    and checks its dict with ``schema.batch_violations(batch, layout=grpo_layout(...))``,
    fitted to the trainer's pad id and ``mask_truncated_completions``. The figures of
    [`check_metrics`][trajschema.trl.check_metrics] are appended to
    ``trainer._metrics["train" | "eval"]``, so each logged step shows their mean; a batch
    with violations is logged (logger ``trajschema.trl``, a warning naming them), and with
    ``strict=True`` raises [`SchemaError`][trajschema.SchemaError] after its figures are
    recorded. A tokenizer pad id that is not a token id (``-1``, ``True``) is taken as
    unknown (``pad_token_id=None``), said once in a warning; without ``strict`` an error of
    the check itself is logged, not raised: the step never fails because of the check.
    Calling it again re-installs with the new arguments.

    Args:
        schema: the schema of the samples (default ``text``), or its name.
        mode: ``"always"``, ``"once"`` (until one check made in that mode passes) or
            ``"never"``; ``None`` (default): the check mode in force at each call
            ([`checks`][trajschema.checks], [`set_check_mode`][trajschema.set_check_mode],
            ``TRAJSCHEMA_CHECKS``), as for [`checked`][trajschema.checked].
        strict: raise on a batch with violations instead of only reporting it.
        depth: ``"shapes"`` (default: masks, padding, shapes and dtypes) or ``"values"``
            (also the value rules: finite advantages, log-probs at most 0, ...).
        record: a directory: a batch the check finds violations in is written there as a
            bundle (``step-<global step>``, [`load_bundle`][trajschema.load_bundle] reads it;
            ``trajschema check DIR/step-...`` checks it), before a strict check raises.
        keep: how many bundles ``record`` keeps (the newest; older ones are deleted).
        every: also record every ``every``-th step's batch (needs ``record``).

    Raises:
        TypeError / ValueError: a bad argument.
        ImportError: TRL is not installed.
        RuntimeError: this TRL is not 1.16.0, or ``_generate_and_score_completions`` has
            another signature; nothing is patched then.
    """
    given: dict[str, Any] = {
        "schema": resolve_schema(schema),
        "mode": None if mode is None else checks(mode).mode,  # validated where check modes are
        "strict": check_bool("strict", strict),
        "depth": depth,
        "passed": False,
    }
    if depth not in DEPTHS:
        raise ValueError(f"depth must be one of {', '.join(map(repr, DEPTHS))}, found {depth!r}")
    given["recorder"] = record_options(record, keep, every, trainer="TRL", version=None)
    _TRL.install(_replacement, then=lambda: _settle(given), recorder=given["recorder"])


def _settle(given: dict[str, Any]) -> None:
    settings.clear()
    settings.update(given)


def uninstall() -> bool:
    """Put back what [`install`][trajschema.trl.install] replaced (the very same function); ``False`` if nothing was."""
    return _TRL.uninstall(then=settings.clear)


def installed() -> bool:
    """Whether [`install`][trajschema.trl.install] is in effect."""
    return _TRL.installed()


def _replacement(target: Target) -> Any:
    original = target.original

    @functools.wraps(original)
    def _generate_and_score_completions(self: Any, inputs: Any) -> Any:
        batch = original(self, inputs)
        _guarded_check(self, batch)
        return batch

    return _generate_and_score_completions


def _guarded_check(trainer: Any, batch: Any) -> None:
    """`_check`, which raises only under ``strict=True``: otherwise an error of the check
    itself (not of the batch) is logged, and the trainer's step goes on."""
    try:
        _check(trainer, batch)
    except Exception:
        if settings.get("strict"):
            raise
        _LOG.warning("trajschema.trl: checking the batch TRL built failed; the step goes on unchecked", exc_info=True)


def _pad_id(trainer: Any) -> int | None:
    """The trainer's tokenizer's pad id; ``None`` (unknown, said once in a warning) when it is not a token id."""
    tokenizer = getattr(trainer, "_tokenizer", None) or getattr(trainer, "processing_class", None)
    pad = getattr(tokenizer, "pad_token_id", None)
    if pad is None:
        return None
    try:
        value = None if isinstance(pad, bool) else operator.index(pad)
    except TypeError:
        value = None
    if value is not None and 0 <= value < 2**63:
        return value
    told = settings.setdefault("odd_pads", set())
    if repr(pad) not in told:
        told.add(repr(pad))
        _LOG.warning(
            "trajschema.trl: the tokenizer's pad_token_id %r is not a token id; the padding of "
            "prompt_ids and completion_ids is checked for one value throughout, whichever it is",
            pad,
        )
    return None


def _check(trainer: Any, batch: Any) -> None:
    mode = due_mode(settings) if settings else None
    schema: Schema | None = settings.get("schema")
    if schema is None:
        return
    layout = grpo_layout(
        pad_token_id=_pad_id(trainer),
        mask_truncated_completions=bool(getattr(trainer, "mask_truncated_completions", False)),
    )
    found: list[Any] = []
    if mode is not None:
        start = time.perf_counter()
        found = schema.batch_violations(batch, layout=layout, depth=settings["depth"])
        _record(trainer, check_metrics(found, time.perf_counter() - start))
    _keep(trainer, batch, schema, layout, found)
    if not found:
        settings["passed"] = settings["passed"] or mode == "once"
        return
    error = SchemaError(found, schema_name=schema.name)
    if settings["strict"]:
        error.add_note("trajschema.trl: GRPOTrainer._generate_and_score_completions built this batch")
        raise error
    _LOG.warning("trajschema.trl: the batch TRL built breaks schema %r:\n%s", schema.name, error)


def _keep(trainer: Any, batch: Any, schema: Schema, layout: Any, found: list[Any]) -> None:
    """The batch as a bundle, when ``install(record=)`` asks for this step's (violations found, or every K steps)."""
    recorder = settings.get("recorder")
    if recorder is None:
        return
    state = getattr(trainer, "state", None)
    step = getattr(state, "global_step", None)
    broken = broken_reason(sorted({f"{v.field} {v.code}" for v in found}), where=f"{len(found)} violations")
    recorder.record(batch, schema=schema, layout=layout, step=step if isinstance(step, int) else None, broken=broken)


def _record(trainer: Any, figures: dict[str, float]) -> None:
    """Append ``figures`` to the trainer's metrics of its current mode, which ``GRPOTrainer.log`` averages."""
    metrics = getattr(trainer, "_metrics", None)
    model = getattr(trainer, "model", None)
    mode = "train" if getattr(model, "training", True) else "eval"
    if not isinstance(metrics, dict) or mode not in metrics:
        return
    for name, value in figures.items():  # setdefault: a plain dict per mode, as well as TRL's defaultdict
        metrics[mode].setdefault(name, []).append(value)
