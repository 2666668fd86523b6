"""Bundles: every batch form round-trips bit-exact with its schema, layout and tags; a tampered
payload or a newer format is refused naming it; what cannot be recorded is refused naming
its path, and nothing is left behind."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import shutil
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import trajschema as ts
from tests.packed.packed_builders import rows_of, thd
from trajschema.core import DenseBatch, PackedBatch
from trajschema.testing import batches, tq_batch

SCHEMAS = ts.schema_names()


def same(a: Any, b: Any, path: str = "batch") -> None:
    """``a`` and ``b`` the same: classes, containers, and every tensor's dtype, shape and bytes."""
    assert type(a) is type(b), f"{path}: {type(a).__name__} != {type(b).__name__}"
    if isinstance(a, torch.Tensor):
        assert (a.dtype, a.layout, a.is_nested) == (b.dtype, b.layout, b.is_nested), path
        if a.is_nested and a.layout == torch.jagged:
            same(a.values(), b.values(), f"{path}.values")
            same(a.offsets(), b.offsets(), f"{path}.offsets")
            assert a._ragged_idx == b._ragged_idx, path
        elif a.is_nested:
            for i, (x, y) in enumerate(zip(a.unbind(), b.unbind(), strict=True)):
                same(x, y, f"{path}[{i}]")
        else:
            assert a.shape == b.shape, path
            bytes_a = a.contiguous().view(-1).view(torch.uint8) if a.numel() else a
            bytes_b = b.contiguous().view(-1).view(torch.uint8) if b.numel() else b
            assert torch.equal(bytes_a, bytes_b), f"{path}: bytes differ"
    elif type(a).__name__ == "TensorDict":
        assert a.batch_size == b.batch_size and list(a.keys()) == list(b.keys()), path
        for k in a.keys():
            same(a.get(k), b.get(k), f"{path}.{k}")
    elif type(a).__name__ in ("NonTensorStack", "NonTensorData"):
        same(
            a.tolist() if type(a).__name__ == "NonTensorStack" else a.data,
            b.tolist() if type(b).__name__ == "NonTensorStack" else b.data,
            path,
        )
    elif isinstance(a, dict):
        assert list(a) == list(b), f"{path}: keys {list(a)} != {list(b)}"
        for k in a:
            same(a[k], b[k], f"{path}.{k}")
        if isinstance(a, (DenseBatch, PackedBatch)):
            same(a.metadata, b.metadata, f"{path}.metadata")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            same(x, y, f"{path}[{i}]")
    elif isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and a.shape == b.shape, path
        for i, (x, y) in enumerate(zip(a.reshape(-1).tolist(), b.reshape(-1).tolist(), strict=True)):
            same(x, y, f"{path}[{i}]")
    elif isinstance(a, float) and math.isnan(a):
        assert math.isnan(b), path
    else:
        assert a == b, f"{path}: {a!r} != {b!r}"


def round_trip(tmp_path: Path, batch: Any, **kw: Any) -> ts.Bundle:
    path = ts.record_batch(batch, tmp_path / "bundle", overwrite=True, **kw)
    return ts.load_bundle(path)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.data())
def test_every_schemas_jagged_batches_round_trip_bit_exact(tmp_path, data) -> None:
    name = data.draw(st.sampled_from(SCHEMAS))
    form = data.draw(st.sampled_from(["tq", "list"]))
    batch, tags = data.draw(batches(name, layout=form, size=st.integers(0, 5), max_len=6, with_tags=True))
    got = round_trip(tmp_path, batch, schema=name, tags=tags, step=7)
    same(batch, got.batch)
    assert got.tags == tags and got.schema == ts.load_schema(name) and got.layout is None and got.step == 7
    assert got.violations() == ts.load_schema(name).batch_violations(batch, tags=tags)


@pytest.mark.parametrize("name", SCHEMAS)
@pytest.mark.parametrize("layout", ["verl_dataproto", "skyrl"])
def test_every_schemas_dense_batches_round_trip_with_their_layout(tmp_path, name, layout) -> None:
    schema = ts.load_schema(name)
    fitted = ts.load_layout(layout).with_pad_token(0)
    dense = schema.to_dense(rows_of(name), layout=fitted)
    got = round_trip(tmp_path, dense, schema=schema, layout=fitted)
    same(dense, got.batch)
    assert dataclasses.replace(got.layout, source=fitted.source) == fitted
    assert got.rows == got.manifest["rows"] == 4
    assert got.violations() == schema.batch_violations(dense, layout=fitted) == []


