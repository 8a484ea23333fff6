"""Loading a latency profile: a built-in one by name, or a saved ``profile.json``."""

from __future__ import annotations

import json
from pathlib import Path

from cachelab.errors import InputError
from cachelab.profile.builtin import PROFILES
from cachelab.profile.model import LatencyProfile
from cachelab.schemas import check_fields


def load_profile(name_or_path: str | Path) -> LatencyProfile:
    """A built-in profile by name (``appengine-2017``) or a saved ``profile.json`` (the file,
    or the directory holding it)."""
    if str(name_or_path) in PROFILES:
        return PROFILES[str(name_or_path)]()
    path = Path(name_or_path)
    if path.is_dir():
        path = path / "profile.json"
    try:
        text = path.read_text()
    except FileNotFoundError:
        known = ", ".join(PROFILES)
        raise InputError(
            f"{name_or_path}: no such file, and not a built-in profile ({known})"
        ) from None
    except OSError as e:
        raise InputError(f"{path}: {e.strerror}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise InputError(f"{path}:{e.lineno}: not valid JSON: {e.msg}") from None
    if not isinstance(data, dict):
        raise InputError(f"{path}:1: expected a JSON object")
    if data.get("schema") == "cachelab.latency-profile" and data.get("schema_version") == 1:
        check_fields(data, "profile", str(path))  # names a missing or mistyped field
    return LatencyProfile.from_dict(data, str(path))
