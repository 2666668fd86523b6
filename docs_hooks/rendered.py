"""Markdown that reached a built page unrendered.

A block whose Markdown extension `mkdocs.yml` does not enable is not an error to
Markdown: it is text. A `??? note` (a collapsible block, `pymdownx.details`) then shows
as a literal `??? note "…"` paragraph followed by its indented body as a code block
that starts with the literal fence of the code it held, and `mkdocs build --strict`
passes. `raw_markdown` finds what such a page shows:

- `???` or `!!!` (a details or admonition opener) in the text outside code;
- a code fence (three backticks) in the text outside code;
- inline Markdown in the text outside code: a backtick (a code span that did not close),
  ``**`` (emphasis), ``](`` (a link), ``][`` (a cross-reference mkdocs-autorefs did not
  resolve), ``{:`` (an attribute list), ``:::`` (an mkdocstrings block that was not
  expanded);
- a code block (`<pre>`) whose first line is a fence: an indented fenced block that was
  read as indented code;
- a list inside a paragraph: a line of a `<p>` that starts with ``- ``, ``* ``, ``+ `` or a
  number and a dot (Markdown starts a list only after a blank line, so a list written right under
  its sentence renders as one run-on paragraph).

The build hooks run it on every page (`docs_hooks.mkdocs_hooks`), and the site test on
every built `.html` file.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser

#: Elements whose text is code or not text at all.
_CODE = frozenset({"code", "pre", "kbd", "samp"})
_SKIP = frozenset({"script", "style", "template", "textarea"})
# ``**`` counts next to a letter only: ``2**24`` is arithmetic, ``**word`` is emphasis left unrendered.
_PROSE_MARKUP = re.compile(r"\?\?\?|!!!|`+|\*\*(?=[^\W\d])|(?<=[^\W\d])\*\*|\]\(|\]\[|\{:|:::")
_FENCE_LINE = re.compile(r"\s*(```|~~~)")
_LIST_ITEM = re.compile(r"^[ \t]*(?:[-*+]|\d+\.)[ \t]")


class _Reader(HTMLParser):
    """Collects the page's text outside code, the text of each `<pre>` and of each `<p>`, with line numbers.

    A paragraph's text is kept as runs of (text, whether it is inline code): a line that
    starts with code is not a list item, whatever the code says.
    """

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.open: dict[str, int] = {}  # tag -> how many are open (only the ones that matter)
        self.prose: list[tuple[int, str]] = []
        self.pre: list[tuple[int, list[str]]] = []
        self.paragraphs: list[tuple[int, list[tuple[str, bool]]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _CODE or tag in _SKIP or tag == "p":
            self.open[tag] = self.open.get(tag, 0) + 1
            if tag == "pre":
                self.pre.append((self.getpos()[0], []))
            if tag == "p":
                self.paragraphs.append((self.getpos()[0], []))

    def handle_endtag(self, tag: str) -> None:
        if self.open.get(tag):
            self.open[tag] -= 1

    def handle_data(self, data: str) -> None:
        if any(self.open.get(t) for t in _SKIP):
            return
        code = any(self.open.get(t) for t in _CODE)
        if self.open.get("p") and self.paragraphs:
            self.paragraphs[-1][1].append((data, code))
        if self.open.get("pre"):
            self.pre[-1][1].append(data)
        elif not code:
            self.prose.append((self.getpos()[0], data))


def raw_markdown(page: str) -> list[str]:
    """What ``page`` (HTML) shows of Markdown that was not rendered: one message per find, with its line.

    >>> raw_markdown('<p>??? note "x"</p><pre><code>```yaml\\na: 1\\n```</code></pre>')
    ['line 1: \\'??? note "x"\\' in the text', "line 1: a code block starting with a fence: '```yaml'"]
    >>> raw_markdown("<p>Use <code>```python</code> blocks.</p><details><summary>x</summary></details>")
    []
    >>> raw_markdown("<p>[<code>Schema</code>][ts.Schema]</p>")
    ["line 1: '][ts.Schema]' in the text"]
    >>> len(raw_markdown("<p>**bold**</p>")), raw_markdown("<p>2**24 and x ** 2</p>")
    (2, [])
    >>> raw_markdown("<p>It checks:\\n- shapes.</p>")
    ["line 2: a list inside a paragraph (no blank line before the list?): '- shapes.'"]
    """
    reader = _read(page)
    problems = []
    for line, text in reader.prose:
        for match in _PROSE_MARKUP.finditer(text):
            start = text.rfind("\n", 0, match.start()) + 1
            end = text.find("\n", match.end())
            excerpt = text[start : end if end >= 0 else None].strip()[:80]
            problems.append(f"line {line + text.count(chr(10), 0, match.start())}: {excerpt!r} in the text")
    for line, parts in reader.pre:
        first = next((ln for ln in "".join(parts).splitlines() if ln.strip()), "")
        if _FENCE_LINE.match(first):
            problems.append(f"line {line}: a code block starting with a fence: {first.strip()[:80]!r}")
    return problems + _lists_in_paragraphs(reader)


def lists_in_paragraphs(page: str) -> list[str]:
    """The lines of ``page``'s paragraphs (HTML) that start like a list item: one message per line.

    Part of `raw_markdown`; on its own for pages whose other Markdown is expanded later
    (a page of ``:::`` blocks rendered without mkdocstrings).

    >>> lists_in_paragraphs("<p>Two steps:\\n1. write;\\n<code>- x</code> is code</p><ul><li>a real list</li></ul>")
    ["line 2: a list inside a paragraph (no blank line before the list?): '1. write;'"]
    """
    return _lists_in_paragraphs(_read(page))


def _read(page: str) -> _Reader:
    reader = _Reader()
    reader.feed(page)
    reader.close()
    return reader


def _lists_in_paragraphs(reader: _Reader) -> list[str]:
    problems = []
    for line, runs in reader.paragraphs:
        # Code's characters are masked (its line breaks kept) to find where the text's lines start.
        masked = "".join(re.sub(r"[^\n]", "x", text) if code else text for text, code in runs).split("\n")
        for offset, text in enumerate("".join(text for text, _ in runs).split("\n")):
            if _LIST_ITEM.match(masked[offset]):
                problems.append(
                    f"line {line + offset}: a list inside a paragraph (no blank line before the list?): "
                    f"{text.strip()[:80]!r}"
                )
    return problems
