"""What a packed layout declares: one flat run of tokens per batch (THD), cut into one
segment per sample by offsets, and how each schema field sits beside it.

A packed layout is data, like a dense `Layout`: immutable, hashable, picklable and
independent of any one schema. Layout files with ``kind: packed`` are read by the
``files`` room; ``trajschema.packed`` fits one to a schema, checks and converts batches.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Literal

from trajschema.core.layout import ANY, PadValue

__all__ = ["NESTED", "PACKED_HELD", "PackedBatch", "PackedEntry", "PackedLayout"]

#: ``offsets: nested``: the real offsets are those of the layout's ``nested`` columns (verl).
NESTED = "nested"

#: How a field is held in a packed batch: ``tokens`` (on the flat run, sequences one after
#: another, each padded to the alignment), ``nested`` (a jagged nested tensor whose offsets
#: are the real offsets), ``jagged`` (a jagged nested tensor with its own offsets), ``dense``
#: (as the layout's ``dense:`` layout holds it), ``column`` (one entry per sample: a
#: ``(B, ...)`` tensor or a list), ``alias`` (the very object of another key), ``absent``.
Held = Literal["tokens", "nested", "jagged", "dense", "column", "alias", "absent"]
PACKED_HELD: tuple[str, ...] = ("tokens", "nested", "jagged", "dense", "column", "alias", "absent")


@dataclasses.dataclass(frozen=True)
class PackedEntry:
    """How one schema field is held in a packed batch (``fields.<name>`` of a packed layout file).

    Attributes:
        held: see `Held`; ``None`` lets the field's shape decide (`PackedLayout.entry`).
        key: the batch key (default the field's name).
        pad: ``tokens``: the value of the alignment padding after each sequence (a
            number, ``pad_token`` or ``any``).
        span: ``tokens``: the part of the token dim the field covers when its own dim is
            one (``response``: a response-level field laid on the run at its sequence's
            response tokens).
        fill: ``tokens`` with ``span``: the value at the sequence's other tokens.
        source: ``alias``: the key it is the same object as.
        nested_with: ``nested``: only nested when these fields are too (verl nests the
            teacher fields only as a pair); otherwise held as ``dense``.
    """

    held: Held | None = None
    key: str | None = None
    pad: PadValue = ANY
    span: str | None = None
    fill: PadValue = ANY
    source: str | None = None
    nested_with: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class PackedLayout:
    """How one trainer packs the samples of any schema into one flat run of tokens.

    Load one with [`load_layout`][trajschema.load_layout] (``thd``, ``verl_nopad``).

    Attributes:
        name, description, source: as for a dense [`Layout`][trajschema.Layout].
        tokens: the per-sample dim laid along the run (``seq``); ``parts`` the dims it is
            the sum of, in order within a sequence (``[prompt, response]``).
        offsets: the batch key of the real offsets (``int32 (B + 1,)``: sequence ``i`` has
            ``offsets[i+1] - offsets[i]`` real tokens), or ``nested``: the offsets of the
            ``nested`` columns.
        padded_offsets: the batch key of the padded offsets (where each segment starts on
            the run), or ``""``: segments follow one another unpadded.
        alignment: every padded segment's length is a multiple of it (pin the trainer's with
            [`with_alignment`][trajschema.PackedLayout.with_alignment]).
        positions: the field whose positions restart at each sequence (its first row
            ``0..len-1``, every other row 0 at the sequence's first token), or ``""``.
        dense: the dense layout that holds the ``dense`` fields, or ``""``.
        fields, overrides, tags: as for a dense layout.
        metadata: batch-level entries derived from the dense geometry: key -> ``index``
            (flat positions of the real tokens in the ``(B, width)`` grid) or
            ``width:<dim>`` (the padded width of that dim).
        pad_token_id: the tokenizer's pad id, once pinned.
    """

    name: str
    description: str
    tokens: str
    parts: tuple[str, ...]
    offsets: str
    padded_offsets: str
    alignment: int
    positions: str
    dense: str
    fields: Mapping[str, PackedEntry]
    overrides: Mapping[str, Mapping[str, PackedEntry]]
    tags: Mapping[str, str]
    metadata: Mapping[str, str]
    source: str
    pad_token_id: int | None = None

    def __hash__(self) -> int:
        return hash((self.name, self.source, self.alignment, self.pad_token_id, tuple(self.fields.items())))

    @property
    def is_nested(self) -> bool:
        """Whether the real offsets are those of nested columns (no offsets key)."""
        return self.offsets == NESTED

    def with_pad_token(self, pad_token_id: int) -> PackedLayout:
        """This layout with the tokenizer's pad id pinned, as `Layout.with_pad_token`.

        Raises:
            TypeError / ValueError: ``pad_token_id`` is not an int in ``0..2**64 - 1``.
        """
        from trajschema.core.validation import check_int

        check_int("pad_token_id", pad_token_id, minimum=0, maximum=2**64 - 1)
        return dataclasses.replace(self, pad_token_id=int(pad_token_id))

    def with_alignment(self, alignment: int) -> PackedLayout:
        """This layout with every padded segment a multiple of ``alignment`` tokens
        (``trajschema.verl.sequence_alignment(...)`` gives verl's).

        Raises:
            TypeError / ValueError: ``alignment`` is not an int in ``1..2**63 - 1``.
        """
        from trajschema.core.validation import check_int

        check_int("alignment", alignment, minimum=1, maximum=2**63 - 1)
        return dataclasses.replace(self, alignment=int(alignment))

    def entry(self, field: str, lineage: tuple[str, ...]) -> PackedEntry:
        """The entry of ``field`` for a schema of this ``lineage`` (its name first, then its ancestors)."""
        for family in lineage:
            found = self.overrides.get(family, {}).get(field)
            if found is not None:
                return found
        return self.fields.get(field, PackedEntry())

    def __repr__(self) -> str:
        return f"<PackedLayout {self.name!r} from {self.source}>"


class PackedBatch(dict):
    """A packed batch as [`Schema.to_packed`][trajschema.Schema.to_packed] returns it: batch
    key -> tensor (the flat run ``(T, ...)``, the offsets ``(B + 1,)``, nested columns,
    ``(B, ...)`` columns) or per-sample list, plus ``metadata`` (batch-level entries such as
    verl's ``indices``, ``max_seq_len``), the way verl keeps them as ``NonTensorData``."""

    def __init__(self, *args: object, metadata: dict | None = None, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)
        self.metadata: dict = {} if metadata is None else metadata

    def __reduce__(self):  # keep metadata through pickling
        return (type(self), (dict(self),), {"metadata": self.metadata})

    def copy(self) -> PackedBatch:
        """A shallow copy with its own key table and ``metadata`` dict."""
        return type(self)(self, metadata=dict(self.metadata))

    __copy__ = copy

    def __repr__(self) -> str:
        return f"PackedBatch({dict.__repr__(self)}, metadata={self.metadata!r})"
