"""Two fixes to each rendered page's HTML: tables that scroll, and console blocks that copy without prompts.

- `wrap_tables` puts every top-level ``<table>`` inside Material's scrolling wrapper
  (``div.md-typeset__scrollwrap > div.md-typeset__table``) in the HTML itself. Material
  adds that wrapper only from its JavaScript, so a table wider than the page was clipped
  wherever the script had not run; ``docs/stylesheets/extra.css`` makes the wrapper the
  script then adds inside ours a no-op.
- `copy_commands` gives each code block with prompts (the ``console`` lexer's ``$ `` and
  ``pycon``'s ``>>> `` are ``.gp`` spans) a ``data-copy`` attribute holding only the
  commands, without their prompts and without the output. Material's copy button copies
  the ``data-copy`` of the nearest element that has one, instead of the block's text.

Both take and return the HTML of one page's content (what mkdocs' ``on_page_content`` hook gets).
"""

from __future__ import annotations

import html
import re

SCROLLWRAP = "md-typeset__scrollwrap"
_WRAP_OPEN = f'<div class="{SCROLLWRAP}"><div class="md-typeset__table">'
_WRAP_CLOSE = "</div></div>"
_TABLE_TAG = re.compile(r"<(/?)table\b[^>]*>", re.IGNORECASE)

_PRE_WITH_CODE = re.compile(r"<pre([^>]*)>(.*?)<code([^>]*)>(.*?)</code>", re.S)
_LINE_ANCHOR = re.compile(r'^(?:<a [^>]*id="__codelineno[^"]*"[^>]*></a>)+')
_PROMPT = re.compile(r'^<span class="gp">(.*?)</span>', re.S)
_TAG = re.compile(r"<[^>]+>")


def wrap_tables(page: str) -> str:
    """``page`` with each top-level table inside a scrolling wrapper (one already wrapped is left alone).

    >>> wrap_tables("<p>x</p><table></table>")
    '<p>x</p><div class="md-typeset__scrollwrap"><div class="md-typeset__table"><table></table></div></div>'
    >>> wrap_tables(wrap_tables("<table></table>")) == wrap_tables("<table></table>")
    True
    """
    out: list[str] = []
    depth, pos, start = 0, 0, 0
    for m in _TABLE_TAG.finditer(page):
        closing = bool(m[1])
        if not closing:
            depth += 1
            if depth == 1:
                start = m.start()
        elif depth:
            depth -= 1
            if depth == 0:
                already = page[:start].endswith(_WRAP_OPEN)
                out += [page[pos:start], "" if already else _WRAP_OPEN, page[start : m.end()]]
                out.append("" if already else _WRAP_CLOSE)
                pos = m.end()
    return "".join(out) + page[pos:]


def _text(fragment: str) -> str:
    return html.unescape(_TAG.sub("", fragment))


def commands(code_html: str) -> list[str]:
    """The commands of a highlighted code block: each line that starts with a prompt, without it.

    A command ending in a backslash goes on with the next line, as in a shell.

    >>> commands('<span class="gp">$ </span>ls<span class="w"> </span>-l\\nfile.txt\\n<span class="gp">$ </span>pwd')
    ['ls -l', 'pwd']
    """
    found: list[str] = []
    continued = False
    for line in code_html.split("\n"):
        line = _LINE_ANCHOR.sub("", line)
        prompt = _PROMPT.match(line)
        if prompt is not None:
            found.append(_text(line[prompt.end() :]))
        elif continued:
            found[-1] += "\n" + _text(line)
        continued = bool(found) and found[-1].endswith("\\") and (prompt is not None or continued)
    return found


def copy_commands(page: str) -> str:
    """``page`` with a ``data-copy`` attribute (the commands only) on each ``<pre>`` whose code has prompts."""

    def add(m: re.Match[str]) -> str:
        pre_attrs, between, code_attrs, code = m.groups()
        found = commands(code)
        if not found or "data-copy=" in pre_attrs:
            return m[0]
        copy = html.escape("\n".join(found), quote=True).replace("\n", "&#10;")
        return f'<pre{pre_attrs} data-copy="{copy}">{between}<code{code_attrs}>{code}</code>'

    return _PRE_WITH_CODE.sub(add, page)
