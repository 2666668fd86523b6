"""install()'s reading of the actor model's config (``actor_rollout_ref.model``) and the pinned padding, without verl.

The installed ``upsample_batch_to_divisible_size`` wrapper is run directly, with a trainer
stub in the context install() gives it and the in-memory TransferQueue standing in for the
``transfer_queue`` module.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

import trajschema as ts
from tests.schema_texts import MOE_ROUTED
from tests.verl_support import verl_module
from trajschema.core import FixedDim
from trajschema.testing import MemoryTransferQueue, verl_sample
from trajschema.verl import VerlConfigError
from trajschema.verl import patch as _patch

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "configs"


@pytest.fixture(autouse=True)
def _schemas(tmp_path, monkeypatch):
    d = tmp_path / "schemas"
    d.mkdir()
    (d / "moe_routed.yaml").write_text(MOE_ROUTED)
    monkeypatch.setenv("TRAJSCHEMA_PATH", str(d))
    monkeypatch.setattr(_patch, "_model_configs", {})


@pytest.fixture(autouse=True)
def hf_cache(tmp_path, monkeypatch):
    """An empty Hugging Face cache of the test's own, so the machine's cache never answers.

    Without huggingface_hub no hub id is looked up; a test that needs the cache skips then."""
    cache = tmp_path / "hf-cache"
    cache.mkdir()
    try:
        import huggingface_hub.constants as constants
    except ImportError:
        return None
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    return cache


def cache_model(cache: Path | None, repo_id: str, config: dict, commit: str = "0123abcd") -> Path:
    """``config`` as the ``config.json`` of ``repo_id``'s ``main`` revision, laid out as transformers caches it."""
    if cache is None:
        pytest.skip("huggingface_hub is not installed (it comes with the verl requirements)")
    repo = cache / f"models--{repo_id.replace('/', '--')}"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(commit)
    snapshot = repo / "snapshots" / commit
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text(json.dumps(config))
    return snapshot / "config.json"


def verl_config(**model) -> dict:
    return {"actor_rollout_ref": {"actor": {}, "model": model}, "critic": {"enable": False}}


# -- which config is read ---------------------------------------------------------------------


def test_the_model_path_is_read_a_directory_or_its_config_json():
    for path in (FIXTURES / "mixtral", FIXTURES / "mixtral" / "config.json"):
        model = _patch.model_config_of(verl_config(path=str(path)))
        assert model is not None and model.top["num_local_experts"] == 8
        assert model.source == str(FIXTURES / "mixtral" / "config.json")


def test_hf_config_path_wins_over_path_as_verl_reads_it():
    model = _patch.model_config_of(
        verl_config(path=str(FIXTURES / "mixtral"), hf_config_path=str(FIXTURES / "qwen3-moe"))
    )
    assert model is not None and model.top["num_experts"] == 128
    # hf_config_path null: verl falls back to path, and so does this
    model = _patch.model_config_of(verl_config(path=str(FIXTURES / "qwen3-moe"), hf_config_path=None))
    assert model is not None and model.top["num_experts"] == 128


def test_a_home_relative_path_is_expanded(tmp_path, monkeypatch):
    shutil.copytree(FIXTURES / "qwen3-moe", tmp_path / "models" / "q")
    monkeypatch.setenv("HOME", str(tmp_path))
    model = _patch.model_config_of(verl_config(path="~/models/q"))
    assert model is not None and model.top["num_experts"] == 128


@pytest.mark.parametrize("path", ["Qwen/Qwen3-30B-A3B", "hdfs://cluster/models/q", "/no/such/dir"])
def test_a_path_that_is_not_local_is_skipped_never_downloaded(path):
    assert _patch.model_config_of(verl_config(path=path)) is None


def test_a_hub_id_is_read_from_the_local_hugging_face_cache(hf_cache):
    """verl's path names a hub model: its config.json in the cache is read, never downloaded."""
    config = json.loads((FIXTURES / "qwen3-moe" / "config.json").read_text())
    file = cache_model(hf_cache, "Qwen/Qwen3-30B-A3B", config)
    model = _patch.model_config_of(verl_config(path="Qwen/Qwen3-30B-A3B"))
    assert model is not None and model.top["num_experts"] == 128 and model.source == str(file)
    # hf_config_path wins, as verl reads it; another hub id, not cached, gives nothing
    assert _patch.model_config_of(verl_config(path="Qwen/Qwen3-30B-A3B", hf_config_path="org/other")) is None


