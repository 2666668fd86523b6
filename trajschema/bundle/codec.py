"""A batch as tensors plus a JSON tree, and back: what a bundle stores, without pickle.

`encode` walks a batch (a list of samples, a TensorDict, a mapping of columns, verl's
``DataProto``, SkyRL's ``TrainingInputBatch``) and answers ``(tensors, tree)``: every tensor
under a generated key (``t0``, ``t1``, ...) for ``safetensors``, and a JSON tree naming
each node's kind and where its tensors went. `decode` rebuilds the batch from the two:
bit-exact (the bytes of every tensor, its dtype and shape), with the same containers, and
with one object wherever the batch held one object twice (verl's ``loss_mask is
response_mask``).

Node kinds (``"t"``): ``tensor`` (a strided tensor), ``jagged`` (a jagged nested tensor:
its flat values, offsets, lengths when narrowed, ragged index), ``nested`` (a strided nested
tensor: one tensor per row), ``ref`` (the node already written at ``id``), ``json`` (a
string, number, bool or ``None``), ``list``, ``tuple``, ``dict`` (string keys), ``numpy``
(a numeric array, stored as a tensor) and ``numpy_object`` (an object array of JSON
values), ``nontensor`` (tensordict's ``NonTensorData``), ``nontensor_stack``, ``dense_batch`` and
``packed_batch`` (`DenseBatch`, `PackedBatch`: items and ``metadata``), ``dataclass`` (a
dataclass's fields, with its class's dotted name: read back as a dict of the fields plus
``"__class__"``, the class never imported), ``tensordict``
(with its batch size), ``dataproto`` (verl's class where verl imports, else a `RecordedDataProto`:
its ``batch``, ``non_tensor_batch`` and ``meta_info``, which every check reads as it reads verl's), ``training_input``
(SkyRL's class where it imports, else a `DenseBatch`: a dict with ``metadata``, which every
check reads as it reads SkyRL's) and ``tensor_list`` (SkyRL's per-row ``TensorList`` of
images, else a list of its tensors). Anything else is refused with `BundleError` naming its path: a bundle
holds data, never code.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

import torch

from trajschema.check import without_fx_note
from trajschema.core import BundleError, DenseBatch, PackedBatch

__all__ = ["RecordedDataProto", "decode", "encode"]


@dataclasses.dataclass
class RecordedDataProto:
    """A recorded verl ``DataProto``, as [`load_bundle`][trajschema.load_bundle] reads it where verl
    does not import: its three parts, which every check reads as it reads verl's (recorded again,
    it is a ``DataProto`` once more where verl imports).

    Attributes:
        batch: the tensors (a TensorDict).
        non_tensor_batch: the non-tensor columns by name (numpy object arrays).
        meta_info: the batch's ``meta_info``.
    """

    batch: Any
    non_tensor_batch: dict[str, Any]
    meta_info: dict[str, Any]


_JSON = (str, int, float, bool, type(None))

#: The dtypes safetensors stores (as of 0.4): every other one is refused, naming its path.
_STORABLE = frozenset(
    getattr(torch, n)
    for n in (
        "bool",
        "uint8",
        "int8",
        "int16",
        "int32",
        "int64",
        "uint16",
        "uint32",
        "uint64",
        "float16",
        "bfloat16",
        "float32",
        "float64",
        "float8_e4m3fn",
        "float8_e5m2",
        "complex64",
    )
    if hasattr(torch, n)
)


class _Writer:
    def __init__(self) -> None:
        self.tensors: dict[str, torch.Tensor] = {}
        self.storages: set[int] = set()  # the storages of the tensors kept so far
        self.seen: dict[int, int] = {}  # id(object) -> node id
        self.kept: list[Any] = []  # the objects of ``seen``, alive while encoding (ids stay unique)
        self.open: set[int] = set()  # ids of the containers being written (a cycle meets one)
        self.count = 0

    def tensor(self, t: torch.Tensor, path: str) -> str:
        if t.is_meta:
            raise BundleError(f"{path}: a meta tensor holds no values to record")
        if t.layout != torch.strided:
            raise BundleError(f"{path}: a {str(t.layout).removeprefix('torch.')} tensor cannot be recorded")
        if t.dtype not in _STORABLE:
            raise BundleError(
                f"{path}: a {str(t.dtype).removeprefix('torch.')} tensor cannot be recorded "
                "(safetensors has no such dtype)"
            )
        key = f"t{len(self.tensors)}"
        flat = t.detach().resolve_conj().resolve_neg().to("cpu").contiguous()
        storage = flat.untyped_storage().data_ptr() if flat.numel() else None
        if storage is not None and (storage in self.storages or flat.untyped_storage().nbytes() != flat.nbytes):
            flat = flat.clone()  # safetensors stores each tensor's own bytes: a view of shared memory is copied
        if storage is not None:
            self.storages.add(flat.untyped_storage().data_ptr())
        self.tensors[key] = flat
        return key

    def node(self, value: Any, path: str) -> dict[str, Any]:
        if isinstance(value, (torch.Tensor, list, dict, tuple)) or _is_tensordict(value):
            hit = self.seen.get(id(value))
            if hit is not None:
                if id(value) in self.open:
                    raise BundleError(f"{path}: holds itself (a cycle); a bundle holds trees of data")
                return {"t": "ref", "id": hit}
            self.count += 1
            self.seen[id(value)] = self.count
            self.kept.append(value)
            self.open.add(id(value))
            try:
                return {"id": self.count, **_node(self, value, path)}
            finally:
                self.open.discard(id(value))
        return _node(self, value, path)


def encode(batch: Any) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """``(tensors, tree)`` of ``batch`` (module docstring).

    Raises:
        BundleError: a value that cannot be recorded (a meta or sparse tensor, an object of
            no kind above, a dict with a key that is not a string), naming its path.
    """
    writer = _Writer()
    try:
        tree = writer.node(batch, "batch")
    except RecursionError:
        raise BundleError("batch: nested too deeply to record") from None
    return writer.tensors, tree


def _node(w: _Writer, value: Any, path: str) -> dict[str, Any]:
    if isinstance(value, torch.Tensor):
        return _tensor_node(w, value, path)
    if _is_tensordict(value):
        return _tensordict_node(w, value, path)
    kind = type(value).__name__
    if kind in ("NonTensorData", "NonTensorStack"):
        return _nontensor_node(w, value, path)
    if kind in ("DataProto", "RecordedDataProto") and hasattr(value, "non_tensor_batch"):
        return {
            "t": "dataproto",
            "batch": w.node(value.batch, f"{path}.batch"),
            "non_tensor_batch": w.node(dict(value.non_tensor_batch), f"{path}.non_tensor_batch"),
            "meta_info": w.node(dict(value.meta_info), f"{path}.meta_info"),
        }
    if kind == "TrainingInputBatch" and hasattr(value, "metadata"):
        columns = {k: value[k] for k in value.keys()}
        return {"t": "training_input", "columns": w.node(columns, path), "metadata": w.node(value.metadata, path)}
    if isinstance(value, (DenseBatch, PackedBatch)):
        items = _plain_node(w, dict(value), path)["items"]
        node = {"t": "dense_batch" if isinstance(value, DenseBatch) else "packed_batch", "items": items}
        node["metadata"] = w.node(value.metadata, f"{path}.metadata")
        if isinstance(value, DenseBatch) and value.sources:
            node["sources"] = w.node(value.sources, f"{path}.sources")
        return node
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = {f.name: w.node(getattr(value, f.name), f"{path}.{f.name}") for f in dataclasses.fields(value)}
        return {"t": "dataclass", "class": f"{type(value).__module__}.{type(value).__qualname__}", "fields": fields}
    if kind == "TensorList" and isinstance(getattr(value, "tensors", None), list):  # SkyRL's per-row images
        return {"t": "tensor_list", "items": [w.node(t, f"{path}[{i}]") for i, t in enumerate(value.tensors)]}
    if type(value).__module__ == "numpy" and kind == "ndarray":
        return _numpy_node(w, value, path)
    return _plain_node(w, value, path)


def _tensor_node(w: _Writer, t: torch.Tensor, path: str) -> dict[str, Any]:
    if t.is_nested and t.layout == torch.jagged:
        lengths = t.lengths()  # type: ignore[attr-defined]  # NJT-only method
        return {
            "t": "jagged",
            "values": w.tensor(t.values(), f"{path} (values)"),
            "offsets": w.tensor(t.offsets(), f"{path} (offsets)"),  # type: ignore[attr-defined]
            "lengths": None if lengths is None else w.tensor(lengths, f"{path} (lengths)"),
            "ragged_idx": int(t._ragged_idx),  # type: ignore[attr-defined]  # NJT-only attribute
        }
    if t.is_nested:
        return {"t": "nested", "parts": [w.tensor(p, f"{path}[{i}]") for i, p in enumerate(t.unbind(0))]}
    return {"t": "tensor", "key": w.tensor(t, path)}


def _tensordict_node(w: _Writer, td: Any, path: str) -> dict[str, Any]:
    items = {}
    for key in td.keys():
        if not isinstance(key, str):
            raise BundleError(f"{path}: key {key!r} is not a string")
        items[key] = w.node(td.get(key), f"{path}.{key}")
    return {"t": "tensordict", "batch_size": list(td.batch_size), "items": items}


def _nontensor_node(w: _Writer, value: Any, path: str) -> dict[str, Any]:
    if type(value).__name__ == "NonTensorData":
        return {"t": "nontensor", "batch_size": list(value.batch_size), "value": w.node(value.data, path)}
    rows = value.tolist()
    return {
        "t": "nontensor_stack",
        "batch_size": list(value.batch_size),
        "values": [w.node(v, f"{path}[{i}]") for i, v in enumerate(rows)],
    }


def _numpy_node(w: _Writer, a: Any, path: str) -> dict[str, Any]:
    if a.dtype.kind in "biuf":
        return {"t": "numpy", "key": w.tensor(torch.from_numpy(a.copy()), path)}
    if a.dtype.kind == "O":
        flat = [w.node(v, f"{path}[{i}]") for i, v in enumerate(a.reshape(-1).tolist())]
        return {"t": "numpy_object", "shape": list(a.shape), "values": flat}
    if a.dtype.kind == "U":
        return {"t": "numpy_str", "dtype": a.dtype.str, "shape": list(a.shape), "values": a.reshape(-1).tolist()}
    raise BundleError(f"{path}: a numpy array of dtype {a.dtype} cannot be recorded")


def _plain_node(w: _Writer, value: Any, path: str) -> dict[str, Any]:
    if isinstance(value, _JSON):
        if isinstance(value, float) and not math.isfinite(value):
            return {"t": "float", "value": repr(value)}  # JSON has no NaN or inf
        return {"t": "json", "value": value}
    if isinstance(value, (list, tuple)):
        items = [w.node(v, f"{path}[{i}]") for i, v in enumerate(value)]
        return {"t": "list" if isinstance(value, list) else "tuple", "items": items}
    if isinstance(value, Mapping):
        out = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise BundleError(f"{path}: key {k!r} ({type(k).__name__}) is not a string; a bundle keeps string keys")
            out[k] = w.node(v, f"{path}.{k}")
        return {"t": "dict", "items": out}
    raise BundleError(
        f"{path}: a {type(value).__module__}.{type(value).__name__} cannot be recorded "
        "(a bundle holds tensors, numbers, strings, lists and dicts of them; never pickled objects)"
    )


def _is_tensordict(value: Any) -> bool:
    return type(value).__name__ == "TensorDict" and hasattr(value, "batch_size")


class _Reader:
    def __init__(self, tensors: Mapping[str, torch.Tensor]) -> None:
        self.tensors = tensors
        self.made: dict[int, Any] = {}

    def tensor(self, key: Any, path: str) -> torch.Tensor:
        t = self.tensors.get(key) if isinstance(key, str) else None
        if t is None:
            raise BundleError(f"{path}: the tensors payload holds no tensor {key!r}")
        return t

    def node(self, node: Any, path: str) -> Any:
        if not isinstance(node, Mapping) or not isinstance(node.get("t"), str):
            raise BundleError(f'{path}: expected a node with a kind ("t"), found {type(node).__name__}')
        if node["t"] == "ref":
            if node.get("id") not in self.made:
                raise BundleError(f"{path}: refers to node {node.get('id')!r}, which comes later or nowhere")
            return self.made[node["id"]]
        value = _decode(self, node, path)
        if "id" in node:
            self.made[node["id"]] = value
        return value


def decode(tensors: Mapping[str, torch.Tensor], tree: Any) -> Any:
    """The batch `encode` gave ``(tensors, tree)`` for.

    Raises:
        BundleError: the tree is malformed, names a tensor the payload lacks, or holds parts
            verl's or SkyRL's batch class refuses, naming the path.
    """
    try:
        return _Reader(tensors).node(tree, "batch")
    except RecursionError:
        raise BundleError("batch: the recorded structure is nested too deeply to read") from None


def _decode(r: _Reader, node: Mapping[str, Any], path: str) -> Any:
    kind = node["t"]
    if kind == "tensor":
        return r.tensor(node.get("key"), path)
    if kind == "jagged":
        return _jagged(r, node, path)
    if kind == "nested":
        parts = [r.tensor(k, f"{path}[{i}]") for i, k in enumerate(_list(node, "parts", path))]
        return torch.nested.as_nested_tensor(parts, layout=torch.strided)
    if kind == "float":
        if node.get("value") not in ("nan", "inf", "-inf"):
            raise BundleError(
                f"{path}: a non-finite float node must hold 'nan', 'inf' or '-inf', found {node.get('value')!r}"
            )
        return float(node["value"])
    if kind == "json":
        return node.get("value")
    if kind in ("list", "tuple"):
        items = [r.node(v, f"{path}[{i}]") for i, v in enumerate(_list(node, "items", path))]
        return items if kind == "list" else tuple(items)
    if kind == "dict":
        return {k: r.node(v, f"{path}.{k}") for k, v in _dict(node, "items", path).items()}
    if kind == "tensordict":
        return _tensordict(r, node, path)
    if kind in ("nontensor", "nontensor_stack"):
        return _nontensor(r, node, path)
    if kind in ("numpy", "numpy_object", "numpy_str"):
        return _numpy(r, node, path)
    if kind in ("dataproto", "training_input", "tensor_list"):
        return _trainer_batch(r, node, path)
    if kind in ("dataclass", "dense_batch", "packed_batch"):
        return _batch_dict(r, node, path)
    raise BundleError(f"{path}: unknown node kind {kind!r}")


def _batch_dict(r: _Reader, node: Mapping[str, Any], path: str) -> Any:
    """A dataclass's fields as a dict (never imported: the class named under ``__class__``),
    or a `DenseBatch` / `PackedBatch` with its ``metadata``."""
    if node["t"] == "dataclass":
        fields = {k: r.node(v, f"{path}.{k}") for k, v in _dict(node, "fields", path).items()}
        return {"__class__": str(node.get("class")), **fields}
    columns = {k: r.node(v, f"{path}.{k}") for k, v in _dict(node, "items", path).items()}
    metadata = r.node(node.get("metadata", {"t": "dict", "items": {}}), f"{path}.metadata")
    if node["t"] == "packed_batch":
        return PackedBatch(columns, metadata=metadata)
    dense = DenseBatch(columns, metadata=metadata)
    if "sources" in node:
        dense.sources = r.node(node["sources"], f"{path}.sources")
    return dense


def _tensor_list(tensors: list[Any]) -> Any:
    """SkyRL's ``TensorList`` of ``tensors`` where SkyRL imports, else the plain list (which the
    checks read per row alike)."""
    try:
        from skyrl.backends.skyrl_train.training_batch import TensorList  # type: ignore[import-untyped]
    except Exception:  # not installed, or below Python 3.12 (see _trainer_batch)
        return tensors
    return TensorList(tensors) if tensors else tensors


def _list(node: Mapping[str, Any], key: str, path: str) -> list[Any]:
    value = node.get(key)
    if not isinstance(value, list):
        raise BundleError(f"{path}: expected a list under {key!r}, found {type(value).__name__}")
    return value


def _dict(node: Mapping[str, Any], key: str, path: str) -> dict[str, Any]:
    value = node.get(key)
    if not isinstance(value, dict):
        raise BundleError(f"{path}: expected a mapping under {key!r}, found {type(value).__name__}")
    return value


def _jagged(r: _Reader, node: Mapping[str, Any], path: str) -> torch.Tensor:
    values, offsets = r.tensor(node.get("values"), path), r.tensor(node.get("offsets"), path)
    lengths = None if node.get("lengths") is None else r.tensor(node["lengths"], path)
    ragged = node.get("ragged_idx", 1)
    try:
        with without_fx_note():
            return torch.nested.nested_tensor_from_jagged(values, offsets, lengths, jagged_dim=ragged)
    except (RuntimeError, ValueError, TypeError) as exc:
        raise BundleError(f"{path}: its values, offsets and ragged index make no jagged tensor ({exc})") from None


def _tensordict(r: _Reader, node: Mapping[str, Any], path: str) -> Any:
    from tensordict import TensorDict

    items = {k: r.node(v, f"{path}.{k}") for k, v in _dict(node, "items", path).items()}
    try:
        td = TensorDict({}, batch_size=_list(node, "batch_size", path))
        for k, v in items.items():
            td[k] = v
    except (RuntimeError, ValueError, TypeError) as exc:
        raise BundleError(f"{path}: its items do not fit its batch size ({exc})") from None
    return td


def _nontensor(r: _Reader, node: Mapping[str, Any], path: str) -> Any:
    from tensordict import NonTensorData

    if node["t"] == "nontensor":
        return NonTensorData(r.node(node.get("value"), path), batch_size=_list(node, "batch_size", path))
    rows = [r.node(v, f"{path}[{i}]") for i, v in enumerate(_list(node, "values", path))]
    dims = node.get("batch_size", [len(rows)])
    if not isinstance(dims, list) or not dims:
        raise BundleError(f"{path}: a non-tensor stack's batch size must be a non-empty list, found {dims!r}")
    return _stack(rows, len(dims), path)


def _stack(rows: list[Any], dims: int, path: str) -> Any:
    """``rows`` (nested ``dims`` deep, as ``NonTensorStack.tolist`` gives them) as a stack again."""
    from tensordict import NonTensorData, NonTensorStack

    if dims == 1:
        return NonTensorStack(*(NonTensorData(v) for v in rows))
    if not all(isinstance(v, list) for v in rows):
        raise BundleError(f"{path}: a {dims}-D non-tensor stack needs nested lists of rows")
    return NonTensorStack(*(_stack(v, dims - 1, f"{path}[{i}]") for i, v in enumerate(rows)))


def _numpy(r: _Reader, node: Mapping[str, Any], path: str) -> Any:
    import numpy as np

    if node["t"] == "numpy":
        return r.tensor(node.get("key"), path).numpy().copy()
    shape = tuple(_list(node, "shape", path))
    if node["t"] == "numpy_str":
        dtype = node.get("dtype")
        if not isinstance(dtype, str) or not dtype.lstrip("<>=|").startswith("U"):
            raise BundleError(f"{path}: a string array's dtype must be a numpy string dtype, found {dtype!r}")
        return np.array(_list(node, "values", path), dtype=np.dtype(dtype)).reshape(shape)
    flat = [r.node(v, f"{path}[{i}]") for i, v in enumerate(_list(node, "values", path))]
    out = np.empty(len(flat), dtype=object)
    out[:] = flat if flat else []
    return out.reshape(shape)


def _trainer_batch(r: _Reader, node: Mapping[str, Any], path: str) -> Any:
    if node["t"] == "dataproto":
        parts = {k: r.node(node.get(k), f"{path}.{k}") for k in ("batch", "non_tensor_batch", "meta_info")}
        for k in ("non_tensor_batch", "meta_info"):
            if not isinstance(parts[k], dict):
                raise BundleError(f"{path}.{k}: a DataProto's {k} must be a dict, found {type(parts[k]).__name__}")
        try:
            from verl import DataProto
        except ImportError:  # not installed: the parts, which the checks read alike
            return RecordedDataProto(**parts)
        return _rebuilt(DataProto, path, **parts)
    if node["t"] == "tensor_list":
        return _tensor_list([r.node(v, f"{path}[{i}]") for i, v in enumerate(_list(node, "items", path))])
    columns, metadata = r.node(node.get("columns"), path), r.node(node.get("metadata"), path)
    try:
        from skyrl.backends.skyrl_train.training_batch import TrainingInputBatch
    except Exception:  # not installed (ImportError), or below Python 3.12, where pydantic refuses
        # SkyRL 0.3.0's TypedDict (PydanticUserError): a dict with .metadata, which the checks read the same way
        return DenseBatch(columns, metadata=metadata)
    batch = _rebuilt(TrainingInputBatch, path, columns)
    batch.metadata = metadata
    return batch


def _rebuilt(cls: Any, path: str, *args: Any, **kwargs: Any) -> Any:
    """A trainer's batch class made from recorded parts; what its constructor refuses (a bundle
    edited by hand: verl asserts each non-tensor column has the batch's rows) is a `BundleError`."""
    try:
        return cls(*args, **kwargs)
    except Exception as exc:
        raise BundleError(f"{path}: {cls.__name__} refuses the recorded parts ({type(exc).__name__}: {exc})") from None
