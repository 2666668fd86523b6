"""Test assertions: a sample or batch follows its schema, and a function ignores schema padding.

Both helpers raise ``AssertionError`` with a readable report when the property does not
hold, and ``TypeError``/``ValueError`` for bad arguments (so a broken test is never
mistaken for a failing one). Their frames are hidden from pytest tracebacks
(``__tracebackhide__``); the ``trajschema`` pytest plugin registers this module for
assertion rewriting. Import them from `trajschema.testing`.
"""

from __future__ import annotations

import fractions
import math
import numbers
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch

from trajschema.check import batch as _check
from trajschema.check import batch_view, is_tensordict
from trajschema.core import DEPTHS, SchemaError, Violation, is_real
from trajschema.load import resolve_schema
from trajschema.padding import padding_needed
from trajschema.schema import Schema
from trajschema.tq import wire_batch

__all__ = ["assert_padding_invariant", "assert_valid"]

# The report of SchemaError lists this many violations as a table; the rest follow one a line.
_TABLE_ROWS = 40


def _is_single_sample(x: Any) -> bool:
    """A mapping, or a TensorDict without a batch dim (one row of a batch TensorDict)."""
    if is_tensordict(x):
        return x.batch_dims == 0
    return isinstance(x, Mapping)


def _report(violations: Sequence[Violation], schema_name: str, bindings: Mapping[Any, Mapping[str, int]]) -> str:
    """SchemaError's table of the violations, then every one the table leaves out."""
    text = str(SchemaError(violations, schema_name=schema_name, bindings=bindings))
    rest = violations[_TABLE_ROWS:]
    if rest:
        text += f"\nthe other {len(rest)} violations:\n" + "\n".join(f"  {v}" for v in rest)
    return text


def _fail_validation(violations: list[Violation], schema: Schema, bindings: Mapping[Any, Mapping[str, int]]) -> None:
    __tracebackhide__ = True
    error = AssertionError(_report(violations, schema.name, bindings))
    error.violations = violations  # type: ignore[attr-defined]  # what the report's "see .violations" means
    raise error


def _batch_size(batch: Any) -> int:
    if is_tensordict(batch):
        return int(batch.batch_size[0])  # a batch TensorDict has a batch dim (a row without one is a sample)
    if isinstance(batch, Sequence) and not isinstance(batch, (str, bytes)):
        return len(batch)
    raise TypeError(
        f"assert_valid takes a sample (a mapping), a list of samples or a TensorDict, found {type(batch).__name__}"
    )


def _check_tags(tags: Any, n: int) -> list[Any] | None:
    """``tags`` as a list of one tag dict per sample (``None`` stays ``None``)."""
    if tags is None:
        return None
    if isinstance(tags, Mapping) or not isinstance(tags, Sequence) or isinstance(tags, (str, bytes)):
        raise TypeError(f"tags= must be a list of tag dicts, one per sample, found {type(tags).__name__}")
    if len(tags) != n:
        raise ValueError(f"tags= needs one tag dict per sample: the batch has {n} samples, tags= has {len(tags)}")
    bad = [i for i, t in enumerate(tags) if t is not None and not isinstance(t, Mapping)]
    if bad:
        raise TypeError(f"tags[{bad[0]}] must be a tag dict (a mapping), found {type(tags[bad[0]]).__name__}")
    return list(tags)