@pytest.mark.parametrize("path", ["hdfs://cluster/models/q", "/no/such/dir", "not a repo id", "a/b/c"])
def test_what_is_not_a_hub_id_is_not_looked_up_in_the_cache(hf_cache, path):
    assert _patch.model_config_of(verl_config(path=path)) is None


def test_no_model_section_means_no_model_config():
    assert _patch.model_config_of({"actor_rollout_ref": {"actor": {}}}) is None
    assert _patch.model_config_of({}) is None


def test_a_model_path_that_is_not_a_str_names_the_key():
    with pytest.raises(VerlConfigError, match=r"config.actor_rollout_ref.model.path must be a path"):
        _patch.model_config_of(verl_config(path=5))
    with pytest.raises(VerlConfigError, match=r"config.actor_rollout_ref.model must be a mapping"):
        _patch.model_config_of({"actor_rollout_ref": {"model": "Qwen/Qwen3"}})


def test_a_local_config_that_cannot_be_read_is_a_typed_error_naming_the_file(tmp_path):
    (tmp_path / "m").mkdir()
    with pytest.raises(ts.ModelConfigError, match=r"the directory holds no config.json"):
        _patch.model_config_of(verl_config(path=str(tmp_path / "m")))
    (tmp_path / "m" / "config.json").write_text("{oops")
    with pytest.raises(ts.ModelConfigError, match=r"config.json: line 1, column 2: not JSON"):
        _patch.model_config_of(verl_config(path=str(tmp_path / "m")))


def test_a_config_is_read_once_and_again_when_it_changes(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"num_experts": 4}))
    config = verl_config(path=str(tmp_path))
    first = _patch.model_config_of(config)
    assert _patch.model_config_of(config) is first
    path.write_text(json.dumps({"num_experts": 16}))
    os.utime(path, ns=(1, 1))  # a new stamp even on a coarse clock
    again = _patch.model_config_of(config)
    assert again is not first and again.top["num_experts"] == 16


# -- the pinned schema the padding gets -------------------------------------------------------


@pytest.fixture
def tq(monkeypatch):
    client = MemoryTransferQueue()
    monkeypatch.setitem(sys.modules, "transfer_queue", client)  # `import transfer_queue` finds it
    return client


def put_batch(client, schema_name: str, n: int, **dims):
    schema = ts.load_schema(schema_name)
    writer = ts.TransferQueueWriter(schema, partition_id="p", eos_token_id=2, client=client)
    samples = [verl_sample(schema, 4, 2 + i, seed=i, uid=f"q{i}", **dims) for i in range(n)]
    return writer.put([f"k{i}" for i in range(n)], samples)


def run_installed(meta, multiple: int, config: dict):
    wrapper = _patch._upsample_for(None)
    token = _patch._trainer.set(SimpleNamespace(config=config))
    try:
        return wrapper(meta, multiple, 2)
    finally:
        _patch._trainer.reset(token)


def _spy_on_upsample(tq, monkeypatch) -> dict:
    """Route install()'s padding to ``tq`` and record the keywords it passes (the schema among them)."""
    seen: dict = {}
    real = _patch.upsample_batch_to_divisible_size

    def spy(batch, multiple, eos, **kw):
        seen.update(kw)
        return real(batch, multiple, eos, client=tq, **kw)

    monkeypatch.setattr(_patch, "upsample_batch_to_divisible_size", spy)
    return seen


def test_the_padding_gets_the_samples_schema_with_the_models_dims_pinned(tq, monkeypatch):
    meta = put_batch(tq, "moe_routed", 3, layers=32, topk=2)
    seen = _spy_on_upsample(tq, monkeypatch)
    out = run_installed(meta, 4, verl_config(path=str(FIXTURES / "mixtral")))
    schema = seen["schema"]
    assert schema.name == "moe_routed"
    assert {n: (d.size, d.source) for n, d in schema.dims.items() if isinstance(d, FixedDim)} == {
        "experts": (8, "config: num_local_experts"),
        "topk": (2, "config: num_experts_per_tok"),
        "layers": (32, "config: num_hidden_layers"),
    }
    assert seen["dims"] == {"prompt": 127, "response": 1}  # the layout's padding length, as before
    assert len(out.keys) == 4
    padded = tq.kv_batch_get(keys=[out.keys[-1]], partition_id="p")
    assert tuple(padded["routed_experts"][0].shape) == (128, 32, 2)


