"""Profiles: a single run or a sweep over spec fields, saved as TOML; bundled ones replay known experiments.

from xferscope.profiles import load_profile, save_profile, list_profiles, Profile

profile = load_profile("ssd-block-mix-qd16")     # a name (user, then bundled) or a .toml path
for spec in profile.points():                     # RunSpecs (MemSpecs for kind = "mem")
    ...
save_profile(Profile.from_spec(spec, "mine"))     # to the user profile directory
"""

from xferscope.profiles.model import Profile, point_identity
from xferscope.profiles.store import ProfileInfo, bundled_dir, list_profiles, load_profile, save_profile, user_dir
from xferscope.profiles.toml_format import dump_profile, parse_profile

__all__ = [
    "Profile",
    "ProfileInfo",
    "bundled_dir",
    "dump_profile",
    "list_profiles",
    "load_profile",
    "parse_profile",
    "point_identity",
    "save_profile",
    "user_dir",
]
