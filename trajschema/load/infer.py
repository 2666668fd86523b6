"""Drafting a schema from real samples: fields, dtypes, shared dims, dim relations, pad rules, value checks.

The draft is conservative: every check it writes holds on the samples it came from.
A field that looks like routes (integer ids, a small fixed last axis of 2 or more slots,
named like ``*expert*`` / ``*route*`` or of rank 3 as ``[seq, layers, topk]``) whose every
slice along the last axis holds distinct values in every sample is drafted ``distinct``,
with its ids below an expert-count dim (``max: experts - 1``) that its padding spreads
over (``pad: {spread: experts}``). A
field whose name a known schema also uses (``base=``, then the packaged families) takes
that schema's dim names, pad rule, dtypes and value checks wherever the samples agree
with them; everything else is inferred and its guesses are kept as YAML comments, which
[`Schema.to_yaml`][trajschema.Schema.to_yaml] writes beside the entries (``schema._comments``).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

from trajschema.check import as_mapping, batch_view, is_tensordict
from trajschema.core import (
    DTYPES_BY_NAME,
    DerivedDim,
    Field,
    FixedDim,
    FreeDim,
    PadRule,
    SchemaDefinitionError,
    SchemaNotFoundError,
    dtype_name,
    parse_expr,
    scalar_failures,
    tensor_extremes,
    tensor_has_failures,
)
from trajschema.export import dim_entry, field_entry, schema_sections, tag_entry
from trajschema.load.search import load_schema, resolve_schema, schema_from_dict, schema_names
from trajschema.schema import Schema

__all__ = ["infer_schema"]

_LENGTH_TAGS = ("prompt", "response", "seq")

#: The longest last axis read as a token's routing slots (``topk``); longer ones are sequences.
_MAX_SLOTS = 64


@dataclasses.dataclass
class _Obs:
    """One field as the samples show it: where it is present and its values there."""

    name: str
    kind: str  # "tensor" or a non-tensor kind
    at: list[int]
    values: list[Any]
    dtypes: list[torch.dtype] = dataclasses.field(default_factory=list)
    rank: int = 0


@dataclasses.dataclass
class _Group:
    """Tensor axes found to be one dim: their size in every sample that has them."""

    sizes: dict[int, int]
    members: list[tuple[str, int]]
    role: str | None = None
    role_dim: Any = None
    name: str | None = None
    literal: int | None = None
    derived: str | None = None

    def fits(self, sizes: Mapping[int, int]) -> bool:
        common = self.sizes.keys() & sizes.keys()
        return bool(common) and all(self.sizes[i] == sizes[i] for i in common)

    @property
    def varying(self) -> bool:
        return len(set(self.sizes.values())) > 1


# -- reading the samples ------------------------------------------------------------


def _rows(batch: Any) -> list[Mapping[str, Any]]:
    if is_tensordict(batch):
        view = batch_view(batch)
        return list(view.rows()) if view.is_table else [dict(r) for r in view.samples or ()]
    if isinstance(batch, Mapping) or not isinstance(batch, Sequence) or isinstance(batch, (str, bytes)):
        raise TypeError(f"infer_schema needs a list of sample mappings or a TensorDict, found {type(batch).__name__}")
    rows = []
    for i, s in enumerate(batch):
        try:
            rows.append(as_mapping(s))
        except TypeError:
            raise TypeError(
                f"sample {i}: expected a mapping of field name to value, found {type(s).__name__}"
            ) from None
    return rows


def _value_kind(v: Any) -> str:
    if isinstance(v, torch.Tensor):
        return "tensor"
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, int):
        return "int"
    if isinstance(v, float):
        return "float"
    if isinstance(v, str):
        return "str"
    return "mapping" if isinstance(v, Mapping) else "any"


def _merge_kinds(kinds: set[str]) -> str:
    if len(kinds) == 1:
        return next(iter(kinds))
    return "float" if kinds <= {"int", "float"} else "any"


def _observe(rows: list[Mapping[str, Any]]) -> dict[str, _Obs]:
    seen: dict[str, _Obs] = {}
    for i, row in enumerate(rows):
        for key, v in row.items():
            if not isinstance(key, str) or not key or key != key.strip() or not key.isprintable():
                raise ValueError(f"sample {i}: field name {key!r} is not a usable field name (a non-empty string)")
            if v is None:
                continue
            o = seen.setdefault(key, _Obs(key, "", [], []))
            o.at.append(i)
            o.values.append(v)
    for o in seen.values():
        _settle_kind(o, rows)
    return seen


def _settle_kind(o: _Obs, rows: list[Mapping[str, Any]]) -> None:
    kinds = {_value_kind(v) for v in o.values}
    if "tensor" in kinds and len(kinds) > 1:
        where = next(i for i, v in zip(o.at, o.values) if not isinstance(v, torch.Tensor))
        raise ValueError(
            f"field {o.name!r} is a tensor in some samples and a {_value_kind(rows[where][o.name])} in sample {where}"
        )
    o.kind = _merge_kinds(kinds)
    if o.kind != "tensor":
        return
    ranks: dict[int, int] = {}
    for i, t in zip(o.at, o.values):
        if t.is_nested or t.layout != torch.strided:
            raise ValueError(f"field {o.name!r} in sample {i}: expected a dense tensor, found layout {t.layout}")
        if t.dtype not in DTYPES_BY_NAME.values():
            raise ValueError(
                f"field {o.name!r} in sample {i}: dtype {dtype_name(t.dtype)} is not one a schema can declare "
                f"({', '.join(DTYPES_BY_NAME)})"
            )
        if t.dtype not in o.dtypes:
            o.dtypes.append(t.dtype)
        ranks.setdefault(t.dim(), i)
    if len(ranks) > 1:
        found = ", ".join(f"{r} in sample {i}" for r, i in ranks.items())
        raise ValueError(f"field {o.name!r} has different ranks across samples: {found}")
    o.rank = next(iter(ranks))


# -- what known schemas say about a field of that name -------------------------------


class _Roles:
    """``base`` and the packaged schemas, asked in that order for a field of a given name."""

    def __init__(self, base: Schema | None, obs: Mapping[str, _Obs]) -> None:
        self.schemas: list[Schema] = []
        for n in schema_names():
            try:
                s = load_schema(n)
            except (SchemaDefinitionError, SchemaNotFoundError):  # a broken file on TRAJSCHEMA_PATH
                continue
            if s != base:
                self.schemas.append(s)
        # The family the samples fit best first: fields it shares with them, less those it requires and they lack.
        self.schemas.sort(key=lambda s: -self._fit(s, obs))
        if base is not None:
            self.schemas.insert(0, base)

    def _fit(self, s: Schema, obs: Mapping[str, _Obs]) -> int:
        shared = sum(self.field(o, [s]) is not None for o in obs.values())
        return shared - sum(f.required and n not in obs for n, f in s.fields.items())

    def field(self, o: _Obs, among: list[Schema] | None = None) -> tuple[Field, Schema] | None:
        for s in self.schemas if among is None else among:
            f = s.fields.get(o.name)
            if f is None or (f.kind != o.kind) or (f.is_tensor and len(f.shape or ()) != o.rank):
                continue
            return f, s
        return None

    def axis(self, o: _Obs, i: int) -> tuple[str, Any] | None:
        hit = self.field(o)
        if hit is None:
            return None
        e = (hit[0].shape or ())[i]
        return (e.args[0], hit[1].dims[e.args[0]]) if e.is_name else None


def _base(base: Any) -> Schema | None:
    return None if base is None else resolve_schema(base, argument="base")


# -- dims: which axes are one dim, and what each dim is ------------------------------


def _group_axes(obs: Mapping[str, _Obs], roles: _Roles, notes: list[tuple[str, str]]) -> list[_Group]:
    """The tensor axes in groups of one dim each: a known field's axes by their dim name, then by equal sizes."""
    groups: list[_Group] = []
    later: list[tuple[str, int, dict[int, int]]] = []
    for o in obs.values():
        if o.kind != "tensor":
            continue
        for ax in range(o.rank):
            sizes = {i: int(t.shape[ax]) for i, t in zip(o.at, o.values)}
            role = roles.axis(o, ax)
            same = [g for g in groups if role and g.role == role[0]]
            if role and not same:
                groups.append(_Group(sizes, [(o.name, ax)], role[0], role[1]))
            elif role and same[0].fits(sizes):
                same[0].sizes.update(sizes)
                same[0].members.append((o.name, ax))
            else:
                later.append((o.name, ax, sizes))
                if role:
                    notes.append(
                        (o.name, f"axis {ax} is not {role[0]}: its sizes differ from {same[0].members[0][0]}'s")
                    )
    for field, ax, sizes in later:
        varying = len(set(sizes.values())) > 1
        hit = next((g for g in groups if (g.varying or (not varying and g.role is None)) and g.fits(sizes)), None)
        if hit is None:
            groups.append(_Group(sizes, [(field, ax)]))
        else:
            hit.sizes.update(sizes)
            hit.members.append((field, ax))
    return groups


