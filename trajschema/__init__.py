"""trajschema: typed schemas and contracts for LLM reinforcement-learning trajectories.

A YAML schema per model family declares every field of a rollout sample (symbolic
shape, dtype, value checks, padding rule). From it, trajschema validates samples and
TransferQueue-shaped batches (reporting every violation at once), and derives padding
samples for growing a batch to the multiple a PPO/GRPO step needs.

    >>> import trajschema as ts
    >>> schema = ts.load_schema("vlm_mrope_moe")
    >>> pad = schema.padding(7, eos_token_id=2, dims={"layers": 48, "topk": 8, "experts": 128})
    >>> schema.validate_batch(pad.fields, tags=pad.tags)

Importing this package imports none of its rooms: each public name is imported when it
is first read, so ``trajschema --version`` answers without torch. Reading a name that
needs them (``ts.load_schema``, ``ts.Schema``) imports torch, tensordict and pydantic;
no name imports Ray, TransferQueue, hypothesis or rich until it runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from trajschema.core import VERSION
from trajschema.core import lazy_front as _lazy_front

if TYPE_CHECKING:
    from trajschema.bundle import Bundle, RecordedDataProto, load_bundle, record_batch
    from trajschema.contract import (
        PaddingOnlyBatchWarning,
        check_padding_contract,
        exclude_padding,
        is_padding,
        padding_contract_violations,
        real_count,
        real_mask,
        select_real,
    )
    from trajschema.core import (
        Batch,
        BundleError,
        BundleIntegrityError,
        BundleVersionError,
        DenseBatch,
        Depth,
        DerivedDim,
        Expr,
        FixedDim,
        FreeDim,
        Layout,
        LayoutDefinitionError,
        PackedBatch,
        PackedLayout,
        SchemaDefinitionError,
        SchemaError,
        SchemaMatchError,
        SchemaNotFoundError,
        SchemaProblem,
        Violation,
        ViolationCode,
    )
    from trajschema.evolution import Change
    from trajschema.files import layout_names, load_layout, schema_search_path
    from trajschema.load import (
        ModelConfigError,
        infer_schema,
        load_schema,
        schema_for_architecture,
        schema_for_config,
        schema_for_sample,
        schema_from_dict,
        schema_names,
    )
    from trajschema.padding import (
        PaddingBatch,
        PaddingMemoryError,
        PaddingSizeError,
        new_padding_uid,
        padding_needed,
        required_multiple,
    )
    from trajschema.runtime import (
        PaddingAuditError,
        StepAudit,
        audit_step,
        check_mode,
        checked,
        checks,
        set_check_mode,
    )
    from trajschema.schema import Field, PadRule, Schema, Tag
    from trajschema.tq import TransferQueueStartError, TransferQueueWriter, start_local_transfer_queue

__version__ = VERSION

__all__ = [
    "Batch",
    "Bundle",
    "BundleError",
    "BundleIntegrityError",
    "BundleVersionError",
    "Change",
    "DenseBatch",
    "Depth",
    "DerivedDim",
    "Expr",
    "Field",
    "FixedDim",
    "FreeDim",
    "Layout",
    "LayoutDefinitionError",
    "ModelConfigError",
    "PackedBatch",
    "PackedLayout",
    "PadRule",
    "PaddingAuditError",
    "PaddingBatch",
    "PaddingMemoryError",
    "PaddingOnlyBatchWarning",
    "PaddingSizeError",
    "RecordedDataProto",
    "Schema",
    "SchemaDefinitionError",
    "SchemaError",
    "SchemaMatchError",
    "SchemaNotFoundError",
    "SchemaProblem",
    "StepAudit",
    "Tag",
    "TransferQueueStartError",
    "TransferQueueWriter",
    "Violation",
    "ViolationCode",
    "audit_step",
    "check_mode",
    "check_padding_contract",
    "checked",
    "checks",
    "exclude_padding",
    "infer_schema",
    "is_padding",
    "layout_names",
    "load_bundle",
    "load_layout",
    "load_schema",
    "new_padding_uid",
    "padding_contract_violations",
    "padding_needed",
    "real_count",
    "real_mask",
    "record_batch",
    "required_multiple",
    "schema_for_architecture",
    "schema_for_config",
    "schema_for_sample",
    "schema_from_dict",
    "schema_names",
    "schema_search_path",
    "select_real",
    "set_check_mode",
    "start_local_transfer_queue",
]

#: Where each public name lives: it is imported from there when first read (see `trajschema.core.lazy`),
#: and a public class then reports itself under the package, not the private module.
_ROOMS: dict[str, tuple[str, ...]] = {
    "trajschema.schema": ("Field", "PadRule", "Schema", "Tag"),
    "trajschema.contract": (
        "PaddingOnlyBatchWarning",
        "check_padding_contract",
        "exclude_padding",
        "is_padding",
        "padding_contract_violations",
        "real_count",
        "real_mask",
        "select_real",
    ),
    "trajschema.bundle": ("Bundle", "RecordedDataProto", "load_bundle", "record_batch"),
    "trajschema.core": (
        "Batch",
        "BundleError",
        "BundleIntegrityError",
        "BundleVersionError",
        "DenseBatch",
        "Depth",
        "DerivedDim",
        "Expr",
        "FixedDim",
        "FreeDim",
        "Layout",
        "LayoutDefinitionError",
        "PackedBatch",
        "PackedLayout",
        "SchemaDefinitionError",
        "SchemaError",
        "SchemaMatchError",
        "SchemaNotFoundError",
        "SchemaProblem",
        "Violation",
        "ViolationCode",
    ),
    "trajschema.evolution": ("Change",),
    "trajschema.files": ("layout_names", "load_layout", "schema_search_path"),
    "trajschema.load": (
        "ModelConfigError",
        "infer_schema",
        "load_schema",
        "schema_for_architecture",
        "schema_for_config",
        "schema_for_sample",
        "schema_from_dict",
        "schema_names",
    ),
    "trajschema.padding": (
        "PaddingBatch",
        "PaddingMemoryError",
        "PaddingSizeError",
        "new_padding_uid",
        "padding_needed",
        "required_multiple",
    ),
    "trajschema.runtime": (
        "PaddingAuditError",
        "StepAudit",
        "audit_step",
        "check_mode",
        "checked",
        "checks",
        "set_check_mode",
    ),
    "trajschema.tq": ("TransferQueueStartError", "TransferQueueWriter", "start_local_transfer_queue"),
}

__getattr__, __dir__ = _lazy_front(__name__, _ROOMS, public_module=__name__)
