"""The report's registry: artifact kind -> the verb's section builder (one table, no if/else)."""

from __future__ import annotations

from collections.abc import Callable

from cachelab.artifacts import Artifact
from cachelab.compare import section as compare_section
from cachelab.load import section as load_section
from cachelab.page.section import Context, Section
from cachelab.profile import section as profile_section
from cachelab.replay import section as replay_section
from cachelab.report import overview
from cachelab.scale import section as scale_section
from cachelab.simulate import section as simulation_section
from cachelab.size import section as size_section
from cachelab.tiers import section as tiers_section
from cachelab.usl import section as usl_section

__all__ = ["SECTIONS", "build_section"]

#: Artifact kind -> section builder.
SECTIONS: dict[str, Callable[[Artifact, Context], Section]] = {
    "run": overview.section,
    "profile": profile_section.section,
    "load": load_section.section,
    "scale": scale_section.section,
    "usl": usl_section.section,
    "simulation": simulation_section.section,
    "size": size_section.section,
    "tiers": tiers_section.section,
    "replay": replay_section.section,
    "compare": compare_section.section,
}


def build_section(art: Artifact, ctx: Context) -> Section:
    """The section of one artifact; a result this cachelab cannot render becomes a section
    that says so rather than a failed report."""
    try:
        return SECTIONS[art.kind](art, ctx)
    except (KeyError, TypeError, ValueError, IndexError, AttributeError) as e:
        sec = Section(f"{art.kind}: {art.path.name}", art.kind, art.path)
        sec.notes.append(f"this {art.kind} result could not be rendered: missing or bad field "
                         f"({type(e).__name__}: {e})")
        return sec
