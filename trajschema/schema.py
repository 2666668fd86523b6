"""The compiled schema: the front door whose methods delegate to the checking and padding layers."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

# The check and padding rooms are imported as their (lazy) fronts and read at call time: a
# schema is loaded, shown and compared without torch, which only checking and padding need.
import trajschema.check as _check
import trajschema.files as _files
import trajschema.padding as _padding
from trajschema.core import (
    DTYPE_NAMES,
    KINDS,
    MAX_SIZE,
    PAD_RULES,
    SPREAD,
    DenseBatch,
    Depth,
    DerivedDim,
    Dim,
    Expr,
    Field,
    FixedDim,
    FreeDim,
    Layout,
    PackedBatch,
    PackedLayout,
    PadRule,
    Sample,
    SchemaDefinitionError,
    SchemaError,
    Tag,
    TagDict,
    as_dtype,
    check_int,
    dtype_name,
    is_int,
    provenance,
    short_dtype,
    value_failures,
)

if TYPE_CHECKING:
    from trajschema.check import Plan
    from trajschema.core import Batch, DenseBatch, Depth, Sample, TagDict, Violation
    from trajschema.evolution import Change
    from trajschema.padding import PaddingBatch

__all__ = ["KINDS", "PAD_RULES", "Field", "PadRule", "Schema", "Tag", "dtype_name", "short_dtype"]


class ReadOnlyDict(dict):
    """A dict that refuses changes: a schema's ``dims``, ``fields``, ``tags`` and ``padding_sizes``.

    Still a ``dict`` (``isinstance`` checks, ``json``, ``dict(...)`` copies work), and it
    pickles and copies as a plain, mutable ``dict``.
    """

    __slots__ = ()

    def _read_only(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("a schema's declarations are read-only; copy them (dict(schema.fields)) to change a copy")

    # Every mutator refuses; their signatures differ from dict's on purpose.
    __setitem__ = __delitem__ = __ior__ = _read_only  # type: ignore[assignment]
    update = setdefault = pop = popitem = clear = _read_only  # type: ignore[assignment]

    def __reduce__(self):
        return (dict, (dict(self),))

    def __copy__(self) -> dict:
        return dict(self)

    def __deepcopy__(self, memo: Any) -> dict:
        import copy

        return copy.deepcopy(dict(self), memo)


def _what(v: Any) -> str:
    from trajschema.core import describe_value

    return describe_value(v)


def _check_strs(arg: str, v: Any) -> None:
    if isinstance(v, (str, bytes)) or not isinstance(v, Sequence):
        raise TypeError(f"Schema: {arg} must be a sequence of str, found {_what(v)}")
    for i, x in enumerate(v):
        if not isinstance(x, str):
            raise TypeError(f"Schema: {arg}[{i}] must be a str, found {_what(x)}")


def _check_entries(arg: str, v: Any, kinds: tuple[type, ...], what: str) -> None:
    """``v`` is a mapping of name to a ``kinds`` value whose own ``name`` is its key."""
    if not isinstance(v, Mapping):
        raise TypeError(f"Schema: {arg} must be a mapping of name to {what}, found {_what(v)}")
    for k, x in v.items():
        if not isinstance(k, str):
            raise TypeError(f"Schema: {arg} keys must be str, found {_what(k)}")
        if not isinstance(x, kinds):
            raise TypeError(f"Schema: {arg}[{k!r}] must be a {what}, found {_what(x)}")
        if getattr(x, "name", None) != k:
            raise ValueError(
                f"Schema: {arg}[{k!r}] is named {getattr(x, 'name', None)!r}; each entry must be keyed by its own name"
            )


def _check_field(f: Field) -> None:
    """The parts of a field that checks and padding index into: its kind, shape, dtypes and pad rule."""
    where = f"Schema: fields[{f.name!r}]"
    if f.kind not in ("tensor", *KINDS):
        raise ValueError(f"{where}.kind must be 'tensor' or one of {', '.join(KINDS)}, found {_what(f.kind)}")
    if f.is_tensor:
        if not isinstance(f.shape, tuple) or not all(isinstance(e, Expr) for e in f.shape):
            raise TypeError(f"{where}.shape must be a tuple of Expr (ts.Expr), found {_what(f.shape)}")
        names = f.dtype_names
        if not isinstance(names, tuple) or not names or not all(n in DTYPE_NAMES for n in names):
            raise TypeError(
                f"{where}.dtypes must be a non-empty tuple of torch dtypes (or their names: {', '.join(DTYPE_NAMES)}), "
                f"found {_what(names)}"
            )
    if not isinstance(f.pad, PadRule) or f.pad.rule not in (*PAD_RULES, "fill", SPREAD):
        raise ValueError(
            f"{where}.pad must be a PadRule of one of {', '.join(PAD_RULES)}, 'fill' or {SPREAD!r}, "
            f"found {_what(f.pad)}"
        )
    if f.pad.rule == SPREAD and (
        not isinstance(f.pad.over, str)
        or not f.is_tensor
        or not f.shape
        or any(d.is_bool or d.is_floating_point or d.is_complex for d in map(as_dtype, f.dtype_names))
    ):
        raise ValueError(
            f"{where}.pad: {f.pad} spreads integer ids along the last axis: it needs a dim name in `over` and "
            f"an integer tensor field of at least one axis, found {f.describe()}"
        )


def _check_declarations(
    *,
    name: Any,
    description: Any,
    architectures: Any,
    lineage: Any,
    dims: Any,
    fields: Any,
    tags: Any,
    padding_sizes: Any,
    extra: Any,
    source: Any,
) -> None:
    """Refuse constructor arguments that would break a schema later, far from where they were given."""
    for arg, v in (("name", name), ("description", description), ("source", source)):
        if not isinstance(v, str):
            raise TypeError(f"Schema: {arg} must be a str, found {_what(v)}")
    _check_strs("architectures", architectures)
    _check_strs("lineage", lineage)
    if extra not in ("allow", "forbid") or not isinstance(extra, str):
        raise ValueError(f"Schema: extra must be 'allow' or 'forbid', found {_what(extra)}")
    _check_entries("dims", dims, (FixedDim, FreeDim, DerivedDim), "FixedDim, FreeDim or DerivedDim")
    _check_entries("fields", fields, (Field,), "Field")
    _check_entries("tags", tags, (Tag,), "Tag")
    for f in fields.values():
        _check_field(f)
    for t in tags.values():
        if t.equals is not None and not isinstance(t.equals, Expr):
            raise TypeError(f"Schema: tags[{t.name!r}].equals must be an Expr or None, found {_what(t.equals)}")
    uses = [(f"dims[{n!r}]", d.expr) for n, d in dims.items() if isinstance(d, DerivedDim)]
    uses += [(f"fields[{n!r}].shape", e) for n, f in fields.items() for e in f.shape or ()]
    uses += [(f"tags[{n!r}].equals", t.equals) for n, t in tags.items() if t.equals is not None]
    uses += [
        (f"fields[{n!r}].{k}", e) for n, f in fields.items() for k, e in (("min", f.min_expr), ("max", f.max_expr)) if e
    ]
    for where, e in uses:
        unknown = [m for m in e.names() if m not in dims]
        if unknown:
            raise ValueError(f"Schema: {where} uses dim {unknown[0]!r}, which dims does not declare")
    for n, f in fields.items():
        if f.pad.rule == SPREAD and f.pad.over not in dims:
            raise ValueError(f"Schema: fields[{n!r}].pad spreads over dim {f.pad.over!r}, which dims does not declare")
    if not isinstance(padding_sizes, Mapping):
        raise TypeError(f"Schema: padding_sizes must be a mapping of dim name to size, found {_what(padding_sizes)}")
    for k, v in padding_sizes.items():
        if not isinstance(dims.get(k), FreeDim):
            raise ValueError(f"Schema: padding_sizes[{k!r}]: {k!r} is not a free dim of dims")
        check_int(f"Schema: padding_sizes[{k!r}]", v, maximum=MAX_SIZE)


def _pinned(schema: Schema, dims: Any, sources: Any) -> dict[str, FixedDim]:
    """The free dims of ``schema`` that ``dims`` fixes, as `FixedDim`s; refuses what `Schema.with_dims` refuses."""
    if not isinstance(dims, Mapping):
        raise TypeError(f"with_dims: dims must be a mapping of dim name to size, found {_what(dims)}")
    if sources is None:
        sources = {}
    if not isinstance(sources, Mapping) or not all(isinstance(v, str) for v in sources.values()):
        raise TypeError(f"with_dims: sources must be a mapping of dim name to str, found {_what(sources)}")
    fixed: dict[str, FixedDim] = {}
    for name, size in dims.items():
        if not isinstance(name, str):
            raise TypeError(f"with_dims: dims keys must be dim names (str), found {_what(name)}")
        if not is_int(size):
            raise TypeError(f"with_dims: dims[{name!r}] must be an int, found {_what(size)}")
        source = sources.get(name, "dims")
        d = schema.dims.get(name)
        problem = _pin_problem(schema, name, d, int(size))
        if problem:
            where = schema.source or f"<schema {schema.name}>"
            raise SchemaDefinitionError(where, f"dims.{name}", f"{problem}; the size came from {source}")
        if isinstance(d, FreeDim):
            fixed[name] = FixedDim(name, int(size), description=d.description, source=source)
    env = _check_derived(schema, fixed)
    _check_bounds_at(schema, env, fixed)
    return fixed


def _pin_problem(schema: Schema, name: str, d: Dim | None, size: int) -> str | None:
    if d is None:
        known = ", ".join(schema.dims) or "none"
        return f"schema {schema.name!r} declares no dim {name!r} to pin to {size} (its dims: {known})"
    if isinstance(d, DerivedDim):
        return f"{name} is derived ({d.expr}), so it cannot be pinned to {size}; pin the dims it is made of"
    if isinstance(d, FixedDim):
        by = d.source or "the schema"
        return None if d.size == size else f"{name} is fixed at {d.size} by {by}; it cannot be pinned to {size}"
    if not 0 <= size <= MAX_SIZE:
        return f"{name} cannot be pinned to {size}: a size is an int in 0..2**63-1"
    if not d.allows(size):
        return f"{name} cannot be pinned to {size}: the dim must be {d.describe()}"
    return None


def _check_derived(schema: Schema, fixed: Mapping[str, FixedDim]) -> dict[str, int]:
    """Every derived dim the pinned sizes determine must come out a size (``a - b`` must not go negative).

    Returns the sizes known once pinned: fixed dims, pinned dims and the derived dims they give.
    """
    env = {n: d.size for n, d in schema.dims.items() if isinstance(d, FixedDim)}
    env.update({n: d.size for n, d in fixed.items()})
    for _ in range(len(schema.dims)):  # derived dims of derived dims: evaluate until nothing changes
        grew = False
        for n, d in schema.dims.items():
            if isinstance(d, DerivedDim) and n not in env and (v := d.expr.evaluate(env)) is not None:
                if not 0 <= v <= MAX_SIZE:
                    used = ", ".join(f"{m}={env[m]}" for m in d.expr.names())
                    pinned = ", ".join(f"{m} by {p.source}" for m, p in fixed.items())
                    raise SchemaDefinitionError(
                        schema.source or f"<schema {schema.name}>",
                        f"dims.{n}",
                        f"{n} = {d.expr} would be {v} with {used}, not a size (pinned: {pinned})",
                    )
                env[n], grew = v, True
        if not grew:
            break
    return env


def _check_bounds_at(schema: Schema, env: Mapping[str, int], fixed: Mapping[str, FixedDim]) -> None:
    """The bounds written in dims, at the pinned sizes: some declared dtype must hold the values they
    allow (``uint8`` cannot hold expert 299; with ``uint16`` beside it, a ``uint8`` sample is a
    ``dtype`` violation at these sizes), and a constant fill must keep to them."""
    where = schema.source or f"<schema {schema.name}>"
    for f in schema.fields.values():
        names = [n for e in (f.min_expr, f.max_expr) if e is not None for n in e.names()]
        if not any(n in fixed for n in names):
            continue  # no dim bound, or none over the dims pinned now: the loader checked it already
        pinned = ", ".join(f"{n} by {fixed[n].source}" for n in dict.fromkeys(names) if n in fixed)
        b = f.bounded(env)
        if b.min is not None and b.max is not None and b.min > b.max:
            raise SchemaDefinitionError(
                where, f"fields.{f.name}", f"min {b.min} is above max {b.max} at the pinned sizes; no value passes"
            )
        # a narrow dtype beside wider ones stays: a sample in it is a dtype violation at these sizes
        # (as with dims=); only a field none of whose dtypes holds the bound is refused
        overflows = [(d, _check.dtype_overflow(f, d, env)) for d in f.dtype_names]
        if overflows and all(found is not None for _, found in overflows):
            d, found = overflows[-1]
            assert found is not None
            raise SchemaDefinitionError(
                where,
                f"fields.{f.name}.dtype",
                f"no dtype of {', '.join(map(dtype_name, f.dtype_names))} holds the bound: {dtype_name(d)} "
                f"{found[1]}; add a wider dtype (pinned: {pinned})",
            )
        # a fill, or the 0 that positions, index and spread start from, must keep to the bounds
        start = f.pad.value if f.pad.rule == "fill" else 0 if f.pad.rule in _COUNTING_RULES else None
        if start is not None:
            broken = value_failures(start, values=None, lo=b.min, hi=b.max, finite=False)
            if broken:
                what = f"fill {start!r}" if f.pad.rule == "fill" else f"pad rule {f.pad} starts at 0, which"
                raise SchemaDefinitionError(
                    where,
                    f"fields.{f.name}.pad",
                    f"{what} is not {broken[0]}, as the field's bounds are at the pinned sizes (pinned: {pinned})",
                )


#: Pad rules that fill 0, 1, 2, ...: their 0 must keep to a field's bounds.
_COUNTING_RULES = ("positions", "index", SPREAD)


#: The attributes a schema is made of (its plan's declarations and the file it came from); none
#: can be reassigned once set (see `Schema`).
_DECLARATIONS = (*_check.DECLARED, "source")


class Schema:
    """A compiled trajectory schema for one model family.

    Build one with [`load_schema`][trajschema.load_schema]; it is immutable and safe to share:
    ``dims``, ``fields``, ``tags`` and ``padding_sizes`` are read-only dicts and the
    attributes cannot be reassigned (``AttributeError``), because ``load_schema`` hands
    the same object to every caller and checks run from a plan derived from them once.

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

    Raises:
        TypeError / ValueError: (constructing one directly) an argument of the wrong
            type, or declarations that do not fit together (a field or tag keyed under
            another name, a shape or padding size naming an undeclared dim); the
            message names the argument.
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
        _check_declarations(
            name=name,
            description=description,
            architectures=architectures,
            lineage=lineage,
            dims=dims,
            fields=fields,
            tags=tags,
            padding_sizes=padding_sizes,
            extra=extra,
            source=source,
        )
        self.name = name
        self.description = description
        self.architectures = tuple(architectures)
        #: This schema and its ancestors in resolution (C3) order.
        self.lineage = tuple(lineage)
        self.dims: Mapping[str, Dim] = ReadOnlyDict(dims)
        self.fields: Mapping[str, Field] = ReadOnlyDict(fields)
        self.tags: Mapping[str, Tag] = ReadOnlyDict(tags)
        #: Default sizes of free dims for padding samples (``padding:`` in YAML).
        self.padding_sizes: Mapping[str, int] = ReadOnlyDict({k: int(v) for k, v in padding_sizes.items()})
        #: ``"allow"`` or ``"forbid"``: what happens to fields the schema does not name.
        self.extra = extra
        self.source = source
        # The checking plan, derived only from the attributes above: built on first use,
        # never pickled or copied (see __getstate__), so a schema crosses process
        # boundaries and compares equal whatever it has checked.
        self._plan: Plan | None = None

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _DECLARATIONS and name in self.__dict__:
            raise AttributeError(
                f"schema {self.__dict__.get('name')!r} is immutable: its {name} cannot be reassigned "
                "(build another schema, e.g. with ts.schema_from_dict)"
            )
        object.__setattr__(self, name, value)

    def __delattr__(self, name: str) -> None:
        if name in _DECLARATIONS:
            raise AttributeError(f"schema {self.__dict__.get('name')!r} is immutable: its {name} cannot be deleted")
        object.__delattr__(self, name)

    @property
    def plan(self) -> Plan:
        """The compiled plan of this schema (built once, cached): what every room below the front door reads."""
        plan = self._plan
        if plan is None:
            plan = self._plan = _check.build_plan(**{k: getattr(self, k) for k in _check.DECLARED})
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
        for k in ("dims", "fields", "tags", "padding_sizes"):
            state[k] = dict(state[k])  # plain dicts on the wire: readable by any version
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        for k in ("dims", "fields", "tags", "padding_sizes"):
            if k in state:
                self.__dict__[k] = ReadOnlyDict(state[k])

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
            lines.append(f"    {d.name}: {kind} {d.describe()}{provenance(d)}")
        lines.append("  fields:")
        for f in self.fields.values():
            opt = "" if f.required else " (optional)"
            lines.append(f"    {f.name}: {f.describe()}{opt}, pad {f.pad}")
        if self.tags:
            lines.append("  tags: " + ", ".join(self.tags))
        return "\n".join(lines)

    def with_dims(self, dims: Mapping[str, int], *, sources: Mapping[str, str] | None = None) -> Schema:
        """This schema with the free dims of ``dims`` fixed at those sizes (a new schema; this one is unchanged).

        Examples:
            >>> ts.load_schema("moe_routed").with_dims({"layers": 48}).dims["layers"]
            FixedDim(name='layers', size=48, description='MoE layers', source='dims')

        Every check of the new schema holds the pinned sizes (a sample routed over 47
        layers breaks a schema pinned to 48), and padding uses them. A fixed dim
        may be "pinned" to its own size (nothing changes); a derived dim is not pinned (pin
        the dims it is made of). Each pinned dim records where its size came from in
        ``FixedDim.source``: ``sources[name]``, else ``"dims"``.

        Raises:
            TypeError: ``dims`` is not a mapping of str to int, or ``sources`` not one of str to str.
            SchemaDefinitionError: a name the schema does not declare, a derived dim, a fixed
                dim of another size, or a size the dim does not allow (below its ``min``,
                above its ``max``, not a multiple of ``multiple_of``, or making a derived dim
                negative), naming the dim and where the size came from; a field whose bound
                written in dims (``max: experts - 1``) comes out, at the pinned sizes, beyond
                what one of its dtypes holds (``uint8`` with ``experts=300``: the field, the
                dtype and the largest id 299 are named), or below its constant fill.
        """
        fixed = _pinned(self, dims, sources)
        if not fixed:
            return self
        return Schema(
            name=self.name,
            description=self.description,
            architectures=self.architectures,
            lineage=self.lineage,
            dims={n: fixed.get(n, d) for n, d in self.dims.items()},
            fields=self.fields,
            tags=self.tags,
            padding_sizes={n: v for n, v in self.padding_sizes.items() if n not in fixed},
            extra=self.extra,
            source=self.source,
        )

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
            tag: the sample's tag dict, as stored beside it in TransferQueue. A tag that
                is not a mapping is data, reported as a ``tag`` violation.
            dims: dim sizes the sample must have (e.g. ``{"layers": 48}``).
            depth: ``"shapes"`` (presence, kinds, dtypes, shapes, dims; reads no tensor
                values) or ``"values"`` (adds ``values``/``min``/``max``/``finite``).

        Raises:
            TypeError: ``sample`` is not a mapping, or is a TensorDict with batch dims
                (a batch, not one sample).
            ValueError: an unknown ``depth``; ``dims`` not a mapping, naming a dim the
                schema lacks, with a size that is not an int in ``0..2**63-1``, or
                re-pinning a fixed dim.
        """
        return _check.sample_violations(self.plan, sample, tag=tag, dims=dims, depth=depth)[1]

    def validate(
        self,
        sample: Sample,
        *,
        tag: TagDict | None = None,
        dims: Mapping[str, int] | None = None,
        depth: Depth = "values",
    ) -> dict[str, int]:
        """Check one sample and return every dim it binds (free, fixed and derived).

        Args: as for [`violations`][trajschema.Schema.violations].

        Raises:
            SchemaError: with every violation found.
            TypeError / ValueError: bad arguments, as for [`violations`][trajschema.Schema.violations].
        """
        return _check.validate_sample(self.plan, sample, tag=tag, dims=dims, depth=depth)

    def validate_batch(
        self,
        batch: Batch,
        *,
        tags: Sequence[TagDict] | None = None,
        dims: Mapping[str, int] | None = None,
        depth: Depth = "values",
        layout: Layout | PackedLayout | str | None = None,
    ) -> None:
        """Check every sample of a batch; report all violations with their sample index.

        ``batch`` is a list of sample mappings, or a ``tensordict.TensorDict`` laid out as
        TransferQueue returns it (jagged or strided nested tensors, dense tensors whose
        first dim is the batch, ``NonTensorStack`` columns). Jagged columns are checked
        from their offsets and shapes, vectorized over the batch.

        Args:
            batch: the samples.
            tags: one tag dict per sample. Tags are data: a ``tags`` that is not a
                sequence of one entry per sample is a ``batch`` violation, a tag that is
                not a mapping a ``tag`` violation of its sample.
            dims: dim sizes every sample must have.
            depth: ``"shapes"`` or ``"values"``, as for [`violations`][trajschema.Schema.violations].
            layout: a dense padded batch's [`Layout`][trajschema.Layout] (or its name,
                ``"verl_dataproto"``, ``"skyrl"``): ``batch`` is then a mapping of batch key
                to ``(B, ...)`` tensor or per-sample list (a dict, a TensorDict, SkyRL's
                ``TrainingInputBatch``, verl's ``DataProto``), the per-sample sizes are read
                from its masks, and the layout itself is checked too (codes ``mask``,
                ``padded``, ``length``; see the guide "Dense batches and layouts"). Or a
                [`PackedLayout`][trajschema.PackedLayout] (``"thd"``, ``"verl_nopad"``):
                ``batch`` is a packed batch, its sizes read from its offsets, and the
                packing is checked too (codes ``offsets``, ``alignment``, ``positions``,
                ``boundary``, ``padded``; see the guide "Packed batches (THD)").

        A TensorDict without exactly one batch dim is a ``batch`` violation.

        Raises:
            SchemaError: with every violation of every sample.
            TypeError: ``batch`` is neither a sequence of mappings nor a TensorDict (the
                message names ``batch[i]``, the first sample that is not a mapping).
            ValueError: an unknown ``depth`` or bad ``dims``, as for [`violations`][trajschema.Schema.violations].
        """
        if layout is not None:
            found, bindings = self._dense_check(batch, layout, tags=tags, dims=dims, depth=depth)
        else:
            found, bindings = _check.check_batch(self.plan, batch, tags=tags, dims=dims, depth=depth)
        if found:
            raise SchemaError(found, schema_name=self.name, bindings=bindings)

    def batch_violations(
        self,
        batch: Batch,
        *,
        tags: Sequence[TagDict] | None = None,
        dims: Mapping[str, int] | None = None,
        depth: Depth = "values",
        layout: Layout | PackedLayout | str | None = None,
    ) -> list[Violation]:
        """Like [`validate_batch`][trajschema.Schema.validate_batch], but return the violations instead of raising.

        Raises:
            TypeError / ValueError: bad arguments, as for [`validate_batch`][trajschema.Schema.validate_batch].
        """
        if layout is not None:
            return self._dense_check(batch, layout, tags=tags, dims=dims, depth=depth)[0]
        return _check.check_batch(self.plan, batch, tags=tags, dims=dims, depth=depth)[0]

    def _dense_check(
        self, batch: Any, layout: Any, **kw: Any
    ) -> tuple[list[Violation], dict[int | None, dict[str, int]]]:
        found: Any
        chosen = _files.as_any_layout(layout)
        if isinstance(chosen, PackedLayout):
            from trajschema.packed import check_packed

            found = check_packed(self.plan, batch, chosen, **kw)
        else:
            from trajschema.dense import check_dense

            found = check_dense(self.plan, batch, chosen, **kw)
        return found.violations, found.bindings

    # -- dense padded batches: the dense room, which never imports this one ----------------

    def to_dense(
        self,
        samples: Any,
        *,
        layout: Layout | str,
        pad_token_id: int | None = None,
        lengths: Mapping[str, int] | None = None,
    ) -> DenseBatch:
        """Lay samples out as one dense padded batch in ``layout`` (see the guide "Dense batches and layouts").

        Args:
            samples: a list of samples, or a jagged TensorDict as TransferQueue returns one.
            layout: a [`Layout`][trajschema.Layout] or its name.
            pad_token_id: the tokenizer's pad id for ``pad: pad_token`` regions (default:
                the layout's pinned one).
            lengths: padded lengths of ``length: fixed`` blocks (verl's configured
                ``{"prompt": ..., "response": ...}``); default the batch maximum.

        Raises:
            SchemaError: the samples break the schema, or hold what the layout cannot
                carry (a ``same_as`` or ``slice_of`` field that disagrees with its source).
            ValueError: no pad id for a layout that needs one; no samples; a meta tensor;
                a ``lengths`` entry below the batch maximum or for a ``length: max`` block.
        """
        from trajschema.dense import to_dense

        return to_dense(self.plan, samples, layout=_files.as_layout(layout), pad_token_id=pad_token_id, lengths=lengths)

    def from_dense(
        self,
        batch: Any,
        *,
        layout: Layout | str,
        tags: Sequence[TagDict] | None = None,
        depth: Depth = "values",
        as_tensordict: bool = False,
    ) -> Any:
        """The samples of a dense padded batch: a list of sample dicts, or with
        ``as_tensordict=True`` a jagged TensorDict laid out as TransferQueue returns one.

        The batch is checked first (as [`validate_batch`][trajschema.Schema.validate_batch]
        with ``layout=``); fields the layout marks ``absent`` are not in the samples.

        Raises:
            SchemaError: with every violation of the batch; nothing is converted.
        """
        from trajschema.dense import from_dense

        return from_dense(
            self.plan, batch, layout=_files.as_layout(layout), tags=tags, depth=depth, as_tensordict=as_tensordict
        )

    def dense_padding(
        self,
        count: int,
        *,
        layout: Layout | str,
        like: Any,
        eos_token_id: int,
        pad_token_id: int | None = None,
        dims: Mapping[str, int] | None = None,
        check: bool = True,
    ) -> DenseBatch:
        """``count`` padding rows in ``layout``, shaped like the dense batch ``like`` so they
        concatenate to it along the batch axis (same padded lengths, dtypes and keys).

        Each row is a padding sample of [`padding`][trajschema.Schema.padding] (EOS tokens,
        zero loss and response masks, spread routes, a fresh uid, tagged ``is_padding``),
        cut to fit ``like``'s padded lengths, with the layout's pad values around it.
        ``like`` is checked first (at depth ``shapes``); ``check=False`` checks only its
        first row, for a hot path whose batches were checked upstream.

        Raises:
            SchemaError: ``like`` breaks the schema or the layout.
            ValueError: as for [`padding`][trajschema.Schema.padding].
        """
        from trajschema.dense import dense_padding

        return dense_padding(
            self.plan,
            count,
            layout=_files.as_layout(layout),
            like=like,
            eos_token_id=eos_token_id,
            pad_token_id=pad_token_id,
            dims=dims,
            check=check,
        )

    # -- packed batches (THD): the packed room, which never imports this one ---------------

    def to_packed(
        self,
        samples: Any,
        *,
        layout: PackedLayout | str,
        pad_token_id: int | None = None,
        tags: Sequence[TagDict] | None = None,
    ) -> PackedBatch:
        """Pack samples into one flat run of tokens in ``layout`` (``"thd"``; see the guide "Packed batches").

        Every sequence is its own segment, padded to the layout's alignment
        ([`PackedLayout.with_alignment`][trajschema.PackedLayout.with_alignment]); the
        offsets are int32. ``tags`` (one dict per sample) go where the layout's ``tags:``
        say (``is_padding`` as a bool ``(B,)`` tensor).

        Raises:
            SchemaError: the samples break the schema.
            ValueError: no samples; no pad id for a layout that pads with it; a field whose
                samples differ in dtype; a meta tensor; a layout over a dense one
                (``verl_nopad``: use [`pack_dense`][trajschema.Schema.pack_dense]).
        """
        from trajschema.packed import to_packed

        return to_packed(
            self.plan, samples, layout=_files.as_packed_layout(layout), pad_token_id=pad_token_id, tags=tags
        )

    def from_packed(
        self,
        batch: Any,
        *,
        layout: PackedLayout | str,
        tags: Sequence[TagDict] | None = None,
        depth: Depth = "values",
        as_tensordict: bool = False,
    ) -> Any:
        """The samples of a packed batch: a list of sample dicts, or with ``as_tensordict=True``
        a jagged TensorDict laid out as TransferQueue returns one.

        The batch is checked first (as [`validate_batch`][trajschema.Schema.validate_batch]
        with ``layout=``).

        Raises:
            SchemaError: with every violation of the batch; nothing is converted.
        """
        from trajschema.packed import from_packed

        return from_packed(
            self.plan,
            batch,
            layout=_files.as_packed_layout(layout),
            tags=tags,
            depth=depth,
            as_tensordict=as_tensordict,
        )

    def pack_dense(self, batch: Any, *, layout: PackedLayout | str = "verl_nopad") -> Any:
        """A dense batch as the packed layout over it describes (``verl_nopad``: what verl's
        ``left_right_2_no_padding`` returns, field for field).

        The dense batch is checked first and left unchanged. A TensorDict gives a
        TensorDict (metadata as ``NonTensorData``), anything else a `PackedBatch`.

        Raises:
            SchemaError: the dense batch breaks the schema or its dense layout.
            ValueError: ``layout`` has no ``dense:`` layout.
        """
        from trajschema.packed import pack_dense

        return pack_dense(self.plan, batch, layout=_files.as_packed_layout(layout))

    def packed_padding(
        self,
        count: int,
        *,
        layout: PackedLayout | str,
        like: Any,
        eos_token_id: int,
        pad_token_id: int | None = None,
        dims: Mapping[str, int] | None = None,
    ) -> PackedBatch:
        """``like`` with ``count`` padding sequences appended, each its own segment.

        Each is a padding sample of [`padding`][trajschema.Schema.padding] (EOS tokens, zero
        loss and response masks, spread routes, a fresh uid, tagged ``is_padding``) of the
        fewest tokens that meet the layout's alignment (at least a prompt and a response
        token), never merged into a real sequence. ``like`` is checked first.

        Raises:
            SchemaError: ``like`` breaks the schema or the layout.
            ValueError: as for [`padding`][trajschema.Schema.padding], or a layout over a dense one.
        """
        from trajschema.packed import packed_padding

        return packed_padding(
            self.plan,
            count,
            layout=_files.as_packed_layout(layout),
            like=like,
            eos_token_id=eos_token_id,
            pad_token_id=pad_token_id,
            dims=dims,
        )

    # -- exports: each lives in a module of its own, which never imports this one --------

    def jaxtyping(self, field: str) -> Any:
        """The jaxtyping annotation of ``field``, e.g. ``Int64[Tensor, "4 seq"]`` (see ``docs/testing.md``).

        Raises:
            TypeError: ``field`` is not a str, or names a non-tensor field.
            ValueError: the schema has no field ``field`` (the message suggests a close name).
        """
        from trajschema.export import field_annotation

        return field_annotation(self.plan, field)

    def annotations(self, layout: Layout | str | None = None) -> dict[str, Any]:
        """The jaxtyping annotation of every tensor field, by name.

        With ``layout`` (a [`Layout`][trajschema.Layout] or its name): the annotation of
        every tensor column of a dense batch in that layout, by batch key, with the batch
        axis ``batch`` and the padded axes ``<dim>_padded`` (``Float32[Tensor, "batch
        response_padded"]`` for SkyRL's ``loss_mask``).

        Raises:
            LayoutDefinitionError: the layout cannot hold a field of this schema.
        """
        if layout is not None:
            from trajschema.dense import bind_layout
            from trajschema.export import dense_annotations

            return dense_annotations(self.plan, bind_layout(_files.as_layout(layout), self.plan))
        from trajschema.export import all_annotations

        return all_annotations(self.plan)

    def to_yaml(self) -> str:
        """This schema as a YAML document that [`load_schema`][trajschema.load_schema] accepts."""
        from trajschema.export import schema_to_yaml

        return schema_to_yaml(self.plan, getattr(self, "_draft", None), getattr(self, "_comments", None))

    def to_json_schema(self) -> dict[str, Any]:
        """A JSON Schema (2020-12) document describing one sample of this schema."""
        from trajschema.export import json_schema

        return json_schema(self.plan)

    def to_pandera(self, layout: Layout | str | None = None) -> Any:
        """This schema as a ``pandera.tensordict.TensorDictSchema`` (pandera 0.35 or newer).

        It validates a TensorDict of samples (``batch_size`` ``(B,)``, each field's values
        stacked; one sample is a TensorDict of one), or with ``layout`` (a dense
        [`Layout`][trajschema.Layout] or its name) the padded batch that layout writes (verl's
        ``DataProto.batch``). It checks what pandera can say: each required field's
        presence, dtype, rank, the sizes the schema fixes, and (without a layout) the
        value checks; its ``metadata["trajschema"]["unchecked"]`` lists the rest (shared
        and derived dims, dim bounds, dtype sets, ``distinct``, optional and non-tensor
        fields, tags), which only [`validate`][trajschema.Schema.validate] checks. See
        "Exports for TensorDict tools" in the testing guide for what the agreement tests
        measured.

        Examples:
            >>> checker = ts.load_schema("text").to_pandera()
            >>> checker.validate(td, lazy=True)  # doctest: +SKIP

        Raises:
            ImportError: pandera 0.35 or newer is not installed.
            ValueError: ``layout`` names a packed layout.
            LayoutDefinitionError: the layout cannot hold a field of this schema.
        """
        from trajschema.export import pandera_schema

        return pandera_schema(self.plan, self._bound(layout))

    def to_typed_tensordict(self, layout: Layout | str | None = None) -> type:
        """This schema as a tensordict ``TypedTensorDict`` subclass (tensordict 0.12 or newer).

        Its fields are the keys of a TensorDict of samples (or, with ``layout``, of the
        dense batch in that layout), optional ones ``NotRequired``: type checkers read
        them, and ``from_tensordict(td)`` wraps ``td`` checking that every required field
        is present. Nothing else is checked at run time: use
        [`to_pandera`][trajschema.Schema.to_pandera] or [`validate`][trajschema.Schema.validate].

        Examples:
            >>> TextBatch = ts.load_schema("text").to_typed_tensordict()  # doctest: +SKIP
            >>> TextBatch.__name__  # doctest: +SKIP
            'TextBatch'

        Raises:
            ImportError: the installed tensordict has no ``TypedTensorDict`` (older than 0.12).
            ValueError: ``layout`` names a packed layout.
            LayoutDefinitionError: the layout cannot hold a field of this schema.
        """
        from trajschema.export import typed_tensordict_class

        return typed_tensordict_class(self.plan, self._bound(layout))

    def _bound(self, layout: Layout | str | None) -> Any:
        """``layout`` fitted to this schema, for the exports that take the fitted form (``None`` stays ``None``)."""
        if layout is None:
            return None
        from trajschema.dense import bind_layout

        return bind_layout(_files.as_layout(layout), self.plan)

    def compatibility(self, new: Schema, mode: str = "backward") -> list[Change]:
        """How ``new`` differs from this schema, and whether each change breaks samples (see ``docs/compatibility.md``).

        ``backward``: samples valid under this schema stay valid under ``new``; ``forward``:
        samples valid under ``new`` are valid under this one; ``full``: both. Judged at
        ``depth="values"``; description and architectures are not compared.

        Raises:
            ValueError: ``mode`` is not ``backward``, ``forward`` or ``full``.
            TypeError: ``new`` is not a Schema.
        """
        from trajschema.evolution import compatibility

        if not isinstance(new, Schema):
            raise TypeError(f"compatibility: new must be a trajschema Schema, found {_what(new)}")
        return compatibility(self.plan, new.plan, mode)

    def padding(
        self,
        count: int,
        *,
        eos_token_id: int,
        like: Mapping[str, Any] | None = None,
        dims: Mapping[str, int] | None = None,
        include: Sequence[str] | None = None,
        batch: Any = None,
    ) -> PaddingBatch:
        """Derive ``count`` padding samples from this schema.

        Every padding sample validates against the schema; its loss and response masks
        are zero, and all samples of one call share a fresh uid (``pad`` + 32 hex digits)
        so they form a GRPO group of their own. The sizes are resolved first and the
        memory they need is checked before anything is allocated. No two samples share
        anything that can be changed in place: writing into one row changes no other.
        A routes field padded ``pad: {spread: experts}`` gets ids spread evenly over the
        experts (distinct within a token; the tokens of the whole call numbered once, so
        no expert gets more than ``ceil(tokens * topk / experts)`` slots in any layer); the
        number of experts comes from ``dims=``, a schema pinned to it
        ([`schema_for_config`][trajschema.schema_for_config],
        [`with_dims`][trajschema.Schema.with_dims]), the largest id over ``batch`` + 1,
        ``like``'s largest id + 1, then the schema's padding size, and
        ``PaddingBatch.sources`` says which (see the padding guide, "Spread routes").

        Examples:
            >>> pad = ts.load_schema("text").padding(3, eos_token_id=2)
            >>> pad.keys[0].endswith("_0_0"), pad.tags[0]["is_padding"], pad.tags[0]["seq_len"]
            (True, True, 128)

        Args:
            count: how many padding samples (0 is allowed).
            eos_token_id: the tokenizer's EOS id, used by ``pad: eos`` fields.
            like: a real sample of the batch being padded: free dims without a padding
                default (``layers``, ``topk``, ...) and dtypes come from it (and the number
                of experts routes are spread over, when nothing else gives it: its largest
                id + 1), optional fields are emitted exactly when it has them, and fields
                the schema does not name are copied from it.
            dims: padding sizes that override the schema's ``padding:`` defaults and
                ``like``, e.g. ``{"prompt": 1, "response": 1}``.
            include: optional fields to emit when no ``like`` is given.
            batch: the real samples being padded (a list of samples, a TensorDict, or a
                mapping of dense ``(B, ...)`` columns): when neither ``dims=`` nor the
                schema fixes the number of experts, routes are spread over the largest id
                in any of them + 1 (one reduction per routes column), not ``like``'s alone.

        Raises:
            ValueError: bad ``count``/``eos_token_id``/``dims``/``include`` (the message
                names which); a free dim with no size, a ``pad: copy`` field without
                ``like``, or spread routes with no number of experts: a
                `trajschema.padding.PaddingSizeError` (a ``ValueError``; the message says
                what to pass); fewer experts than a token's slots, or ids the dtype cannot
                hold; padding that would take more
                memory than this machine has: a `trajschema.padding.PaddingMemoryError`
                (a ``ValueError`` carrying the bytes needed, the limit and the largest
                fields; refused before anything is allocated); a ``like`` value padding
                cannot copy (a meta, sparse or nested tensor, an object copy refuses); a
                fill that breaks its field's value checks.
            TypeError: ``like`` is not one sample (a mapping with str keys; a TensorDict
                with batch dims is a batch).
            SchemaError: ``like`` itself breaks the schema (each violation's message
                starts ``like= sample:``), or has an undeclared tensor that seems to
                follow a dim the padding resizes.
        """
        plan = self.plan
        seen = _padding.ids_seen(plan, batch) if batch is not None else None
        return _padding.make_padding(
            plan, count, eos_token_id=eos_token_id, like=like, dims=dims, include=include, seen=seen
        )
