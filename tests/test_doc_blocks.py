"""Every ```python block of README.md and docs/*.md runs as written.

Blocks of one page run top to bottom in one namespace, so a page is a script cut into
pieces. Three kinds of page:

* most pages run here, in this process (fast);
* pages that start a TransferQueue (their blocks call ``start_local_transfer_queue``)
  run in ONE subprocess together, since the test session may already hold a Ray with
  all its CPUs (marked ``tq`` and ``slow``). The subprocess starts one local Ray first
  and every page's ``start_local_transfer_queue()`` attaches to it (starting and
  closing only TransferQueue), which saves a Ray start per page; blocks there must
  therefore leave ``num_cpus`` out;
* pages that use ``trajschema.verl`` need verl 0.9.1: without it they skip, saying why
  (they fail under ``TRAJSCHEMA_REQUIRE_VERL=1``), and ``trajschema.verl.uninstall()``
  runs after them, so verl is left un-patched.

A failing block is reported with its page, the line its code starts on, and the
exception; tracebacks point at the page's own lines. Pages generated at build time
are not in ``docs/`` and are not collected.

A block right after a ``<!-- setup: ... -->`` line runs like any other, but the site does
not show it (``docs_hooks/setup_blocks.py``): stand-ins a reader does not need. A block
right after a ``<!-- not run: WHY -->`` line is shown but not run (e.g. code that needs a
Python version the tests do not run on).

Run as a module in the checkout (``python -m tests.test_doc_blocks PAGE...``) it executes
the given pages and prints one JSON result per page: that is the subprocess.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import importlib.util
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
import traceback
import warnings
from pathlib import Path
from typing import Any

import pytest

from tests import early
from tests.verl_support import verl_module

ROOT = Path(__file__).resolve().parents[1]

#: The suite must find at least this many blocks (33 when this was written), so it cannot
#: pass by finding none.
MIN_BLOCKS = 25
#: Seconds for the one subprocess running every TransferQueue page.
TQ_TIMEOUT_S = 240
#: Ray CPUs for that subprocess: the controller and up to 4 storage units (logical CPUs).
TQ_RAY_CPUS = 5
#: Starts each result line of the subprocess (a page may print lines of its own).
RESULT_PREFIX = "doc-block-result: "

#: What ``trajschema.verl.install()`` patches; imported first so that verl's import-time warnings stay quiet.
TRAINER_BASE = "verl.trainer.ppo.v1.trainer_base"

_NOT_RUN = re.compile(r"^[ \t]*<!-- not run: \S[^\n]*-->[ \t]*$")
_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^\s`]*)[^`]*$")


@dataclasses.dataclass(frozen=True)
class Block:
    """One fenced ```python block: the page, the line its code starts on (1-based), the code."""

    page: str
    line: int
    code: str


def pages() -> list[Path]:
    """README.md and every docs/*.md, as they are now."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def blocks(page: Path) -> list[Block]:
    """The ```python blocks of ``page``, in order (indented ones, e.g. in admonitions, too)."""
    found: list[Block] = []
    lines = page.read_text(encoding="utf-8").splitlines()
    rel = page.relative_to(ROOT).as_posix() if page.is_relative_to(ROOT) else str(page)
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if m is None:
            i += 1
            continue
        indent, fence, info = m["indent"], m["fence"], m["info"].lower()
        end = i + 1
        closing = re.compile(rf"^{re.escape(indent)}{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$")
        while end < len(lines) and not closing.match(lines[end]):
            end += 1
        if end == len(lines):
            raise AssertionError(f"{rel}:{i + 1}: a ``` fence is never closed")
        if info in ("python", "py") and not (i > 0 and _NOT_RUN.match(lines[i - 1])):
            body = [ln[len(indent) :] if ln.startswith(indent) else ln for ln in lines[i + 1 : end]]
            found.append(Block(rel, i + 2, textwrap.dedent("\n".join(body))))
        i = end + 1
    return found


def needs_tq(page_blocks: list[Block]) -> bool:
    return any("start_local_transfer_queue" in b.code for b in page_blocks)


def needs_verl(page_blocks: list[Block]) -> bool:
    return any(re.search(r"\btrajschema\.verl\b|\bfrom trajschema import verl\b", b.code) for b in page_blocks)


# -- running a page ---------------------------------------------------------------------


def run_page(page_blocks: list[Block]) -> str | None:
    """Run the blocks of one page in order in a fresh namespace; None, or why the first failing one failed."""
    namespace: dict[str, Any] = {"__name__": "__doc_block__"}
    saved_env = dict(os.environ)
    try:
        for block in page_blocks:
            # Padding with newlines makes the code's line numbers the page's line numbers.
            source = "\n" * (block.line - 1) + block.code
            try:
                exec(compile(source, str(ROOT / block.page), "exec"), namespace)
            except BaseException as exc:
                if isinstance(exc, KeyboardInterrupt):
                    raise
                tb = traceback.format_exception(type(exc), exc, exc.__traceback__)
                # Drop this harness's own frame; keep the page's frames and below.
                shown = "".join(tb[:1] + tb[2:]) if len(tb) > 2 else "".join(tb)
                return (
                    f"{block.page}: the python block starting at line {block.line} raised "
                    f"{type(exc).__name__}: {exc}\n{shown}"
                )
        return None
    finally:
        _cleanup(page_blocks, saved_env)


def _cleanup(page_blocks: list[Block], saved_env: dict[str, str]) -> None:
    """Leave the process as the page found it: environment, verl un-patched."""
    os.environ.clear()
    os.environ.update(saved_env)
    if needs_verl(page_blocks) and "trajschema.verl" in sys.modules:
        sys.modules["trajschema.verl"].uninstall()


# -- the pages, sorted by what they need ---------------------------------------------------

_REQUIRE_VERL = os.environ.get("TRAJSCHEMA_REQUIRE_VERL") == "1"


def _has_verl() -> bool:
    return importlib.util.find_spec("verl") is not None


def _has_tq() -> bool:
    return all(importlib.util.find_spec(m) is not None for m in ("ray", "transfer_queue"))


def _skip_without_verl(page: str) -> None:
    if _has_verl():
        return
    why = f"{page} uses trajschema.verl, which needs verl 0.9.1: pip install --no-deps -r .ci/verl-requirements.txt"
    if _REQUIRE_VERL:
        pytest.fail(f"TRAJSCHEMA_REQUIRE_VERL=1 but {why}")
    pytest.skip(why)


_ALL = {p.relative_to(ROOT).as_posix(): blocks(p) for p in pages()}
_WITH_BLOCKS = {page: bs for page, bs in _ALL.items() if bs}


def _param(page: str, page_blocks: list[Block]) -> Any:
    marks = []
    if needs_tq(page_blocks):
        marks += [pytest.mark.tq, pytest.mark.slow]
    if needs_verl(page_blocks):
        marks.append(pytest.mark.verl)
    return pytest.param(page, marks=marks, id=page)


def test_finds_blocks() -> None:
    total = sum(len(bs) for bs in _ALL.values())
    assert total >= MIN_BLOCKS, f"found only {total} python blocks in README.md and docs/*.md"
    assert len(_ALL["README.md"]) >= 3, "README.md should have its quickstart, TransferQueue and verl blocks"


def test_fences_parse(tmp_path: Path) -> None:
    """The parser sees what a reader sees: indented and longer fences, unclosed fences refused."""
    page = tmp_path / "page.md"
    page.write_text(
        "# t\n\n```python\nx = 1\n```\n\n!!! note\n    ```python\n    y = x + 1\n    ```\n\n"
        "````text\n```python\nnot python\n```\n````\n\n```console\n$ ls\n```\n",
        encoding="utf-8",
    )
    found = blocks(page)
    assert [(b.line, b.code) for b in found] == [(4, "x = 1"), (9, "y = x + 1")]
    assert run_page(found) is None
    page.write_text("```python\nx = 1\n", encoding="utf-8")
    with pytest.raises(AssertionError, match="never closed"):
        blocks(page)


def test_marked_blocks(tmp_path: Path) -> None:
    """A setup block runs (the site hides it); a block marked 'not run' is skipped, only with a reason."""
    page = tmp_path / "page.md"
    page.write_text(
        "<!-- setup: stand-ins -->\n```python\nx = 1\n```\n\n<!-- not run: needs Python 3.12 -->\n"
        "```python\nraise SystemError\n```\n\n<!-- not run: -->\n```python\ny = x + 1\n```\n",
        encoding="utf-8",
    )
    assert [b.code for b in blocks(page)] == ["x = 1", "y = x + 1"]
    verl = blocks(ROOT / "docs" / "verl.md")
    assert any("MemoryTransferQueue()" in b.code for b in verl)  # the page's hidden stand-ins still run


def test_failure_names_page_line_and_exception() -> None:
    failing = [Block("docs/x.md", 10, "a = 1"), Block("docs/x.md", 20, "b = 2\nc = undefined_name")]
    why = run_page(failing)
    assert why is not None
    assert why.startswith("docs/x.md: the python block starting at line 20 raised NameError:")
    assert "line 21" in why  # the traceback points at the page's own line


@pytest.mark.parametrize("page", [_param(p, bs) for p, bs in _WITH_BLOCKS.items() if not needs_tq(bs)])
def test_page_runs(page: str) -> None:
    page_blocks = _WITH_BLOCKS[page]
    if needs_verl(page_blocks):
        verl_module(TRAINER_BASE)  # skips without verl (fails under TRAJSCHEMA_REQUIRE_VERL=1); a quiet import
    why = run_page(page_blocks)
    if needs_verl(page_blocks):
        import trajschema.verl

        assert not trajschema.verl.installed(), f"{page} left verl patched"
    if why is not None:
        pytest.fail(why, pytrace=False)


class _TransferQueueRun:
    """The one subprocess that runs every TransferQueue page; started early, read when first needed."""

    def __init__(self, names: list[str], out: Any, err: Any) -> None:
        self.names = names
        self.deadline = time.monotonic() + TQ_TIMEOUT_S
        env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}  # a Ray of its own
        # Files, not pipes: nobody reads a pipe while the in-process pages run, and a full
        # one would stall the subprocess.
        self.out, self.err = out, err
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.test_doc_blocks", *names],  # cwd=ROOT: the repository root on sys.path
            cwd=ROOT,
            env=env,
            stdout=self.out,
            stderr=self.err,
            text=True,
            start_new_session=True,  # so a timeout can stop Ray's processes with it
        )
        self._results: dict[str, str | None] | None = None

    def results(self) -> dict[str, str | None]:
        if self._results is None:
            self._results = self._collect()
        return self._results

    def _collect(self) -> dict[str, str | None]:
        try:
            self.proc.wait(timeout=max(1.0, self.deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            self.stop()
            self.proc.wait()
            err = self._read(self.err)
            pytest.fail(f"the TransferQueue pages {self.names} did not finish within {TQ_TIMEOUT_S}s:\n{err[-4000:]}")
        out, err = self._read(self.out), self._read(self.err)
        results = {}
        for line in out.splitlines():
            if line.startswith(RESULT_PREFIX):
                record = json.loads(line[len(RESULT_PREFIX) :])
                results[record["page"]] = record["error"]
        missing = [p for p in self.names if p not in results]
        assert not missing, f"no result for {missing} (exit code {self.proc.returncode}):\n{err[-4000:]}"
        return results

    @staticmethod
    def _read(f: Any) -> str:
        f.seek(0)
        return f.read()

    def stop(self) -> None:
        """Kill the subprocess and Ray's processes with it (they share its process group); close its files."""
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        self.out.close()
        self.err.close()


