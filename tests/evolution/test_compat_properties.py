"""Compatibility against validation itself: every "compatible" verdict is tried on valid samples.

A base schema is drawn, then one mutation of each rule's kind; for every direction the
report calls compatible, samples valid under the source (drawn by the project's own
``trajschema.testing.samples``) must validate under the target. For the canonical
breaking edits, a sample valid under the source and invalid under the target is built.
"""

from __future__ import annotations

import copy

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import trajschema as ts
from trajschema.evolution.changes import CHANGE_KINDS
from trajschema.testing import samples

SETTINGS = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64"]
SHAPES = [["p"], ["r"], ["seq"], ["k", "seq"], ["k"], [2], ["r + p"], [], ["seq", "k"]]

# -- drawing schema mappings ---------------------------------------------------------


@st.composite
def free_dim(draw, low: int = 0) -> dict:
    lo = draw(st.integers(low, 3))
    hi = draw(st.none() | st.integers(lo, lo + 5))
    step = draw(st.none() | st.integers(1, 3))
    if step is not None and hi is not None and (hi // step) * step < lo:
        step = None  # no size would be left
    out = {"min": lo, "max": hi, "multiple_of": step}
    return {k: v for k, v in out.items() if v is not None}


def tensor_checks(dtypes: list[str]) -> list[dict]:
    out = [{}, {"min": 0}, {"max": 1}, {"min": 0, "max": 1}, {"values": [0, 1]}, {"values": [0]}, {"values": [1]}]
    out += [{"min": 1}, {"min": -1, "max": 2}, {"max": 100}, {"min": 0.5}]
    if any(d != "bool" for d in dtypes):
        out += [{"values": [0, 1, 2]}, {"min": -3}, {"max": 127}, {"min": -128, "max": 127}, {"min": 2}]
    if any(d.startswith(("float", "bfloat")) for d in dtypes):
        out += [{"finite": True}, {"finite": True, "min": 0.0}, {"min": 0.25, "max": 0.75}, {"values": [0, 0.5]}]
    return out


SCALAR_CHECKS = {
    "int": [{}, {"min": 0}, {"max": 5}, {"values": [0, 1, 2]}, {"min": 1, "max": 3}],
    "float": [{}, {"min": 0}, {"finite": True}, {"min": 0.5, "max": 2}, {"values": [0, 0.5]}],
    "bool": [{}, {"values": [True]}],
    "any": [{}, {"values": [0, 1]}],
    "str": [{}],
    "mapping": [{}],
}


@st.composite
def tensor_field(draw, required: bool | None = None) -> dict:
    dtypes = draw(st.lists(st.sampled_from(DTYPES), min_size=1, max_size=2, unique=True))
    f = {"shape": draw(st.sampled_from(SHAPES)), "dtype": dtypes, "pad": "copy"}
    f.update(draw(st.sampled_from(tensor_checks(dtypes))))
    f["required"] = draw(st.booleans()) if required is None else required
    return f


@st.composite
def scalar_field(draw, kind: str | None = None) -> dict:
    kind = kind or draw(st.sampled_from(sorted(SCALAR_CHECKS)))
    f = {"kind": kind, "pad": "copy", "required": draw(st.booleans())}
    f.update(draw(st.sampled_from(SCALAR_CHECKS[kind])))
    return f


TAGS = {
    "seq_len": {"equals": "seq"},
    "k_len": {"equals": "k"},
    "flag": {"kind": "bool"},
    "count": {"kind": "int"},
    "score": {"kind": "float"},
    "label": {"kind": "str"},
    "is_padding": {"kind": "bool", "default": False},
}


@st.composite
def schema_dicts(draw, low: int = 0) -> dict:
    dims = {"p": draw(free_dim(low)), "r": draw(free_dim(low)), "seq": "p + r", "k": draw(st.integers(1, 3))}
    fields = {
        "bp": {"shape": ["p"], "dtype": "int64", "pad": "copy"},
        "br": {"shape": ["r"], "dtype": "int64", "pad": "copy", "required": draw(st.booleans())},
        "a": draw(tensor_field()),
        "n": draw(scalar_field()),
    }
    tags = {k: v for k, v in TAGS.items() if draw(st.booleans())}
    return {
        "name": "base",
        "dims": dims,
        "fields": fields,
        "tags": tags,
        "extra": draw(st.sampled_from(["allow", "forbid"])),
    }


def load(d: dict) -> ts.Schema:
    return ts.schema_from_dict(d)


def loadable(d: dict, field: str | None = None) -> dict:
    """``d``, with ``field``'s value checks (then every field's) dropped if the loader refuses them."""
    try:
        load(d)
        return d
    except ts.SchemaDefinitionError:
        d = copy.deepcopy(d)
        for name, f in d["fields"].items():
            if field is None or name == field:
                for key in ("values", "min", "max", "finite"):
                    f.pop(key, None)
        d.pop("padding", None)
        return loadable(d) if field is not None else d


# -- one mutation per rule -------------------------------------------------------------


def _pick(draw, d: dict) -> str:
    return draw(st.sampled_from(sorted(d["fields"])))


@st.composite
def m_field_added(draw, d):
    d["fields"]["z"] = draw(st.one_of(tensor_field(), scalar_field()))
    return d


@st.composite
def m_field_removed(draw, d):
    del d["fields"][_pick(draw, d)]
    return d


@st.composite
def m_required_changed(draw, d):
    f = d["fields"][_pick(draw, d)]
    f["required"] = not f.get("required", True)
    return d


@st.composite
def m_kind_changed(draw, d):
    name = draw(st.sampled_from(["a", "n"]))
    required = d["fields"][name].get("required", True)
    new = draw(st.one_of(scalar_field(), tensor_field()))
    new["required"] = required
    d["fields"][name] = new
    return d


@st.composite
def m_dtype_changed(draw, d):
    d["fields"]["a"]["dtype"] = draw(st.lists(st.sampled_from(DTYPES), min_size=1, max_size=3, unique=True))
    d["fields"]["a"].setdefault("shape", ["p"])
    d["fields"]["a"].pop("kind", None)
    return loadable(d, "a")


@st.composite
def m_shape_changed(draw, d):
    d["fields"]["a"]["shape"] = draw(st.sampled_from(SHAPES))
    return d


@st.composite
def m_dim_bounds_changed(draw, d):
    name = draw(st.sampled_from(["p", "r", "k"]))
    d["dims"][name] = draw(st.one_of(free_dim(), st.integers(0, 4)))
    return loadable(d)


@st.composite
def m_dim_changed(draw, d):
    d["dims"]["seq"] = draw(st.sampled_from(["r + p", "p + r + 1", "2 * p + r - p", "p", "p * r", {"min": 0}]))
    return d


@st.composite
def m_values_changed(draw, d):
    a = d["fields"]["a"]
    for key in ("values", "min", "max", "finite"):
        a.pop(key, None)
    a.update(draw(st.sampled_from(tensor_checks(a["dtype"]))))
    n = d["fields"]["n"]
    if draw(st.booleans()):
        for key in ("values", "min", "max", "finite"):
            n.pop(key, None)
        n.update(draw(st.sampled_from(SCALAR_CHECKS[n["kind"]])))
    return d


def m_pad_changed(d):
    if "bool" not in d["fields"]["a"]["dtype"]:  # eos fills integers, which a bool tensor cannot hold
        d["fields"]["a"]["pad"] = "eos"
    return st.just(d)


TAG_DECLS = [{"equals": "seq"}, {"equals": "p + r"}, {"equals": "k"}, {"equals": "r + 1"}, {"equals": "p"}]
TAG_DECLS += [{"kind": k} for k in ("int", "float", "bool", "str", "any")] + [{"kind": "int", "default": 2}, {}]


@st.composite
def m_tag_changed(draw, d):
    """Drop, add or redeclare one tag (mostly one the base declares)."""
    tags = d["tags"]
    name = draw(st.sampled_from(sorted(tags) or ["other"]) | st.sampled_from([*TAGS, "other"]))
    if name == "is_padding":
        tags.pop(name) if name in tags else tags.update(is_padding={"kind": "bool"})
    elif draw(st.integers(0, 5)) == 0:
        tags.pop(name, None)
    else:
        tags[name] = draw(st.sampled_from(TAG_DECLS))
    return d


def m_extra_changed(d):
    d["extra"] = "forbid" if d["extra"] == "allow" else "allow"
    return st.just(d)


@st.composite
def m_padding_changed(draw, d):
    p = load(d).dims["p"]
    sizes = [s for s in range(12) if p.allows(s)]
    if sizes:
        d["padding"] = {"p": draw(st.sampled_from(sizes))}
    return d


MUTATIONS = {
    "field_added": m_field_added,
    "field_removed": m_field_removed,
    "required_changed": m_required_changed,
    "kind_changed": m_kind_changed,
    "dtype": m_dtype_changed,
    "shape_changed": m_shape_changed,
    "dim_bounds_changed": m_dim_bounds_changed,
    "dim_changed": m_dim_changed,
    "values_changed": m_values_changed,
    "pad_changed": m_pad_changed,
    "tags": m_tag_changed,
    "extra_changed": m_extra_changed,
    "padding_default_changed": m_padding_changed,
}


# -- the properties -----------------------------------------------------------------------


def _samples_of(schema: ts.Schema):
    try:
        return samples(schema, max_len=5, with_tags=True)
    except ValueError:  # a required field admits no value: the schema has no valid sample at all
        return None


def _stays_valid(data, src: ts.Schema, tgt: ts.Schema, draws: int = 4) -> None:
    strategy = _samples_of(src)
    if strategy is None:
        return
    for _ in range(draws):
        sample, tag = data.draw(strategy)
        # The documented assumption: a source sample or tag dict carries no undeclared key the target declares.
        tag = {k: v for k, v in tag.items() if k in src.tags or k not in tgt.tags}
        if src.extra == "allow":
            sample["undeclared_field"] = data.draw(st.sampled_from([1, "x", torch.zeros(2)]))
        assert tgt.violations(sample, tag=tag, depth="values") == [], (sample, tag)


@pytest.mark.parametrize("rule", sorted(MUTATIONS))
@SETTINGS
@given(data=st.data())
def test_every_compatible_direction_keeps_samples_valid(rule, data):
    base = data.draw(schema_dicts())
    mutated = data.draw(MUTATIONS[rule](copy.deepcopy(base)))
    mutated["name"] = "mutated"
    old, new = load(base), load(mutated)
    changes = old.compatibility(new, "full")
    assert all(c.kind in CHANGE_KINDS for c in changes)
    assert [c.breaking for c in old.compatibility(new, "backward")] == [c.backward_breaking for c in changes]
    assert [c.breaking for c in old.compatibility(new, "forward")] == [c.forward_breaking for c in changes]
    assert old.compatibility(old, "full") == [] and new.compatibility(new, "full") == []
    if not any(c.backward_breaking for c in changes):
        _stays_valid(data, old, new)
    if not any(c.forward_breaking for c in changes):
        _stays_valid(data, new, old)


# -- canonical breaks are real ---------------------------------------------------------------


def _one_sample(data, schema: ts.Schema, dims: dict | None = None):
    return data.draw(samples(schema, max_len=5, dims=dims))


@SETTINGS
@given(data=st.data())
def test_adding_a_required_field_breaks_old_samples(data):
    base = data.draw(schema_dicts())
    new_d = copy.deepcopy(base)
    new_d["fields"]["z"] = data.draw(st.one_of(tensor_field(required=True), scalar_field()))
    new_d["fields"]["z"]["required"] = True
    old, new = load(base), load(new_d)
    (c,) = [c for c in old.compatibility(new) if c.path == "fields.z"]
    assert (c.kind, c.backward_breaking) == ("field_added", True)
    if _samples_of(old) is not None:
        sample = _one_sample(data, old)
        assert "z" in {v.field for v in new.violations(sample) if v.code == "missing"}


@SETTINGS
@given(data=st.data())
def test_narrowing_dtypes_breaks_old_samples(data):
    base = data.draw(schema_dicts())
    a = base["fields"]["a"] = data.draw(tensor_field(required=True))
    for key in ("values", "min", "max", "finite"):
        a.pop(key, None)
    a["dtype"] = data.draw(st.lists(st.sampled_from(DTYPES), min_size=2, max_size=3, unique=True))
    keep = data.draw(st.lists(st.sampled_from(a["dtype"]), min_size=1, max_size=len(a["dtype"]) - 1, unique=True))
    new_d = copy.deepcopy(base)
    new_d["fields"]["a"]["dtype"] = keep
    old, new = load(base), load(new_d)
    (c,) = old.compatibility(new, "full")
    assert (c.kind, c.backward_breaking, c.forward_breaking) == ("dtype_narrowed", True, False)
    dropped = next(d for d in a["dtype"] if d not in keep)
    only = copy.deepcopy(base)
    only["fields"]["a"]["dtype"] = [dropped]
    sample = _one_sample(data, load(only))  # valid under a narrower schema, so under old too
    assert old.violations(sample) == []
    assert [v.code for v in new.violations(sample)] == ["dtype"]


@SETTINGS
@given(data=st.data())
def test_tightening_min_breaks_old_samples(data):
    base = data.draw(schema_dicts(low=1))
    dtype = data.draw(st.sampled_from([d for d in DTYPES if d != "bool"]))
    lo = data.draw(st.integers(0, 3))
    base["fields"]["a"] = {"shape": data.draw(st.sampled_from(SHAPES)), "dtype": dtype, "min": lo, "pad": "copy"}
    new_d = copy.deepcopy(base)
    new_d["fields"]["a"]["min"] = lo + data.draw(st.sampled_from([1, 0.5, 2]))
    old, new = load(base), load(new_d)
    (c,) = old.compatibility(new, "full")
    assert (c.kind, c.backward_breaking, c.forward_breaking) == ("values_changed", True, False)
    sample = _one_sample(data, old)
    sample["a"] = torch.full_like(sample["a"], lo)  # every dim is at least 1: a is not empty
    assert old.violations(sample) == []
    assert [v.code for v in new.violations(sample)] == ["value"]


@SETTINGS
@given(data=st.data())
def test_changing_a_fixed_dim_breaks_both_ways(data):
    base = data.draw(schema_dicts())
    base["fields"]["a"] = {"shape": ["k", "seq"], "dtype": "int64", "pad": "copy"}
    new_d = copy.deepcopy(base)
    k = base["dims"]["k"]
    new_d["dims"]["k"] = data.draw(st.sampled_from([x for x in range(5) if x != k]))
    old, new = load(base), load(new_d)
    (c,) = old.compatibility(new, "full")
    assert (c.kind, c.path, c.backward_breaking, c.forward_breaking) == ("dim_bounds_changed", "dims.k", True, True)
    assert f"k: {k} -> {new_d['dims']['k']}" in c.message
    for src, tgt in ((old, new), (new, old)):
        sample = _one_sample(data, src)
        assert src.violations(sample) == [] and "shape" in {v.code for v in tgt.violations(sample)}


@SETTINGS
@given(data=st.data())
def test_forbidding_extra_fields_breaks_old_samples(data):
    base = data.draw(schema_dicts())
    base["extra"] = "allow"
    new_d = dict(copy.deepcopy(base), extra="forbid")
    old, new = load(base), load(new_d)
    assert [(c.kind, c.backward_breaking, c.forward_breaking) for c in old.compatibility(new, "full")] == [
        ("extra_changed", True, False)
    ]
    if _samples_of(old) is not None:
        sample = dict(_one_sample(data, old), undeclared_field=1)
        assert old.violations(sample) == []
        assert [v.code for v in new.violations(sample)] == ["extra"]


# -- binding: edits that keep every shape's sizes but change how dims are bound -----------------

BASES = ("a", "u", "w")
DERIVED = ["u + a", "u + w + a", "2 * u + a", "u * a", "a + 1", "w + u"]


@st.composite
def binding_dicts(draw) -> dict:
    dims: dict = {b: draw(free_dim()) for b in BASES}
    names = []
    for i, e in enumerate(draw(st.lists(st.sampled_from(DERIVED), min_size=1, max_size=3, unique=True))):
        if names and draw(st.booleans()):
            e = f"{e} + {names[-1]}"  # a chain: a derived dim over a derived dim
        dims[f"d{i}"] = e
        names.append(f"d{i}")
    # Mostly fields over derived dims, so that binding has to solve for the dims no field gives.
    refs = [n for n in names if draw(st.integers(0, 4))]
    refs += draw(st.lists(st.sampled_from([*BASES, *DERIVED]), min_size=0 if refs else 1, max_size=2))
    refs = draw(st.permutations(refs))
    fields = {}
    for i, ref in enumerate(refs):
        fields[f"f{i}"] = {"shape": [ref], "dtype": "int64", "pad": "copy", "required": draw(st.booleans())}
    return {"name": "base", "dims": dims, "fields": fields}


@st.composite
def rebind(draw, d: dict) -> dict:
    """One edit that keeps every field's sizes: reorder, inline or name a derived dim, drop a field."""
    d = copy.deepcopy(d)
    edit = draw(st.sampled_from(["reorder dims", "reorder fields", "inline", "name", "drop", "optional"]))
    if edit.startswith("reorder"):
        key = edit.split()[1]
        items = list(d[key].items())
        order = draw(st.permutations(range(len(items))))
        d[key] = {items[i][0]: items[i][1] for i in order}  # any order loads: dims may refer forward
    elif edit == "inline":
        derived = [n for n, v in d["dims"].items() if isinstance(v, str)]
        name = draw(st.sampled_from(derived))
        for f in d["fields"].values():
            f["shape"] = [f"({d['dims'][name]})" if s == name else s for s in f["shape"]]
    elif edit == "name":
        d["dims"]["named"] = d["fields"]["f0"]["shape"][0] if d["fields"]["f0"]["shape"][0] not in d["dims"] else "a"
        if d["fields"]["f0"]["shape"][0] not in d["dims"] or d["fields"]["f0"]["shape"][0] == "named":
            d["fields"]["f0"]["shape"] = ["named"]
    elif edit == "drop" and len(d["fields"]) > 1:
        del d["fields"][draw(st.sampled_from(sorted(d["fields"])))]
    elif edit == "optional":
        d["fields"][draw(st.sampled_from(sorted(d["fields"])))]["required"] = False
    return d


def _valid_pairs(data, src: ts.Schema, draws: int = 4, *, dims: dict | None = None, max_len: int = 4):
    """Samples drawn for ``src`` that ``src`` accepts, with ``dims`` when given (bounds in them checked);
    the strategy covers most binding schemes, not all."""
    try:
        strategy = samples(src, max_len=max_len, dims=dims)
    except ValueError:
        return
    for _ in range(draws):
        try:
            sample = data.draw(strategy)
        except ValueError:
            return
        if src.violations(sample, dims=dims, depth="values") == []:
            yield sample


# Only a few percent of these edits really change what binding accepts: twice the profile examples.
@settings(SETTINGS, max_examples=2 * settings().max_examples)
@given(data=st.data())
def test_binding_edits_reported_compatible_keep_samples_valid(data):
    base = data.draw(binding_dicts())
    try:
        old = load(base)
        new = load(dict(data.draw(rebind(base)), name="rebound"))
    except ts.SchemaDefinitionError:
        return  # e.g. a derived dim that is negative for every size
    changes = old.compatibility(new, "full")
    for src, tgt, flag in ((old, new, "backward_breaking"), (new, old, "forward_breaking")):
        if not any(getattr(c, flag) for c in changes):
            for sample in _valid_pairs(data, src):
                assert tgt.violations(sample) == [], (sample, [str(c) for c in changes])


# Inline expressions with one key (``p + r``, ``r + p``) are distinct derived dims, bound in
# field order: reordering the fields changes which one a field observes, and what is solved.
INLINE = ["p + r", "r + p", "2 * r", "r + r", "p", "r", "p + 1", "1 + p"]


@st.composite
def inline_dicts(draw) -> dict:
    # Always two spellings of one sum and one field that gives a summand alone, then others.
    shapes = draw(st.permutations(["p + r", "r + p", draw(st.sampled_from(INLINE[2:6]))]))
    shapes += draw(st.lists(st.sampled_from(INLINE), max_size=1))
    fields = {
        f"f{i}": {"shape": [s], "dtype": "int64", "pad": "copy", "required": draw(st.booleans())}
        for i, s in enumerate(shapes)
    }
    return {"name": "base", "dims": {"p": {}, "r": {}}, "fields": fields}


@settings(SETTINGS)
@given(data=st.data())
def test_reordering_fields_over_inline_expressions_is_judged_by_binding(data):
    base = data.draw(inline_dicts())
    items = list(base["fields"].items())
    order = data.draw(st.permutations(range(len(items))))
    old = load(base)
    new = load(dict(base, name="reordered", fields={items[i][0]: items[i][1] for i in order}))
    changes = old.compatibility(new, "full")
    for src, tgt, flag in ((old, new, "backward_breaking"), (new, old, "forward_breaking")):
        if not any(getattr(c, flag) for c in changes):
            for sample in _valid_pairs(data, src, draws=8):
                assert tgt.violations(sample) == [], (sample, [str(c) for c in changes])


# -- issue 16: bounds in dims and distinct ------------------------------------------------------

# Over dims the samples bind (p, r, seq), the fixed k (folded to a number) and a dim no field
# uses (e: checked only under dims=, where the verdicts must hold too).
DIM_BOUNDS = [None, "p", "p + 1", "r - 1", "seq", "k", "k - 1", "2 * p", "p - r", "e - 1", "e"]


def _hand(schema: ts.Schema, name: str, **changes) -> ts.Schema:
    import dataclasses

    from trajschema.core import FreeDim, parse_expr

    for side in ("min_expr", "max_expr"):
        if isinstance(changes.get(side), str):
            changes[side] = parse_expr(changes[side])
    return ts.Schema(
        name=name,
        description="",
        architectures=(),
        lineage=(name,),
        dims={**schema.dims, "e": FreeDim("e", 1, 6)},
        fields={**schema.fields, "a": dataclasses.replace(schema.fields["a"], **changes)},
        tags=schema.tags,
        padding_sizes=schema.padding_sizes,
        extra=schema.extra,
        source="<test>",
    )


@st.composite
def value_decls(draw, rank: int) -> dict:
    out = {"min_expr": draw(st.sampled_from(DIM_BOUNDS)), "max_expr": draw(st.sampled_from(DIM_BOUNDS))}
    out["distinct"] = rank > 0 and draw(st.booleans())
    return out


@SETTINGS
@given(data=st.data())
def test_bounds_in_dims_and_distinct_verdicts_hold_on_samples(data):
    """Every direction reported compatible keeps samples valid, with e given (dims=) or not."""
    base = load(data.draw(schema_dicts()))
    rank = len(base.fields["a"].shape or ())
    try:
        old = _hand(base, "old", **data.draw(value_decls(rank)))
        new = _hand(base, "new", **data.draw(value_decls(rank)))
    except (ValueError, TypeError):  # a field the front door refuses (no value left, say)
        return
    changes = old.compatibility(new, "full")
    assert all(c.kind in CHANGE_KINDS for c in changes)
    dims = data.draw(st.sampled_from([{}, {"e": data.draw(st.integers(1, 6))}]))
    for src, tgt, flag in ((old, new, "backward_breaking"), (new, old, "forward_breaking")):
        if not any(getattr(c, flag) for c in changes):
            for sample in _valid_pairs(data, src, dims=dims, max_len=5):
                assert tgt.violations(sample, dims=dims, depth="values") == [], (sample, [str(c) for c in changes])
