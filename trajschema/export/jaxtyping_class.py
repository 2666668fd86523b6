"""A schema as the Python source of a checked sample class: ``trajschema export NAME --format jaxtyping``.

For schema ``text`` the source defines

* ``TextSample``, a frozen, keyword-only dataclass decorated with
  ``@jaxtyped(typechecker=beartype)``. jaxtyping checks a dataclass's fields as the
  parameters of one call, so building one checks every field it declares: presence (a
  required field has no default), each tensor's dtype and shape, the Python type of the
  other fields, and the dims the fields share, ``seq = prompt + response`` included;
* ``check_text(sample)``, which builds a ``TextSample`` from one sample dict, naming every
  required field missing at once, and every key the schema does not declare when its
  ``extra`` is ``forbid`` (else such keys are left out). Optional fields left out are ``None``.

Why not a TypedDict of the same annotations, which this export printed before: beartype
checks a TypedDict argument only for being a ``dict``, never its values, so
``@jaxtyped(typechecker=beartype) def f(sample: TextSample)`` took ``{}`` and float
tensors. The per-argument form, a function whose parameters carry
[`Schema.annotations`][trajschema.Schema.annotations], is checked as well, and stays the
way to annotate a function that takes some of the fields.

Axes are those of [`Schema.annotations`][trajschema.Schema.annotations] but for one
difference: the class holds every field at once, so a derived dim is written as
jaxtyping's symbolic axis (``"prompt+response"``) wherever every name in it is bound by a
required tensor field before it; the required tensor fields come first for that reason.
What no annotation can say is checked by the class's ``__post_init__``: the bounds of
free dims (``min``, ``max``, ``multiple_of``), and each axis whose dims are bound only by
an optional field or a later one. The element checks (``values``, an element's ``min`` /
``max``, ``finite``, ``distinct``) are [`validate`][trajschema.Schema.validate]'s.

Non-tensor kinds become types beartype checks as trajschema does: ``int`` an integral
number or a 0-d integer tensor, never a ``bool``; ``float`` a real number or a 0-d real
tensor; ``mapping`` any ``Mapping``. A field whose key is not a Python name gets an
attribute that is (``a-b`` -> ``a_b``); ``check_<name>`` maps keys to attributes.
"""

from __future__ import annotations

import keyword
import re
import unicodedata
from typing import TYPE_CHECKING, Any

from trajschema.core import DerivedDim, Expr, FreeDim
from trajschema.export.jaxtyping import JAXTYPING_DTYPE, AxisNames, symbolic_axis

if TYPE_CHECKING:
    from trajschema.check import Plan

__all__ = ["jaxtyping_source"]

#: Each non-tensor kind's type in the source.
_KIND_TYPES = {
    "int": "IntKind",
    "float": "FloatKind",
    "bool": "BoolKind",
    "str": "str",
    "mapping": "Mapping[Any, Any]",
    "any": "AnyKind",
}
#: The kinds the source defines: each one's union, and the jaxtyping names it uses.
_KIND_DEFS = {
    "IntKind": (
        'Annotated[numbers.Integral, _NOT_BOOL] | Int[torch.Tensor, ""] | UInt[torch.Tensor, ""]',
        ("Int", "UInt"),
    ),
    "FloatKind": ('Annotated[numbers.Real, _NOT_BOOL] | Real[torch.Tensor, ""]', ("Real",)),
    "BoolKind": ('bool | Bool[torch.Tensor, ""]', ("Bool",)),
    "AnyKind": ("Annotated[object, Is[lambda v: v is not None]]", ()),
}
_KIND_COMMENT = (
    "# trajschema's kinds as types beartype checks: an int is an integral number or a 0-d integer\n"
    "# tensor, never a bool; a float is a real number (a bool is none) or a 0-d real tensor; any\n"
    "# value is one that is not None (a None counts as absent).\n"
)
_NOT_BOOL = "_NOT_BOOL = Is[lambda v: not isinstance(v, bool)]"

