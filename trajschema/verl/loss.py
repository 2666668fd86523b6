"""Loss aggregation over the real rows of a padded batch, equal to verl's ``agg_loss`` on the unpadded batch."""

from __future__ import annotations

import math
import numbers
from typing import Any

import torch

from trajschema.core import describe_value, positive_int, shown_value

__all__ = ["LOSS_AGG_MODES", "SEQ_MEAN_MODES", "agg_loss_real"]

#: verl 0.9.1's loss aggregation modes.
LOSS_AGG_MODES = ("token-mean", "token-sum", "seq-mean-token-sum", "seq-mean-token-sum-norm", "seq-mean-token-mean")
#: The modes that divide by a number of sequences (verl's trainer passes the padded mini-batch size).
SEQ_MEAN_MODES = tuple(mode for mode in LOSS_AGG_MODES if mode.startswith("seq-mean"))


def _masked_sum(values: torch.Tensor, mask: torch.Tensor, dim: int | None = None) -> torch.Tensor:
    # Elements outside the mask count as 0, even NaN or inf ones.
    kept = torch.where(mask.bool(), values, 0.0) * mask
    return kept.sum() if dim is None else kept.sum(dim=dim)


def _real_rows(real_rows: Any, n: int, device: torch.device) -> torch.Tensor:
    # A tensor is used where it is (indexing checks its device); a list becomes one on the loss's device.
    expected = f"real_rows must be a bool mask of one entry per row ({n})"
    if isinstance(real_rows, torch.Tensor):
        rows = real_rows
    else:
        try:
            rows = torch.as_tensor(real_rows, device=device)
        except (TypeError, ValueError, RuntimeError, OverflowError):  # what torch says of a non-array
            raise ValueError(f"{expected}, found {describe_value(real_rows)}") from None
    if rows.dtype != torch.bool or rows.shape != (n,):
        raise ValueError(f"{expected}, found {rows.dtype} of shape {tuple(rows.shape)}")
    if rows.is_meta and device.type != "meta":
        raise ValueError(f"{expected}, found a tensor on the meta device (it holds no values)")
    return rows


def _check_size(name: str, v: Any) -> None:
    """A global size or scale: ``None``, a positive finite number torch can divide by, or a 0-d numeric tensor."""
    if v is None:
        return
    if isinstance(v, torch.Tensor):
        # Its value is not read: on an accelerator that would wait for the device. A 0-d
        # tensor, as verl passes (a sum), keeps the loss 0-d; a (1,) one would broadcast it.
        if v.dim() == 0 and v.dtype != torch.bool and not v.is_complex():
            return
    elif (
        isinstance(v, numbers.Real)
        and not isinstance(v, bool)
        and math.isfinite(v)
        and float(v) > 0
        and (not isinstance(v, numbers.Integral) or int(v) <= _LARGEST)  # torch divides by int64 at most
    ):
        return
    raise ValueError(f"{name} must be a positive number or a 0-d tensor (or None), found {describe_value(v)}")


#: The largest int torch takes as a scalar (int64).
_LARGEST = 2**63 - 1


