"""The console's side of profiles: save the setup, list and open profiles. No Textual here."""

from __future__ import annotations

import dataclasses

from xferscope.errors import SpecError
from xferscope.spec import RunSpec


def save_setup(specs: list[RunSpec], name: str, description: str = "") -> str:
    """Save the form's specs (one per path) as a profile; returns the file written."""
    from xferscope.profiles import Profile, save_profile

    if not name:
        raise SpecError("name", "give the profile a name")
    first = specs[0]
    if any(s.replace(path=first.path) != first for s in specs):
        raise SpecError(
            "name",
            "this setup is an opened profile's grid: it is saved already as that profile; "
            "edit the form to save a setup of your own",
        )
    profile = Profile.from_spec(first, name, description)
    paths = list(dict.fromkeys(s.path for s in specs))
    if len(paths) > 1:
        base = {k: v for k, v in profile.base.items() if k != "path"}
        profile = dataclasses.replace(profile, base=base, grid={"path": paths})
    return save_profile(profile)


def available_profiles() -> list[tuple[str, str]]:
    """(name, one line: points, paths, description) of every profile that loads."""
    from xferscope.profiles import list_profiles

    out = []
    for info in list_profiles():
        if info.error:
            continue
        one, many = ("knee search", "knee searches") if info.kind == "saturate" else ("point", "points")
        what = f"{info.points} {one if info.points == 1 else many}, {', '.join(info.paths)}"
        out.append((info.name, f"({what}) {info.description}".strip()))
    return out


def open_profile(name_or_path: str, duration: float | None = None) -> tuple[str, str, list, int]:
    """(name, kind, points, repetitions) of a profile: RunSpecs for kind "io", MemSpecs for "mem", the one
    SaturatePlan for "saturate"."""
    from xferscope.profiles import load_profile

    profile = load_profile(name_or_path)
    profile.check_ranks(False, None)  # a profile made for an MPI job is replayed with mpirun, not here
    if duration is not None:
        profile = profile.with_changes(duration=duration)
    if profile.kind == "workload":
        raise SpecError(
            "profile",
            f"{profile.name} is a {profile.workload.get('workload', 'train')} workload: replay it with "
            f"`xferscope replay {profile.name}`",
        )
    if profile.kind == "saturate":
        from xferscope.saturate.plan import plan_from

        return profile.name, profile.kind, [plan_from(profile)], 1
    return profile.name, profile.kind, profile.points(), profile.repetitions
