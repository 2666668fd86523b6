"""The OpenRLHF 0.11.2 steps [`install`][trajschema.openrlhf.install] wraps: OpenRLHF's own, on the real rows.

``BasePPOTrainer.train_step`` calls, in order: the experience maker's
``make_experience_batch`` (``split_rollout_samples``, the model forwards,
``compute_advantages_and_returns``), ``_compute_rollout_stats``, ``balance_experiences``
(with ``train.dynamic_batch_enable``), then ``async_run_method_batch("append")`` to the
actors. The wrappers here pad the rollout where it is split, run the advantage step and the
rollout statistics on the real rows only (zeros written on the padding rows), and pad the
balanced batch when a rollout reached it unpadded.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

import torch

from trajschema.bundle import broken_reason
from trajschema.core import SchemaError
from trajschema.dropin import padding_metrics, real_and_padding, zeros_on_padding
from trajschema.openrlhf.audit import audit_experiences
from trajschema.openrlhf.experience import padding_flags, schema_of, settings
from trajschema.openrlhf.layout import experience_violations, held_schema, readable_samples
from trajschema.openrlhf.pad import pad_multiple, pad_rollout_samples, padding_experiences
from trajschema.runtime import check_metrics, due_mode

_LOG = logging.getLogger("trajschema.openrlhf")

__all__ = [
    "advantages_for",
    "balance_for",
    "check_rollout",
    "real_part",
    "rollout_stats_for",
    "split_for",
    "with_real",
]

#: What ``compute_advantages_and_returns`` writes per row, put back with zeros on padding rows.
OUTPUTS = ("advantages", "returns", "rewards")


def split_for(original: Callable[..., Any]) -> Callable[..., Any]:
    """``RemoteExperienceMaker.split_rollout_samples``: the rollout checked (`check_rollout`),
    padded (`pad_rollout_samples`) to the multiple every model group and micro-batch needs,
    then OpenRLHF's own split."""

    @functools.wraps(original)
    def split_rollout_samples(self: Any, rollout_samples: Any) -> Any:
        groups = [name for name, attr in _GROUPS if getattr(self, attr, None) is not None]
        multiple = pad_multiple(self.args, groups=groups or ("actor",))
        given = settings.get("eos_token_id")  # install()'s, which may be 0; else the tokenizer's
        eos = (
            given
            if given is not None
            else _int_or_none(getattr(getattr(self, "tokenizer", None), "eos_token_id", None))
        )
        check_rollout(rollout_samples)
        _warn_router_loss(self.args)
        padded = pad_rollout_samples(rollout_samples, multiple, eos_token_id=eos)
        return original(self, padded)

    return split_rollout_samples


def _warn_router_loss(args: Any) -> None:
    """Say once that a mixture-of-experts router loss counts padding rows (their attention masks are ones)."""
    coef = getattr(getattr(args, "actor", None), "aux_loss_coef", 0.0)
    if isinstance(coef, (int, float)) and coef > 1e-8 and not settings.get("warned_router_loss"):
        settings["warned_router_loss"] = True
        _LOG.warning(
            "trajschema.openrlhf: actor.aux_loss_coef=%g: the router's load-balancing loss counts the "
            "padding rows' tokens (their attention masks are ones), so padding is not inert in it",
            coef,
        )


def check_rollout(samples: Sequence[Any]) -> None:
    """The rollout OpenRLHF generated, checked against ``install(schema=)``'s schema in
    OpenRLHF's layout (`trajschema.openrlhf.layout`) when ``install(mode=)`` makes a check due:
    the figures of `trajschema.runtime.check_metrics` and the violations wait in
    ``settings["figures"]`` / ``["found"]`` for the step's statistics (and its audit, whose
    ``trajschema/violations`` they join); a rollout with violations is logged (logger ``trajschema.openrlhf``),
    or with ``strict=True`` raises `SchemaError` before anything is padded or tagged."""
    mode = due_mode(settings) if settings else None
    if mode is None:
        return
    schema = schema_of(None)
    start = time.perf_counter()
    try:
        found = experience_violations(samples, schema=schema, depth=settings.get("depth", "shapes"))
    except Exception:
        if settings.get("strict"):
            raise
        _LOG.warning("trajschema.openrlhf: checking the rollout failed; the step goes on unchecked", exc_info=True)
        return
    settings["figures"] = check_metrics(found, time.perf_counter() - start)
    settings["found"] = found
    if not found:
        settings["passed"] = settings.get("passed", False) or mode == "once"
        return
    error = SchemaError(found, schema_name=schema.name)
    if settings.get("strict"):
        error.add_note("trajschema.openrlhf: the rollout reached RemoteExperienceMaker.split_rollout_samples so")
        raise error
    _LOG.warning("trajschema.openrlhf: the rollout breaks schema %r:\n%s", schema.name, error)


