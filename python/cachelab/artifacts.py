"""Reading, writing and finding the JSON artifacts every verb produces (see docs/artifacts.md).

Writes are atomic — a fresh temporary file beside the target (a name no one could have
prepared), then a rename — so a reader never sees half a result; and they replace only
regular files: a device, FIFO, socket or directory in the way is refused
(:func:`atomic_file`, :func:`in_the_way`), never opened or replaced. Reads accept the file
or a directory holding the verb's default file, and turn every problem into one
:class:`~cachelab.errors.InputError` naming the file (and the line, for JSON syntax errors).
:func:`find_artifacts` finds the results in directories: every ``*.json`` whose ``schema``
is one of cachelab's, read once and kept with its path (:class:`Artifact`); ``report`` and
``compare`` start from it. :func:`write_through` writes all of a result's files at once and,
when the target cannot take them, keeps them elsewhere: a measurement that took minutes is
never lost to a full disk or a removed directory.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, fields
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TypeVar

from cachelab.errors import InputError
from cachelab.schemas import check_fields

__all__ = ["KINDS", "Artifact", "Written", "atomic_dir", "atomic_file", "check_replaceable",
           "check_schema", "created_now", "describe_entry", "find_artifacts", "from_fields",
           "in_the_way", "os_error_text", "read_artifact", "read_json", "write_json",
           "write_through"]


def created_now() -> str:
    """The ``created`` of every artifact made now: UTC to the second, ``2026-11-25T12:00:00Z``."""
    return datetime.now(timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def write_json(path: str | Path, doc: Mapping[str, Any], *, allow_nan: bool = True) -> Path:
    """Write ``doc`` as indented JSON to ``path`` atomically (:func:`atomic_file`), creating
    parent directories."""
    path = Path(path)
    text = json.dumps(doc, indent=1, allow_nan=allow_nan) + "\n"
    with atomic_file(path) as tmp:
        tmp.write_text(text)
    return path


# -- what is at a path, and replacing only regular files -----------------------------------

#: File types by their test, as they are named in messages.
_TYPES = ((stat.S_ISREG, "a regular file"), (stat.S_ISDIR, "a directory"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"))


def _type_name(mode: int) -> str:
    return next((name for test, name in _TYPES if test(mode)), "a special file")


def describe_entry(path: str | os.PathLike[str]) -> str | None:
    """What is at ``path``, in words: None when nothing is; ``"a regular file"``, ``"a
    directory"``, ``"a character device"``, ``"a FIFO"``, ``"a socket"``, …; for a symbolic
    link, ``"a symlink to a FIFO"`` (what it points to) or ``"a dangling symlink"``."""
    try:
        st = os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    if not stat.S_ISLNK(st.st_mode):
        return _type_name(st.st_mode)
    try:
        return f"a symlink to {_type_name(os.stat(path).st_mode)}"
    except OSError:
        return "a dangling symlink"


def in_the_way(path: str | os.PathLike[str], *, directory: bool = False) -> str | None:
    """What is at ``path`` when a writer may not replace it (:func:`describe_entry`'s words),
    or None when nothing is there or a regular file is (or, with ``directory``, a directory:
    the writers that make a directory replace one), directly or through a symlink. Devices,
    FIFOs, sockets and dangling symlinks are always in the way."""
    what = describe_entry(path)
    allowed = {None, "a regular file", "a symlink to a regular file"}
    if directory:
        allowed |= {"a directory", "a symlink to a directory"}
    return None if what in allowed else what


def check_replaceable(path: str | os.PathLike[str], *, directory: bool = False) -> None:
    """OSError (naming ``path`` and what is there) when :func:`in_the_way` says a writer may
    not replace it; an OSError, so :func:`write_through` keeps the results elsewhere."""
    what = in_the_way(path, directory=directory)
    if what is not None:
        kind = "a regular file or directory" if directory else "a regular file"
        raise OSError(errno.EEXIST, f"is {what}, not {kind}: cachelab replaces nothing else",
                      str(path))


def _umask() -> int:
    """The process umask (temporary files are created private; the result should not be)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


@contextmanager
def atomic_file(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yields a fresh temporary file beside ``path`` (created by :func:`tempfile.mkstemp`: a
    new regular file under an unpredictable name, so nothing placed in advance is opened);
    renames it to ``path`` when the block succeeds and deletes it when the block raises.
    OSError, before anything is written, when ``path`` is not a regular file or absent
    (:func:`check_replaceable`), and again before the rename."""
    target = Path(path)
    check_replaceable(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    os.close(fd)
    tmp = Path(name)
    try:
        os.chmod(tmp, 0o666 & ~_umask())
        yield tmp
        check_replaceable(target)
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


@contextmanager
def atomic_dir(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yields a fresh temporary directory beside ``path``; when the block succeeds it takes
    ``path``'s place (replacing an existing directory or regular file of that name), and when
    the block raises it is removed and ``path`` is left as it was. OSError when something
    else is at ``path`` (:func:`check_replaceable`)."""
    target = Path(path)
    check_replaceable(target, directory=True)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent))
    os.chmod(tmp, 0o777 & ~_umask())
    try:
        yield tmp
        check_replaceable(target, directory=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    old: Path | None = None
    if target.exists() or target.is_symlink():
        old = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".old", dir=target.parent))
        old.rmdir()
        os.replace(target, old)
    try:
        os.replace(tmp, target)
    except BaseException:
        if old is not None:
            os.replace(old, target)
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if old is not None:
        if old.is_dir() and not old.is_symlink():
            shutil.rmtree(old, ignore_errors=True)
        else:
            old.unlink(missing_ok=True)


