"""What the agreement tests measured of the pandera and TypedTensorDict exports of the packaged schemas.

``tests/export/test_tensordict_agreement.py`` draws a corpus per packaged schema with
trajschema's hypothesis strategies (derandomized, so every run draws the same one):
valid samples and valid TensorDicts of samples, and labelled invalid samples
([`invalid_samples`][trajschema.testing.invalid_samples]), each checked alone (a
TensorDict of one) and twice over (a TensorDict of two). It holds each export to its
contract, and these figures to what it finds:

* every valid case is accepted;
* every invalid sample with a violation the export expresses
  (`TensorDictColumns.expresses`) is rejected: ``expressed`` counts them;
* of the others, whose every violation is one the export cannot say, ``caught`` counts
  those rejected all the same, and ``missed`` the rest, by the code of the labelled violation.

The figures are those of the TensorDict of samples (no layout), and of the schema as
packaged: ``digest`` identifies the columns and gaps they were measured on, so a
changed schema prints no stale figures.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Mapping
from typing import TYPE_CHECKING

from trajschema.export.columns import wrapped

if TYPE_CHECKING:
    from trajschema.export.columns import TensorDictColumns

__all__ = ["HYPOTHESIS_VERSION", "MEASURED", "Measured", "columns_digest", "measured_lines"]


@dataclasses.dataclass(frozen=True)
class Measured:
    """One export's agreement with ``schema.violations`` on one schema's corpus (see the module docstring)."""

    digest: str
    valid: int
    invalid: int
    expressed: int
    caught: int
    missed: Mapping[str, int]


def columns_digest(cols: TensorDictColumns) -> str:
    """A short digest of the columns and gaps, so figures measured on other ones are not shown."""
    return hashlib.sha256(repr((cols.columns, sorted(cols.gaps.items()))).encode()).hexdigest()[:12]


def measured_lines(export: str, cols: TensorDictColumns) -> list[str]:
    """The header comment's lines on what the tests measured, when they measured these columns."""
    m = MEASURED.get((export, cols.schema))
    if m is None or cols.layout is not None or m.digest != columns_digest(cols):
        return []
    missed = sum(m.missed.values())
    by_code = ", ".join(f"{code} {n}" for code, n in sorted(m.missed.items(), key=lambda kv: (-kv[1], kv[0])))
    text = (
        f"# Measured (tests/export/test_tensordict_agreement.py): {m.valid} valid samples and TensorDicts, "
        f"all accepted; of {m.invalid} labelled invalid samples, the {m.expressed} with a violation this "
        f"export states are all rejected"
        + (f", and {m.caught} more" if m.caught else "")
        + f"; it misses {missed}"
        + (f" (by the label's code: {by_code})." if missed else ".")
    )
    return wrapped(text, "# ")


#: The hypothesis the corpus was drawn with: another draws another corpus (the tests then check the
#: contract, not these figures).
HYPOTHESIS_VERSION = "6.170.27"

#: Filled in from the agreement tests' corpus (``python -m tests.export.tensordict_corpus`` prints
#: them; the tests hold them to it), by ``(export, schema)``.
MEASURED: dict[tuple[str, str], Measured] = {
    ("pandera", "distill"): Measured(
        digest="7cea88a95332",
        valid=60,
        invalid=200,
        expressed=81,
        caught=0,
        missed={"dim_mismatch": 29, "dim_range": 24, "dtype": 13, "tag": 53},
    ),
    ("pandera", "moe_routed"): Measured(
        digest="015f9a319664",
        valid=60,
        invalid=200,
        expressed=80,
        caught=0,
        missed={"dim_mismatch": 26, "dim_range": 27, "dtype": 7, "repeated": 23, "tag": 18, "value": 19},
    ),
    ("pandera", "text"): Measured(
        digest="26f09f274e70",
        valid=60,
        invalid=200,
        expressed=97,
        caught=6,
        missed={"dim_mismatch": 9, "dim_range": 21, "dtype": 19, "kind": 12, "missing": 7, "tag": 9, "value": 20},
    ),
    ("pandera", "vlm_mrope"): Measured(
        digest="aa0607c09f23",
        valid=60,
        invalid=200,
        expressed=73,
        caught=0,
        missed={
            "dim_mismatch": 25,
            "dim_range": 20,
            "dtype": 6,
            "kind": 12,
            "missing": 14,
            "rank": 16,
            "tag": 10,
            "value": 24,
        },
    ),
    ("pandera", "vlm_mrope_moe"): Measured(
        digest="deb7d77f8040",
        valid=60,
        invalid=200,
        expressed=78,
        caught=0,
        missed={"dim_mismatch": 22, "dim_range": 23, "kind": 19, "missing": 5, "repeated": 6, "tag": 34, "value": 13},
    ),
    ("typed-tensordict", "distill"): Measured(
        digest="7cea88a95332",
        valid=60,
        invalid=200,
        expressed=30,
        caught=0,
        missed={"dim_mismatch": 29, "dim_range": 24, "dtype": 34, "kind": 24, "rank": 6, "tag": 53},
    ),
    ("typed-tensordict", "moe_routed"): Measured(
        digest="015f9a319664",
        valid=60,
        invalid=200,
        expressed=18,
        caught=0,
        missed={
            "dim_mismatch": 26,
            "dim_range": 27,
            "dtype": 37,
            "kind": 10,
            "rank": 16,
            "repeated": 23,
            "tag": 18,
            "value": 25,
        },
    ),
    ("typed-tensordict", "text"): Measured(
        digest="26f09f274e70",
        valid=60,
        invalid=200,
        expressed=29,
        caught=0,
        missed={"dim_mismatch": 9, "dim_range": 21, "dtype": 43, "kind": 33, "rank": 35, "tag": 9, "value": 21},
    ),
    ("typed-tensordict", "vlm_mrope"): Measured(
        digest="aa0607c09f23",
        valid=60,
        invalid=200,
        expressed=35,
        caught=0,
        missed={"dim_mismatch": 25, "dim_range": 20, "dtype": 28, "kind": 20, "rank": 20, "tag": 10, "value": 42},
    ),
    ("typed-tensordict", "vlm_mrope_moe"): Measured(
        digest="deb7d77f8040",
        valid=60,
        invalid=200,
        expressed=28,
        caught=0,
        missed={
            "dim_mismatch": 22,
            "dim_range": 23,
            "dtype": 21,
            "kind": 31,
            "rank": 2,
            "repeated": 6,
            "shape": 9,
            "tag": 34,
            "value": 24,
        },
    ),
}
