"""Lazy package attributes: a package's public names load on first use (PEP 562).

A package ``__init__`` that imported every verb would make importing any one of its modules
pay for all of them (numpy, pandas, the load engine …): simulating a flat trace would spend
more CPU importing than simulating. Instead the package lists which module holds each public
name and imports it when the name is first read::

    __getattr__, __dir__ = exports(__name__, {
        "cachelab.simulate.flat": ("simulate_flat", "miss_ratio_curve"),
    })

The package also imports the same names under ``if TYPE_CHECKING:`` (so readers, type checkers
and the architecture test see every edge) and lists them in ``__all__``;
tests/architecture checks that the three agree.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any


def exports(
    package: str, modules: Mapping[str, Sequence[str]]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for ``package``; ``modules`` maps a module's full name to
    the public names it provides."""
    where = {name: module for module, names in modules.items() for name in names}

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            if importlib.util.find_spec(f"{package}.{name}") is not None:  # a subpackage
                return importlib.import_module(f"{package}.{name}")
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        setattr(sys.modules[package], name, value)  # the next read is a plain attribute
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(where))

    return __getattr__, __dir__