def _tq_pages() -> list[str]:
    return [p for p, bs in _WITH_BLOCKS.items() if needs_tq(bs) and (_has_verl() or not needs_verl(bs))]


def start_early(items: list[pytest.Item]) -> _TransferQueueRun | None:
    """The TransferQueue pages' subprocess, when any is selected; ``tests/conftest.py`` calls this when
    collection ends (tests/early.py), so that it runs beside the whole session."""
    if not (any("tq_results" in getattr(item, "fixturenames", ()) for item in items) and _has_tq() and _tq_pages()):
        return None
    return _TransferQueueRun(_tq_pages(), tempfile.TemporaryFile("w+"), tempfile.TemporaryFile("w+"))


@pytest.fixture(scope="module", autouse=True)
def _tq_run(request: pytest.FixtureRequest) -> Any:
    """The subprocess started when collection ended (else now), stopped when the module ends."""
    run = early.take(request.config, __name__) or start_early(request.session.items)
    yield run
    if run is not None:
        run.stop()


@pytest.fixture(scope="module")
def tq_results(_tq_run: _TransferQueueRun | None) -> dict[str, str | None]:
    """page -> None, or why it failed, for every TransferQueue page that can run here."""
    if not _has_tq():
        pytest.skip("these pages need Ray and TransferQueue: the tq extra, pip install -e '.[tq]' in the checkout")
    assert _tq_run is not None
    return _tq_run.results()