#: The helpers a ``__post_init__`` calls.
_HELPERS = '''\
def _sizes(sample: Any, places: dict[str, list[tuple[str, int]]]) -> dict[str, int]:
    """Each size, read at the first (attribute, axis) holding a tensor with that axis; others left out."""
    out = {}
    for name, where in places.items():
        for attr, axis in where:
            value = getattr(sample, attr)
            if isinstance(value, torch.Tensor) and value.dim() > axis:
                out[name] = int(value.shape[axis])
                break
    return out


def _rule(sample: Any, sizes: dict[str, int], rule: str, holds: Any) -> None:
    """Raise TypeCheckError when ``holds()`` is false; a rule over a size not read is skipped."""
    try:
        ok = holds()
    except KeyError:
        return
    if not ok:
        found = ", ".join(f"{k}={v}" for k, v in sizes.items())
        raise TypeCheckError(f"{type(sample).__name__}: {rule} does not hold ({found})")'''

#: Names the source may define or import besides the per-schema ones: no attribute takes them.
_SOURCE_NAMES = frozenset(
    {"dataclasses", "numbers", "torch", "beartype", "jaxtyped", "Mapping", "Annotated", "Any"}
    | {"Is", "TypeCheckError", "AbstractDtype", "Int", "UInt", "Real", "Bool", "_NOT_BOOL", "_sizes", "_rule"}
    | {*_KIND_DEFS, *JAXTYPING_DTYPE.values(), "self"}
)


def jaxtyping_source(plan: Plan) -> str:
    """Python source of a checked dataclass of ``schema``'s fields, and of a function building it from a dict.

    What ``trajschema export NAME --format jaxtyping`` prints; the docstring of
    `trajschema.export.jaxtyping_class` says what it checks. The source imports only
    ``dataclasses``, ``numbers``, ``collections.abc``, ``typing``, ``torch``, ``beartype``
    and ``jaxtyping``.

    Examples:
        >>> source = jaxtyping_source(ts.load_schema("text").plan)
        >>> [line.strip() for line in source.splitlines() if line.strip().startswith("input_ids:")]
        ['input_ids: Int64[torch.Tensor, "prompt+response"]']
        >>> namespace = {}
        >>> exec(source, namespace)
        >>> namespace["check_text"]({"prompts": torch.zeros(3, dtype=torch.int64)})  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        TypeError: check_text: the sample has no 'responses', 'input_ids', ... (schema 'text' requires them)
    """
    src = _Source(plan)
    blocks = [*src.defs, *([_HELPERS] if src.rules else []), "\n".join(src.class_lines()), *src.check_function_blocks()]
    # isort leaves one blank line between the imports and a statement, two before a class or def.
    after_imports = "\n\n\n" if blocks[0].startswith(("class ", "def ", "@")) else "\n\n"
    return "\n".join(src.header_lines()) + after_imports + "\n\n\n".join(blocks) + "\n"


