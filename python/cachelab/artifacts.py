"""Reading and writing the JSON artifacts every verb produces (see docs/artifacts.md).

Writes are atomic — a temporary file beside the target, then a rename — so a reader never
sees half a result. Reads accept the file or a directory holding the verb's default file, and
turn every problem into one :class:`~cachelab.errors.InputError` naming the file (and the
line, for JSON syntax errors).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cachelab.errors import InputError

__all__ = ["check_schema", "read_json", "write_json"]


def write_json(path: str | Path, doc: Mapping[str, Any], *, allow_nan: bool = True) -> Path:
    """Write ``doc`` as indented JSON to ``path`` atomically, creating parent directories."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(doc, indent=1, allow_nan=allow_nan) + "\n")
    tmp.replace(path)
    return path


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
