"""Bundles against hostile input (an adversarial review's findings, each a test): round trips that
must stay bit-exact, paths and overwrites, manifests tampered with their checksums re-sealed,
corrupted payloads read without verification, and the recorder of a live run."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import trajschema as ts
from trajschema.bundle import Recorder
from trajschema.bundle.store import _canonical, sha256

TEXT = ts.load_schema("text")


def _rehashed_manifest_edit(path: Path, change) -> None:
    """Edit manifest.json and re-seal the schema's checksum (the manifest itself is not sealed)."""
    manifest = json.loads((path / "manifest.json").read_text())
    change(manifest)
    manifest["schema"]["sha256"] = sha256(_canonical(manifest["schema"]["yaml"]))
    (path / "manifest.json").write_text(json.dumps(manifest))


@pytest.fixture
def bundle(tmp_path) -> Path:
    return ts.record_batch([], tmp_path / "b", schema="text")


# -- codec: round trips that are not bit-exact, or that do not read back ------------------------------


def test_conjugate_view_round_trips_with_its_values(tmp_path):
    """A conj() view is stored with its values (the conjugate bit resolved), not its storage."""
    x = torch.tensor([1 + 2j, 3 - 4j]).conj()
    got = ts.load_bundle(ts.record_batch({"x": x}, tmp_path / "b", schema="text")).batch["x"]
    assert torch.equal(got, x.resolve_conj())


def test_numpy_string_arrays_keep_their_dtype(tmp_path):
    """codec._numpy: np.array(values) re-infers the dtype: <U10 comes back <U2, an empty <U3 array as float64."""
    batch = {"a": np.array(["a", "bb"], dtype="<U10"), "e": np.array([], dtype="<U3")}
    got = ts.load_bundle(ts.record_batch(batch, tmp_path / "b", schema="text")).batch
    assert (got["a"].dtype, got["e"].dtype) == (np.dtype("<U10"), np.dtype("<U3"))


def test_a_bt_tensordict_with_a_2d_nontensor_stack_reads_back(tmp_path):
    """A [B, T] NonTensorStack is rebuilt [B, T], not as a 1-d stack of lists."""
    from tensordict import NonTensorData, NonTensorStack, TensorDict

    s = NonTensorStack(*[NonTensorStack(*[NonTensorData(f"{i}{j}") for j in range(3)]) for i in range(2)])
    td = TensorDict({"a": torch.zeros(2, 3), "s": s}, batch_size=[2, 3])
    path = ts.record_batch(td, tmp_path / "b", schema="text")  # written fine
    got = ts.load_bundle(path).batch  # RuntimeError: "Received a new batch size torch.Size([2, 3]) ..."
    assert got.get("s").batch_size == torch.Size([2, 3])


def test_a_tensor_dtype_safetensors_lacks_is_a_bundle_error(tmp_path):
    """store.write_bundle: complex32 reaches safetensors.save_file, which raises KeyError(torch.complex32)."""
    with pytest.raises(ts.BundleError, match=r"batch\.x"):
        ts.record_batch({"x": torch.zeros(2, dtype=torch.complex32)}, tmp_path / "b", schema="text")


def test_a_tag_that_is_no_bool_is_recorded_and_left_uncounted(tmp_path):
    """A tag is data: recorded as it is (the check reports it), the manifest's padding count unknown."""
    path = ts.record_batch([], tmp_path / "b", schema="text", tags=[{"is_padding": torch.tensor([1, 0])}])
    got = ts.load_bundle(path)
    assert got.manifest["padding_rows"] is None and torch.equal(got.tags[0]["is_padding"], torch.tensor([1, 0]))


# -- record_batch: paths ------------------------------------------------------------------------------


def test_a_parent_that_is_a_file_is_a_bundle_error(tmp_path):
    """store.write_bundle: path.parent.mkdir raises a bare FileExistsError (OSError)."""
    (tmp_path / "afile").write_text("x")
    with pytest.raises(ts.BundleError):
        ts.record_batch([], tmp_path / "afile" / "b", schema="text")


