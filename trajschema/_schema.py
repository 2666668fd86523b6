"""The compiled schema: fields, dims, tags and padding defaults of one model family."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

import torch

from ._dims import DerivedDim, Expr, FixedDim, FreeDim

if TYPE_CHECKING:
    from ._errors import Violation
    from ._padding import PaddingBatch

__all__ = ["Field", "PadRule", "Schema", "Tag"]

Depth = Literal["shapes", "values"]

#: Pad rules that are names rather than literals.
PAD_RULES = ("eos", "positions", "uid", "index", "empty", "copy")
#: Non-tensor kinds a field may declare.
KINDS = ("int", "float", "bool", "str", "mapping", "any")

_SHORT_DTYPE = {
    torch.bool: "b",
    torch.uint8: "u8",
    torch.int8: "i8",
    torch.int16: "i16",
    torch.int32: "i32",
    torch.int64: "i64",
    torch.float16: "f16",
    torch.bfloat16: "bf16",
    torch.float32: "f32",
    torch.float64: "f64",
}


def dtype_name(dtype: torch.dtype) -> str:
    """``torch.int64`` -> ``"int64"``."""
    return str(dtype).removeprefix("torch.")


def short_dtype(dtype: torch.dtype) -> str:
    """``torch.int16`` -> ``"i16"``, as tensors are printed in reports."""
    return _SHORT_DTYPE.get(dtype, dtype_name(dtype))


@dataclasses.dataclass(frozen=True)
class PadRule:
    """How a padding sample fills one field: a named rule or a literal fill value."""

    rule: str  # one of PAD_RULES, or "fill"
    value: int | float | bool | None = None

    def __str__(self) -> str:
        return repr(self.value) if self.rule == "fill" else self.rule


@dataclasses.dataclass(frozen=True)
class Field:
    """One field of a sample: a tensor (``shape`` + ``dtypes``) or a non-tensor ``kind``.

    Attributes:
        name: the field's key in a sample.
        kind: ``"tensor"`` or one of ``int float bool str mapping any``.
        shape: for tensors, one parsed expression per axis.
        dtypes: for tensors, the allowed dtypes; padding uses the first unless a reference
            sample says otherwise.
        required: whether every sample must have it.
        pad: the padding rule.
        values / min / max / finite: value checks (``depth="values"``).
    """

    name: str
    kind: str
    shape: tuple[Expr, ...] | None
    dtypes: tuple[torch.dtype, ...]
    required: bool
    pad: PadRule
    values: tuple[int | float | bool, ...] | None = None
    min: int | float | None = None
    max: int | float | None = None
    finite: bool = False
    description: str = ""

    @property
    def is_tensor(self) -> bool:
        return self.kind == "tensor"

    @property
    def has_value_checks(self) -> bool:
        return self.values is not None or self.min is not None or self.max is not None or self.finite

    def describe(self) -> str:
        """``int64[prompt + response]`` or ``int``."""
        if not self.is_tensor:
            return self.kind
        dt = "|".join(dtype_name(d) for d in self.dtypes)
        return f"{dt}[{', '.join(str(e) for e in self.shape or ())}]"


@dataclasses.dataclass(frozen=True)
class Tag:
    """One declared key of the per-sample tag dict.

    ``equals`` ties a tag to a dim expression (``seq_len: {equals: seq}``); ``kind``
    constrains the value's type; ``default`` is what an absent tag means.
    """

    name: str
    kind: str | None = None
    default: Any = None
    equals: Expr | None = None
    description: str = ""


Dim = FixedDim | FreeDim | DerivedDim


class Schema:
    """A compiled trajectory schema for one model family.

    Build one with :func:`trajschema.load_schema`; it is immutable and safe to share.

    Examples:
        >>> import torch, trajschema as ts
        >>> schema = ts.load_schema("text")
        >>> sample = {
        ...     "prompts": torch.tensor([5, 6]), "responses": torch.tensor([7, 2]),
        ...     "input_ids": torch.tensor([5, 6, 7, 2]), "position_ids": torch.arange(4),
        ...     "response_mask": torch.ones(2, dtype=torch.int64),
        ...     "loss_mask": torch.ones(2, dtype=torch.int64),
        ...     "num_turns": 1, "uid": "q0",
        ... }
        >>> schema.validate(sample)
        {'prompt': 2, 'response': 2, 'seq': 4}
    """

    def __init__(
        self,
        *,
        name: str,
        description: str,
        architectures: Sequence[str],
        lineage: Sequence[str],
        dims: Mapping[str, Dim],
        fields: Mapping[str, Field],
        tags: Mapping[str, Tag],
        padding_sizes: Mapping[str, int],
        extra: str,
        source: str,
    ) -> None:
        self.name = name
        self.description = description
        self.architectures = tuple(architectures)
        #: This schema and its ancestors in resolution (C3) order.
        self.lineage = tuple(lineage)
        self.dims: Mapping[str, Dim] = dict(dims)
        self.fields: Mapping[str, Field] = dict(fields)
        self.tags: Mapping[str, Tag] = dict(tags)
        #: Default sizes of free dims for padding samples (``padding:`` in YAML).
        self.padding_sizes: Mapping[str, int] = dict(padding_sizes)
        #: ``"allow"`` or ``"forbid"``: what happens to fields the schema does not name.
        self.extra = extra
        self.source = source
        # Lazily built plans for the fast paths; derived only from the fields above.
        self._plan: Any = None

    def __repr__(self) -> str:
        return f"<Schema {self.name!r}: {len(self.fields)} fields, dims {list(self.dims)}>"

    def describe(self) -> str:
        """A multi-line human-readable summary of the dims, fields and tags."""
        lines = [f"schema {self.name}" + (f" (extends {', '.join(self.lineage[1:])})" if len(self.lineage) > 1 else "")]
        if self.description:
            lines.append(f"  {self.description}")
        lines.append("  dims:")
        for d in self.dims.values():
            kind = type(d).__name__.removesuffix("Dim").lower()
            lines.append(f"    {d.name}: {kind} {d.describe()}")
        lines.append("  fields:")
        for f in self.fields.values():
            opt = "" if f.required else " (optional)"
            lines.append(f"    {f.name}: {f.describe()}{opt}, pad {f.pad}")
        if self.tags:
            lines.append("  tags: " + ", ".join(self.tags))
        return "\n".join(lines)

    # The checking and padding logic lives in _validate and _padding; these methods are
    # the public front door and keep their signatures stable.

    def violations(
        self,
        sample: Mapping[str, Any],
        *,
        tag: Mapping[str, Any] | None = None,
        dims: Mapping[str, int] | None = None,
        depth: Depth = "values",
    ) -> list[Violation]:
        """Every way ``sample`` (and its ``tag`` dict) breaks this schema; never raises for bad data.

        Examples:
            >>> [v.code for v in ts.load_schema("text").violations({"uid": "q"})][:2]
            ['missing', 'missing']

        Args:
            sample: a mapping of field name to value (a dict or one row of a TensorDict).
            tag: the sample's tag dict, as stored beside it in TransferQueue.
            dims: dim sizes the sample must have (e.g. ``{"layers": 48}``).
            depth: ``"shapes"`` (presence, kinds, dtypes, shapes, dims; reads no tensor
                values) or ``"values"`` (adds ``values``/``min``/``max``/``finite``).

        Raises:
            TypeError: ``sample`` is not a mapping.
        """
        return _validate.check_sample(self, sample, tag=tag, dims=dims, depth=depth)[1]

    def validate(
        self,
        sample: Mapping[str, Any],
        *,
        tag: Mapping[str, Any] | None = None,
        dims: Mapping[str, int] | None = None,
        depth: Depth = "values",
    ) -> dict[str, int]:
        """Check one sample and return every dim it binds (free, fixed and derived).

        Args: as for :meth:`violations`.

        Raises:
            SchemaError: with every violation found.
            TypeError: ``sample`` is not a mapping.
        """
        return _validate.validate_sample(self, sample, tag=tag, dims=dims, depth=depth)

    def validate_batch(
        self,
        batch: Any,
        *,
        tags: Sequence[Mapping[str, Any]] | None = None,
        dims: Mapping[str, int] | None = None,
        depth: Depth = "values",
    ) -> None:
        """Check every sample of a batch; report all violations with their sample index.

        ``batch`` is a list of sample mappings, or a ``tensordict.TensorDict`` laid out as
        TransferQueue returns it (jagged or strided nested tensors, dense tensors whose
        first dim is the batch, ``NonTensorStack`` columns). Jagged columns are checked
        from their offsets and shapes, vectorized over the batch.

        Args:
            batch: the samples.
            tags: one tag dict per sample.
            dims: dim sizes every sample must have.
            depth: ``"shapes"`` or ``"values"``, as for :meth:`violations`.

        Raises:
            SchemaError: with every violation of every sample.
            TypeError: ``batch`` is neither a sequence of mappings nor a TensorDict.
        """
        _validate.check_batch(self, batch, tags=tags, dims=dims, depth=depth, raise_errors=True)

    def batch_violations(
        self,
        batch: Any,
        *,
        tags: Sequence[Mapping[str, Any]] | None = None,
        dims: Mapping[str, int] | None = None,
        depth: Depth = "values",
    ) -> list[Violation]:
        """Like :meth:`validate_batch`, but return the violations instead of raising."""
        return _validate.check_batch(self, batch, tags=tags, dims=dims, depth=depth, raise_errors=False)

    def padding(
        self,
        count: int,
        *,
        eos_token_id: int,
        like: Mapping[str, Any] | None = None,
        dims: Mapping[str, int] | None = None,
        include: Sequence[str] | None = None,
    ) -> PaddingBatch:
        """Derive ``count`` padding samples from this schema.

        Every padding sample validates against the schema; its loss and response masks
        are zero, and all samples of one call share a fresh uid (``pad`` + 32 hex digits)
        so they form a GRPO group of their own.

        Examples:
            >>> pad = ts.load_schema("text").padding(3, eos_token_id=2)
            >>> pad.keys[0].endswith("_0_0"), pad.tags[0]["is_padding"], pad.tags[0]["seq_len"]
            (True, True, 128)

        Args:
            count: how many padding samples (0 is allowed).
            eos_token_id: the tokenizer's EOS id, used by ``pad: eos`` fields.
            like: a real sample of the batch being padded: free dims without a padding
                default (``layers``, ``topk``, ...) and dtypes come from it, optional fields
                are emitted exactly when it has them, and fields the schema does not name
                are copied from it.
            dims: padding sizes that override the schema's ``padding:`` defaults and
                ``like``, e.g. ``{"prompt": 1, "response": 1}``.
            include: optional fields to emit when no ``like`` is given.

        Raises:
            ValueError: bad ``count``/``dims``/``include``, or a free dim with no size
                (the message says to pass ``like=`` or ``dims=``).
            SchemaError: ``like`` itself breaks the schema.
        """
        return _padding.make_padding(self, count, eos_token_id=eos_token_id, like=like, dims=dims, include=include)


# At the bottom on purpose: these modules import Schema from here, and the methods above
# call into them on every check, so they are bound once rather than imported per call.
from . import _padding, _validate  # noqa: E402
