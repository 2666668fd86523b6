"""A schema as a pandera ``TensorDictSchema``: ``trajschema export NAME --format pandera``.

pandera 0.35 validates TensorDicts (``pandera.tensordict``): a ``TensorDictSchema`` of
``Tensor(dtype, shape, checks)`` entries, a shape's sizes ints or ``None`` for any size.
The export describes a TensorDict of samples (or, with a layout, a dense padded batch:
see `trajschema.export.columns`) and says, of each required field:

* that it is present (pandera requires every key it lists, so optional fields are not
  listed: their dtype and shape go unchecked);
* its dtype, when the schema allows one (a dtype set, ``[int16, int32, ...]``, becomes
  any dtype) and, for a tensor, its rank and every size the schema alone decides (a
  literal, a fixed dim); a number kind (``int``, ``float``, ``bool``) is a ``(B,)``
  column of any dtype;
* its value checks, as pandera's built-in checks: ``values`` -> ``Check.isin``, literal
  ``min`` / ``max`` -> ``Check.ge`` / ``Check.le``, ``finite`` -> ``Check.in_range``
  open at both infinite ends (which NaN and the infinities break). Built-in checks
  survive pandera's ``to_yaml`` / ``to_json``; bounds are compared as torch compares a
  tensor with a Python number.

What it cannot say, the header comment of the source lists by kind, with what the tests
measured: dims shared across fields (pandera's sizes are ints or ``None``),
``seq = prompt + response``, dim bounds, dtype sets, bounds written in dims, ``distinct``,
``str`` / ``mapping`` / ``any`` fields (a ``NonTensorStack``, not a tensor), tags, and
TensorDicts of samples of different sizes (jagged columns: pandera has no nested tensors).
Every check it does state, it states exactly as trajschema does: a sample trajschema
accepts, it accepts.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from trajschema.export.columns import (
    Column,
    TensorDictColumns,
    ValueCheck,
    header_gaps,
    needs,
    python_name,
    tensordict_columns,
    wrapped,
)
from trajschema.export.measured import measured_lines

if TYPE_CHECKING:
    from trajschema.check import Plan

__all__ = ["pandera_schema", "pandera_source"]

#: The first pandera with ``pandera.tensordict``.
PANDERA_VERSION = (0, 35)
_WHAT = "the pandera export (trajschema export --format pandera, Schema.to_pandera)"


def pandera_schema(plan: Plan, bound: Any = None) -> Any:
    """``schema`` as a ``pandera.tensordict.TensorDictSchema`` object (what `pandera_source` writes, built).

    ``bound``: a dense layout fitted to the schema (`trajschema.dense.bind_layout`), or
    ``None`` for a TensorDict of samples.

    Examples:
        >>> checker = ts.load_schema("text").to_pandera()
        >>> checker.keys["response_mask"]
        Tensor(dtype=torch.int64, shape=(None, None))

    Raises:
        ImportError: pandera 0.35 or newer is not installed.
    """
    needs("pandera", PANDERA_VERSION, _WHAT)
    import torch
    from pandera.api.checks import Check
    from pandera.tensordict import Tensor, TensorDictSchema

    cols = tensordict_columns(plan, bound)
    keys: dict[str | tuple[str, ...], Tensor] = {}
    for c in cols.pandera_keys():
        checks = [getattr(Check, k.method)(*k.args, **dict(k.kwargs)) for k in c.checks]
        dtype = getattr(torch, c.dtype) if c.dtype is not None else None
        keys[c.key] = Tensor(dtype=dtype, shape=c.shape, checks=checks or None)
    return TensorDictSchema(keys=keys, batch_size=(None,), name=plan.name, metadata=_metadata(cols))


def _metadata(cols: TensorDictColumns) -> dict[str, Any]:
    """What the schema object carries of its origin: the trajschema schema, its layout, what it leaves out."""
    origin: dict[str, Any] = {"schema": cols.schema}
    if cols.layout is not None:
        origin["layout"] = cols.layout
    origin["unchecked"] = {k: list(v) for k, v in cols.gaps.items()}
    return {"trajschema": origin}


def pandera_source(plan: Plan, bound: Any = None) -> str:
    """Python source that builds `pandera_schema`'s object, headed by what it leaves to trajschema.

    Examples:
        >>> source = pandera_source(ts.load_schema("text").plan)
        >>> print(source[source.index("TEXT_SCHEMA = "):].splitlines()[4])
                "input_ids": Tensor(dtype=torch.int64, shape=(None, None)),

    Raises:
        ImportError: pandera 0.35 or newer is not installed (the source would not run).
    """
    needs("pandera", PANDERA_VERSION, _WHAT)
    cols = tensordict_columns(plan, bound)
    var = python_name(plan.name).upper() + "_SCHEMA"
    keys = [f"        {_literal(c.key)}: {_tensor(c)}," for c in cols.pandera_keys()]
    lines = _header(cols, var)
    lines += ["import math", ""] if any("math." in k for k in keys) else []
    lines += [
        "import torch",
        "from pandera.api.checks import Check",
        "from pandera.tensordict import Tensor, TensorDictSchema",
    ]
    lines += ["", f"{var} = TensorDictSchema(", "    keys={"]
    lines += keys
    # JSON of strings, lists and dicts is a Python literal too (no null: a missing layout is left out).
    metadata = json.dumps(_metadata(cols), indent=4, ensure_ascii=False).replace("\n", "\n    ")
    lines += ["    },", "    batch_size=(None,),", f"    name={_literal(plan.name)},", f"    metadata={metadata},", ")"]
    return "\n".join(lines) + "\n"


def _header(cols: TensorDictColumns, var: str) -> list[str]:
    where = f"the dense batch of layout {cols.layout!r}" if cols.layout else "a TensorDict of samples"
    command = f"trajschema export {cols.schema} --format pandera" + (f" --layout {cols.layout}" if cols.layout else "")
    lines = [
        *wrapped(f"# {var}: trajschema schema {cols.schema!r} as a pandera TensorDictSchema, for {where}.", "# "),
        f"# Generated by `{command}`;",
        "# regenerate it when the schema changes.",
        f"# {var}.validate(td, lazy=True) checks each required field's presence, dtype (where the",
        "# schema allows one), rank and the sizes the schema fixes, and the value checks values / min /",
        "# max / finite. Only trajschema (schema.validate, schema.validate_batch) checks:",
        *header_gaps(cols),
    ]
    return lines + measured_lines("pandera", cols) + [""]


def _literal(text: str) -> str:
    """``text`` as a double-quoted Python string literal (JSON's escapes are Python's)."""
    return json.dumps(text, ensure_ascii=False)


def _tensor(c: Column) -> str:
    parts = [f"dtype=torch.{c.dtype}"] if c.dtype is not None else []
    parts.append(f"shape={c.shape!r}")
    if c.checks:
        parts.append(f"checks=[{', '.join(_check(k) for k in c.checks)}]")
    return f"Tensor({', '.join(parts)})"


def _check(k: ValueCheck) -> str:
    args = [_number(a) for a in k.args] + [f"{n}={_number(v)}" for n, v in k.kwargs]
    return f"Check.{k.method}({', '.join(args)})"


def _number(v: Any) -> str:
    """A check's argument as Python source: a list, a number (``math.inf`` for an infinity), a bool."""
    if isinstance(v, list):
        return "[" + ", ".join(_number(x) for x in v) + "]"
    if isinstance(v, float) and v != v:
        return "math.nan"
    if isinstance(v, float) and v in (float("inf"), float("-inf")):
        return "math.inf" if v > 0 else "-math.inf"
    return repr(v)