def test_a_legal_long_name_is_recorded(tmp_path):
    """The temporary sibling's name stays short, so a legal 250-character name records."""
    path = ts.record_batch([], tmp_path / ("x" * 250), schema="text")
    assert ts.load_bundle(path).batch == []


def test_overwrite_does_not_delete_a_directory_that_is_no_bundle(tmp_path):
    """store.write_bundle: overwrite=True rmtree()s whatever is at path ('replace a bundle'), e.g. a user's data dir."""
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "precious.txt").write_text("important")
    with pytest.raises(ts.BundleError, match="overwrite=True replaces only a bundle"):
        ts.record_batch([], tmp_path / "data", schema="text", overwrite=True)
    assert (tmp_path / "data" / "precious.txt").exists()


def test_overwrite_of_a_regular_file_is_a_bundle_error(tmp_path):
    """store.write_bundle: shutil.rmtree on a file raises a bare NotADirectoryError (OSError)."""
    (tmp_path / "f").write_text("x")
    with pytest.raises(ts.BundleError):
        ts.record_batch([], tmp_path / "f", schema="text", overwrite=True)


# -- load_bundle: a tampered manifest -----------------------------------------------------------------


def test_loading_a_bundle_writes_no_file_outside_it(bundle, tmp_path):
    """bundle._schema: ancestor names from the manifest are joined to a temp dir unchecked: an absolute
    (or ../) name writes '<name>.yaml' anywhere on disk when the bundle is loaded."""
    target = tmp_path / "pwned"
    _rehashed_manifest_edit(bundle, lambda m: m["schema"]["yaml"].update({str(target): "x: 1"}))
    with pytest.raises(ts.BundleError, match="schema names"):
        ts.load_bundle(bundle)
    assert not (tmp_path / "pwned.yaml").exists()


def test_an_ancestor_name_with_a_slash_is_a_bundle_error(bundle):
    """bundle._schema: writing '<tmp>/a/b.yaml' raises a bare FileNotFoundError (OSError)."""
    _rehashed_manifest_edit(bundle, lambda m: m["schema"]["yaml"].update({"a/b": "x: 1"}))
    with pytest.raises(ts.BundleError):
        ts.load_bundle(bundle)


def test_a_deeply_nested_schema_yaml_is_a_bundle_error(bundle):
    """bundle._schema: yaml.safe_load of '[[[[...]]]]' raises RecursionError (not caught)."""
    _rehashed_manifest_edit(bundle, lambda m: m["schema"]["yaml"].update(text="[" * 5000 + "]" * 5000))
    with pytest.raises(ts.BundleError):
        ts.load_bundle(bundle)


def test_schema_yaml_that_is_not_a_string_is_refused(bundle):
    """bundle._schema: str(texts[name]) turns a dict into its Python repr, which YAML parses as a flow
    mapping: a manifest whose 'yaml' is not text loads as if it were."""
    import yaml

    _rehashed_manifest_edit(
        bundle, lambda m: m["schema"]["yaml"].update(text=yaml.safe_load(m["schema"]["yaml"]["text"]))
    )
    with pytest.raises(ts.BundleError):
        ts.load_bundle(bundle)


def test_a_schema_name_that_is_a_list_is_a_bundle_error(bundle):
    """bundle._schema: `name not in texts` with a list name raises TypeError 'unhashable type: list', naming nothing."""
    _rehashed_manifest_edit(bundle, lambda m: m["schema"].update(name=["text"]))
    with pytest.raises(ts.BundleError):
        ts.load_bundle(bundle)


def _tree(batch: dict) -> dict:
    return {
        "t": "dict",
        "items": {"batch": batch, "tags": {"t": "json", "value": None}, "extras": {"t": "dict", "items": {}}},
    }