@pytest.mark.parametrize("name", SCHEMAS)
def test_packed_batches_round_trip_with_their_pinned_layout(tmp_path, name) -> None:
    schema = ts.load_schema(name)
    layout = thd(alignment=4, pad=0)
    packed = schema.to_packed(rows_of(name), layout=layout, tags=[{"is_padding": False}] * 4)
    got = round_trip(tmp_path, packed, schema=schema, layout=layout)
    same(packed, got.batch)
    assert got.layout.alignment == 4 and got.layout.pad_token_id == 0
    assert got.rows == got.manifest["rows"] == 4
    assert got.violations() == schema.batch_violations(packed, layout=layout) == []


def test_verl_nopad_keeps_one_object_where_verl_holds_one(tmp_path) -> None:
    schema = ts.load_schema("text")
    dense = schema.to_dense(rows_of("text"), layout=ts.load_layout("verl_dataproto").with_pad_token(0))
    nopad = schema.pack_dense(dense, layout="verl_nopad")
    aliased = [k for k in nopad.keys() for j in nopad.keys() if k < j and nopad.get(k) is nopad.get(j)]
    got = round_trip(tmp_path, nopad, schema=schema, layout="verl_nopad")
    same(nopad, got.batch)
    assert got.rows == 4
    assert aliased and all(
        got.batch.get(k) is got.batch.get(j) for k in aliased for j in nopad.keys() if nopad.get(k) is nopad.get(j)
    )
    assert got.violations() == []


def test_odd_bits_survive(tmp_path) -> None:
    nan = torch.tensor([0x7FC00001, -0x003EDCBB], dtype=torch.int32).view(torch.float32)  # NaNs with payloads
    batch = {
        "f": torch.cat([nan, torch.tensor([-0.0, float("inf")])]),
        "bf16": torch.tensor([1.5, -2.25], dtype=torch.bfloat16),
        "b": torch.tensor([True, False]),
        "u8": torch.tensor([255, 0], dtype=torch.uint8),
        "strided": torch.arange(12).reshape(3, 4).t(),  # not contiguous
        "scalars": [float("nan"), float("-inf"), 2**62, None, "x", (1, 2)],
        "np": np.array(["a", None, 3], dtype=object),
    }
    got = round_trip(tmp_path, batch, schema="text")
    same(batch, got.batch)


@pytest.mark.parametrize(
    ("value", "match"),
    [
        (torch.zeros(2, device="meta"), r"batch\.x: a meta tensor holds no values"),
        (torch.zeros(2, 2).to_sparse(), r"batch\.x: a sparse_coo tensor cannot be recorded"),
        (object(), r"batch\.x: a builtins\.object cannot be recorded"),
        ({1: 2}, r"batch\.x: key 1 \(int\) is not a string"),
        (np.array([1 + 2j]), r"batch\.x: a numpy array of dtype complex128"),
    ],
    ids=["meta", "sparse", "object", "int-key", "complex-numpy"],
)
def test_what_cannot_be_recorded_is_refused_and_nothing_is_left(tmp_path, value, match) -> None:
    with pytest.raises(ts.BundleError, match=match):
        ts.record_batch({"x": value}, tmp_path / "b", schema="text")
    assert list(tmp_path.iterdir()) == []


def test_a_taken_path_is_refused_unless_overwrite(tmp_path) -> None:
    first = ts.record_batch([], tmp_path / "b", schema="text", step=1)
    with pytest.raises(ts.BundleError, match="already exists"):
        ts.record_batch([], first, schema="text", step=2)
    assert ts.load_bundle(first).step == 1
    ts.record_batch([], first, schema="text", step=2, overwrite=True)
    assert ts.load_bundle(first).step == 2 and [p.name for p in tmp_path.iterdir()] == ["b"]


@pytest.fixture
def recorded(tmp_path) -> Path:
    rows = rows_of("moe_routed")
    return ts.record_batch(tq_batch(rows), tmp_path / "b", schema="moe_routed", tags=[{"is_padding": False}] * 4)