@dataclass
class Written:
    """Where a result's files went: ``directory`` is the target, or, when ``failure`` says why
    the target could not take them, the rescue directory (None when even that failed)."""

    directory: Path | None
    paths: list[Path] = field(default_factory=list)
    failure: str | None = None
    #: Why the rescue failed too (None when it worked or was not needed).
    rescue_failure: str | None = None


def write_through(
    write: Callable[[Path], list[Path]],
    out: str | Path,
    *,
    name: str,
    essential: Callable[[Path], list[Path]] | None = None,
) -> Written:
    """Run ``write(directory)`` (a result's ``write``) into a scratch directory and move the
    files into ``out``, so ``out`` gets each file whole. On an OSError (disk full, ``out``
    removed or made read-only meanwhile) the files go to a fresh ``cachelab-NAME-*`` directory
    under :func:`tempfile.gettempdir` instead, and failing that, ``essential(directory)`` (the
    result's JSON) is tried there alone; the :class:`Written` says which happened.

    The scratch directory is made inside ``out`` rather than beside it: ``out`` was checked
    writable before the run, its parent was not (``--out .`` may sit in a read-only one), and
    a rename within one directory is atomic."""
    out = Path(out)
    try:
        return Written(out, _write_into(write, out))
    except OSError as e:
        failure = os_error_text(e, out)
    rescue: Path | None = None
    try:
        rescue = Path(tempfile.mkdtemp(prefix=f"cachelab-{name}-"))
        return Written(rescue, write(rescue), failure)
    except OSError as e:
        second = os_error_text(e, rescue or Path(tempfile.gettempdir()))
    if rescue is not None and essential is not None:
        try:
            return Written(rescue, essential(rescue), failure, rescue_failure=second)
        except OSError as e:
            second = os_error_text(e, rescue)
    return Written(None, [], failure, rescue_failure=second)


def _write_into(write: Callable[[Path], list[Path]], out: Path) -> list[Path]:
    """``write`` into a scratch directory inside ``out``, then each file renamed into place
    (none when any would replace something other than a regular file: OSError); the
    scratch (and ``out``, if this made it and it stayed empty) removed on failure."""
    made = not out.is_dir()
    out.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=".cachelab-tmp-", dir=out))
    try:
        paths = write(scratch)
        entries = sorted(scratch.iterdir())
        for entry in entries:  # all checked before any is moved
            check_replaceable(out / entry.name, directory=entry.is_dir())
        for entry in entries:
            os.replace(entry, out / entry.name)
        scratch.rmdir()
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)
        if made:
            with contextlib.suppress(OSError):  # not empty: keep it
                out.rmdir()
        raise
    return [out / p.relative_to(scratch) if p.is_relative_to(scratch) else p for p in paths]


def os_error_text(e: OSError, where: Path) -> str:
    """``PATH: reason`` for an OSError, naming the file it was about when it says."""
    return f"{e.filename or where}: {e.strerror or e}"


def read_json(path: str | Path, default_name: str) -> tuple[Path, dict[str, Any]]:
    """The JSON object in ``path`` (or ``path/default_name`` when ``path`` is a directory)."""
    path = Path(path)
    if path.is_dir():
        path = path / default_name
    try:
        data = json.loads(path.read_text())
    except OSError as e:
        raise InputError(f"{path}: {e.strerror or e}") from None
    except json.JSONDecodeError as e:
        raise InputError(f"{path}:{e.lineno}: not valid JSON: {e.msg}") from None
    if not isinstance(data, dict):
        raise InputError(f"{path}:1: expected a JSON object")
    return path, data


