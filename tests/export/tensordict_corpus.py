"""The agreement corpus of the TensorDict exports: valid and labelled invalid samples, as TensorDicts.

Drawn per packaged schema with trajschema's own strategies, derandomized (the same corpus on
every run and machine with one hypothesis version). Each case is checked by trajschema and
by an export, on the same data: a sample as a TensorDict of one and of two (itself twice), a
valid batch as the ``"dense"`` form of `trajschema.testing.batches` draws it. `measure`
tallies what `trajschema.export.measured` records; run this module to print the figures.
"""

from __future__ import annotations

import collections
import contextlib
import functools
import math
from collections.abc import Callable, Iterator
from typing import Any

import torch
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from tensordict import NonTensorData, NonTensorStack, TensorDict

import trajschema as ts
from trajschema.export import tensordict_columns
from trajschema.export.measured import Measured, columns_digest
from trajschema.testing import batches, invalid_samples, samples

#: Cases per schema: valid samples, valid TensorDicts of samples, labelled invalid samples.
VALID, BATCHES, INVALID = 40, 20, 200
MAX_LEN = 8


def draw(strategy: st.SearchStrategy, n: int) -> list[Any]:
    """``n`` examples of ``strategy``, the same ones on every run (whatever the hypothesis profile)."""
    out: list[Any] = []

    @settings(
        settings.get_profile("default"),
        max_examples=n,
        derandomize=True,
        database=None,
        phases=[Phase.generate],
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(strategy)
    def collect(example: Any) -> None:
        out.append(example)

    with _no_local_constants():
        collect()
    return out


@contextlib.contextmanager
def _no_local_constants() -> Iterator[None]:
    """Hypothesis also draws, now and then, the literals of the modules loaded so far ("local
    constants"), so what a test run imported before changes the corpus. Drawn without them, the
    corpus depends on hypothesis, torch, trajschema's strategies and the schemas only."""
    from hypothesis.internal.conjecture import providers

    if not all(hasattr(providers, n) for n in ("_get_local_constants", "CONSTANTS_CACHE", "Constants", "SortedSet")):
        yield  # another hypothesis: the corpus is drawn as it draws (its figures are checked on one version only)
        return
    saved = providers._get_local_constants
    providers.CONSTANTS_CACHE.cache.clear()
    providers._get_local_constants = lambda: providers.Constants(
        integers=providers.SortedSet(),
        floats=providers.SortedSet(key=providers.float_to_int),
        bytes=providers.SortedSet(),
        strings=providers.SortedSet(),
    )
    try:
        yield
    finally:
        providers._get_local_constants = saved
        providers.CONSTANTS_CACHE.cache.clear()


def as_tensordict(sample: dict[str, Any], rows: int = 1) -> TensorDict:
    """``sample`` as a TensorDict of ``rows`` copies of it: tensors stacked, numbers as ``(B,)`` tensors
    where a tensor holds them exactly (as `trajschema.testing.batches` writes its dense form), anything
    else a ``NonTensorStack``; a ``None`` is left out (trajschema counts it absent)."""
    td = TensorDict({}, batch_size=[rows])
    for key, value in sample.items():
        if value is None:
            continue
        if isinstance(value, torch.Tensor):
            td[key] = torch.stack([value] * rows)
            continue
        column = _number_column(value, rows)
        td[key] = column if column is not None else _nontensor(value, rows)
    return td


def _nontensor(value: Any, rows: int) -> NonTensorStack:
    """``rows`` copies of ``value``, each one datum: ``NonTensorStack.from_list`` would read a list as rows."""
    return NonTensorStack(*(NonTensorData(data=value, batch_size=[]) for _ in range(rows)))


def _number_column(value: Any, rows: int) -> torch.Tensor | None:
    if not isinstance(value, (bool, int, float)):
        return None
    dtype = torch.bool if isinstance(value, bool) else torch.int64 if isinstance(value, int) else torch.float64
    try:
        column = torch.tensor([value] * rows, dtype=dtype)
    except (OverflowError, RuntimeError):
        return None
    same = column[0].item() == value or (isinstance(value, float) and math.isnan(value))
    return column if same else None


@functools.cache
def corpus(name: str) -> tuple[list[TensorDict], list[tuple[dict[str, Any], Any]]]:
    """The valid TensorDicts and the ``(sample, expected)`` invalid samples of packaged schema ``name``."""
    schema = ts.load_schema(name)
    valid = [as_tensordict(s) for s in draw(samples(schema, max_len=MAX_LEN), VALID)]
    valid += draw(batches(schema, layout="dense", size=st.integers(1, 4), max_len=MAX_LEN), BATCHES)
    return valid, draw(invalid_samples(schema, max_len=MAX_LEN), INVALID)


def measure(name: str, export: str, accepts: Callable[[TensorDict], bool]) -> Measured:
    """Check every case of ``name``'s corpus with ``accepts`` and tally (asserting the export's contract)."""
    schema = ts.load_schema(name)
    cols = tensordict_columns(schema.plan)
    valid, invalid = corpus(name)
    for td in valid:
        assert not schema.batch_violations(td), f"the corpus drew an invalid batch of {name}"
        assert accepts(td), f"{export} refuses a valid TensorDict of {name}: {td}"
    expressed = caught = 0
    missed: collections.Counter[str] = collections.Counter()
    for sample, expected in invalid:
        found = schema.violations(sample, tag=expected.tag)
        twice = schema.batch_violations(as_tensordict(sample, 2), tags=[expected.tag] * 2)
        said = [v for v in found if cols.expresses(v, export)]
        assert bool(said) == any(cols.expresses(v, export) for v in twice), (expected, found, twice)
        one, two = accepts(as_tensordict(sample)), accepts(as_tensordict(sample, 2))
        assert one == two, (export, expected, found)
        if said:
            assert not one, f"{export} accepts a {name} sample with {[str(v) for v in said]}"
            expressed += 1
        elif not one:
            caught += 1
        else:
            missed[expected.code] += 1
    return Measured(columns_digest(cols), len(valid), len(invalid), expressed, caught, dict(sorted(missed.items())))


def pandera_accepts(name: str) -> Callable[[TensorDict], bool]:
    import pandera.errors

    checker = ts.load_schema(name).to_pandera()

    def accepts(td: TensorDict) -> bool:
        try:
            checker.validate(td, lazy=True)
        except pandera.errors.SchemaErrors:
            return False
        return True

    return accepts


def typed_accepts(name: str) -> Callable[[TensorDict], bool]:
    cls = ts.load_schema(name).to_typed_tensordict()

    def accepts(td: TensorDict) -> bool:
        try:
            cls.from_tensordict(td)
        except TypeError:
            return False
        return True

    return accepts


if __name__ == "__main__":  # print the figures for trajschema/export/measured.py
    for export, accepts in (("pandera", pandera_accepts), ("typed-tensordict", typed_accepts)):
        for name in ts.schema_names():
            print(f"    ({export!r}, {name!r}): {measure(name, export, accepts(name))!r},")