def _name_groups(groups: list[_Group], taken: set[str], comments: dict[str, str]) -> None:
    counter = 0
    for g in groups:
        sizes = sorted(set(g.sizes.values()))
        fields = {f for f, _ in g.members}
        if g.role is not None:
            g.name = g.role
            continue
        if len(sizes) == 1 and len(g.sizes) > 1 and len(fields) == 1:
            g.literal = sizes[0]
            field, ax = g.members[0]
            comments[f"fields.{field}"] = _join(
                comments.get(f"fields.{field}"), f"axis {ax} is {sizes[0]} in every sample: written as a literal"
            )
            continue
        while f"d{counter}" in taken:
            counter += 1
        g.name = f"d{counter}"
        taken.add(g.name)
        axes = ", ".join(f"{f}[{a}]" for f, a in g.members)
        seen = f"size {sizes[0]} in every sample" if len(sizes) == 1 else f"sizes {sizes[0]}..{sizes[-1]}"
        comments[f"dims.{g.name}"] = f"unnamed dim of {axes}: {seen}; rename it"


def _join(a: str | None, b: str) -> str:
    return f"{a}; {b}" if a else b


def _holds(expr_text: str, target: _Group, named: Mapping[str, _Group], at_least: int) -> bool:
    expr = parse_expr(expr_text)
    common = set(target.sizes)
    for n in expr.names():
        common &= set(named[n].sizes)
    if len(common) < at_least:
        return False
    return all(expr.evaluate({n: named[n].sizes[i] for n in expr.names()}) == target.sizes[i] for i in common)