class _Source:
    """One schema's source, in parts: names, imports, definitions, field types and size rules."""

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self.names = AxisNames(plan)
        self.cls = _class_name(plan.name)
        snake = "_".join(w.lower() for w in re.split(r"[^0-9A-Za-z]+", plan.name) if w) or "sample"
        self.fn, self.keys, self.required = f"check_{snake}", f"_{snake.upper()}_KEYS", f"_{snake.upper()}_REQUIRED"
        self.imports: dict[str, set[str]] = {"collections.abc": {"Mapping"}, "typing": {"Any"}}
        self.imports |= {"beartype": {"beartype"}, "jaxtyping": {"jaxtyped"}}
        self.defs: list[str] = []
        binders = [f for f in plan.fields.values() if f.is_tensor and f.required]
        self.order = binders + [f for f in plan.fields.values() if f not in binders]
        self.dim_strs, loose = self._axes()
        self.types = {f.name: self._type(f) for f in self.order}
        taken = set(_SOURCE_NAMES) | {self.cls, self.fn, self.keys, self.required}
        taken |= {d.split("(")[0].removeprefix("class ") for d in self.defs}
        self.attrs = _attributes([f.name for f in self.order], taken)
        self.places = self._places()
        self.rules = self._bound_rules() + [r for r in (self._axis_rule(*x) for x in loose) if r is not None]

    # -- axes ---------------------------------------------------------------------------

    def _axes(self) -> tuple[dict[str, str], list[tuple[Any, int, Expr]]]:
        """Each tensor field's dim string, and the axes jaxtyping cannot relate (for ``__post_init__``)."""
        bound: set[str] = set()  # dims a named axis of an earlier required tensor field binds
        dim_strs, loose = {}, []
        for f in self.order:
            if not f.is_tensor:
                continue
            local, axes = set(bound), []
            for i, e in enumerate(f.shape or ()):
                text, exact = self._axis(e, local)
                axes.append(text)
                if not exact:
                    loose.append((f, i, e))
                if e.is_name and text == self.names.names[e.args[0]]:
                    local.add(e.args[0])
            bound = local if f.required else bound
            dim_strs[f.name] = " ".join(axes)
        return dim_strs, loose

    def _axis(self, e: Expr, bound: set[str]) -> tuple[str, bool]:
        """An axis as jaxtyping writes it, and whether jaxtyping checks it exactly."""
        folded = e.evaluate(self.names.fixed)
        if isinstance(folded, int):
            return str(folded), True
        derived = e.is_name and isinstance(self.names.dims[e.args[0]], DerivedDim)
        if e.is_name and not derived:
            return self.names.names[e.args[0]], True
        symbolic = symbolic_axis(e, self.names, bound, top=True)
        if symbolic is not None:
            return symbolic, True
        return (self.names.names[e.args[0]], False) if derived else ("_", False)

    # -- what __post_init__ checks ------------------------------------------------------

    def _places(self) -> dict[str, list[tuple[str, int]]]:
        """Where each free dim's size is read: a required field's axis, else every optional one's."""
        required: dict[str, list[tuple[str, int]]] = {}
        optional: dict[str, list[tuple[str, int]]] = {}
        for f in self.order:
            for i, e in enumerate(f.shape or () if f.is_tensor else ()):
                if e.is_name and isinstance(self.names.dims[e.args[0]], FreeDim):
                    (required if f.required else optional).setdefault(e.args[0], []).append((self.attrs[f.name], i))
        places = {n: required[n][:1] if n in required else optional[n] for n in {**required, **optional}}
        return {n: places[n] for n in self.names.dims if n in places}

    def _bound_rules(self) -> list[tuple[str, str]]:
        """``(rule, condition)`` for each bound of a free dim whose size some axis shows."""
        out = []
        for n in self.places:
            d, v = self.names.dims[n], f"n[{_py_str(n)}]"
            if d.min > 0:
                out.append((f"{n} >= {d.min}", f"{v} >= {d.min}"))
            if d.max is not None:
                out.append((f"{n} <= {d.max}", f"{v} <= {d.max}"))
            if d.multiple_of is not None and d.multiple_of > 1:
                out.append((f"{n} % {d.multiple_of} == 0", f"{v} % {d.multiple_of} == 0"))
        return out

    def _axis_rule(self, f: Any, i: int, e: Expr) -> tuple[str, str] | None:
        """The rule an axis jaxtyping cannot relate must keep, when every free dim in it is read somewhere."""
        size = self._size_expr(e)
        if size is None:
            return None
        key = f"{f.name} axis {i}"
        self.places[key] = [(self.attrs[f.name], i)]
        said = f"{e} = {self.names.dims[e.args[0]].expr}" if e.is_name else str(e)
        return f"{key} == {said}", f"n[{_py_str(key)}] == {size}"

    def _size_expr(self, e: Expr) -> str | None:
        """``e`` as Python over the sizes read (``n["prompt"] + n["response"]``), or ``None``."""
        folded = e.evaluate(self.names.fixed)
        if isinstance(folded, int):
            return str(folded) if folded >= 0 else f"({folded})"
        if e.is_name:
            d = self.names.dims[e.args[0]]
            if isinstance(d, DerivedDim):
                return self._size_expr(d.expr)  # an operation comes parenthesized
            return f"n[{_py_str(e.args[0])}]" if e.args[0] in self.places else None
        parts = [self._size_expr(a) for a in e.args]
        if any(p is None for p in parts):
            return None
        return f"-{parts[0]}" if e.op == "neg" else f"({parts[0]} {e.op} {parts[1]})"

    # -- types and imports --------------------------------------------------------------

    def _use(self, module: str, *names: str) -> None:
        self.imports.setdefault(module, set()).update(names)

    def _define(self, text: str) -> None:
        if text not in self.defs:
            self.defs.append(text)

    def _type(self, f: Any) -> str:
        """The field's type in the source (``... | None`` when it may be left out)."""
        if f.is_tensor:
            dtypes = self._dtype(f.dtype_names)
            text = f"{dtypes}[torch.Tensor, {_py_str(self.dim_strs[f.name])}]"
        else:
            text = _KIND_TYPES[f.kind]
            if text in _KIND_DEFS:
                self._kind(text)
        return text if f.required else f"{text} | None"

    def _kind(self, name: str) -> None:
        union, jaxtyping_names = _KIND_DEFS[name]
        for needed, module, imported in (("Annotated[", "typing", "Annotated"), ("Is[", "beartype.vale", "Is")):
            if needed in union or "_NOT_BOOL" in union:
                self._use(module, imported)
        if "numbers." in union:
            self._use("numbers")
        self._use("jaxtyping", *jaxtyping_names)
        comment = "" if any(d.startswith(_KIND_COMMENT) for d in self.defs) else _KIND_COMMENT
        if "_NOT_BOOL" in union and _NOT_BOOL not in "".join(self.defs):
            self._define(comment + _NOT_BOOL)
            comment = ""
        self._define(comment + f"{name} = {union}")

    def _dtype(self, dtypes: tuple[str, ...]) -> str:
        """The name of a dtype set in the source, defining its class when it lists several."""
        names = [JAXTYPING_DTYPE[d] for d in dtypes]
        if len(names) == 1:
            self._use("jaxtyping", names[0])
            return names[0]
        cls = "Or".join(names)  # the class `_dtype_class` makes, under a name Python can spell
        listed = ", ".join(_py_str(d) for d in dtypes)
        self._define(f"class {cls}(AbstractDtype):\n    dtypes = ({listed})")
        self._use("jaxtyping", "AbstractDtype")
        return cls

    # -- the source ---------------------------------------------------------------------

    def header_lines(self) -> list[str]:
        name = self.plan.name
        lines = [
            f"# The checked sample class of trajschema schema {name!r}: building a {self.cls} (or",
            f"# calling {self.fn}) checks every field's presence, type, dtype and shape, and the dims",
            "# the fields share, with jaxtyping and beartype; values are Schema.validate's.",
            f"# Generated by `trajschema export {name} --format jaxtyping`; regenerate it when the schema changes.",
            "",
        ]
        if self.rules:
            self._use("jaxtyping", "TypeCheckError")
        plain = ["dataclasses"] + (["numbers"] if "numbers" in self.imports else [])
        lines += [f"import {m}" for m in plain]
        lines += [f"from {m} import {', '.join(sorted(self.imports[m]))}" for m in ("collections.abc", "typing")]
        lines += ["", "import torch"]
        for m in ("beartype", "beartype.vale", "jaxtyping"):
            if self.imports.get(m):
                lines.append(f"from {m} import {', '.join(sorted(self.imports[m], key=_import_order))}")
        return lines

    def class_lines(self) -> list[str]:
        lines = [
            "@jaxtyped(typechecker=beartype)",
            "@dataclasses.dataclass(frozen=True, kw_only=True, eq=False)",
            f"class {self.cls}:",
            f'    """One sample of schema {self.plan.name!r}, checked when built; see {self.fn}."""',
            "",
        ]
        for f in self.order:
            attr = self.attrs[f.name]
            note = "" if attr == f.name else f"  # the key {_py_str(f.name)}"
            lines.append(f"    {attr}: {self.types[f.name]}{'' if f.required else ' = None'}{note}")
        if self.rules:
            lines += [
                "",
                "    def __post_init__(self) -> None:",
                "        # What no annotation can say: dim bounds, and axes no earlier required field binds.",
                "        n = _sizes(",
                "            self,",
                "            {",
                *(f"                {_py_str(k)}: {_places_source(v)}," for k, v in self.places.items()),
                "            },",
                "        )",
                *(f"        _rule(self, n, {_py_str(rule)}, lambda: {cond})" for rule, cond in self.rules),
            ]
        return lines

    def check_function_blocks(self) -> list[str]:
        """The key table and ``check_<name>``: a sample dict in, a checked class out."""
        keys = "".join(f"    {_py_str(f.name)}: {_py_str(self.attrs[f.name])},\n" for f in self.order)
        required = "".join(f"    {_py_str(f.name)},\n" for f in self.plan.fields.values() if f.required)
        constants = (
            "#: Each key of a sample and the attribute holding it; the keys a sample must have.\n"
            f"{self.keys} = {{\n{keys}}}\n{self.required} = (\n{required})"
        )
        forbid = self.plan.extra == "forbid"
        schema = _in_fstring(repr(self.plan.name))
        fn = self.fn
        lines = [
            f"def {fn}(sample: Mapping[str, Any]) -> {self.cls}:",
            f'    """One sample dict as a checked {self.cls}; keys schema {schema} does not declare are '
            + ("refused." if forbid else "left out."),
            "",
            "    Raises:",
            "        TypeError: not a mapping, or required fields missing"
            + (", or undeclared keys" if forbid else "")
            + " (all of them named).",
            "        jaxtyping.TypeCheckError: (a TypeError) a field's type, dtype or shape, or a size rule.",
            '    """',
            "    if not isinstance(sample, Mapping):",
            "        found = type(sample).__name__",
            f'        raise TypeError(f"{fn}: a sample maps field names to values, found {{found}}")',
            f"    missing = [k for k in {self.required} if sample.get(k) is None]  # a None counts as absent",
            "    if missing:",
            '        names = ", ".join(map(repr, missing))',
            f'        raise TypeError(f"{fn}: the sample has no {{names}} (schema {schema} requires them)")',
            *(_FORBID.format(fn=fn, schema=schema, keys=self.keys).splitlines() if forbid else []),
            f"    values = {{attr: sample[key] for key, attr in {self.keys}.items() if key in sample}}",
            f"    return {self.cls}(**values)",
        ]
        return [constants, "\n".join(lines)]