def agg_loss_real(
    loss_mat: torch.Tensor,
    loss_mask: torch.Tensor,
    loss_agg_mode: str,
    *,
    real_rows: Any,
    dp_size: int = 1,
    batch_num_tokens: int | torch.Tensor | None = None,
    global_batch_size: int | torch.Tensor | None = None,
    loss_scale_factor: int | None = None,
) -> torch.Tensor:
    """verl's ``agg_loss`` of a padded batch's rows, computed over its real rows alone.

    Equal to ``verl.trainer.ppo.core_algos.agg_loss(loss_mat[real_rows],
    loss_mask[real_rows], ...)``: what the loss would be had the batch never been padded.
    verl's seq-mean modes divide by a global batch size; given the padded batch's rows,
    they count padding rows when ``global_batch_size`` is left to default, and verl's
    trainer passes the padded mini-batch size. Here the padding rows are dropped first.

    ``dp_size``, ``batch_num_tokens``, ``global_batch_size`` and ``loss_scale_factor``
    mean what they mean for verl's ``agg_loss``, *of the real batch*: pass the number of
    real sequences in the global mini-batch as ``global_batch_size`` (with
    ``dp_size > 1`` it is required, as in verl). For ``seq-mean-token-sum-norm`` without
    ``loss_scale_factor`` the horizon is ``loss_mask.shape[-1]``, as in verl.

    Examples:
        >>> from trajschema.verl import agg_loss_real
        >>> loss = torch.tensor([[1.0, 2.0], [5.0, 0.0]])
        >>> mask = torch.tensor([[1, 1], [0, 0]])
        >>> agg_loss_real(loss, mask, "seq-mean-token-sum", real_rows=torch.tensor([True, False]))
        tensor(3.)

    Raises:
        TypeError: ``loss_mat`` or ``loss_mask`` is not a tensor.
        ValueError: an unknown ``loss_agg_mode``, shapes (or devices) that differ, a
            ``real_rows`` that is not one bool per row, a ``dp_size`` that is not a
            positive int, a ``batch_num_tokens`` / ``global_batch_size`` /
            ``loss_scale_factor`` that is neither a positive number (at most 2**63-1)
            nor a 0-d tensor, or a missing global size with ``dp_size > 1``.
    """
    if not isinstance(loss_agg_mode, str) or loss_agg_mode not in LOSS_AGG_MODES:
        raise ValueError(f"loss_agg_mode must be one of {list(LOSS_AGG_MODES)}, found {shown_value(loss_agg_mode)}")
    for name, t in (("loss_mat", loss_mat), ("loss_mask", loss_mask)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a (rows, tokens) tensor, found {describe_value(t)}")
    if loss_mat.shape != loss_mask.shape or loss_mat.dim() != 2:
        raise ValueError(
            f"loss_mat and loss_mask must be (rows, tokens) of the same shape, found {tuple(loss_mat.shape)} "
            f"and {tuple(loss_mask.shape)}"
        )
    if loss_mat.device != loss_mask.device:
        raise ValueError(
            f"loss_mat and loss_mask must be on one device, found {loss_mat.device} and {loss_mask.device}"
        )
    positive_int("dp_size", dp_size)
    for name, v in (
        ("batch_num_tokens", batch_num_tokens),
        ("global_batch_size", global_batch_size),
        ("loss_scale_factor", loss_scale_factor),
    ):
        _check_size(name, v)
    rows = _real_rows(real_rows, loss_mat.shape[0], loss_mat.device)
    mat, mask = loss_mat[rows], loss_mask[rows]
    if loss_agg_mode == "token-sum":
        return _masked_sum(mat, mask) * dp_size
    if loss_agg_mode == "token-mean":
        tokens = (
            batch_num_tokens if batch_num_tokens is not None else _required(dp_size, "batch_num_tokens", mask.sum())
        )
        return _masked_sum(mat, mask) / tokens * dp_size
    if loss_agg_mode == "seq-mean-token-mean":
        per_seq = torch.sum(mask, dim=-1)
        seq_losses = torch.sum(mat * mask, dim=-1) / (per_seq + 1e-8)
        seq_mask = (per_seq > 0).float()
    else:
        seq_losses = torch.sum(mat * mask, dim=-1)
        seq_mask = (torch.sum(mask, dim=-1) > 0).float()
    size = (
        global_batch_size if global_batch_size is not None else _required(dp_size, "global_batch_size", seq_mask.sum())
    )
    loss = _masked_sum(seq_losses, seq_mask) / size * dp_size
    if loss_agg_mode == "seq-mean-token-sum-norm":
        loss = loss / (loss_scale_factor if loss_scale_factor is not None else loss_mask.shape[-1])
    return loss


def _required(dp_size: int, name: str, local: torch.Tensor) -> torch.Tensor:
    if dp_size > 1:
        raise ValueError(f"{name} (of the real rows of the global batch) is required when dp_size > 1")
    return local
