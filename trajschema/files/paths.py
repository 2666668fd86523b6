"""The search path of schema files: ``TRAJSCHEMA_PATH``, then the packaged ``schemas/``; each
directory scanned for ``*.yaml`` / ``*.yml``, the first file of a name winning, a missing entry
told once. The layout files' search (``files.layouts``) walks directories the same way."""

from __future__ import annotations

import os
import stat
import sys
import threading
import types
import warnings
from pathlib import Path
from typing import NamedTuple

from trajschema.files.filetext import refuse
from trajschema.files.reader import IS_A_DIRECTORY, NOTHING, file_problem, os_problem

__all__ = [
    "ENV_VAR",
    "NAME_SHOWN",
    "PATH_SHOWN",
    "Found",
    "Search",
    "missing_entry_note",
    "packaged_dir",
    "readable",
    "schema_search_path",
    "search_path_files",
    "shown_name",
]

#: Environment variable: extra schema directories (``os.pathsep``-separated),
#: searched before the packaged ones so a project can add or override families.
ENV_VAR = "TRAJSCHEMA_PATH"

# ---------------------------------------------------------------------------
# Search path


def packaged_dir() -> Path:
    # In a wheel the schemas sit inside the package; in a source checkout or an
    # editable install they are the repository's top-level `schemas/`.
    package = Path(__file__).resolve().parent.parent  # trajschema/, above this room
    inside = package / "schemas"
    if inside.is_dir():
        return inside
    return package.parent / "schemas"


def schema_search_path() -> list[Path]:
    """The directories searched for schema names: ``TRAJSCHEMA_PATH`` entries, then the packaged ones."""
    extra = [Path(p) for p in os.environ.get(ENV_VAR, "").split(os.pathsep) if p.strip()]
    return [*extra, packaged_dir()]


class Found(NamedTuple):
    """A schema file on the search path: where it is, and why it cannot be read (``None`` if it can be)."""

    path: Path
    problem: str | None


class Search(NamedTuple):
    """What the search path holds: the first file of each name, the directories that cannot be
    listed, and the entries that do not exist."""

    files: dict[str, Found]
    unlisted: list[tuple[Path, str]]
    missing: list[Path]

    def unlisted_note(self) -> str:
        return "".join(f"; {d} {why}" for d, why in self.unlisted)


_SUFFIXES = (".yaml", ".yml")


def _directory_problem(d: Path) -> str | None:
    """Why the search directory ``d`` cannot be listed: ``None`` when it can, ``NOTHING`` when it is missing.

    A missing directory holds nothing to look up, so lookups go on without it (saying so
    once, see `search_path_files`); a dangling or looping symbolic link, a file or a
    directory without permission is an entry that cannot be listed.
    """
    try:
        mode = os.stat(d).st_mode
    except (FileNotFoundError, NotADirectoryError) as exc:
        return os_problem(exc, d) if os.path.islink(d) else NOTHING
    except OSError as exc:
        return os_problem(exc, d)
    except ValueError:  # a NUL byte in the name
        return NOTHING
    return None if stat.S_ISDIR(mode) else f"is not a directory ({ENV_VAR} lists directories of schema files)"


def _scan(d: Path, name: str | None) -> tuple[list[tuple[str, Found]], str | None]:
    """The schema files of ``d`` by name (only ``name``'s, when given), and why ``d`` cannot be listed
    (``NOTHING`` when it does not exist)."""
    problem = _directory_problem(d)
    if problem == NOTHING:
        return [], NOTHING
    entries: list[str] = []
    if problem is None:
        try:
            with os.scandir(d) as listing:
                entries = sorted(e.name for e in listing)
        except OSError as exc:
            problem = f"cannot be listed: {exc.strerror or exc}"
    if problem is not None and name is not None:
        # A directory one may search but not list (or one that vanished): a known name can still be looked up.
        entries = [f"{name}{suffix}" for suffix in _SUFFIXES]
    found = []
    for entry in entries:
        p = d / entry
        if p.suffix not in _SUFFIXES or (name is not None and p.stem != name) or not os.path.lexists(p):
            continue  # not a schema file's name, or nothing there (or nothing one may see)
        why = file_problem(p)
        if why not in (NOTHING, IS_A_DIRECTORY):  # a directory named x.yaml is not a schema
            found.append((p.stem, Found(p, why)))
    return found, problem


def search_path_files(dirs: list[Path], name: str | None = None, *, quiet: bool = False) -> Search:
    """Every schema file on ``dirs`` (or only ``name``'s), the first of each name winning.

    A file that cannot be read (a dangling or looping symbolic link, a FIFO, a device)
    still takes its name: it is what the user put there, so it is reported, not skipped
    for a file of the same name further down the path.

    An entry that does not exist is left out of the lookup with a `UserWarning` naming
    it, once per entry per process (a typo in ``TRAJSCHEMA_PATH`` would otherwise hide
    every schema of that directory without a word). ``quiet=True`` is for a caller that
    shows the missing entries itself (`trajschema list`): they count as told.
    """
    files: dict[str, Found] = {}
    unlisted: list[tuple[Path, str]] = []
    missing: list[Path] = []
    for d in dirs:
        found, problem = _scan(d, name)
        if problem == NOTHING:
            missing.append(d)
        elif problem is not None:
            unlisted.append((d, problem))
        for stem, hit in found:
            files.setdefault(stem, hit)
    _tell_missing(missing, quiet)
    return Search(files, unlisted, missing)


#: The missing search path entries already warned about (or shown), so each is told once per process.
_TOLD: set[Path] = set()
_TOLD_LOCK = threading.Lock()
_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep  # as code objects name files


def missing_entry_note(d: Path) -> str:
    """What a search path entry that does not exist means for lookups (the warning's and `list`'s words)."""
    return f"search path entry {d} does not exist; schemas are looked up without it (check {ENV_VAR})"


def _tell_missing(missing: list[Path], quiet: bool) -> None:
    for d in missing:
        with _TOLD_LOCK:
            if d in _TOLD:
                continue
            _TOLD.add(d)
        if not quiet:
            warnings.warn(missing_entry_note(d), UserWarning, stacklevel=_caller_level())


def _caller_level() -> int:
    """The ``stacklevel`` of the first frame outside this package: the warning names the caller's line."""
    level = 2  # 1 is the function calling warnings.warn, 2 its caller
    frame: types.FrameType | None = sys._getframe(level)
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE_DIR):
        level, frame = level + 1, frame.f_back
    return level


#: A name longer than this is shown cut, with its length: an error message does not grow with the input.
NAME_SHOWN = 60
#: ... and a path (a real one can be long; the file system refuses one much longer than this).
PATH_SHOWN = 1000


def shown_name(text: str, limit: int = NAME_SHOWN) -> str:
    """``text`` quoted as an error message echoes a user-given name: whole up to ``limit``
    characters, else its first ``limit`` and its length (``'xxxxxxxx'…(5000 chars)``)."""
    if len(text) <= limit:
        return repr(text)
    return f"{text[:limit]!r}…({len(text)} chars)"


def readable(hit: Found) -> Path:
    """The resolved path of a found file, or its problem as a SchemaDefinitionError naming the file."""
    if hit.problem is not None:
        refuse(str(hit.path), "", hit.problem)
    return hit.path.resolve()