def assert_valid(samples_or_batch: Any, schema: Schema | str, *, tags: Any = None, depth: str = "values") -> None:
    """Fail, with a report of every violation, unless a sample or a batch follows ``schema``.

    A single sample (a mapping) is checked like [`Schema.violations`][trajschema.Schema.violations], with ``tags``
    its tag dict; a batch (a list of samples, or a TensorDict as TransferQueue returns
    it) like [`Schema.batch_violations`][trajschema.Schema.batch_violations], with ``tags`` one tag dict per sample.

    Examples:
        >>> from trajschema.testing import assert_valid, verl_sample
        >>> assert_valid(verl_sample("text", 3, 2), "text")
        >>> assert_valid({"uid": "q0"}, "text")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        AssertionError: 7 violations of schema 'text':
        ...

    Args:
        samples_or_batch: one sample, a list of samples, or a batch TensorDict.
        schema: the schema, or its name (as for [`load_schema`][trajschema.load_schema]).
        tags: a single sample's tag dict, or a batch's list of tag dicts (one per sample).
        depth: ``"shapes"`` or ``"values"``, as for [`Schema.violations`][trajschema.Schema.violations].

    Raises:
        AssertionError: the data breaks the schema. The message is [`SchemaError`][trajschema.SchemaError]'s
            report (every violation; past its first 40 rows one a line) and the error's
            ``.violations`` holds them all.
        TypeError: ``schema`` is neither a Schema nor a name; the data is neither a
            sample nor a batch; ``tags`` has the wrong type.
        ValueError: an unknown ``depth``; ``tags`` not one per sample of a batch.
        SchemaNotFoundError: no schema has that name.
    """
    __tracebackhide__ = True
    schema = resolve_schema(schema)
    if depth not in DEPTHS:
        raise ValueError(f"depth must be one of {', '.join(map(repr, DEPTHS))}, found {depth!r}")
    plan = schema.plan
    bindings: Mapping[Any, Mapping[str, int]]
    if _is_single_sample(samples_or_batch):
        if tags is not None and not isinstance(tags, Mapping):
            raise TypeError(f"tags= for a single sample must be its tag dict (a mapping), found {type(tags).__name__}")
        bound, found = _check.sample_violations(plan, samples_or_batch, tag=tags, dims=None, depth=depth)
        bindings = {None: bound}
    else:
        tag_list = _check_tags(tags, _batch_size(samples_or_batch))
        found, bindings = _check.check_batch(plan, samples_or_batch, tags=tag_list, dims=None, depth=depth)
    if found:
        _fail_validation(found, schema, bindings)


# -- assert_padding_invariant -------------------------------------------------------------


def _pad_batch(batch: Any, tags: list[Any], schema: Schema, eos_token_id: int, multiple: int) -> tuple[Any, list, int]:
    """(padded batch in the input's layout, padded tags, padding count)."""
    view = batch_view(batch)
    if view.n == 0:
        raise ValueError("assert_padding_invariant needs at least one real sample (padding copies dims from one)")
    count = padding_needed(view.n, multiple)
    pad = schema.padding(count, eos_token_id=eos_token_id, like=view.row(0), batch=batch)
    padded_tags = [*tags, *pad.tags]
    if is_tensordict(batch):
        # What kv_batch_get returns for the real keys and the padding keys together.
        return wire_batch([*view.rows(), *pad.samples]), padded_tags, count
    return [dict(s) for s in view.samples or ()] + pad.samples, padded_tags, count


def _check_rtol(rtol: Any) -> float | None:
    if rtol is None:
        return None
    if not is_real(rtol):
        raise TypeError(f"rtol must be a number >= 0 or None, found {type(rtol).__name__}")
    try:
        value = float(rtol)
    except OverflowError:  # an int or Fraction beyond float range
        value = math.inf
    if not (value >= 0 and math.isfinite(value)):
        raise ValueError(f"rtol must be a finite number >= 0, found {rtol!r}")
    return value


def _invariant_tags(tags: Any, n: int) -> list[Any]:
    if tags is None:
        return [{} for _ in range(n)]
    return _check_tags(tags, n) or []