def _find_relations(groups: list[_Group]) -> None:
    """Mark derived dims: a known family's relation (``seq: prompt + response``) wherever the samples keep it,
    then ``c = a + b`` for each varying dim that is the sum of two others on every sample with all three."""
    named = {g.name: g for g in groups if g.name is not None}
    operands: set[str] = set()

    def mark(c: _Group, tries: list[str], at_least: int) -> None:
        free = {n for n, g in named.items() if g.derived is None and n != c.name}
        found = next((t for t in tries if set(parse_expr(t).names()) <= free and _holds(t, c, named, at_least)), None)
        if found is not None:
            c.derived = found
            operands.update(parse_expr(found).names())

    for c in named.values():
        if isinstance(c.role_dim, DerivedDim) and c.name not in operands:
            mark(c, [str(c.role_dim.expr)], 1)
    for c in sorted(named.values(), key=lambda g: -max(g.sizes.values())):
        if c.varying and c.derived is None and c.name not in operands:
            free = [n for n, g in named.items() if g.derived is None and n != c.name and set(g.sizes.values()) != {0}]
            mark(c, [f"{a} + {b}" for i, a in enumerate(free) for b in free[i + 1 :]], 2)


def _dim_decl(g: _Group, padding: dict[str, int], roles: _Roles, comments: dict[str, str]) -> Any:
    role = g.role_dim
    if g.derived is not None:
        return DerivedDim(g.name or "", parse_expr(g.derived), getattr(role, "description", ""))
    if isinstance(role, FixedDim) and set(g.sizes.values()) == {role.size}:
        return role
    if isinstance(role, FixedDim):
        seen = ", ".join(map(str, sorted(set(g.sizes.values()))))
        comments[f"dims.{g.name}"] = f"sizes {seen} in the samples; a known schema fixes it at {role.size}"
    free = FreeDim(g.name or "")
    if isinstance(role, FreeDim) and all(role.allows(s) for s in g.sizes.values()):
        free = dataclasses.replace(role, name=g.name or "")
    elif isinstance(role, (FreeDim, DerivedDim)):
        free = dataclasses.replace(free, description=role.description)
        if isinstance(role, FreeDim):
            comments[f"dims.{g.name}"] = f"a known schema bounds it {role.describe()}, which the samples break"
    for s in roles.schemas:
        size = s.padding_sizes.get(g.name or "")
        if size is not None and free.allows(size):
            padding[g.name or ""] = size
            break
    return free


