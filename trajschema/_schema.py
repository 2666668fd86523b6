"""The compiled schema: the front door whose methods delegate to the checking and padding layers."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from . import _check, _padding
from ._decl import KINDS, PAD_RULES, Dim, Field, PadRule, Tag, dtype_name, short_dtype
from ._errors import SchemaError
from ._plan import Plan, build_plan
from ._types import Batch, Depth, Sample, TagDict

if TYPE_CHECKING:
    from ._compat import Change
    from ._errors import Violation
    from ._padding import PaddingBatch

__all__ = ["KINDS", "PAD_RULES", "Field", "PadRule", "Schema", "Tag", "dtype_name", "short_dtype"]


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
        # The checking plan, derived only from the attributes above: built on first use,
        # never pickled or copied (see __getstate__), so a schema crosses process
        # boundaries and compares equal whatever it has checked.
        self._plan: Plan | None = None

    def _compiled(self) -> Plan:
        plan = self._plan
        if plan is None:
            plan = self._plan = build_plan(
                name=self.name,
                dims=self.dims,
                fields=self.fields,
                tags=self.tags,
                extra=self.extra,
                padding_sizes=self.padding_sizes,
            )
        return plan

    def _key(self) -> tuple[Any, ...]:
        return (
            self.name,
            self.description,
            self.architectures,
            self.lineage,
            tuple(self.dims.items()),
            tuple(self.fields.items()),
            tuple((k, repr(t)) for k, t in self.tags.items()),  # a tag's default may be unhashable
            tuple(self.padding_sizes.items()),
            self.extra,
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Schema):
            return NotImplemented
        return self is other or self._key() == other._key()

    def __hash__(self) -> int:
        return hash((self.name, tuple(self.fields), tuple(self.dims)))

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_plan"] = None  # holds generated code; rebuilt from the declarations on first use
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)

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

    # The checking and padding logic lives in the layers below (_check, _padding); these
    # methods are the public front door and keep their signatures stable.

    def violations(
        self,
        sample: Sample,
        *,
        tag: TagDict | None = None,
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
        return _check.sample_violations(self._compiled(), sample, tag=tag, dims=dims, depth=depth)[1]

    def validate(
        self,
        sample: Sample,
        *,
        tag: TagDict | None = None,
        dims: Mapping[str, int] | None = None,
        depth: Depth = "values",
    ) -> dict[str, int]:
        """Check one sample and return every dim it binds (free, fixed and derived).

        Args: as for :meth:`violations`.

        Raises:
            SchemaError: with every violation found.
            TypeError: ``sample`` is not a mapping.
        """
        return _check.validate_sample(self._compiled(), sample, tag=tag, dims=dims, depth=depth)

    def validate_batch(
        self,
        batch: Batch,
        *,
        tags: Sequence[TagDict] | None = None,
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
        found, bindings = _check.check_batch(self._compiled(), batch, tags=tags, dims=dims, depth=depth)
        if found:
            raise SchemaError(found, schema_name=self.name, bindings=bindings)

    def batch_violations(
        self,
        batch: Batch,
        *,
        tags: Sequence[TagDict] | None = None,
        dims: Mapping[str, int] | None = None,
        depth: Depth = "values",
    ) -> list[Violation]:
        """Like :meth:`validate_batch`, but return the violations instead of raising."""
        return _check.check_batch(self._compiled(), batch, tags=tags, dims=dims, depth=depth)[0]

    # -- exports: each lives in a module of its own, which never imports this one --------

    def jaxtyping(self, field: str) -> Any:
        """The jaxtyping annotation of ``field``, e.g. ``Int64[Tensor, "4 seq"]`` (see ``docs/testing.md``)."""
        from ._jaxtyping_export import field_annotation

        return field_annotation(self, field)

    def annotations(self) -> dict[str, Any]:
        """The jaxtyping annotation of every tensor field, by name."""
        from ._jaxtyping_export import all_annotations

        return all_annotations(self)

    def to_yaml(self) -> str:
        """This schema as a YAML document that :func:`trajschema.load_schema` accepts."""
        from ._schema_yaml import schema_to_yaml

        return schema_to_yaml(self)

    def to_json_schema(self) -> dict[str, Any]:
        """A JSON Schema (2020-12) document describing one sample of this schema."""
        from ._json_schema import json_schema

        return json_schema(self)

    def compatibility(self, new: Schema, mode: str = "backward") -> list[Change]:
        """How ``new`` differs from this schema, and whether each change breaks samples (see ``docs/compatibility.md``).

        ``backward``: samples valid under this schema stay valid under ``new``; ``forward``:
        samples valid under ``new`` are valid under this one; ``full``: both. Judged at
        ``depth="values"``; description and architectures are not compared.

        Raises:
            ValueError: ``mode`` is not ``backward``, ``forward`` or ``full``.
            TypeError: ``new`` is not a Schema.
        """
        from ._compat import compatibility

        return compatibility(self, new, mode)

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
        return _padding.make_padding(
            self._compiled(), count, eos_token_id=eos_token_id, like=like, dims=dims, include=include
        )
