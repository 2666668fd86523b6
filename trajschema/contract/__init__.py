"""The is_padding contract and the metrics filter that keeps padding out of metrics.

Internal: the public API is `trajschema` (and `trajschema.verl`, `trajschema.testing`); this
front lists what the other rooms take from this one.
"""

from trajschema.contract.contract import (
    check_padding_contract,
    is_padding,
    padding_contract_violations,
    real_count,
    real_mask,
)
from trajschema.contract.metrics import PaddingOnlyBatchWarning, exclude_padding, select_real

__all__ = [
    "PaddingOnlyBatchWarning",
    "check_padding_contract",
    "exclude_padding",
    "is_padding",
    "padding_contract_violations",
    "real_count",
    "real_mask",
    "select_real",
]