def _edit_manifest(path: Path, change) -> None:
    manifest = json.loads((path / "manifest.json").read_text())
    change(manifest)
    (path / "manifest.json").write_text(json.dumps(manifest))


@pytest.mark.parametrize(
    ("tamper", "payload"),
    [
        (
            lambda p: p.joinpath("tensors.safetensors").write_bytes(
                p.joinpath("tensors.safetensors").read_bytes()[:-1] + b"\x01"
            ),
            "tensors.safetensors",
        ),
        (
            lambda p: p.joinpath("batch.json").write_text(
                p.joinpath("batch.json").read_text().replace("false", "true ")
            ),
            "batch.json",
        ),
        (lambda p: p.joinpath("batch.json").unlink(), "batch.json"),
        (
            lambda p: _edit_manifest(
                p, lambda m: m["schema"]["yaml"].update(moe_routed=m["schema"]["yaml"]["moe_routed"] + "\n# edited")
            ),
            "schema",
        ),
    ],
    ids=["tensor-byte", "tag-flipped", "payload-deleted", "schema-edited"],
)
def test_a_tampered_payload_is_refused_naming_it(recorded, tamper, payload) -> None:
    tamper(recorded)
    with pytest.raises(ts.BundleIntegrityError, match=payload.replace(".", r"\.")) as caught:
        ts.load_bundle(recorded)
    assert caught.value.payload == payload


def test_a_newer_format_is_refused_with_its_version(recorded) -> None:
    _edit_manifest(recorded, lambda m: m.update(version=2, trajschema="9.0.0"))
    with pytest.raises(ts.BundleVersionError, match=r"format version 2 .*reads up to version 1") as caught:
        ts.load_bundle(recorded)
    assert (caught.value.found, caught.value.supported) == (2, 1)


@pytest.mark.parametrize(
    ("change", "error", "match"),
    [
        (lambda p: shutil.rmtree(p), ts.BundleError, "no bundle here"),
        (lambda p: p.joinpath("manifest.json").write_text("{not json"), ts.BundleError, "manifest is not JSON"),
        (lambda p: _edit_manifest(p, lambda m: m.update(format="zip")), ts.BundleError, "not a trajschema bundle"),
    ],
    ids=["gone", "manifest-garbage", "other-format"],
)
def test_no_bundle_is_named_so(recorded, change, error, match) -> None:
    change(recorded)
    with pytest.raises(error, match=match):
        ts.load_bundle(recorded)


def test_the_recorded_schema_is_the_one_checked_even_where_its_family_is_unknown(tmp_path, monkeypatch) -> None:
    family = tmp_path / "schemas"
    family.mkdir()
    (family / "mine.yaml").write_text(
        "name: mine\nextends: text\nfields:\n  score: {kind: float, required: false, pad: 0.0}\n"
    )
    monkeypatch.setenv("TRAJSCHEMA_PATH", str(family))
    schema = ts.load_schema("mine")
    path = ts.record_batch(rows_of("text"), tmp_path / "b", schema=schema)
    shutil.rmtree(family)
    got = ts.load_bundle(path)
    assert got.schema == schema and got.schema.plan.lineage == ("mine", "text") and got.violations() == []


def test_a_bundle_checks_against_another_schema_on_request(tmp_path) -> None:
    got = round_trip(tmp_path, rows_of("text"), schema="text")
    assert {v.field for v in got.violations(schema="moe_routed")} == {"routed_experts"}
    with pytest.raises(ts.SchemaError, match="routed_experts"):
        got.validate(schema="moe_routed")


def test_a_recorded_batch_becomes_a_regression_test(recorded, trajschema_bundle, tmp_path) -> None:
    from trajschema.testing import assert_bundle_valid, recorded_batch

    assert_bundle_valid(recorded)
    assert trajschema_bundle(recorded).schema.name == "moe_routed"  # an absolute path as it is
    with pytest.raises(AssertionError, match=r"breaks its schema") as caught:
        assert_bundle_valid(recorded_batch(recorded), schema="vlm_mrope_moe")  # the schema the code uses now
    assert {v.field for v in caught.value.violations} == {"position_ids"}
    broken = ts.record_batch([*rows_of("text")[:1], {"uid": "q9"}], tmp_path / "broken", schema="text")
    with pytest.raises(AssertionError, match=r"first problem: sample 1, prompts: required field is missing"):
        assert_bundle_valid(broken)