def assert_padding_invariant(
    fn: Callable[[Any, list[Any]], Any],
    batch: Any,
    tags: Any,
    schema: Schema | str,
    *,
    eos_token_id: int,
    multiple: int,
    rtol: float | None = None,
) -> None:
    """Fail unless ``fn(batch, tags)`` gives the same result on the real samples after schema padding.

    ``batch`` is padded as a trainer pads it: ``schema.padding(count, eos_token_id=...,
    like=batch[0])`` samples are appended until its size is a multiple of ``multiple``
    (``count = padding_needed(len(batch), multiple)``; their tags, with
    ``is_padding=True``, are appended to ``tags``). A list of samples is padded to a list
    of dicts; a TensorDict to the TensorDict TransferQueue returns for the real and the
    padding samples together (`wire_batch` of all rows). Then ``fn`` runs on the
    unpadded and on the padded batch, and the results are compared:

    * ``fn`` returns a tensor, a Python number, or a (nested) dict of those; the two
      results must have the same structure (keys, types);
    * a tensor whose first dim is the batch size (``n`` unpadded, ``n + count`` padded)
      is compared on its first ``n`` rows, the real samples; a nested (jagged) tensor
      likewise, row by row; anything else is compared whole;
    * tensors must keep their dtype, shape and device; float and complex values are
      compared as ``torch.allclose(padded, unpadded, rtol=rtol, atol=0, equal_nan=True)``
      does, and the default ``rtol=None`` means ``rtol=0``: equal values (``-0.0``
      equals ``0.0``, ``inf`` only ``inf`` of the same sign), NaN matching NaN in the same
      place (for complex values torch's ``isnan``: a NaN in either part). An infinite or
      NaN change never passes, whatever ``rtol``. Integer and bool tensors are always
      compared exactly;
    * Python numbers follow the same rules as the 0-dim tensors of them: a ``float`` like
      a float64 tensor, a ``complex`` like a complex128 one, a NumPy float scalar like a
      tensor of its dtype; ``int`` and ``bool`` (any size: no rounding through float) and
      ``fractions.Fraction`` are compared exactly, a Fraction within ``rtol`` computed
      exactly. A number must keep its type: ``1`` unpadded and ``1.0`` padded is a type
      change, as ``torch.allclose`` refuses an int64 and a float64 tensor;
    * float8 and complex32 tensors, which torch cannot compare directly, are compared
      as the float32 and complex64 tensors holding the same values.

    A float reduction over the whole concatenated batch (``torch.cat(...).sum()``) may
    change in its last bits when padding lengthens it, even though padding adds only
    zeros: torch sums in blocks, and the blocks move. Check such functions with
    ``rtol=1e-6`` (float32); a per-sample accumulation in batch order stays bit-identical.

    The padding count may be 0 (the batch is already a multiple): ``fn`` is then only
    checked to be deterministic. ``fn`` must not modify its arguments in place; the
    padded run gets fresh dicts (list input) or a fresh TensorDict.

    Examples:
        >>> from trajschema.testing import assert_padding_invariant, verl_sample
        >>> batch = [verl_sample("text", 3, r, uid=f"q{r}") for r in (2, 4, 5)]
        >>> def token_sum(b, tags):  # over loss_mask: padding masks every token
        ...     return sum(float(s["loss_mask"].sum()) for s in b)
        >>> assert_padding_invariant(token_sum, batch, None, "text", eos_token_id=2, multiple=4)
        >>> def row_count(b, tags):  # counts padding rows
        ...     return len(b)
        >>> assert_padding_invariant(row_count, batch, None, "text", eos_token_id=2, multiple=4)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        AssertionError: fn is not invariant under schema padding ...
        ...

    Args:
        fn: ``fn(batch, tags)``, the metric, loss or advantage to check.
        batch: the real samples: a list of sample mappings or a TensorDict.
        tags: one tag dict per sample, or ``None`` (empty tag dicts).
        schema: the schema (or its name) whose padding to use.
        eos_token_id: the tokenizer's EOS id, for the padding samples.
        multiple: pad the batch to a multiple of this.
        rtol: relative tolerance for float and complex values (``atol`` is 0); ``None``
            (default) means 0: equal values, NaN matching NaN.

    Raises:
        AssertionError: the results differ on the real samples, or differ in structure;
            the message names the key, the shapes and dtypes, the largest absolute
            difference and the first differing index.
        TypeError: ``fn`` is not callable, ``fn`` returns something other than tensors,
            numbers and dicts (a list, ``None``, a ``Decimal``; dicts nested more than
            100 deep, or containing themselves), a tensor without comparable values
            (``meta``, sparse, quantized, a dtype such as ``uint4`` that torch cannot
            compare), a bad ``schema``/``tags``/``rtol``.
        ValueError: an empty batch, ``tags`` not one per sample, a bad ``multiple``,
            ``rtol`` or ``eos_token_id``.
    """
    __tracebackhide__ = True
    if not callable(fn):
        raise TypeError(f"fn must be callable as fn(batch, tags), found {type(fn).__name__}")
    schema = resolve_schema(schema)
    rtol = _check_rtol(rtol)
    n = batch_view(batch).n
    tag_list = _invariant_tags(tags, n)
    padded, padded_tags, count = _pad_batch(batch, tag_list, schema, eos_token_id, multiple)
    expected = fn(batch, list(tag_list))
    got = fn(padded, padded_tags)
    problems = _compare(expected, got, "", n, n + count, rtol)
    if problems:
        head = (
            f"fn is not invariant under schema padding (schema {schema.name!r}): {n} real samples padded with "
            f"{count} padding samples to a multiple of {multiple}; on the real samples"
        )
        raise AssertionError(head + ("\n" + "\n".join(f"  {p}" for p in problems)))