def test_samples_that_disagree_with_the_model_config_are_refused(tq):
    """Routes over 3 experts per token where the config says 2: the reference breaks the pinned schema."""
    meta = put_batch(tq, "moe_routed", 3, layers=32, topk=3)
    with pytest.raises(ts.SchemaError, match=r"like= sample"):
        run_installed(meta, 4, verl_config(path=str(FIXTURES / "mixtral")))
    assert len(tq.kv_list()["p"]) == 3  # nothing was written
    # without a local model config the same batch pads as before
    assert len(run_installed(meta, 4, verl_config(path="mistralai/Mixtral-8x7B-v0.1")).keys) == 4


def test_a_schema_that_reads_nothing_from_the_config_is_padded_as_it_is(tq):
    meta = put_batch(tq, "text", 3)
    assert _patch.pinned_schema(meta, 4, _patch.model_config_of(verl_config(path=str(FIXTURES / "mixtral")))) is (
        ts.load_schema("text")
    )
    assert len(run_installed(meta, 4, verl_config(path=str(FIXTURES / "mixtral"))).keys) == 4


def test_a_model_config_lacking_a_key_the_schema_reads_is_named(tq, tmp_path):
    config = json.loads((FIXTURES / "mixtral" / "config.json").read_text())
    del config["num_experts_per_tok"]
    (tmp_path / "config.json").write_text(json.dumps(config))
    meta = put_batch(tq, "moe_routed", 3, layers=32, topk=2)
    with pytest.raises(ts.ModelConfigError, match=r"config.json: num_experts_per_tok: the config gives no"):
        run_installed(meta, 4, verl_config(path=str(tmp_path)))


def test_nothing_is_read_when_no_padding_is_needed_or_the_batch_is_not_one(tq):
    model = _patch.model_config_of(verl_config(path=str(FIXTURES / "mixtral")))
    meta = put_batch(tq, "moe_routed", 4, layers=32, topk=2)
    calls = []
    tq.kv_batch_get = lambda **kw: calls.append(kw)  # type: ignore[method-assign]
    assert _patch.pinned_schema(meta, 4, model) is None  # 4 is a multiple of 4
    assert _patch.pinned_schema(None, 3, model) is None  # upsample refuses it in its own words
    assert _patch.pinned_schema(meta, 0, model) is None
    assert calls == []


def test_an_all_padding_batch_is_left_to_upsample_to_refuse(tq):
    model = _patch.model_config_of(verl_config(path=str(FIXTURES / "mixtral")))
    meta = put_batch(tq, "moe_routed", 3, layers=32, topk=2)
    meta.tags = [{**t, "is_padding": True} for t in meta.tags]
    assert _patch.pinned_schema(meta, 4, model) is None


@pytest.mark.verl
def test_install_reads_the_model_config_again(monkeypatch):
    verl_module("verl")
    _patch._model_configs["x"] = ((0, 0), None)  # type: ignore[assignment]
    monkeypatch.setattr(_patch, "_trainer_module", lambda: (_ for _ in ()).throw(ImportError("no verl")))
    with pytest.raises(ImportError):
        _patch.install()
    assert "x" in _patch._model_configs  # a refused install changes nothing
    monkeypatch.undo()
    monkeypatch.setattr(_patch, "_model_configs", {"x": ((0, 0), None)})
    _patch.install()
    try:
        assert _patch._model_configs == {}
    finally:
        _patch.uninstall()


# -- spread routes over the model's experts (issue 16) ----------------------------------------

#: MOE_ROUTED with its routes spread over the experts, as the packaged moe_routed says from issue 16.
MOE_ROUTED_SPREAD = MOE_ROUTED.replace(
    "min: 0, pad: 0}", "min: 0, max: experts - 1, distinct: true, pad: {spread: experts}}"
)