def test_the_fixture_reads_a_bundle_beside_the_test_file(trajschema_bundle, request) -> None:
    here = Path(str(request.node.path)).parent
    name = f"_bundle_of_this_test_{uuid.uuid4().hex}"  # its own: the newest and floor runs share the checkout
    try:
        ts.record_batch(rows_of("text"), here / name, schema="text")
        assert trajschema_bundle(name).violations() == []
    finally:
        shutil.rmtree(here / name, ignore_errors=True)


def test_a_cycle_or_a_too_deep_batch_is_refused_and_a_too_deep_file_named(tmp_path) -> None:
    loop: list[Any] = []
    loop.append(loop)
    with pytest.raises(ts.BundleError, match=r"batch\.x\[0\]: holds itself"):
        ts.record_batch({"x": loop}, tmp_path / "a", schema="text")
    deep: Any = 0
    for _ in range(100_000):
        deep = [deep]
    with pytest.raises(ts.BundleError, match="nested too deeply"):
        ts.record_batch(deep, tmp_path / "b", schema="text")
    assert list(tmp_path.iterdir()) == []
    good = ts.record_batch([], tmp_path / "c", schema="text")
    (good / "batch.json").write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(ts.BundleError, match=r"batch\.json"):
        ts.load_bundle(good, verify=False)


def test_the_same_object_twice_is_one_object_again_and_shared_views_are_stored_whole(tmp_path) -> None:
    base = torch.arange(10)
    mask = torch.ones(3)
    batch = {"a": mask, "b": mask, "view": base[2:5], "whole": base}
    got = round_trip(tmp_path, batch, schema="text").batch
    same(batch, got)
    assert got["a"] is got["b"] and got["view"].tolist() == [2, 3, 4]


def test_a_dense_batch_tagged_in_its_own_columns_counts_its_padding_rows(tmp_path) -> None:
    schema = ts.load_schema("text")
    layout = ts.load_layout("skyrl").with_pad_token(0)
    dense = schema.to_dense(rows_of("text"), layout=layout)
    dense.metadata["is_padding"] = [False, False, False, True]  # where SkyRL's batches keep the tag
    got = round_trip(tmp_path, dense, schema=schema, layout=layout)
    assert got.manifest["padding_rows"] == 1
    assert [v.code for v in got.violations()] == ["padding"]  # a padding row with a loss mask: the layout reads the tag


def test_a_path_that_is_no_path_is_a_type_error(tmp_path) -> None:
    from trajschema.testing import recorded_batch

    with pytest.raises(TypeError, match=r"path must be a bundle's directory .* found int 3"):
        recorded_batch(3)
    with pytest.raises(TypeError, match=r"path must be a directory path .* found NoneType"):
        ts.record_batch([], None, schema="text")
    with pytest.raises(TypeError, match="tags must be a sequence of tag dicts"):
        ts.record_batch([], tmp_path / "t", schema="text", tags={"is_padding": True})
    with pytest.raises(TypeError, match="step must be an int >= 0"):
        ts.record_batch([], tmp_path / "s", schema="text", step=-1)
    assert list(tmp_path.iterdir()) == []


