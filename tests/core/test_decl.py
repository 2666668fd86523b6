"""A field's dtypes are stored by name (a schema is read without torch) and read as torch dtypes."""

from __future__ import annotations

import copy
import dataclasses
import pickle
import subprocess
import sys

import pytest
import torch

from trajschema.core.decl import Field, PadRule
from trajschema.core.dims import parse_expr
from trajschema.core.dtypes import DType


def _field(dtypes) -> Field:
    return Field("x", "tensor", (parse_expr("seq"),), dtypes, True, PadRule("fill", 0), min=0)


@pytest.mark.parametrize(
    "given",
    [(torch.int64, torch.int32), ("int64", "int32"), (DType("int64"), DType("int32")), [torch.int64, "int32"]],
    ids=["torch dtypes", "names", "DTypes", "a list of both"],
)
def test_every_spelling_of_dtypes_is_one_field(given) -> None:
    f = _field(given)
    assert f.dtype_names == ("int64", "int32")
    assert f.dtypes == (torch.int64, torch.int32)
    assert f == _field(("int64", "int32")) and hash(f) == hash(_field((torch.int64, torch.int32)))


def test_a_field_keyword_and_replace_keep_the_names() -> None:
    f = Field("x", "tensor", (), dtypes=(torch.float32,), required=True, pad=PadRule("fill", 0))
    g = dataclasses.replace(f, required=False)
    assert g.dtype_names == ("float32",) and g.dtypes == (torch.float32,) and not g.required
    assert f.bounded({}) is f


def test_a_field_pickles_and_copies_by_name() -> None:
    f = _field(("int16",))
    f.dtypes  # noqa: B018 (read once: the torch dtypes are cached on the object)
    state = f.__getstate__()
    assert "dtypes" not in state and state["dtype_names"] == ("int16",)
    for g in (pickle.loads(pickle.dumps(f)), copy.copy(f), copy.deepcopy(f)):
        assert g == f and g.dtypes == (torch.int16,)


def test_a_field_cannot_be_reassigned() -> None:
    f = _field(("int64",))
    with pytest.raises(dataclasses.FrozenInstanceError):
        f.dtypes = ("int32",)  # type: ignore[misc]


def test_something_else_given_is_kept_for_the_schema_to_report() -> None:
    assert _field(5).dtype_names == 5
    assert _field(("int", torch.int64)).dtypes == ("int", "int64")  # an unknown name: not resolved


def test_a_field_is_made_compared_and_shown_without_torch() -> None:
    code = (
        "import sys\n"
        "from trajschema.core.decl import Field, PadRule\n"
        "f = Field('x', 'tensor', (), ('int64',), True, PadRule('fill', 0))\n"
        "assert f == Field('x', 'tensor', (), ('int64',), True, PadRule('fill', 0)) and hash(f)\n"
        "assert 'int64' in repr(f) and f.describe() == 'int64[]'\n"
        "assert 'torch' not in sys.modules, 'torch was imported'\n"
        "f.dtypes\n"
        "assert 'torch' in sys.modules\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