def test_padding_routes_spread_over_the_models_experts(tq, tmp_path, monkeypatch):
    """No dims, no extra line: install() reads the model path, and padding spreads over its 8 experts."""
    (tmp_path / "schemas" / "moe_routed.yaml").write_text(MOE_ROUTED_SPREAD)
    meta = put_batch(tq, "moe_routed", 3, layers=32, topk=2)
    seen = _spy_on_upsample(tq, monkeypatch)
    out = run_installed(meta, 8, verl_config(path=str(FIXTURES / "mixtral")))
    schema = seen["schema"]
    assert schema.dims["experts"].source == "config: num_local_experts"
    routes = tq.kv_batch_get(keys=out.keys[3:], partition_id="p")["routed_experts"]
    routes = torch.stack(list(routes.unbind())) if routes.is_nested else routes
    assert routes.shape == (5, 128, 32, 2)
    # 5 x 128 tokens x 2 slots over 8 experts: 160 each, in every layer; distinct in every token
    for layer in (0, 31):
        assert torch.bincount(routes[:, :, layer].flatten().long(), minlength=8).tolist() == [160] * 8
    assert (routes[..., 0] != routes[..., 1]).all()
    pad = schema.padding(5, eos_token_id=2, like=tq.kv_batch_get(keys=[out.keys[0]], partition_id="p")[0])
    assert pad.sources["experts"] == "config"


def test_without_a_model_config_the_real_samples_give_the_experts(tq, tmp_path):
    (tmp_path / "schemas" / "moe_routed.yaml").write_text(MOE_ROUTED_SPREAD)
    meta = put_batch(tq, "moe_routed", 3, layers=4, topk=2)
    out = run_installed(meta, 4, verl_config(path="mistralai/Mixtral-8x7B-v0.1"))  # a hub id: not read
    first = tq.kv_batch_get(keys=[meta.keys[0]], partition_id="p")["routed_experts"]
    largest = int(first.unbind()[0].max()) if first.is_nested else int(first[0].max())
    pad = tq.kv_batch_get(keys=[out.keys[-1]], partition_id="p")["routed_experts"]
    pad = pad.unbind()[0] if pad.is_nested else pad[0]
    assert int(pad.max()) == largest  # spread over exactly the reference's experts 0..largest


# -- the expert count from the model config in every padding call (issue 27, item 2) ---------------

#: A 64-expert model's config, as little of it as the schema reads.
CONFIG_64 = {
    "architectures": ["Qwen3MoeForCausalLM"],
    "num_experts": 64,
    "num_experts_per_tok": 2,
    "num_hidden_layers": 4,
}


def _spy_on_padding(monkeypatch) -> list:
    """Every PaddingBatch Schema.padding makes, in order."""
    made: list = []
    real = ts.Schema.padding

    def padding(self, *args, **kwargs):
        made.append(real(self, *args, **kwargs))
        return made[-1]

    monkeypatch.setattr(ts.Schema, "padding", padding)
    return made


@pytest.mark.parametrize("where", ["model-directory", "hub-cache"])
def test_every_padding_call_spreads_over_the_configs_experts(tq, tmp_path, hf_cache, monkeypatch, where):
    """Reference samples that route to experts 0..2 alone, a model config with 64: each of three steps' padding
    spreads over all 64 (sources says "config"), within the even share per layer, not over the reference's 3."""
    (tmp_path / "schemas" / "moe_routed.yaml").write_text(MOE_ROUTED_SPREAD)
    if where == "hub-cache":
        cache_model(hf_cache, "org/moe-64", CONFIG_64)
        path = "org/moe-64"
    else:
        (tmp_path / "model").mkdir()
        (tmp_path / "model" / "config.json").write_text(json.dumps(CONFIG_64))
        path = str(tmp_path / "model")
    made = _spy_on_padding(monkeypatch)
    schema = ts.load_schema("moe_routed")
    for step, (real, multiple) in enumerate([(3, 8), (5, 16), (2, 4)]):
        samples = [verl_sample(schema, 4, 2 + i, seed=i, uid=f"q{i}", layers=4, topk=2, experts=3) for i in range(real)]
        writer = ts.TransferQueueWriter(schema, partition_id="p", eos_token_id=2, client=tq)
        meta = writer.put([f"s{step}k{i}" for i in range(real)], samples)
        out = run_installed(meta, multiple, verl_config(path=path))
        assert made[-1].sources["experts"] == "config", step
        routes = tq.kv_batch_get(keys=out.keys[real:], partition_id="p")["routed_experts"]
        routes = torch.cat(list(routes.unbind())) if routes.is_nested else routes.flatten(0, 1)
        share = math.ceil(routes.shape[0] * 2 / 64)  # padding tokens x topk slots over 64 experts
        for layer in range(4):
            counts = torch.bincount(routes[:, layer].flatten().long(), minlength=64)
            assert counts.shape == (64,) and bool((counts > 0).all()) and int(counts.max()) <= share, (step, layer)
    assert len(made) == 3