#: The experience maker's model groups (``async_run_method_batch`` deals each the batches) and their ``args`` sections.
_GROUPS = (
    ("actor", "actor_model_group"),
    ("critic", "critic_model_group"),
    ("reward", "reward_model_group"),
    ("ref", "initial_model_group"),
)


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def real_part(experience: Any, rows: Sequence[int]) -> Any:
    """The rows ``rows`` of a batched ``experience``: a new one of its class, every tensor,
    per-row list and ``info`` entry cut to them (its own objects: nothing is shared)."""
    n = int(experience.sequences.shape[0])
    index = torch.tensor(list(rows), dtype=torch.long)
    out: dict[str, Any] = {}
    for f in dataclasses.fields(experience):
        value = getattr(experience, f.name)
        if f.name == "info":
            out[f.name] = {k: _rows_of(v, rows, index, n) for k, v in value.items()}
        else:
            out[f.name] = _rows_of(value, rows, index, n)
    return type(experience)(**out)


def _rows_of(value: Any, rows: Sequence[int], index: torch.Tensor, n: int) -> Any:
    if isinstance(value, torch.Tensor) and value.dim() >= 1 and value.shape[0] == n:
        return value[index.to(value.device)]
    if isinstance(value, list) and len(value) == n:
        return [value[i] for i in rows]
    return value


def with_real(
    step: Callable[[list[Any]], Any], experiences: Sequence[Any]
) -> tuple[Any, list[tuple[Any, list[int], Any]]]:
    """``step`` on the real rows of ``experiences`` (experiences with none left out), and each
    ``(experience, real rows, its real part)`` for writing back; ``step``'s result as it is."""
    parts = []
    for exp in experiences:
        real = [i for i, p in enumerate(padding_flags(exp)) if not p]
        if real:
            parts.append((exp, real, real_part(exp, real)))
    if not parts:
        rows = [p for e in experiences for p in padding_flags(e)]
        real_and_padding(rows)  # no row, or none real: refused with the message every drop-in gives
    return step([p for _, _, p in parts]), parts


def advantages_for(original: Callable[..., Any]) -> Callable[..., Any]:
    """``compute_advantages_and_returns``: OpenRLHF's own on the real rows, so group baselines,
    the whitening mean and std, and length penalties see no padding row; ``advantages``,
    ``returns``, ``rewards`` and the per-row ``info`` it adds come back with exact zeros on
    the padding rows."""

    @functools.wraps(original)
    def compute_advantages_and_returns(self: Any, experiences: Any) -> Any:
        if not any(any(padding_flags(e)) for e in experiences):
            return original(self, experiences)
        _, parts = with_real(lambda real: original(self, real), experiences)
        done = {id(exp): (real, part) for exp, real, part in parts}
        keys = {k: v for _, _, part in parts for k, v in part.info.items() if isinstance(v, torch.Tensor)}
        for exp in experiences:
            real, part = done.get(id(exp), ([], None))
            _write_back(exp, real, part)
            if part is None:  # all padding: the per-row logs the step gave the others, as zeros
                rows = int(exp.sequences.shape[0])
                for key, value in keys.items():
                    exp.info.setdefault(key, value.new_zeros((rows, *value.shape[1:])))
        return experiences

    return compute_advantages_and_returns


