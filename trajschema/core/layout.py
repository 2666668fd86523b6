"""What a dense layout declares: the padded axes, the masks that give per-sample sizes, and
how each schema field sits in a trainer's dense batch.

A layout is data, like a schema: immutable, hashable, picklable, and independent of any
one schema. Layout files are read by the ``load`` room; ``trajschema.dense`` fits a layout
to a schema and reads and writes the batches.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    import torch

    from trajschema.core.decl import Field

__all__ = [
    "ABSENT",
    "ANY",
    "EDGE",
    "FIXED",
    "LEFT",
    "MAX",
    "PAD_TOKEN",
    "RIGHT",
    "Axis",
    "Block",
    "DenseBatch",
    "FieldEntry",
    "Layout",
    "PadValue",
]

LEFT, RIGHT = "left", "right"
#: ``length: max``: the padded length is exactly the batch maximum of the real lengths.
MAX = "max"
#: ``length: fixed``: any padded length at least the batch maximum (a configured size).
FIXED = "fixed"

#: Pad rules besides a number: the tokenizer's pad id; the nearest real value of the row
#: (what ``clip(cumsum(mask) - 1, 0)`` positions leave); not checked.
PAD_TOKEN, EDGE, ANY = "pad_token", "edge", "any"
PadValue = int | float | str

#: How a field is held: ``column`` (a batch entry), ``slice`` (a part of another field's
#: real region), ``same_as`` (another field stands for it), ``gather`` (a mapping field
#: gathered from per-sample list columns), ``absent`` (the trainer does not hold it).
ABSENT = "absent"
Held = Literal["column", "slice", "same_as", "gather", "absent"]


@dataclasses.dataclass(frozen=True)
class Block:
    """One padded stretch of an axis, filled by the per-sample size of ``dim``.

    Attributes:
        dim: the schema dim whose per-sample size is the block's real length.
        pad_side: where the padding goes: ``left`` (the real values end the block) or ``right``.
        length: ``max`` (the block is exactly as long as the longest sample) or ``fixed``
            (any length at least that, e.g. a configured ``prompt_length``).
        holds: the dims that lie one after another inside the real region (SkyRL's
            sequence block holds ``[prompt, response]``); empty when the real region is
            ``dim`` alone.
    """

    dim: str
    pad_side: Literal["left", "right"]
    length: Literal["max", "fixed"]
    holds: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class Axis:
    """A padded axis of the dense batch for the per-sample dim ``dim``: one block, or the
    concatenation of several (verl's ``seq`` is a left-padded prompt block then a
    right-padded response block)."""

    dim: str
    blocks: tuple[Block, ...]

    @property
    def concat(self) -> bool:
        return len(self.blocks) > 1


@dataclasses.dataclass(frozen=True)
class FieldEntry:
    """How one schema field is held in the dense batch (``fields.<name>`` of a layout file).

    Attributes:
        held: see `Held`.
        key: the batch key (``column``; defaults to the field's name). ``metadata.<name>``
            reads ``batch.metadata[<name>]`` (SkyRL's ``TrainingInputBatch``).
        pad: the value of the padded region (a number, ``pad_token``, ``edge`` or ``any``).
        dtype: the dtype the trainer stores when it is not one of the schema's (SkyRL
            keeps ``loss_mask`` as float32); values convert exactly both ways.
        source: the field it is a slice of (``slice``) or that stands for it (``same_as``).
        gather: the per-sample list columns a mapping field is gathered from (``gather``).
        broadcast: the trainer may hold the field with size 1 along its padded axis, one
            value per row broadcast over the axis (TRL's sequence-level importance ratio
            ``(B, 1)`` beside its per-token ``(B, C)``); that form has no padded region.
    """

    held: Held = "column"
    key: str | None = None
    pad: PadValue = ANY
    dtype: torch.dtype | None = None
    source: str | None = None
    gather: tuple[str, ...] = ()
    broadcast: bool = False


@dataclasses.dataclass(frozen=True)
class Layout:
    """How one trainer lays out the samples of any schema as a dense padded batch.

    Load one with [`load_layout`][trajschema.load_layout]. Entries for fields a schema
    lacks are unused for that schema; a schema field the layout does not mention is a
    ``column`` under its own name with its padded region unchecked.

    Attributes:
        name, description, source: as for a schema.
        axes: the padded axes, by the per-sample dim they pad.
        sizes: for each per-sample dim, the mask field whose ones count it.
        fields: how each schema field is held.
        overrides: per model family (a schema name; it applies to that schema and every
            schema extending it), entries that replace ``fields`` entries.
        tags: where the batch keeps a tag per sample, e.g. ``is_padding``.
        pad_token_id: the tokenizer's pad id (``pad_token`` fields), once pinned with
            [`with_pad_token`][trajschema.Layout.with_pad_token].
        adds: fields the trainer keeps for every schema, which no schema declares (TRL's
            ``prompt_mask``, ``advantages``, ``ref_per_token_logps``): checked with the
            schema's fields wherever the layout is used, over the schema's dims.
        shared: batch keys held once for the whole batch rather than one entry per row
            (TRL's ``pixel_values``, flattened over every image of the batch): their
            length is not the batch size, and nothing per row is read from them.
    """

    name: str
    description: str
    axes: Mapping[str, Axis]
    sizes: Mapping[str, str]
    fields: Mapping[str, FieldEntry]
    overrides: Mapping[str, Mapping[str, FieldEntry]]
    tags: Mapping[str, str]
    source: str
    pad_token_id: int | None = None
    adds: Mapping[str, Field] = dataclasses.field(default_factory=dict)
    shared: tuple[str, ...] = ()

    def __hash__(self) -> int:
        return hash((self.name, self.source, self.pad_token_id, tuple(self.fields.items()), tuple(self.adds)))

    def with_pad_token(self, pad_token_id: int) -> Layout:
        """This layout with the tokenizer's pad id pinned: ``pad_token`` regions must hold it.

        Without it, a ``pad_token`` region must hold one value throughout a field of the
        batch, whichever it is.

        A pad id no field's dtype can hold is refused when the layout meets a schema
        (`bind_layout`), naming the field.

        Raises:
            TypeError / ValueError: ``pad_token_id`` is not an int in ``0..2**64 - 1`` (no
                torch dtype holds a larger one).
        """
        from trajschema.core.validation import check_int

        check_int("pad_token_id", pad_token_id, minimum=0, maximum=2**64 - 1)
        return dataclasses.replace(self, pad_token_id=int(pad_token_id))

    def entry(self, field: str, lineage: tuple[str, ...]) -> FieldEntry:
        """The entry of ``field`` for a schema of this ``lineage`` (its name first, then its ancestors)."""
        for family in lineage:
            found = self.overrides.get(family, {}).get(field)
            if found is not None:
                return found
        return self.fields.get(field, FieldEntry())

    def __repr__(self) -> str:
        return f"<Layout {self.name!r} from {self.source}>"


class DenseBatch(dict):
    """A dense padded batch as [`Schema.to_dense`][trajschema.Schema.to_dense] and
    [`Schema.dense_padding`][trajschema.Schema.dense_padding] return it: batch key ->
    tensor ``(B, ...)`` or per-sample list, plus ``metadata`` (the ``metadata.<name>``
    keys of the layout, e.g. SkyRL's ``uids``), the way SkyRL's ``TensorBatch`` keeps them.

    ``TrainingInputBatch(d)`` (then ``.metadata = d.metadata``) or
    ``DataProto.from_dict(tensors=..., non_tensors=...)`` take it as it is.

    ``sources`` is set on padding rows (`Schema.dense_padding`): where each padding size
    came from, as `PaddingBatch.sources` (``{"experts": "batch", ...}``); empty otherwise.
    """

    def __init__(self, *args: object, metadata: dict | None = None, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)
        self.metadata: dict = {} if metadata is None else metadata
        self.sources: dict[str, str] = {}

    def __reduce__(self):  # keep metadata (and sources) through pickling
        return (type(self), (dict(self),), {"metadata": self.metadata, "sources": self.sources})

    def copy(self) -> DenseBatch:  # a DenseBatch, not a dict
        """A shallow copy, as `dict.copy`: the same values, its own key table and its own
        ``metadata`` dict (changing a key of one changes nothing in the other)."""
        out = type(self)(self, metadata=dict(self.metadata))
        out.sources = dict(self.sources)
        return out

    __copy__ = copy

    def __repr__(self) -> str:
        return f"DenseBatch({dict.__repr__(self)}, metadata={self.metadata!r})"
