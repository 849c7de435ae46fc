"""`xferscope profiles [list]` and `xferscope profiles show NAME`: the bundled and user profiles."""

from __future__ import annotations

from typing import Annotated

import typer

from xferscope.errors import SpecError

ACTIONS = ("list", "show")


def list_command(as_json: bool) -> None:
    from xferscope.profiles import list_profiles, user_dir

    infos = list_profiles()
    if as_json:
        from xferscope.records import json_text

        typer.echo(json_text(infos), nl=False)
        return
    from rich.markup import escape
    from rich.table import Table

    from xferscope.report import stdout_console

    table = Table(header_style="bold", title="profiles (replay with: xferscope replay NAME)")
    for h in ("name", "kind", "paths", "points", "reps", "from", "description"):
        table.add_column(h, justify="right" if h in ("points", "reps") else "left", overflow="fold")
    for i in infos:
        description = f"cannot load: {i.error}" if i.error else i.description.split(". ")[0].rstrip(".")
        table.add_row(
            *(
                escape(c)
                for c in (i.name, i.kind, ", ".join(i.paths), str(i.points), str(i.repetitions), i.origin, description)
            )
        )
    stdout_console(width=max(140, stdout_console().width)).print(table)
    typer.echo(f"user profiles: {user_dir()}")


def show_command(name: str, as_json: bool) -> None:
    from xferscope.profiles import dump_profile, load_profile
    from xferscope.profiles.store import info_of
    from xferscope.sweep.plan import plan_points

    profile = load_profile(name)
    if as_json:
        from xferscope.profiles.toml_format import profile_to_dict
        from xferscope.records import as_data, json_text

        typer.echo(json_text({**as_data(info_of(profile)), "profile": profile_to_dict(profile)}), nl=False)
        return
    typer.echo(f"# {profile.origin} profile: {profile.file}")
    typer.echo(dump_profile(profile).rstrip())
    if profile.kind == "workload":
        typer.echo(f"# a {profile.workload.get('workload', 'train')} workload: run it with `xferscope replay {name}`")
        return
    if profile.kind == "saturate":
        typer.echo(
            f"# a saturate plan: {profile.point_count} knee searches (paths x GPU sets x block sizes); "
            f"run it with `xferscope replay {name}` or `xferscope saturate --profile {name}`"
        )
        return
    points = plan_points(profile)
    seconds = (profile.point_duration() or 0.0) * profile.repetitions
    skipped = sum(1 for p in points if p.skip)
    typer.echo(
        f"# {len(points)} points x {profile.repetitions} repetitions"
        + (f", {seconds:g} s of measuring per point" if profile.kind == "io" else "")
        + (f"; {skipped} cannot run on this machine" if skipped else "")
    )


def profiles_command(
    action: Annotated[str | None, typer.Argument(help="list (default) or show")] = None,
    name: Annotated[str | None, typer.Argument(help="with show: a profile name or .toml file")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
) -> None:
    """List the bundled and user profiles, or show one (xferscope profiles show NAME)."""
    action = action or "list"
    if action not in ACTIONS:
        raise SpecError(
            "profiles", f"unknown action {action!r}; use 'xferscope profiles' to list or 'xferscope profiles show NAME'"
        )
    if action == "list":
        if name:
            raise SpecError("profiles", "list takes no name; to see one: xferscope profiles show NAME")
        list_command(as_json)
        return
    if not name:
        raise SpecError("profiles", "show needs a name: xferscope profiles show NAME")
    show_command(name, as_json)


def register(app: typer.Typer) -> None:
    app.command("profiles")(profiles_command)