#: How ``check_<name>`` refuses the keys a schema with ``extra: forbid`` does not declare.
_FORBID = """\
    unknown = [k for k in sample if k not in {keys}]
    if unknown:
        found = ", ".join(repr(k[:40]) if isinstance(k, str) else type(k).__name__ for k in unknown[:5])
        found += f" and {{len(unknown) - 5}} more" if len(unknown) > 5 else ""
        raise TypeError(f"{fn}: schema {schema} forbids keys it does not declare; found {{found}}")"""


def _places_source(places: list[tuple[str, int]]) -> str:
    return "[" + ", ".join(f"({_py_str(attr)}, {axis})" for attr, axis in places) + "]"


def _import_order(name: str) -> tuple[bool, str]:
    """isort's order within one ``from`` import: classes and constants before functions."""
    return (name[:1].islower(), name)


def _attributes(keys: list[str], taken: set[str]) -> dict[str, str]:
    """Each field key's attribute: the key itself when Python reads it as that name, else a spelling that is."""
    out: dict[str, str] = {}
    for key in keys:
        attr = unicodedata.normalize("NFKC", key)
        attr = re.sub(r"\W", "_", attr)
        if attr.startswith("__"):  # a private name is mangled, a dunder may be the dataclass's own
            attr = "f" + attr
        if not attr.isidentifier() or unicodedata.normalize("NFKC", attr) != attr:
            attr = f"field_{len(out)}"
        while keyword.iskeyword(attr) or attr in taken:
            attr += "_"
        taken.add(attr)
        out[key] = attr
    return out


def _py_str(text: str) -> str:
    return f'"{text}"' if text.isprintable() and '"' not in text and "\\" not in text else repr(text)


def _in_fstring(text: str) -> str:
    """``text`` as it stays itself inside a double-quoted f-string."""
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("{", "{{").replace("}", "}}")


def _class_name(schema_name: str) -> str:
    words = [w for w in re.split(r"[^0-9A-Za-z]+", schema_name) if w]
    name = "".join(w[0].upper() + w[1:] for w in words) + "Sample"
    return name if name[0].isalpha() else "Schema" + name