# -- fields ---------------------------------------------------------------------------


def _holds_checks(f: Field, o: _Obs) -> bool:
    if not f.has_value_checks:
        return True
    if o.kind == "tensor":
        return not any(tensor_has_failures(f, t) for t in o.values) and (not f.distinct or _all_distinct(o.values))
    return not any(scalar_failures(f, v) for v in o.values)


def _extremes(o: _Obs) -> tuple[float, float, bool] | None:
    """``(min, max, all finite)`` over every element of the samples; ``None`` if none.

    Read in bounded memory (an expanded tensor's repeats are read once). The bounds
    matter only for fields of integer dtypes, where they are exact; NaN only makes a
    float field not finite.
    """
    lo, hi, finite, seen = math.inf, -math.inf, True, False
    for t in o.values:
        if t.dtype == torch.bool:
            continue
        found = tensor_extremes(t)
        if found is None:  # meta or empty
            continue
        a, b, all_finite = found
        seen = True
        if not math.isnan(a):
            lo, hi = min(lo, a), max(hi, b)
        finite = finite and all_finite
    return (lo, hi, finite) if seen else None


def _own_checks(o: _Obs, note: list[str]) -> dict[str, Any]:
    """Value checks read off the samples: 0/1 masks, a lower bound of 0, finiteness."""
    if o.kind == "tensor":
        seen = _extremes(o)
        if seen is None:
            return {}
        lo, hi, finite = seen
        if any(d.is_floating_point for d in o.dtypes):
            return {"finite": True} if finite else {}
        if "mask" in o.name and lo >= 0 and hi <= 1:
            note.append("every value is 0 or 1")
            return {"values": [0, 1]}
        if lo >= 0:
            note.append("every value is >= 0 in the samples")
            return {"min": 0}
        return {}
    if o.kind == "int" and all(v >= 0 for v in o.values):
        return {"min": 0}
    if o.kind == "float" and all(math.isfinite(v) for v in o.values):
        return {"finite": True}
    return {}


def _routes_like(o: _Obs) -> bool:
    """Integer ids with a small fixed last axis of 2+ slots, named or shaped like routes, distinct in every slice seen.

    Never when a slice of any sample repeats a value, when an id is negative, or when a
    tensor cannot be read (``meta``).
    """
    if o.kind != "tensor" or o.rank < 2 or any(d.is_floating_point or d == torch.bool for d in o.dtypes):
        return False
    n = o.name.lower()
    slots = {int(t.shape[-1]) for t in o.values}
    if (
        len(slots) != 1
        or not 2 <= next(iter(slots)) <= _MAX_SLOTS
        or not ("expert" in n or "route" in n or o.rank == 3)
    ):
        return False
    if not any(t.numel() for t in o.values) or not _all_distinct(o.values):
        return False
    return all(int(t.min()) >= 0 for t in o.values if t.numel())


def _all_distinct(tensors: Sequence[torch.Tensor]) -> bool:
    """Whether every slice along the last axis of every tensor holds distinct values (unknown, so no, for ``meta``)."""
    for t in tensors:
        if t.is_meta:
            return False
        if t.numel() and t.dim():
            rows = t.reshape(-1, t.shape[-1]).sort(dim=1).values
            if bool((rows[:, 1:] == rows[:, :-1]).any()):
                return False
    return True


def _guess_pad(o: _Obs, checks: Mapping[str, Any]) -> tuple[Any, str]:
    n = o.name.lower()
    if o.kind == "tensor":
        ints = [d for d in o.dtypes if not d.is_floating_point and d != torch.bool]
        if ints and len(ints) == len(o.dtypes) and o.rank and "position" in n:
            return "positions", "pad guessed from the name (position ids)"
        if ints and len(ints) == len(o.dtypes) and (n.endswith("ids") or "token" in n) and "values" not in checks:
            return "eos", "pad guessed from the name (token ids)"
        if o.dtypes == [torch.bool]:
            return False, "pad False: no role known"
        return (0 if ints or torch.bool in o.dtypes else 0.0), "pad 0: no role known"
    if o.kind == "str":
        return ("uid", "pad guessed from the name (group id)") if n.endswith("uid") else ("copy", "no role known")
    if o.kind == "int" and ("session" in n or "index" in n):
        return "index", "pad guessed from the name (numbered per padding sample)"
    if o.kind in ("mapping", "any"):
        return ("empty", "no role known") if o.kind == "any" else ("empty", "")
    return {"int": 0, "float": 0.0, "bool": False}[o.kind], f"pad {0 if o.kind == 'int' else 0.0}: no role known"


