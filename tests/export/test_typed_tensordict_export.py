"""Schema.to_typed_tensordict() and `trajschema export NAME --format typed-tensordict`: one TypedTensorDict subclass.

TypedTensorDict came in tensordict 0.12: on the floor's 0.10.0 the export raises an ImportError
naming the version (tested here), and everything else skips saying so.
"""

from __future__ import annotations

import importlib.metadata
import inspect
from typing import Any

import pytest
import torch

import trajschema as ts
from trajschema.export import typed_tensordict_class, typed_tensordict_source

TENSORDICT = importlib.metadata.version("tensordict")
HAS_TYPED = tuple(int(p) for p in TENSORDICT.split(".")[:2]) >= (0, 12)
typed = pytest.mark.skipif(not HAS_TYPED, reason=f"TypedTensorDict came in tensordict 0.12; this is {TENSORDICT}")


def _exec(source: str) -> dict[str, Any]:
    namespace: dict[str, Any] = {}
    exec(compile(source, "<exported>", "exec", dont_inherit=True), namespace)  # not this file's __future__
    return namespace


def _shape(cls: type) -> tuple[Any, ...]:
    return (cls.__name__, cls.__required_keys__, cls.__optional_keys__, inspect.get_annotations(cls))


@typed
@pytest.mark.parametrize("layout", [None, "verl_dataproto", "skyrl"])
@pytest.mark.parametrize("name", ts.schema_names())
def test_the_source_builds_the_class(name, layout):
    schema = ts.load_schema(name)
    made = schema.to_typed_tensordict(layout=layout)
    source = typed_tensordict_source(schema.plan, schema._bound(layout))
    built = _exec(source)[made.__name__]
    assert _shape(built) == _shape(made)
    assert made.__required_keys__ == {
        c.key for c in ts.export.tensordict_columns(schema.plan, schema._bound(layout)).columns if c.required
    }


@typed
def test_from_tensordict_names_the_missing_fields_and_keeps_the_data():
    from tensordict import TensorDict

    TextBatch = ts.load_schema("text").to_typed_tensordict()
    td = TensorDict(prompts=torch.zeros(2, 3, dtype=torch.int64), batch_size=[2])
    with pytest.raises(TypeError, match=r"missing required field\(s\): input_ids, loss_mask"):
        TextBatch.from_tensordict(td)
    assert TextBatch.from_tensordict(td, check=False).prompts is td["prompts"]


@typed
def test_odd_keys_are_left_out_and_shadowing_names_declared_on_shadow():
    schema = ts.schema_from_dict(
        {
            "name": "odd-1",
            "dims": {"n": {}},
            "fields": {
                "a-b": {"shape": ["n"], "dtype": "int64", "pad": 0},
                "names": {"shape": ["n"], "dtype": "int64", "pad": 0},
                "ok": {"kind": "str", "pad": "uid", "required": False},
            },
        }
    )
    cls = schema.to_typed_tensordict()
    source = typed_tensordict_source(schema.plan)
    assert cls.__name__ == "Odd1Batch" and cls.__required_keys__ == {"names"} and cls.__optional_keys__ == {"ok"}
    assert 'class Odd1Batch(TypedTensorDict["shadow"]):' in source
    assert "#   keys: 'a-b' (not Python names, or TypedTensorDict's own: no field can hold them)" in source
    assert _shape(_exec(source)["Odd1Batch"]) == _shape(cls)


@pytest.mark.skipif(HAS_TYPED, reason=f"tensordict {TENSORDICT} has TypedTensorDict")
def test_on_an_older_tensordict_both_forms_name_the_version():
    plan = ts.load_schema("text").plan
    for build in (typed_tensordict_class, typed_tensordict_source):
        with pytest.raises(ImportError, match=rf"needs tensordict>=0\.12; this is tensordict {TENSORDICT}"):
            build(plan)


def test_a_tensordict_too_old_is_named_whatever_is_installed(monkeypatch):
    real = importlib.metadata.version
    monkeypatch.setattr(importlib.metadata, "version", lambda n: "0.11.0" if n == "tensordict" else real(n))
    with pytest.raises(
        ImportError, match=r"TypedTensorDict export .* needs tensordict>=0\.12; this is tensordict 0\.11\.0"
    ):
        ts.load_schema("text").to_typed_tensordict()


@typed
def test_typed_tensordict_with_a_field_named_like_its_own_method():
    """typed_tensordict._Fields: shadows only TensorDictBase attributes; a field 'from_tensordict' replaces
    TypedTensorDict.from_tensordict, and calling it raises "'property' object is not callable"."""
    from tensordict import TensorDict

    from trajschema.load import schema_from_dict

    s = schema_from_dict({"name": "tt", "fields": {"from_tensordict": {"shape": [], "dtype": "int64", "pad": 0}}})
    cls = s.to_typed_tensordict()
    cls.from_tensordict(TensorDict({"from_tensordict": torch.zeros(2, dtype=torch.long)}, batch_size=[2]))