def _write_back(exp: Any, real: list[int], part: Any) -> None:
    rows = int(exp.sequences.shape[0])
    like = part if part is not None else exp
    for name in OUTPUTS:
        value = getattr(like, name, None)
        if isinstance(value, torch.Tensor):
            setattr(
                exp, name, zeros_on_padding(value, real, rows) if real else value.new_zeros((rows, *value.shape[1:]))
            )
        elif name != "rewards":
            setattr(exp, name, _zeros_like_actions(exp))
    exp.kl = None  # as OpenRLHF's step leaves it
    if part is not None:
        for key, value in part.info.items():
            if key in exp.info:
                continue  # the step adds per-row logs (return, group_reward_std); the rest are as they were
            if isinstance(value, torch.Tensor) and value.dim() >= 1 and value.shape[0] == len(real):
                exp.info[key] = zeros_on_padding(value, real, rows)


def _zeros_like_actions(exp: Any) -> torch.Tensor:
    """An all-padding experience's advantages or returns: zeros over its actions, float32."""
    return torch.zeros(exp.action_mask.shape, dtype=torch.float32, device=exp.action_mask.device)


def rollout_stats_for(original: Callable[..., Any]) -> Callable[..., Any]:
    """``BasePPOTrainer._compute_rollout_stats``: OpenRLHF's own on the real rows (reward mean
    and std, response length, truncation rate, sample count as a never-padded run logs them),
    ``padding/samples``, ``padding/tokens``, ``padding/share``, and the step audit's
    ``trajschema/*`` figures (`trajschema.openrlhf.audit`)."""

    @functools.wraps(original)
    def _compute_rollout_stats(self: Any, experiences: Any, **ray: Any) -> Any:
        stats, _ = with_real(lambda real: original(self, real, **ray), experiences)
        flags = [p for e in experiences for p in padding_flags(e)]
        tokens = sum(
            float(e.attention_mask[[i for i, p in enumerate(padding_flags(e)) if p]].sum())
            for e in experiences
            if isinstance(e.attention_mask, torch.Tensor)
        )
        stats.update(padding_metrics(flags, tokens))
        stats.update(settings.pop("figures", {}))
        checked = settings.pop("found", None)
        audit = audit_experiences(experiences, violations=checked) if settings.get("audit", "report") != "off" else None
        if audit is not None:
            stats.update(audit.figures)
        _keep(experiences, checked, audit)
        if audit is not None and settings.get("audit") == "strict":
            audit.raise_if_broken()
        return stats

    return _compute_rollout_stats


def _keep(experiences: Sequence[Any], checked: Sequence[Any] | None, audit: Any) -> None:
    """The step as a bundle when ``install(record=)`` asks for it: the rows as the schema's
    samples (its batch) and the raw experiences beside them (``extras["experiences"]``)."""
    recorder = settings.get("recorder")
    if recorder is None:
        return
    # the audit's faults count the check's violations too
    why = list(audit.faults) if audit is not None else [f"{len(checked)} violations"] if checked else []
    try:
        samples, tags = readable_samples(experiences)
    except (TypeError, ValueError):
        samples, tags = [], []  # nothing readable: the raw experiences alone
    recorder.record(
        samples,
        schema=held_schema(schema_of(None)),
        tags=tags,
        broken=broken_reason(why),
        extras={"experiences": list(experiences)},
    )


def balance_for(original: Callable[..., Any]) -> Callable[..., Any]:
    """``balance_experiences``: OpenRLHF's own, after padding the rows to a multiple of the
    actors it deals them to, for a rollout that reached it unpadded (one not split by
    ``split_rollout_samples``): every actor then gets the same count."""

    @functools.wraps(original)
    def balance_experiences(experiences: Any, args: Any) -> Any:
        experiences = list(experiences)
        if experiences:
            rows = sum(int(e.sequences.shape[0]) for e in experiences)
            short = (-rows) % pad_multiple(_dynamic(args))
            if short:
                first = next((e for e in experiences if (f := padding_flags(e)) and not f[0]), experiences[0])
                experiences.extend(padding_experiences(first, short))
        return original(experiences, args)

    return balance_experiences


class _Dynamic:
    """``args`` as ``balance_experiences`` deals them: one sample at a time (``dynamic_batch_enable``)."""

    def __init__(self, args: Any) -> None:
        self._args = args
        self.train = type("Train", (), {"dynamic_batch_enable": True})()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._args, name)


def _dynamic(args: Any) -> Any:
    return _Dynamic(args)
