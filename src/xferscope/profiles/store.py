"""Where profiles live: bundled with xferscope (package data) and the user's own (XDG data directory).

A user profile with the name of a bundled one takes its place.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from importlib import resources

from xferscope.errors import FormatError, NotWritten, SpecError
from xferscope.profiles.model import Profile
from xferscope.profiles.toml_format import NAME_RE, dump_profile, read_profile_file
from xferscope.safe_write import reason_of, write_output

SUFFIX = ".toml"


def user_dir() -> str:
    """``$XDG_DATA_HOME/xferscope/profiles`` (default ``~/.local/share/xferscope/profiles``)."""
    data_home = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return os.path.join(data_home, "xferscope", "profiles")


def bundled_dir() -> str:
    return str(resources.files("xferscope.profiles").joinpath("bundled"))


def _toml_files(directory: str) -> list[str]:
    try:
        names = sorted(n for n in os.listdir(directory) if n.endswith(SUFFIX) and not n.startswith("."))
    except OSError:
        return []
    return [os.path.join(directory, n) for n in names]


def _by_name() -> dict[str, tuple[str, str]]:
    """name -> (file, origin); user files replace bundled ones of the same file name."""
    found: dict[str, tuple[str, str]] = {}
    for origin, directory in (("bundled", bundled_dir()), ("user", user_dir())):
        for path in _toml_files(directory):
            found[os.path.basename(path)[: -len(SUFFIX)]] = (path, origin)
    return found


def load_profile(name_or_path: str) -> Profile:
    """A profile by file path (anything ending in .toml or naming a file) or by name (user, then bundled)."""
    if name_or_path.endswith(SUFFIX) or os.sep in name_or_path or os.path.isfile(name_or_path):
        return read_profile_file(name_or_path, "file")
    found = _by_name()
    if name_or_path not in found:
        names = ", ".join(sorted(found)) or "none"
        raise SpecError(
            "profile", f"no profile named {name_or_path!r}; available: {names} (or give the path of a .toml file)"
        )
    path, origin = found[name_or_path]
    return read_profile_file(path, origin)


def save_profile(profile: Profile, path: str | None = None) -> str:
    """Write ``profile`` as TOML (default: ``NAME.toml`` in the user profile directory); returns the path.
    NotWritten (one line) when it cannot be written."""
    if not NAME_RE.match(profile.name):
        raise SpecError("name", f"{profile.name!r} must be letters, digits, '.', '_' or '-'")
    if path is None:
        path = os.path.join(user_dir(), profile.name + SUFFIX)
    text = dump_profile(profile)
    directory = os.path.dirname(os.path.abspath(path))
    try:
        os.makedirs(directory, exist_ok=True)
    except OSError as exc:
        raise NotWritten(path, reason_of(exc)) from None
    write_output(path, text)  # atomically: a crash or a full disk leaves the previous version
    return path


@dataclass
class ProfileInfo:
    """One line of ``xferscope profiles``."""

    name: str
    description: str
    source: str
    kind: str
    origin: str
    file: str
    paths: list[str] = field(default_factory=list)
    points: int = 0
    repetitions: int = 1
    error: str | None = None  # set when the file does not load; the other fields are then empty


def info_of(profile: Profile) -> ProfileInfo:
    return ProfileInfo(
        name=profile.name,
        description=profile.description,
        source=profile.source,
        kind=profile.kind,
        origin=profile.origin,
        file=profile.file or "",
        paths=profile.paths(),
        points=profile.point_count,
        repetitions=profile.repetitions,
    )


def list_profiles() -> list[ProfileInfo]:
    """Every bundled and user profile, by name; a user file that does not load is listed with its error."""
    out = []
    for name, (path, origin) in sorted(_by_name().items()):
        try:
            out.append(info_of(read_profile_file(path, origin)))
        except (FormatError, SpecError) as exc:
            out.append(
                ProfileInfo(name=name, description="", source="", kind="", origin=origin, file=path, error=str(exc))
            )
    return out
