"""Setup blocks: code a page's examples need to run as a test, which a reader does not need to see.

``tests/test_doc_blocks.py`` runs every ```python block of a page, in order, in one
namespace; some pages need stand-ins first (a trainer object, an in-memory
TransferQueue). Such a block follows a ``<!-- setup: ... -->`` comment line: the test
runs it like any other, and the build hook removes the comment and the block from the
page before it is rendered.
"""

from __future__ import annotations

import re

#: The comment line that marks the fenced block right after it as setup.
MARKER = re.compile(r"^<!-- setup:[^\n]*-->\n(?P<fence>`{3,})python\n.*?^(?P=fence)[ \t]*$\n?", re.M | re.S)
_LOOSE = re.compile(r"^<!-- setup:", re.M)


class SetupBlockError(ValueError):
    """A setup comment that is not followed, on the next line, by a ```python block."""


def strip_setup_blocks(markdown: str, page: str = "page") -> str:
    """``markdown`` without its setup blocks (each marker comment and the python block after it).

    >>> strip_setup_blocks("a\\n\\n<!-- setup: x -->\\n```python\\nx = 1\\n```\\n\\nb\\n")
    'a\\n\\n\\nb\\n'
    """
    stripped = MARKER.sub("", markdown)
    if _LOOSE.search(stripped):
        raise SetupBlockError(f"{page}: a '<!-- setup: ... -->' line must be followed by a ```python block")
    return stripped