def check_schema(d: Mapping[str, Any], schema: str, version: int, what: str, where: str) -> None:
    """Refuse a document that is not ``schema`` at ``version``."""
    if d.get("schema") != schema or d.get("schema_version") != version:
        raise InputError(
            f"{where}: not a cachelab {what} version {version} "
            f"(schema {d.get('schema')!r}, version {d.get('schema_version')!r})"
        )


_D = TypeVar("_D")


def from_fields(cls: type[_D], d: Mapping[str, Any], where: str) -> _D:
    """The dataclass ``cls`` from the entries of ``d`` that name its fields (the others, such
    as ``schema``, are left out); InputError naming ``where`` when a required one is missing."""
    try:
        return cls(**{f.name: d[f.name] for f in fields(cls) if f.name in d})
    except TypeError as e:
        raise InputError(f"{where}: {e}") from None


# -- finding results ------------------------------------------------------------------------

#: Schema name -> (kind, the schema version this cachelab reads). The kind names a report
#: section and a comparison.
KINDS: dict[str, tuple[str, int]] = {
    "cachelab.run": ("run", 1),
    "cachelab.latency-profile": ("profile", 1),
    "cachelab.load": ("load", 2),
    "cachelab.scale": ("scale", 1),
    "cachelab.usl": ("usl", 1),
    "cachelab.simulation": ("simulation", 1),
    "cachelab.size": ("size", 1),
    "cachelab.tiers": ("tiers", 1),
    "cachelab.replay": ("replay", 2),
    "cachelab.compare": ("compare", 1),
}
#: Older schema versions the report still reads (their sections use no field that changed).
_ALSO_READS: dict[str, tuple[int, ...]] = {"cachelab.replay": (1,)}

#: Directories never searched (virtual environments, VCS data, caches).
_SKIP_DIRS = {".git", ".venv", "venv", "node_modules", "__pycache__", ".pytest_cache", "target"}
#: Files larger than this are not opened while searching (traces, not results).
_MAX_BYTES = 200 * 2**20


@dataclass
class Artifact:
    """One result file: where it is, which kind, and its parsed JSON."""

    path: Path
    schema: str
    kind: str
    data: dict[str, Any]

    @property
    def directory(self) -> Path:
        return self.path.parent


def read_artifact(path: Path) -> Artifact:
    """The artifact in ``path``; InputError when it is not one this cachelab reads: not
    JSON, another schema or version, or a field its readers use missing or of the wrong
    type (:func:`cachelab.schemas.check_fields`, naming the field)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise InputError(f"{path}: {e.strerror or e}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        line = getattr(e, "lineno", 1)
        raise InputError(f"{path}:{line}: not valid JSON: {getattr(e, 'msg', e)}") from None
    schema = data.get("schema") if isinstance(data, dict) else None
    if schema not in KINDS:
        raise InputError(f"{path}: not a cachelab result (schema {schema!r})")
    kind, version = KINDS[schema]
    if data.get("schema_version") != version and \
            data.get("schema_version") not in _ALSO_READS.get(schema, ()):
        raise InputError(f"{path}: {schema} version {data.get('schema_version')!r} is not "
                         f"supported (this cachelab reads version {version})")
    check_fields(data, kind, str(path))
    return Artifact(path=path, schema=schema, kind=kind, data=data)


def _candidates(root: Path) -> Iterable[Path]:
    if root.is_file():
        yield root
        return
    for path in sorted(root.rglob("*.json")):
        if any(part in _SKIP_DIRS for part in path.relative_to(root).parts[:-1]):
            continue
        yield path


def find_artifacts(
    paths: Iterable[str | Path], skipped: list[str] | None = None
) -> list[Artifact]:
    """Every cachelab result under ``paths`` (files or directories, searched recursively), in
    path order. A file named directly must be a result; JSON files met while searching that
    are not cachelab results are skipped, and those that look like one but cannot be read
    (another schema version, bad JSON) are named in ``skipped``. A path that does not exist
    is an InputError."""
    found: list[Artifact] = []
    seen: set[Path] = set()
    for p in paths:
        root = Path(p)
        if not root.exists():
            raise InputError(f"{root}: no such file or directory")
        for path in _candidates(root):
            real = path.resolve()
            if real in seen:
                continue
            seen.add(real)
            if root.is_file():
                found.append(read_artifact(path))
                continue
            try:
                if path.stat().st_size > _MAX_BYTES:
                    continue
                head = path.read_bytes()[:4096]
            except OSError:
                continue
            if b'"schema"' not in head or b'"cachelab.' not in head:
                continue
            try:
                found.append(read_artifact(path))
            except InputError as e:
                if skipped is not None:
                    skipped.append(str(e))
    return found