DENSE_LAYOUTS = [n for n in ts.layout_names() if isinstance(ts.load_layout(n), ts.Layout)]
PACKED_LAYOUTS = [n for n in ts.layout_names() if isinstance(ts.load_layout(n), ts.PackedLayout)]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.data())
def test_every_schema_in_every_dense_layout_round_trips(tmp_path, data) -> None:
    from trajschema.testing import dense_batches

    name, layout = data.draw(st.sampled_from(SCHEMAS)), data.draw(st.sampled_from(DENSE_LAYOUTS))
    fitted = ts.load_layout(layout).with_pad_token(0)
    batch = data.draw(dense_batches(name, fitted, size=st.integers(1, 4), max_len=6))
    got = round_trip(tmp_path, batch, schema=name, layout=fitted)
    same(batch, got.batch)
    assert [v.code for v in got.violations()] == [
        v.code for v in ts.load_schema(name).batch_violations(batch, layout=fitted)
    ]


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.data())
def test_every_schema_in_every_packed_layout_round_trips(tmp_path, data) -> None:
    name, layout = data.draw(st.sampled_from(SCHEMAS)), data.draw(st.sampled_from(PACKED_LAYOUTS))
    schema = ts.load_schema(name)
    lengths = data.draw(st.lists(st.tuples(st.integers(1, 6), st.integers(0, 5)), min_size=1, max_size=4))
    rows = rows_of(name, lengths)  # real samples (a drawn one may hold a 0 inside its attention mask)
    if layout == "verl_nopad":
        packed = schema.pack_dense(
            schema.to_dense(rows, layout=ts.load_layout("verl_dataproto").with_pad_token(0)), layout=layout
        )
        fitted: Any = ts.load_layout(layout)
    else:
        fitted = ts.load_layout(layout).with_pad_token(0).with_alignment(data.draw(st.integers(1, 8)))
        packed = schema.to_packed(rows, layout=fitted)
    got = round_trip(tmp_path, packed, schema=schema, layout=fitted)
    same(packed, got.batch)
    assert got.rows == len(rows)
    assert got.violations() == schema.batch_violations(packed, layout=fitted)


def test_a_skyrl_tensor_list_round_trips_its_tensors(tmp_path) -> None:
    class TensorList:  # SkyRL's per-row images: its class is read by name, so a stand-in of that name
        def __init__(self, tensors: list[torch.Tensor]) -> None:
            self.tensors = tensors

    images = TensorList([torch.rand(2, 3), torch.rand(5, 3)])
    got = round_trip(tmp_path, {"pixel_values": images}, schema="text").batch["pixel_values"]
    tensors = got.tensors if hasattr(got, "tensors") else got  # SkyRL's class where it imports, else a list
    assert [t.tolist() for t in tensors] == [t.tolist() for t in images.tensors]


@pytest.mark.parametrize(("umask", "folder", "files"), [(0o022, 0o755, 0o644), (0o077, 0o700, 0o600)])
def test_a_bundle_is_readable_by_whom_the_umask_shares_with(tmp_path, umask, folder, files) -> None:
    """Written into a temporary sibling and renamed: that sibling (and safetensors' file, which it
    writes 0600) must not keep a bundle from the team it is recorded for."""
    old = os.umask(umask)
    try:
        path = ts.record_batch(rows_of("text"), tmp_path / "b", schema="text")
    finally:
        os.umask(old)
    assert path.stat().st_mode & 0o777 == folder
    assert {p.name: p.stat().st_mode & 0o777 for p in path.iterdir()} == dict.fromkeys(
        ("tensors.safetensors", "batch.json", "manifest.json"), files
    )


@pytest.mark.parametrize(
    ("layout", "match"),
    [
        ("verl_dataproto", r"^batch: layout 'verl_dataproto' cannot read it: a dense batch must be a mapping"),
        ("skyrl", r"^batch: layout 'skyrl' cannot read it: a dense batch must be a mapping"),
        ("thd", r"^batch: layout 'thd' cannot read it: a packed batch is a mapping"),
    ],
)
def test_a_batch_its_layout_cannot_read_is_refused_and_nothing_is_written(tmp_path, layout, match) -> None:
    """A list of samples given a dense or packed layout: every check of that bundle would raise."""
    with pytest.raises(TypeError, match=match):
        ts.record_batch(rows_of("text"), tmp_path / "b", schema="text", layout=layout)
    assert list(tmp_path.iterdir()) == []


def test_a_batch_that_breaks_its_schema_in_its_layout_is_still_recorded(tmp_path) -> None:
    """Only the form is read before writing: a dense batch with a broken mask is what a bundle is for."""
    layout = ts.load_layout("verl_dataproto").with_pad_token(0)
    dense = ts.load_schema("text").to_dense(rows_of("text"), layout=layout)
    dense["attention_mask"][0, -1] = 7
    got = ts.load_bundle(ts.record_batch(dense, tmp_path / "b", schema="text", layout=layout))
    assert [(v.sample, v.field) for v in got.violations()][:1] == [(0, "attention_mask")]