# -- comparing fn's results ---------------------------------------------------------------

#: Dicts in fn's result nested deeper than this are refused (a dict containing itself would
#: otherwise recurse until Python's recursion limit).
_MAX_DEPTH = 100

#: Dtypes torch compares directly; float8 and complex32 are widened first (exactly), any other is refused.
_NATIVE = frozenset(
    {
        torch.bool,
        *(torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64),
        *(torch.uint16, torch.uint32, torch.uint64),
        *(torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.complex64, torch.complex128),
    }
)


def _where(path: str) -> str:
    if not path or path.startswith("["):  # the whole result, or a row of a nested tensor result
        return f"the result{path}"
    return f"key {path!r}"


def _kind(x: Any) -> str:
    if isinstance(x, torch.Tensor):
        return f"tensor {tuple(x.shape)} {str(x.dtype).removeprefix('torch.')}"
    return type(x).__name__


def _compare(want: Any, got: Any, path: str, n: int, n_padded: int, rtol: float | None, depth: int = 0) -> list[str]:
    """Every difference between the unpadded (``want``) and padded (``got``) results."""
    if isinstance(want, Mapping) and isinstance(got, Mapping):
        if depth >= _MAX_DEPTH:
            shown = path if len(path) <= 60 else path[:60] + "..."
            raise TypeError(
                f"fn's result nests dicts more than {_MAX_DEPTH} deep, at key {shown!r} (does a dict contain itself?)"
            )
        return _compare_dicts(want, got, path, n, n_padded, rtol, depth + 1)
    if isinstance(want, torch.Tensor) and isinstance(got, torch.Tensor):
        return _compare_tensors(want, got, path, n, n_padded, rtol)
    if _is_number(want) and _is_number(got) and type(want) is type(got):
        return _compare_numbers(want, got, path, rtol)
    for x in (want, got):
        if not (isinstance(x, (Mapping, torch.Tensor)) or _is_number(x)):
            raise TypeError(
                f"fn must return a tensor, a number or a dict of those; {_where(path)} is {type(x).__name__}"
            )
    return [f"{_where(path)}: the type changed: {_kind(want)} unpadded, {_kind(got)} padded"]


def _is_number(x: Any) -> bool:
    return isinstance(x, numbers.Number) and not isinstance(x, torch.Tensor)


def _compare_dicts(
    want: Mapping, got: Mapping, path: str, n: int, n_padded: int, rtol: float | None, depth: int
) -> list[str]:
    problems = []
    missing = [k for k in want if k not in got]
    extra = [k for k in got if k not in want]
    if missing or extra:
        problems.append(
            f"{_where(path)}: the keys changed: missing after padding {missing!r}, new after padding {extra!r}"
        )
    for key in want:
        if key in got:
            sub = f"{path}.{key}" if path else str(key)
            problems += _compare(want[key], got[key], sub, n, n_padded, rtol, depth)
    return problems