@pytest.mark.parametrize("page", [_param(p, bs) for p, bs in _WITH_BLOCKS.items() if needs_tq(bs)])
def test_transfer_queue_page_runs(page: str, tq_results: dict[str, str | None]) -> None:
    if needs_verl(_WITH_BLOCKS[page]):
        _skip_without_verl(page)
    why = tq_results[page]
    if why is not None:
        pytest.fail(why, pytrace=False)


# -- the subprocess -----------------------------------------------------------------------


def _main(names: list[str]) -> int:
    """Run the given TransferQueue pages on one local Ray; print a JSON line per page."""
    import logging

    import ray

    if any(needs_verl(blocks(ROOT / name)) for name in names):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # verl warns about every engine it cannot load on CPU
            importlib.import_module(TRAINER_BASE)
    ray.init(address="local", num_cpus=TQ_RAY_CPUS, include_dashboard=False, logging_level=logging.ERROR)
    try:
        for name in names:
            _wait_for_free_cpus(ray)
            started = time.perf_counter()
            why = run_page(blocks(ROOT / name))
            seconds = round(time.perf_counter() - started, 1)
            print(RESULT_PREFIX + json.dumps({"page": name, "error": why, "seconds": seconds}), flush=True)
    finally:
        ray.shutdown()
    return 0


def _wait_for_free_cpus(ray: Any, timeout_s: float = 30) -> None:
    """Ray frees the CPUs of killed actors a moment after the kill: wait until the last page's are back."""
    deadline = time.monotonic() + timeout_s
    while ray.available_resources().get("CPU", 0) < TQ_RAY_CPUS and time.monotonic() < deadline:
        time.sleep(0.1)


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