def test_a_corrupted_batch_json_without_verify_is_a_bundle_error_not_a_key_error(bundle):
    """codec._decode: a 'float' node without 'value' raises KeyError('value') under verify=False."""
    (bundle / "batch.json").write_text(json.dumps(_tree({"t": "float"})))
    with pytest.raises(ts.BundleError):
        ts.load_bundle(bundle, verify=False)


def test_a_corrupted_batch_json_without_verify_is_a_bundle_error_not_a_runtime_error(bundle):
    """codec._tensordict: an item whose leading size is not batch_size raises tensordict's RuntimeError."""
    from safetensors.torch import save_file

    save_file({"t0": torch.zeros(3)}, str(bundle / "tensors.safetensors"))
    node = {"t": "tensordict", "batch_size": [5], "items": {"x": {"t": "tensor", "key": "t0"}}}
    (bundle / "batch.json").write_text(json.dumps(_tree(node)))
    with pytest.raises(ts.BundleError):
        ts.load_bundle(bundle, verify=False)


# -- Recorder -----------------------------------------------------------------------------------------


def test_recorder_keep_1_keeps_the_bundle_it_just_wrote(tmp_path):
    """Recorder._prune sorts by step number: after step 10, recording step 3 (a restart, steps not increasing)
    deletes the bundle just written and returns its path, which no longer exists."""
    r = Recorder(tmp_path, keep=1)
    r.record([], schema=TEXT, step=10, broken="x")
    made = r.record([], schema=TEXT, step=3, broken="y")
    assert made is not None and made.exists()


def test_recorder_does_not_delete_unrelated_step_folders(tmp_path):
    """Recorder._prune deletes any step-NNNNNNNN directory in the folder, not only bundles it wrote."""
    mine = tmp_path / "step-00000000"
    mine.mkdir()
    (mine / "notes.txt").write_text("not a bundle")
    Recorder(tmp_path, keep=1).record([], schema=TEXT, step=5, broken="x")
    assert (mine / "notes.txt").exists()


def test_recording_never_breaks_the_step_with_a_float_step(tmp_path):
    """Recorder.record formats f'{step:08d}' outside its try: a float step raises ValueError into the trainer
    ('Recording never breaks the step it watches')."""
    r = Recorder(tmp_path, keep=2, every=5)
    r.record([], schema=TEXT, step=5.0)  # ValueError: Unknown format code 'd' for object of type 'float'


def _dataproto_bundle(bundle: Path, rows: int, uids: list[str]) -> None:
    """``bundle``'s payloads replaced by a DataProto of ``rows`` rows whose ``uid`` column holds ``uids``."""
    from safetensors.torch import save_file

    save_file({"t0": torch.zeros(rows, 2, dtype=torch.int64)}, str(bundle / "tensors.safetensors"))
    node = {
        "t": "dataproto",
        "batch": {"t": "tensordict", "batch_size": [rows], "items": {"input_ids": {"t": "tensor", "key": "t0"}}},
        "non_tensor_batch": {
            "t": "dict",
            "items": {
                "uid": {"t": "numpy_object", "shape": [len(uids)], "values": [{"t": "json", "value": u} for u in uids]}
            },
        },
        "meta_info": {"t": "dict", "items": {}},
    }
    (bundle / "batch.json").write_text(json.dumps(_tree(node)))


def test_a_dataproto_of_mismatched_parts_reads_without_verl_and_checks_with_a_violation(bundle, monkeypatch):
    """Without verl nothing asserts the parts agree: the recorded parts come back, and the check says what is wrong."""
    monkeypatch.setitem(sys.modules, "verl", None)
    _dataproto_bundle(bundle, 3, ["a", "b"])
    got = ts.load_bundle(bundle, verify=False)
    assert isinstance(got.batch, ts.RecordedDataProto) and list(got.batch.non_tensor_batch["uid"]) == ["a", "b"]
    found = ts.load_schema("text").batch_violations(
        got.batch, layout=ts.load_layout("verl_dataproto").with_pad_token(0)
    )
    assert ("uid", "batch") in {(v.field, v.code) for v in found}  # 2 uids for 3 rows