# -- numbers ------------------------------------------------------------------------------


def _floats_close(want: float, got: float, rtol: float) -> bool:
    """``torch.isclose(got, want, rtol=rtol, atol=0, equal_nan=True)`` of float64 values, in Python.

    As torch computes it: equal, or both NaN, or a *finite* difference within
    ``|rtol * want|``. The finiteness test is what keeps ``inf`` from being close to a
    finite value (``inf <= inf`` would pass it) and ``1e308`` from being close to
    ``-1e308`` with ``rtol=10`` (the difference overflows).
    """
    if got == want or (math.isnan(want) and math.isnan(got)):
        return True
    error = abs(got - want)
    return math.isfinite(error) and error <= abs(rtol * want)


def _compare_numbers(want: Any, got: Any, path: str, rtol: float | None) -> list[str]:
    """A Python number (``want`` and ``got`` of one type) compared like a 0-dim tensor of it."""
    if isinstance(want, numbers.Integral):  # int, bool, NumPy ints: exact at any size, no float rounding
        w, g = int(want), int(got)
        same, gap = w == g, repr(abs(g - w))
    elif isinstance(want, numbers.Rational):  # Fraction: exact, the tolerance too
        fw, fg = fractions.Fraction(want), fractions.Fraction(got)
        same = fw == fg or (rtol is not None and abs(fg - fw) <= fractions.Fraction(rtol) * abs(fw))
        gap = str(abs(fg - fw))
    elif isinstance(want, float):  # and its subclasses (NumPy float64): a float64 tensor
        xw, xg = float(want), float(got)
        same, gap = _floats_close(xw, xg, rtol or 0.0), repr(abs(xg - xw))
    else:  # complex, NumPy float32 and the like: exactly the tensor comparison
        tw, tg = _number_tensor(want, path), _number_tensor(got, path)
        differs = _differs(tw, tg, rtol)
        same, gap = not bool(differs), _biggest_gap(tw, tg, differs)
    if same:
        return []
    return [f"{_where(path)}: {want!r} unpadded, {got!r} padded (abs difference {gap})"]


def _number_tensor(x: Any, path: str) -> torch.Tensor:
    """The 0-dim tensor of a number that is not an int, Fraction or float: a complex, a NumPy scalar."""
    try:
        t = torch.tensor(x, dtype=torch.complex128) if isinstance(x, complex) else torch.as_tensor(x)
    except (RuntimeError, TypeError, ValueError, OverflowError):
        t = None
    if t is None or t.dim() != 0 or t.dtype not in _NATIVE:
        raise TypeError(
            f"fn must return a tensor, a number torch can hold (int, float, bool, complex, a NumPy scalar, a "
            f"Fraction) or a dict of those; {_where(path)} is {type(x).__name__} {x!r}"
        )
    return t


# -- tensors ------------------------------------------------------------------------------


def _refuse_uncomparable(t: torch.Tensor, path: str) -> None:
    if t.is_meta:
        raise TypeError(f"{_where(path)} is a meta tensor: it has no values to compare")
    if t.is_quantized:
        raise TypeError(f"{_where(path)} is a quantized tensor ({t.dtype}): return its dequantize()")
    if t.layout != torch.strided and not t.is_nested:
        layout = str(t.layout).removeprefix("torch.")
        raise TypeError(f"{_where(path)} is a {layout} tensor: return it dense (to_dense())")


def _comparable(t: torch.Tensor, path: str) -> torch.Tensor:
    """``t``, or the float32/complex64 tensor of the same values for float8/complex32, which torch cannot compare."""
    if t.dtype in _NATIVE:
        return t
    wide = torch.complex64 if t.is_complex() else torch.float32 if t.is_floating_point() else None
    try:
        if wide is not None:
            return t.to(wide)
    except (RuntimeError, NotImplementedError, TypeError):
        pass
    raise TypeError(f"{_where(path)} is a tensor of dtype {t.dtype}, whose values torch cannot compare")


