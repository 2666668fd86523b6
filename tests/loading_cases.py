"""A small valid schema file that the loading tests break one key at a time, and texts they share."""

from typing import NamedTuple

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


def with_field(spec: str, name: str = "x") -> str:
    """BASE plus one field, written as a flow mapping."""
    return BASE + f"  {name}: {{{spec}}}\n"


#: Aliases of aliases: a few lines that expand to 9**8 values once walked ("billion laughs").
LAUGHS = "name: bad\na: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{n}: &{n} [{', '.join([f'*{p}'] * 9)}]\n" for p, n in zip("abcdefg", "bcdefgh")
)

#: A size torch cannot hold.
HUGE = str(2**70)  # 1180591620717411303424


class Mistake(NamedTuple):
    """One mistake in ``BASE``: ``old`` replaced by ``new`` (appended when ``old`` is empty).

    ``path`` and ``words`` are what the problem says; ``token`` is the text it points at,
    the first of it inside ``new`` (a key, a value, the key of a mapping).
    """

    id: str
    old: str
    new: str
    path: str
    words: str
    token: str


#: Mistakes of different kinds, each alone in its own entry, so that any two of them are
#: independent (none is a consequence of another) and a file with all of them has all.
MISTAKES = (
    Mistake("dim-key-typo", "prompt: {min: 1}", "prompt: {mn: 1}", "dims.prompt", "unknown key 'mn'", "mn"),
    Mistake(
        "dim-max-below-min",
        "response: {}",
        "response: {min: 4, max: 2}",
        "dims.response",
        "max 2 is below min 4",
        "response",
    ),
    Mistake("negative-fixed-dim", "rope_rows: 4", "rope_rows: -4", "dims.rope_rows", "cannot be negative", "-4"),
    Mistake("dtype-typo", "dtype: int64", "dtype: int46", "fields.input_ids.dtype", "unknown dtype 'int46'", "int46"),
    Mistake("pad-rule-typo", "pad: uid", "pad: uuid", "fields.uid.pad", "unknown pad rule 'uuid'", "uuid"),
    Mistake("tag-kind-typo", "", "tags:\n  turn: {kind: strr}\n", "tags.turn.kind", "unknown kind 'strr'", "strr"),
    Mistake("negative-padding", "", "padding:\n  response: -1\n", "padding.response", "cannot be negative", "-1"),
    Mistake(
        "field-key-typo",
        "",
        "  mask: {shape: [seq], dtype: int64, pad: 0, requried: false}\n",
        "fields.mask",
        "unknown key 'requried'",
        "requried",
    ),
    Mistake("field-without-pad", "", "  turns: {kind: int}\n", "fields.turns.pad", "has no pad rule", "turns"),
)


def with_mistakes(*mistakes: Mistake) -> tuple[str, list[tuple[str, str, int, int]]]:
    """``BASE`` with ``mistakes`` made, and for each its (path, words, line, column), found in the text."""
    text = BASE
    for m in mistakes:
        text = text.replace(m.old, m.new, 1) if m.old else _append(text, m.new)
    expected = []
    for m in mistakes:
        at = text.index(m.new) + m.new.index(m.token)
        line = text.count("\n", 0, at) + 1
        expected.append((m.path, m.words, line, at - (text.rfind("\n", 0, at) + 1) + 1))
    return text, expected


def _append(text: str, new: str) -> str:
    """A new field goes under ``fields:`` (the last section of ``BASE``) before any section added after it."""
    if new.startswith("  "):
        end = text.index("\n", text.index("  uid: ")) + 1
        return text[:end] + new + text[end:]
    return text + new
