"""Layouts: the ways a one-chunk profile may be cut into chunks per rank (``1``, ``v``,
``loopN``), their names, and which of them `solve` tries for a method.
"""

from __future__ import annotations

from ppsched.solver.model.chunking import with_chunks
from ppsched.solver.model.errors import ProfileError
from ppsched.solver.model.profile import Profile
from ppsched.solver.solving.method_names import HEURISTIC, ILP, ZB_LOOP

Layout = tuple[int, str | None]
"""Chunks per rank and placement: ``(1, None)``, ``(2, "v")``, ``(2, "loop")``, ..."""

# The layouts the heuristic and `ilp` consider by default for a one-chunk profile, at
# every memory level (issue 27): where memory does not bind, the V cut still halves the
# warm-up bubble (gpt1.5b-p8-m24 at 1p: 1188.4 against the single-chunk optimum 1309.5),
# and a solve that never tried it called 1309.5 optimal.
DEFAULT_LAYOUTS: tuple[Layout, ...] = ((1, None), (2, "v"), (2, "loop"))


def parse_layouts(text: str) -> tuple[Layout, ...]:
    """Layouts from their short names, comma-separated: ``1``, ``v`` (or ``v2``), ``loopN``.

    Raises:
        ProfileError: naming the bad entry and the accepted forms.
    """
    layouts: list[Layout] = []
    for item in (x.strip().lower() for x in text.split(",")):
        if item == "1":
            layouts.append((1, None))
        elif item in ("v", "v2"):
            layouts.append((2, "v"))
        elif item.startswith("loop") and item[4:].isdigit() and int(item[4:]) >= 2:
            layouts.append((int(item[4:]), "loop"))
        else:
            raise ProfileError("layouts", item, "a comma-separated list of 1 (one stage per "
                               "rank), v (V placement, 2 chunks) and loopN (N >= 2 chunks, "
                               "loop placement), e.g. 1,v,loop2")
    return tuple(dict.fromkeys(layouts))


def layout_name(layout: Layout) -> str:
    """The short name `parse_layouts` reads."""
    chunks, placement = layout
    return "1" if chunks == 1 else ("v" if placement == "v" else f"loop{chunks}")


def default_layouts(profile: Profile, method: str) -> tuple[Layout, ...]:
    """The layouts `solve` considers when the caller names none: for ``heuristic`` and
    ``ilp`` on a one-chunk profile `DEFAULT_LAYOUTS` (one V or loop search costs about
    one single-chunk search), for ``zb-loop`` its loop cut, else the profile's own."""
    if method == ZB_LOOP:  # what it solves (the service counts its ops from this)
        return loop_layouts(profile, ())
    if method in (HEURISTIC, ILP) and profile.num_chunks == 1:
        return DEFAULT_LAYOUTS
    return ()


def loop_layouts(profile: Profile, layouts: tuple[Layout, ...]) -> tuple[Layout, ...]:
    """The layouts ``zb-loop`` solves: the loop ones given, else two chunks per rank for
    a one-chunk profile, or the profile's own when it is already looped.

    Raises:
        ProfileError: a V-placement profile, or layouts none of which is a loop.
    """
    if profile.num_chunks > 1 and profile.placement != "loop":
        raise ProfileError("method", ZB_LOOP, "a one-chunk or loop-placement profile (this "
                           "one has V placement; zb-v is its zero bubble schedule)")
    if layouts:
        looped = tuple(layout for layout in layouts if layout[1] == "loop")
        if not looped:
            raise ProfileError("layouts", ",".join(map(layout_name, layouts)),
                               f"loopN layouts for {ZB_LOOP} (the loop placement)")
        return looped
    return () if profile.num_chunks > 1 else ((2, "loop"),)


def candidate_profiles(profile: Profile, method: str,
                       layouts: tuple[Layout, ...]) -> list[Profile]:
    """The profiles `solve` tries for `method`: `profile` re-cut for each allowed layout,
    or, none given, the profile and what `default_layouts` adds where it takes the cut."""
    if layouts:
        return _layout_profiles(profile, layouts)
    candidates = [profile]
    for layout in default_layouts(profile, method)[1:]:
        try:
            candidates.append(with_chunks(profile, *layout))
        except ProfileError:
            pass  # a shape the placement does not take: the default only offers it
    return candidates


def _layout_profiles(profile: Profile, layouts: tuple[Layout, ...]) -> list[Profile]:
    """The profile re-cut for each of `layouts` (at least one)."""
    if profile.num_chunks != 1:
        if all(layout == (profile.num_chunks, profile.placement) for layout in layouts):
            return [profile]
        raise ProfileError("layouts", ",".join(map(layout_name, layouts)),
                           "layouts only for a profile with num_chunks = 1 (this one is "
                           f"already cut into {profile.num_chunks} chunks per rank)")
    return [with_chunks(profile, chunks, placement) for chunks, placement in layouts]
