"""A schema as the columns of a TensorDict: what pandera's TensorDict backend and tensordict's
``TypedTensorDict`` can be told of it, and what only trajschema checks.

Both exports describe one of two TensorDicts (`tensordict_columns`):

* without a layout, a TensorDict of samples: ``batch_size`` ``(B,)``, one column per field
  holding every sample's value stacked, ``(B, *shape)`` for a tensor field, ``(B,)`` for an
  ``int`` / ``float`` / ``bool`` field (a ``NonTensorStack`` for ``str``, ``mapping`` and
  ``any`` fields, and for numbers no tensor holds exactly). Every sample of such a
  TensorDict has the same sizes: it is the ``"dense"`` form of
  [`batches`][trajschema.testing.batches], and one sample is a TensorDict of one
  (``torch.stack([TensorDict(sample)])``). This is the form the exports are measured on
  (see the tests of this module): each labelled invalid sample of
  [`invalid_samples`][trajschema.testing.invalid_samples] becomes a TensorDict of one, so
  the verdict of the export and of [`violations`][trajschema.Schema.violations] are on the
  same data;
* with a dense layout (``verl_dataproto``, ``skyrl``, ...), the padded batch that layout
  writes, keyed by its batch keys (verl's ``DataProto.batch``): its tensor columns, the
  padded axes of any length.

A TransferQueue batch, whose columns are jagged nested tensors, is neither: pandera reads
every column as one strided tensor and has no nested tensors.

What a column says: its key, its one dtype (``None`` where the schema allows a set, or a
kind, as pandera takes a single dtype), its shape with the batch axis first (an int where
the schema alone decides the size: a literal, a fixed dim, an expression over fixed dims;
``None`` elsewhere, as pandera knows no named dims) and the value checks pandera's
built-in checks can say (``values``, literal ``min`` / ``max``, ``finite``). What no column
says is listed by `TensorDictColumns.gaps`, in the words of the exports' header comments.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from trajschema.core import DerivedDim, FreeDim, fits_dtype, number_label, values_label
from trajschema.export.jaxtyping import AxisNames

if TYPE_CHECKING:
    from trajschema.check import Plan
    from trajschema.core import Field, Violation

__all__ = [
    "EXPORTS",
    "GAP_REASONS",
    "Column",
    "TensorDictColumns",
    "ValueCheck",
    "header_gaps",
    "needs",
    "python_name",
    "tensordict_columns",
    "wrapped",
]

#: The exports built on these columns, by their ``trajschema export --format`` name.
EXPORTS = ("pandera", "typed-tensordict")

#: Kinds a TensorDict of samples holds as a ``(B,)`` tensor column.
_NUMBER_KINDS = ("int", "float", "bool")


@dataclasses.dataclass(frozen=True)
class ValueCheck:
    """One value check as a pandera built-in check: ``Check.<method>(*args, **kwargs)``.

    ``label`` is how trajschema names the check it stands for in a violation's
    ``expected`` (``in {0, 1}``, ``>= 0``, ``finite``).
    """

    method: str
    args: tuple[Any, ...]
    kwargs: tuple[tuple[str, Any], ...]
    label: str


@dataclasses.dataclass(frozen=True)
class Column:
    """One key of the TensorDict and what the exports say of it (see the module docstring).

    Attributes:
        key: the batch key (the field's name, or the layout's key for it).
        field: the schema field it holds.
        kind: ``"tensor"``; a number kind (``int``, ``float``, ``bool``: a ``(B,)`` tensor);
            or ``str`` / ``mapping`` / ``any`` (a ``NonTensorStack``, which pandera cannot check).
        dtype: the one dtype a tensor column must have, ``None`` for any.
        shape: the column's sizes, batch axis first: an int the schema decides, else ``None``.
        axes: each axis as text, for comments (``("B", "4", "seq")``).
        required: whether every sample holds the field.
        checks: the value checks pandera's built-in checks can say.
    """

    key: str
    field: str
    kind: str
    dtype: str | None
    shape: tuple[int | None, ...]
    axes: tuple[str, ...]
    required: bool
    checks: tuple[ValueCheck, ...]

    @property
    def is_tensor(self) -> bool:
        """Whether the column is a tensor (a tensor field, or a number kind's ``(B,)`` column)."""
        return self.kind == "tensor" or self.kind in _NUMBER_KINDS


@dataclasses.dataclass(frozen=True)
class TensorDictColumns:
    """A schema as the keys of a TensorDict (of samples, or in ``layout``), and what they leave to trajschema.

    Attributes:
        schema: the schema's name.
        layout: the dense layout's name, ``None`` for a TensorDict of samples.
        columns: one per key the batch may hold (what ``TypedTensorDict`` declares; pandera
            lists the required tensor ones, `pandera_keys`).
        forbid: whether the schema refuses keys it does not declare (``extra: forbid``).
        gaps: what trajschema checks and these columns do not, by kind of gap (`GAP_REASONS`).
    """

    schema: str
    layout: str | None
    columns: tuple[Column, ...]
    forbid: bool
    gaps: Mapping[str, tuple[str, ...]]

    def pandera_keys(self) -> tuple[Column, ...]:
        """The columns pandera checks: the required tensor ones (it requires every key it lists)."""
        return tuple(c for c in self.columns if c.required and c.is_tensor)

    def expresses(self, v: Violation, export: str) -> bool:
        """Whether ``export`` (``pandera`` or ``typed-tensordict``) states the check ``v`` breaks.

        The exports' contract, which the agreement tests hold them to: a sample of which
        trajschema reports a violation an export expresses is rejected by that export.
        Only sample violations (a TensorDict of samples) are judged; with a layout, the
        layout's own codes (``mask``, ``padded``, ``length``) are never expressed.
        """
        if export not in EXPORTS:
            raise ValueError(f"expresses(export=...) must be one of {', '.join(EXPORTS)}, found {export!r}")
        if v.code == "missing" and export == "typed-tensordict":
            return any(c.field == v.field and c.key.isidentifier() and not c.key.startswith("_") for c in self.columns)
        c = self._pandera_column(v.field)
        if export != "pandera" or c is None:
            return False
        if c.kind != "tensor":  # a (B,) column of any dtype: a number of the wrong kind may still be a tensor
            return v.code == "missing" or (v.code == "value" and v.expected in {k.label for k in c.checks})
        if v.code in ("kind", "rank"):
            return len(c.shape) > 1  # a TensorDict holds a number as a tensor: 0-d fields cannot tell
        if v.code == "dtype":
            return c.dtype is not None
        if v.code in ("missing", "value"):
            return v.code == "missing" or v.expected in {k.label for k in c.checks}
        if v.code == "shape":  # when an axis pandera sizes is off; not when a named dim or an expression is
            found = _sizes(v.actual)
            return len(found) == len(c.shape) - 1 and any(s not in (None, n) for s, n in zip(c.shape[1:], found))
        return False  # the rest are in `gaps`

    def _pandera_column(self, field: str) -> Column | None:
        return next((c for c in self.pandera_keys() if c.field == field), None)


def _sizes(shape: str) -> tuple[int, ...]:
    """The sizes of a violation's ``actual`` shape, ``"(5, 1)"`` -> ``(5, 1)``; ``()`` for other text."""
    inside = shape.strip().removeprefix("(").removesuffix(")").rstrip(",")
    parts = [p.strip() for p in inside.split(",")] if inside else []
    return tuple(int(p) for p in parts) if all(p.isdigit() for p in parts) else ()


def tensordict_columns(plan: Plan, bound: Any = None) -> TensorDictColumns:
    """``schema``'s fields as the keys of a TensorDict of samples, or of a dense batch in a layout.

    ``bound`` is the layout fitted to ``schema`` (`trajschema.dense.bind_layout`; this room
    sits below the dense one, so it takes the fitted form), ``None`` for a TensorDict of
    samples.

    Examples:
        >>> cols = tensordict_columns(ts.load_schema("vlm_mrope").plan)
        >>> [(c.key, c.dtype, c.shape) for c in cols.columns if c.key == "position_ids"]
        [('position_ids', 'int64', (None, 4, None))]
        >>> cols.gaps["derived dims"]
        ('seq = prompt + response',)
    """
    names = AxisNames(plan)
    columns = _sample_columns(plan, names) if bound is None else _layout_columns(bound, names)
    gaps = _Gaps(plan, names, columns, bound).collect()
    return TensorDictColumns(
        schema=plan.name,
        layout=None if bound is None else bound.layout.name,
        columns=tuple(columns),
        forbid=plan.extra == "forbid",
        gaps=gaps,
    )


def _sample_columns(plan: Plan, names: AxisNames) -> list[Column]:
    columns = []
    for f in plan.fields.values():
        if f.is_tensor:
            shape = (None, *(_size(e, names) for e in f.shape or ()))
            axes = ("B", *(_axis_text(e, names) for e in f.shape or ()))
            dtype = f.dtype_names[0] if len(f.dtype_names) == 1 else None
            checks, _ = _runnable(f, _value_checks(f, "in"))
            columns.append(Column(f.name, f.name, "tensor", dtype, shape, axes, f.required, checks))
        else:
            checks = _runnable(f, _value_checks(f, "one of"))[0] if f.kind in _NUMBER_KINDS else ()
            columns.append(Column(f.name, f.name, f.kind, None, (None,), ("B",), f.required, checks))
    return columns


def _layout_columns(bound: Any, names: AxisNames) -> list[Column]:
    """The layout's tensor columns; values are left out: a padded region holds pad values trajschema never reads."""
    columns = []
    for p in bound.columns():
        if p.key.startswith("metadata.") or p.key in bound.layout.shared or not p.field.is_tensor:
            continue
        shape: list[int | None] = [None]
        axes = ["B"]
        for i, e in enumerate(p.field.shape or ()):
            padded = i + 1 == p.axis
            shape.append(None if padded else _size(e, names))
            axes.append(f"{p.dim} padded" if padded else _axis_text(e, names))
        dtypes = (p.entry.dtype,) if p.entry.dtype is not None else p.field.dtypes
        dtype = _dtype_name(dtypes[0]) if len(dtypes) == 1 else None
        columns.append(Column(p.key, p.field.name, "tensor", dtype, tuple(shape), tuple(axes), p.field.required, ()))
    return columns


def _axis_text(e: Any, names: AxisNames) -> str:
    size = _size(e, names)
    return str(size) if size is not None else str(e)


def _dtype_name(dtype: Any) -> str:
    from trajschema.core import dtype_name

    return dtype_name(dtype)


def _size(e: Any, names: AxisNames) -> int | None:
    size = e.evaluate(names.fixed)
    return size if isinstance(size, int) else None


def _value_checks(f: Field, listed: str) -> tuple[ValueCheck, ...]:
    """``f``'s checks pandera's built-in checks can say; a bound written in dims is not one of them.

    ``listed`` is how trajschema labels ``values`` for the field (``in {0, 1}`` for a
    tensor's elements, ``one of [0, 1]`` for a scalar).
    """
    out = []
    if f.values is not None:
        label = (
            f"in {{{', '.join(map(number_label, f.values))}}}" if listed == "in" else f"one of {values_label(f.values)}"
        )
        out.append(ValueCheck("isin", (list(f.values),), (), label))
    if f.min is not None:
        out.append(ValueCheck("ge", (f.min,), (), f">= {number_label(f.min)}"))
    if f.max is not None:
        out.append(ValueCheck("le", (f.max,), (), f"<= {number_label(f.max)}"))
    if f.finite:  # in_range with both ends open is isfinite: NaN and the infinities break it
        flags = (("include_min", False), ("include_max", False))
        out.append(ValueCheck("in_range", (-math.inf, math.inf), flags, "finite"))
    return tuple(out)


#: The built-in checks torch cannot run on a dtype (``torch.uint16 >= 0`` raises "not implemented"):
#: pandera would report such a check as failed on any data, so a column that may hold the dtype goes without it.
_NO_TORCH_OP = {
    "uint16": ("isin", "ge", "le"),
    "uint32": ("isin", "ge", "le"),
    "uint64": ("isin", "ge", "le"),
    "bool": ("isin",),
}
#: The dtype a number kind's column has in a TensorDict of samples (`trajschema.testing.batches`' dense form).
_KIND_DTYPE = {"int": "int64", "float": "float64", "bool": "bool"}


def _runnable(f: Field, checks: tuple[ValueCheck, ...]) -> tuple[tuple[ValueCheck, ...], list[str]]:
    """The checks torch can run on every dtype ``f`` allows, and the labels of the others (``>= 0 on uint16``)."""
    dtypes = f.dtype_names if f.is_tensor else (_KIND_DTYPE[f.kind],)
    kept, dropped = [], []
    for k in checks:
        bad = [d for d in dtypes if k.method in _NO_TORCH_OP.get(d, ())]
        inexact = [d for d in dtypes if d not in bad and not all(fits_dtype(x, d) for x in _bounds(k))]
        if bad:
            dropped.append(f"{f.name} {k.label} (on {', '.join(bad)})")
        elif inexact:  # torch compares in the tensor's dtype: 0.1 in bfloat16 is 0.10009765625
            dropped.append(f"{f.name} {k.label} (not exact in {', '.join(inexact)})")
        else:
            kept.append(k)
    return tuple(kept), dropped


def _bounds(k: ValueCheck) -> list[Any]:
    """The numbers a check compares with (``isin``'s values, ``ge``/``le``'s bound); none for ``finite``."""
    if k.method == "isin":
        return list(k.args[0])
    return list(k.args) if k.method in ("ge", "le") else []


#: Each kind of gap, in the order the headers list them, and why pandera cannot say it.
GAP_REASONS = {
    "shared dims": "pandera's sizes are ints or None, so two axes cannot share one",
    "derived dims": "no relation between sizes",
    "dim bounds": "no bound on a size",
    "dtype sets": "pandera takes one dtype",
    "value bounds in dims": "pandera's bounds are numbers",
    "distinct": "no built-in check for it",
    "torch ops": "torch cannot compare tensors of that dtype, so pandera's check would fail on any data",
    "optional fields": "pandera requires every key it lists, so these are not listed",
    "number kinds": "a (B,) column of any dtype: pandera checks its values only",
    "non-tensor fields": "NonTensorStack columns: pandera checks tensors only",
    "values": "a padded region holds pad values, which pandera would check too",
    "tags": "a TensorDict holds no tag dict",
    "extra": "pandera lets other keys through",
    "jagged": "samples of different sizes in one TensorDict: pandera has no nested tensors",
    "layout": "the layout's masks, pad values and padded lengths",
}


class _Gaps:
    """What trajschema checks and the columns do not, by kind (`GAP_REASONS`), one short item each."""

    def __init__(self, plan: Plan, names: AxisNames, columns: list[Column], bound: Any):
        self.plan, self.names, self.bound = plan, names, bound
        self.columns = {c.field: c for c in columns}
        self.out: dict[str, list[str]] = {}

    def add(self, kind: str, item: str) -> None:
        self.out.setdefault(kind, []).append(item)

    def collect(self) -> dict[str, tuple[str, ...]]:
        self._dims()
        for f in self.plan.fields.values():
            c = self.columns.get(f.name)
            if c is not None:  # else a field the layout does not hold as a tensor column: the layout's business
                self._field(f, c)
        if self.plan.tags:
            self.add("tags", ", ".join(self.plan.tags))
        if self.plan.extra == "forbid":
            self.add("extra", "extra: forbid")
        if self.bound is None:
            self.add("jagged", "a TransferQueue batch")
        else:
            self.add("layout", self.bound.layout.name)
        return {k: tuple(self.out[k]) for k in GAP_REASONS if k in self.out}

    def _dims(self) -> None:
        shared: dict[str, list[str]] = {}
        for f in self.plan.fields.values():
            if not f.is_tensor or f.name not in self.columns:  # a layout's slice_of / same_as field
                continue
            for e in f.shape or ():
                if e.is_name and _size(e, self.names) is None:
                    shared.setdefault(e.args[0], []).append(f.name)
        for dim, where in shared.items():
            if len(where) > 1:
                self.add("shared dims", f"{dim} in {', '.join(dict.fromkeys(where))}")
        for d in self.plan.dims.values():
            if isinstance(d, DerivedDim) and _size(d.expr, self.names) is None:
                self.add("derived dims", f"{d.name} = {d.expr}")
            elif isinstance(d, FreeDim) and d.describe() != "any size":
                self.add("dim bounds", f"{d.name} {d.describe()}")

    def _field(self, f: Field, c: Column) -> None:
        if c.is_tensor and not f.required:
            self.add("optional fields", f.name)
        if c.is_tensor and self.bound is None:
            listed = "in" if f.is_tensor else "one of"
            for item in _runnable(f, _value_checks(f, listed))[1]:
                self.add("torch ops", item)
        if f.is_tensor:
            self._tensor(f, c)
        elif c.is_tensor:
            self.add("number kinds", f"{f.name} ({f.kind})")
        else:
            self.add("non-tensor fields", f"{f.name} ({f.kind})")

    def _tensor(self, f: Field, c: Column) -> None:
        if c.dtype is None:
            self.add("dtype sets", f"{f.name} ({', '.join(f.dtype_names)})")
        for i, e in enumerate(f.shape or ()):
            if not e.is_name and c.shape[i + 1] is None and c.axes[i + 1] == str(e):
                self.add("derived dims", f"{f.name} axis {i} = {e}")
        for side, bound in ((">=", f.min_expr), ("<=", f.max_expr)):
            if bound is not None:
                self.add("value bounds in dims", f"{f.name} {side} {bound}")
        if f.distinct:
            self.add("distinct", f.name)
        if self.bound is not None and (f.values is not None or f.min is not None or f.max is not None or f.finite):
            self.add("values", f.name)


# -- what both exports' sources share ----------------------------------------------------------


def python_name(schema_name: str) -> str:
    """The schema's name as the words of a Python name: ``vlm_mrope-2`` -> ``["vlm", "mrope", "2"]`` joined by ``_``."""
    words = [w.lower() for w in re.split(r"[^0-9A-Za-z]+", schema_name) if w] or ["schema"]
    name = "_".join(words)
    return name if name[0].isalpha() else "schema_" + name


def needs(package: str, version: tuple[int, int], what: str) -> str:
    """The installed version of ``package``, checked to be at least ``version`` without importing it.

    Raises:
        ImportError: ``package`` is not installed, or older than ``version``; the message
            names ``what`` needs it and how to install it.
    """
    import importlib.metadata

    wanted = f"{package}>={version[0]}.{version[1]}"
    try:
        found = importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        raise ImportError(
            f"{what} needs {wanted}, which is not installed: pip install '{wanted}' "
            "(or the dev extra: pip install -e '.[dev]' in a trajschema checkout)"
        ) from None
    if _release(found) < version:
        raise ImportError(f"{what} needs {wanted}; this is {package} {found}: pip install -U '{wanted}'")
    return found


def _release(version: str) -> tuple[int, ...]:
    parts = []
    for part in version.split(".")[:2]:
        digits = re.match(r"\d*", part)
        parts.append(int(digits.group()) if digits and digits.group() else 0)
    return tuple(parts)


def header_gaps(cols: TensorDictColumns, kinds: tuple[str, ...] | None = None) -> list[str]:
    """The header comment's list of what only trajschema checks: ``#   kind: items (why)``, wrapped.

    ``kinds``: the kinds of gap to list (default: all of them).
    """
    lines = []
    for kind, items in cols.gaps.items():
        if kinds is None or kind in kinds:
            lines += wrapped(f"#   {kind}: {'; '.join(items)} ({GAP_REASONS[kind]})", "#       ")
    return lines


def wrapped(text: str, indent: str, width: int = 100) -> list[str]:
    """``text`` cut at spaces into lines of at most ``width`` characters, the later ones starting with ``indent``."""
    words, lines, line = text.split(" "), [], ""
    for w in words:
        if line and len(line) + 1 + len(w) > width:
            lines.append(line)
            line = indent + w
        else:
            line = f"{line} {w}" if line else w
    return [*lines, line]