def _field(o: _Obs, shape: list[Any], n: int, roles: _Roles, comments: dict[str, str], experts: str) -> dict[str, Any]:
    hit = roles.field(o)
    dtypes = tuple(o.dtypes)
    if hit is not None and o.kind == "tensor" and set(dtypes) <= set(hit[0].dtypes):
        dtypes = hit[0].dtypes
    required = len(o.at) == n and (hit is None or hit[0].required)
    if hit is not None:
        f = dataclasses.replace(hit[0], dtypes=dtypes, shape=None, required=required)
        if o.kind == "tensor" and dtypes != hit[0].dtypes:
            why = f"dtype {'|'.join(map(dtype_name, dtypes))} where schema {hit[1].name!r} has {hit[0].describe()}"
        elif not _holds_checks(f, o):
            why = f"the samples break schema {hit[1].name!r}'s value checks for it"
        else:
            return field_entry(dataclasses.replace(f, shape=tuple(parse_expr(e) for e in shape)))
        comments[f"fields.{o.name}"] = _join(comments.get(f"fields.{o.name}"), why)
    note: list[str] = []
    checks = _own_checks(o, note)
    pad, why = _guess_pad(o, checks)
    if _routes_like(o):
        checks.update(max=f"{experts} - 1", distinct=True)
        pad, why = {"spread": experts}, f"looks like routes: every slice of the last axis is distinct, ids < {experts}"
    if why:
        note.append(why)
    if len(o.at) < n:
        note.append(f"in {len(o.at)} of {n} samples")
    if note:
        comments[f"fields.{o.name}"] = _join(comments.get(f"fields.{o.name}"), "; ".join(note))
    rule = PadRule(pad) if isinstance(pad, str) else PadRule("fill", 0 if isinstance(pad, dict) else pad)
    entry = field_entry(Field(o.name, o.kind, () if o.kind == "tensor" else None, dtypes, required, rule))
    entry.update(checks, pad=pad)
    for key in ("pad", "required"):  # after the checks, where the packaged files keep them
        if key in entry:
            entry[key] = entry.pop(key)
    if o.kind == "tensor":
        entry["shape"] = shape
    return entry


# -- the draft ------------------------------------------------------------------------


def _tags(dims: Mapping[str, Any], roles: _Roles) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for s in roles.schemas:
        for tname, t in s.tags.items():
            if tname in out:
                continue
            if tname == "is_padding" or (t.equals is not None and set(t.equals.names()) <= set(dims)):
                out[tname] = tag_entry(t)
    return out


def _full_draft(obs: dict[str, _Obs], n: int, roles: _Roles, comments: dict[str, str]) -> dict[str, Any]:
    notes: list[tuple[str, str]] = []
    groups = _group_axes(obs, roles, notes)
    for field, note in notes:
        comments[f"fields.{field}"] = _join(comments.get(f"fields.{field}"), note)
    taken = {g.role for g in groups if g.role} | {d for s in roles.schemas for d in s.dims}
    _name_groups(groups, taken, comments)
    _find_relations(groups)
    padding: dict[str, int] = {}
    by_name = {g.name: g for g in groups if g.name is not None}
    dims = {name: dim_entry(_dim_decl(g, padding, roles, comments)) for name, g in by_name.items()}
    axis = {m: (g.literal if g.literal is not None else g.name) for g in groups for m in g.members}
    experts = _unused_name("experts", dims)
    fields = {
        o.name: _field(o, [axis[(o.name, a)] for a in range(o.rank)], n, roles, comments, experts) for o in obs.values()
    }
    _add_value_dims(fields, dims, roles, comments)
    doc: dict[str, Any] = {"name": "", "description": f"Drafted by trajschema.infer_schema from {n} sample(s)."}
    doc.update(dims=dims, fields=fields, tags=_tags(dims, roles), padding=padding)
    return doc


def _unused_name(name: str, taken: Mapping[str, Any]) -> str:
    while name in taken:
        name += "_"
    return name


