"""A small valid schema file that the loading tests break one key at a time."""

BASE = """\
name: bad
dims:
  prompt: {min: 1}
  response: {}
  seq: prompt + response
  rope_rows: 4
fields:
  input_ids: {shape: [seq], dtype: int64, pad: eos}
  uid: {kind: str, pad: uid}
"""


def edit_base(old: str, new: str) -> str:
    """``BASE`` with its first ``old`` replaced by ``new``."""
    assert old in BASE, old
    return BASE.replace(old, new, 1)