def _compare_tensors(want: torch.Tensor, got: torch.Tensor, path: str, n: int, n_padded: int, rtol: float | None):
    _refuse_uncomparable(want, path)
    _refuse_uncomparable(got, path)
    if want.is_nested or got.is_nested:
        return _compare_nested(want, got, path, n, n_padded, rtol)
    real_rows = want.dim() > 0 and got.dim() > 0 and want.shape[0] == n and got.shape[0] == n_padded
    if real_rows:
        got = got[:n]
    if want.dtype != got.dtype or want.shape != got.shape or want.device != got.device:
        what = "on the real rows " if real_rows else ""
        return [
            f"{_where(path)}: {_kind(want)} on {want.device} unpadded, "
            f"{what}{_kind(got)} on {got.device} padded: shape, dtype or device changed"
        ]
    problem = _value_difference(_comparable(want, path), _comparable(got, path), rtol)
    return [f"{_where(path)}: {_kind(want)}{' (real rows)' if real_rows else ''}: {problem}"] if problem else []


def _compare_nested(want: torch.Tensor, got: torch.Tensor, path: str, n: int, n_padded: int, rtol: float | None):
    if not (want.is_nested and got.is_nested):
        return [f"{_where(path)}: the type changed: nested {want.is_nested} unpadded, nested {got.is_nested} padded"]
    rows_w, rows_g = want.unbind(0), got.unbind(0)
    if len(rows_w) == n and len(rows_g) == n_padded:
        rows_g = rows_g[:n]
    if len(rows_w) != len(rows_g):
        return [f"{_where(path)}: nested tensor of {len(rows_w)} rows unpadded, {len(rows_g)} padded"]
    problems = []
    for i, (w, g) in enumerate(zip(rows_w, rows_g)):
        problems += _compare_tensors(w, g, f"{path}[{i}]", -1, -1, rtol)
    return problems


def _differs(want: torch.Tensor, got: torch.Tensor, rtol: float | None) -> torch.Tensor:
    """Where ``got`` is not ``torch.isclose`` to ``want`` (``atol=0``, NaN matching NaN); integers exactly."""
    if want.is_floating_point() or want.is_complex():
        return ~torch.isclose(got, want, rtol=rtol or 0.0, atol=0.0, equal_nan=True)
    return want != got


def _biggest_gap(want: torch.Tensor, got: torch.Tensor, differs: torch.Tensor) -> str:
    """The largest absolute difference where ``differs``, exactly for integers, ``nan`` when every one is NaN."""
    if want.is_floating_point() or want.is_complex():
        wide = torch.complex128 if want.is_complex() else torch.float64
        gaps = (got.to(wide) - want.to(wide)).abs()[differs]
        real = gaps[~gaps.isnan()]  # an inf - inf gap is NaN; a finite-to-inf one is inf, and shown as inf
        return "nan" if real.numel() == 0 else f"{float(real.max()):.6g}"
    pairs = zip(want[differs].tolist(), got[differs].tolist())
    return str(max(abs(int(g) - int(w)) for w, g in pairs))


def _value_difference(want: torch.Tensor, got: torch.Tensor, rtol: float | None) -> str:
    """``""`` when the values agree, else the largest absolute difference and the first differing index."""
    exact = not (want.is_floating_point() or want.is_complex())
    if exact and torch.equal(want, got):
        return ""
    differs = _differs(want, got, rtol)
    if not bool(differs.any()):
        return ""
    at = tuple(differs.nonzero()[0].tolist())
    count = int(differs.sum())
    return (
        f"{count} of {want.numel()} values differ; max abs difference {_biggest_gap(want, got, differs)}; "
        f"first at index {list(at)}: {want[at].item()!r} unpadded, {got[at].item()!r} padded"
    )