def _value_dims(entry: Mapping[str, Any]) -> list[str]:
    """The dims a field entry names outside its shape: in bounds (``max: experts - 1``) and ``pad: {spread: ...}``."""
    names = [n for side in ("min", "max") if isinstance(entry.get(side), str) for n in parse_expr(entry[side]).names()]
    pad = entry.get("pad")
    return [*names, *(pad.values() if isinstance(pad, dict) else ())]


def _add_value_dims(
    fields: Mapping[str, dict[str, Any]], dims: dict[str, Any], roles: _Roles, comments: dict[str, str]
) -> None:
    """Declare the dims that fields name only in value bounds or spread padding (an expert count), as a known schema
    declares them, else free ``>= 1``."""
    for fname, entry in fields.items():
        for name in _value_dims(entry):
            if name in dims:
                continue
            known = next((s.dims[name] for s in roles.schemas if isinstance(s.dims.get(name), FreeDim)), None)
            dims[name] = dim_entry(known if known is not None else FreeDim(name, min=1))
            if known is None:
                comments[f"dims.{name}"] = (
                    f"the expert count {fname}'s ids are below; no field's shape has it: pin it with dims= "
                    "(or read it from the model config: from_config)"
                )


def _diff(doc: dict[str, Any], base: Schema, comments: dict[str, str]) -> dict[str, Any]:
    """Only what ``doc`` adds to or changes in ``base``, as a child of it."""
    have = schema_sections(base.plan)
    out: dict[str, Any] = {"name": doc["name"], "description": doc["description"], "extends": [base.name]}
    for section in ("dims", "fields", "tags", "padding"):
        out[section] = {k: v for k, v in doc[section].items() if have[section].get(k) != v}
    for fname, f in base.fields.items():
        if f.required and fname not in doc["fields"]:
            out["fields"][fname] = {**field_entry(f), "required": False}
            comments[f"fields.{fname}"] = f"in no sample: made optional (schema {base.name!r} requires it)"
    return out


def infer_schema(samples_or_batch: Any, *, name: str, base: Schema | str | None = None) -> Schema:
    """Draft a schema from real samples (a list of sample mappings, or a TransferQueue TensorDict).

    It finds fields, dtypes and kinds; which axes of which fields are one dim (a known
    field name reuses its family's dim names); ``seq = prompt + response``-style sums
    that hold on every sample; axes of one constant size (a literal when one field has
    it, a named dim when several do); pad rules, dtypes and value checks by role (from
    ``base`` and the packaged schemas, else guessed from the name and the values) and
    the standard tags. Guesses are kept as comments, which [`Schema.to_yaml`][trajschema.Schema.to_yaml]
    writes. With ``base``, the draft extends it and holds only what differs.

    Examples:
        >>> from trajschema.testing import verl_sample
        >>> from trajschema.load.infer import infer_schema  # also ts.infer_schema
        >>> draft = infer_schema([verl_sample("text", p, r) for p, r in [(5, 3), (7, 2)]], name="mine")
        >>> str(draft.dims["seq"].expr), draft.fields["input_ids"].pad.rule
        ('prompt + response', 'eos')
        >>> infer_schema([verl_sample("text", 5, 3)], name="mine2", base="text").to_yaml().splitlines()[2]
        'extends: [text]'

    Args:
        samples_or_batch: one or more real samples.
        name: the draft's schema name.
        base: a schema (or its name) the draft extends.

    Raises:
        ValueError: no samples; a field that is a tensor in some samples and not in
            others, or whose rank or layout differs; an unusable field name or dtype.
        TypeError: the input, a sample or ``base`` is of the wrong type.
        SchemaDefinitionError: ``name`` is not a valid schema name.
    """
    if not isinstance(name, str):
        raise TypeError(f"name must be a string, found {type(name).__name__}")
    rows = _rows(samples_or_batch)
    if not rows:
        raise ValueError("infer_schema needs at least one sample, found none")
    base_schema = _base(base)
    obs = _observe(rows)
    comments: dict[str, str] = {}
    doc = _full_draft(obs, len(rows), _Roles(base_schema, obs), comments)
    doc["name"] = name
    if base_schema is not None:
        doc = _diff(doc, base_schema, comments)
    source = Path(base_schema.source) if base_schema is not None else None
    base_dir = source.parent if source is not None and source.is_file() else None
    schema = schema_from_dict(doc, base_dir=base_dir)
    # Plain data outside Schema's equality, hash and plan; pickled with it; written by to_yaml().
    vars(schema).update(_draft=doc, _comments=comments)
    return schema
