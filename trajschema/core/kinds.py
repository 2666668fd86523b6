"""What kind a value is (``int``, ``float``, ``bool``, ``str``, ``mapping``, ``any``) and how reports name it."""

from __future__ import annotations

import numbers
import reprlib
from collections.abc import Mapping, Sequence
from typing import Any

from trajschema.core.dtypes import as_dtype, is_tensor, short_dtype
from trajschema.core.scalars import is_int, is_real

__all__ = ["REPR", "describe_value", "fmt_shape", "kind_ok", "kinds_ok", "scalar_dtype_ok", "shown_value"]

# Exact types accepted without the (slower) abstract-class checks below.
_PLAIN_TYPES: dict[str, set[type]] = {
    "int": {int},
    "float": {float, int},
    "bool": {bool},
    "str": {str},
    "mapping": {dict},
}


def kind_ok(kind: str, v: Any, *, tensors: bool = True) -> bool:
    """Whether ``v`` is of ``kind``; ``tensors=False`` refuses 0-d tensors (for tag dicts).

    A 0-d tensor is a scalar: it is what a dense ``(B,)`` column yields per row.
    """
    if kind == "any":
        return True
    if is_tensor(v):
        return tensors and _tensor_kind_ok(kind, v)
    if kind == "int":
        return is_int(v)
    if kind == "float":
        return is_real(v)
    if kind == "bool":
        return isinstance(v, bool)
    if kind == "str":
        return isinstance(v, str)
    if kind == "mapping":
        return isinstance(v, Mapping)
    raise AssertionError(kind)


def _tensor_kind_ok(kind: str, v: Any) -> bool:
    import torch  # loaded: `v` is a tensor

    if v.is_nested or v.layout != torch.strided or v.dim() != 0:
        return False
    return scalar_dtype_ok(kind, v.dtype)


def scalar_dtype_ok(kind: str, dtype: Any) -> bool:
    """Whether a 0-d tensor of ``dtype`` (a ``torch.dtype``, a name or a `DType`) is a value of ``kind``.

    Examples:
        >>> scalar_dtype_ok("int", "int16"), scalar_dtype_ok("int", "bool"), scalar_dtype_ok("float", "int64")
        (True, False, True)
    """
    if kind == "any":
        return True
    d = as_dtype(dtype)
    if kind == "int":
        return not d.is_floating_point and not d.is_complex and not d.is_bool
    if kind == "float":
        return not d.is_bool and not d.is_complex
    return kind == "bool" and d.is_bool


def kinds_ok(kind: str, values: Sequence[Any]) -> bool:
    """Whether every value is of ``kind`` (``None`` counts as absent), fast for plain types."""
    plain = _PLAIN_TYPES.get(kind)
    if kind == "any" or (plain is not None and set(map(type, values)) <= plain | {type(None)}):
        return True
    return all(v is None or kind_ok(kind, v) for v in values)


#: A bounded repr for messages: a message never grows with the value it shows.
REPR = reprlib.Repr()
REPR.maxstring = REPR.maxother = 60
REPR.maxlist = REPR.maxtuple = REPR.maxdict = REPR.maxset = 6
REPR.maxlevel = 3


def describe_value(v: Any) -> str:
    """``i16[41,4,2]`` for a tensor, the type name (and a short repr) otherwise; never the contents.

    Never raises: it writes error messages, and a hostile value (a ``__len__`` or
    ``__repr__`` that raises) must not replace the error being reported with its own.
    """
    try:
        return _describe(v)
    except Exception:  # any failure of the value's own methods: fall back to its type
        return _type_name(v)


def shown_value(v: Any) -> str:
    """``repr(v)`` for an argument named in an error message when it is short; else `describe_value`.

    A long repr (a list of a million ints) would bury the message, and a hostile
    ``__repr__`` that raises would replace it.
    """
    try:
        text = repr(v)
    except Exception:  # the value's own __repr__ failed: say what it is instead
        return describe_value(v)
    return text if isinstance(text, str) and len(text) <= 80 else describe_value(v)


def _describe(v: Any) -> str:
    if is_tensor(v):
        import torch  # loaded: `v` is a tensor

        if v.is_nested:
            layout = "jagged" if v.layout == torch.jagged else "strided"
            return f"{short_dtype(v.dtype)} {layout} nested tensor of {v.size(0)}"
        layout = "" if v.layout == torch.strided else f" {str(v.layout).removeprefix('torch.')}"
        return f"{short_dtype(v.dtype)}[{','.join(str(s) for s in v.shape)}]{layout}"
    if isinstance(v, (bool, numbers.Number)):
        return f"{_type_name(v)} {_clip_repr(v)}"
    if isinstance(v, str):
        return f"str {_clip_repr(v)}"
    if isinstance(v, Mapping):
        return f"{type(v).__name__} with {len(v)} keys"
    if isinstance(v, (list, tuple)):
        return f"{type(v).__name__} of {len(v)}"
    return _type_name(v)


def _type_name(v: Any) -> str:
    """``int``, but ``numpy.bool`` for a numpy bool (which would otherwise read as a Python bool)."""
    t = type(v)
    module = getattr(t, "__module__", None)
    if not isinstance(module, str) or module == "builtins":  # a class may set __module__ to anything
        return t.__name__
    return f"{module.split('.')[0]}.{t.__name__}"


def _clip_repr(v: Any, n: int = 40) -> str:
    r = repr(v)
    return r if len(r) <= n else r[: n - 4] + "...'"


def fmt_shape(shape: Sequence[int]) -> str:
    """``(3, 4)``, ``(3,)``, ``()``."""
    return "(" + ", ".join(str(s) for s in shape) + ("," if len(shape) == 1 else "") + ")"
