"""The registry of workloads (``workloads.registry``): every workload has its command, its record's schema and
the kinds of its files, and `workload compare` finds the workload of saved files through it."""

from __future__ import annotations

import json

import pytest

from xferscope.commands.workload_kinds import WORKLOADS, workload_command


def test_every_workload_has_its_command_its_schema_and_files_no_other_claims(cli):
    from xferscope.commands.profile_options import command_of
    from xferscope.commands.schema import _file_kinds, _kinds

    schemas, file_schemas = _kinds(), _file_kinds()
    claimed: dict[str, str] = {}
    for w in WORKLOADS:
        assert w.kind.name == w.name and command_of(workload_command(w), w.name).name == w.name
        assert w.kind.record.__name__ in schemas[w.name]()["$defs"]
        for kind, record in w.kind.files.items():
            assert claimed.setdefault(kind, w.name) == w.name, f"{kind} is claimed by {claimed[kind]} and {w.name}"
            assert file_schemas[kind]()["$ref"] == f"#/$defs/{record.__name__}"  # each file kind's own record
    assert [w.name for w in WORKLOADS] == ["train", "kvcache", "load", "checkpoint"]
    r = cli("schema", "workload-train-find-max")  # a file kind through the command line
    assert r.code == 0 and json.loads(r.out)["$ref"] == "#/$defs/FindMaxResult", r.err


def test_a_saved_file_of_no_workload_is_one_line_naming_every_workload(cli, tmp_path):
    other = tmp_path / "run.json"
    other.write_text(json.dumps({"kind": "run", "schema_version": 1}))
    for args in (("workload", "compare", str(other)), ("compare", "--workload", str(other))):
        r = cli(*args)
        assert r.code == 2 and len(r.err.strip().splitlines()) == 1, r.err
        assert "kind 'run'" in r.err and all(w.name in r.err for w in WORKLOADS)


def test_a_dlio_summary_of_neither_training_nor_checkpointing_is_one_line(cli, tmp_path):
    summary = tmp_path / "summary.json"
    summary.write_text(json.dumps({"metric": {"eval_au_mean_percentage": 50}}))
    r = cli("workload", "compare", str(summary))
    assert r.code == 2 and len(r.err.strip().splitlines()) == 1, r.err
    assert "not a DLIO summary.json" in r.err and "train_au_mean_percentage" in r.err


def test_a_saved_side_by_side_compares_as_its_runs(cli, tmp_path, no_gpu):
    import numpy as np
    from safetensors.numpy import save_file

    shards = tmp_path / "shards"
    shards.mkdir()
    save_file({"w": np.arange(4096, dtype=np.float32)}, str(shards / "model-0.safetensors"))
    both = tmp_path / "both.json"
    r = cli("workload", "load", "--files", str(shards), "--path", "host,host", "--rounds", "1", "--json", str(both))
    assert r.code == 0, r.err
    assert json.loads(both.read_text())["kind"] == "workload-load-compare"
    r = cli("workload", "compare", str(both), "--format", "json")
    assert r.code == 0, r.err
    d = json.loads(r.out)
    assert d["kind"] == "workload-load-compare" and len(d["results"]) == 2
    assert [(e["label"], e["runs"]) for e in d["entries"]] == [("both.json", 2)]


BUILT = """
import json, sys
sys.argv = ["xferscope", *json.loads(sys.argv[1])]
import typer.main
from xferscope import cli
cli.register(sys.argv[1:])
group = typer.main.get_command(cli.app).commands["workload"]
shapes = [m.split(".")[2] for m in sys.modules if m.startswith("xferscope.workloads.") and m.endswith(".options")]
modules = sorted(set(shapes) - {"common"})
print(json.dumps({"commands": sorted(group.commands), "modules": modules}))
"""


@pytest.mark.parametrize(
    ("argv", "commands", "modules"),
    [
        (["--help"], ["compare"], []),
        (["workload", "load", "--help"], ["compare", "load"], ["inference"]),
        (["workload", "--help"], ["checkpoint", "compare", "kvcache", "load", "train"], None),
    ],
)
def test_the_cli_builds_only_the_workload_a_command_line_names(argv, commands, modules):
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", BUILT, json.dumps(argv)], capture_output=True, text=True, check=True)
    built = json.loads(out.stdout)
    assert built["commands"] == commands
    every = ["checkpoint", "inference", "train"]  # the packages whose command shapes were imported
    assert built["modules"] == (every if modules is None else modules)


def _form_spec(name: str, typed: dict[str, str]):
    """The console's form of workload ``name`` with ``typed`` in its fields, made a spec as pressing r makes it."""
    from xferscope.workloads.checkpoint import console as checkpoint_model
    from xferscope.workloads.inference import console as inference_model
    from xferscope.workloads.train import console as workload_model

    if name == "train":
        return workload_model.build_spec(workload_model.WorkloadFormValues(**typed), has_gpu=False)
    if name == "checkpoint":
        return checkpoint_model.build_spec(checkpoint_model.CheckpointFormValues(**typed), has_gpu=False)
    return inference_model.build_spec(inference_model.InferenceFormValues(kind=name, **typed), has_gpu=False)


@pytest.mark.parametrize(
    ("name", "typed", "argv"),
    [
        ("train", {"seconds": "soon"}, ("cosmoflow", "--duration", "soon")),
        ("kvcache", {"prompt": "lots"}, ("--prompt-tokens", "lots")),
        ("load", {"concurrency": "many"}, ("--model", "llama3.2-1b", "--threads", "many")),
        ("checkpoint", {"scale": "2"}, ("llama3-8b", "--subset", "--scale", "2", "--plan")),
    ],
)
def test_the_console_reads_an_option_as_its_command_does(cli, name, typed, argv, no_gpu):
    """A workload's options are declared once, in its package: the console's form reads and checks a value as the
    command line does, refused with the same line."""
    from xferscope.errors import SpecError

    r = cli("workload", name, *argv)
    with pytest.raises(SpecError) as refused:
        _form_spec(name, typed)
    assert r.code == 2 and r.err.strip() == f"xferscope: {refused.value}", r.err


def test_a_form_field_left_empty_is_the_command_s_default(no_gpu):
    from xferscope.workloads.train.presets import preset

    spec = _form_spec("train", {"preset": "unet3d", "files": "", "accelerator_type": ""})
    assert spec.files == preset("unet3d").files and spec.accelerator_type == "h100"


async def test_every_registered_view_is_a_console_view_its_key_shows(tmp_path, no_gpu):
    """The console's workload views are the registry's: each shown by its key, its form's fields and tables
    drawn by the one workload screen from what its package declares, and the registry's workloads each in one."""
    from textual.widgets import DataTable
    from tui_helpers import make_app, wait_for

    from xferscope.app.screens.workload_run import WorkloadScreen
    from xferscope.workloads.registry import console_views

    views = console_views()
    app = make_app(tmp_path)
    # each view's key is its own: no two views share one, nor a view and another key of the console or of the
    # workload screen (which would take it first)
    shows = {f"show-{v.name}" for v in views}
    others = {k for b in [*app.BINDINGS, *WorkloadScreen.BINDINGS] if b.id not in shows for k in b.key.split(",")}
    keys = [v.key for v in views]
    assert len(set(keys)) == len(keys) and not set(keys) & others, (keys, others)
    async with app.run_test(size=(130, 40)) as pilot:
        for view in views:
            await pilot.press(view.key)
            await wait_for(pilot, lambda v=view: isinstance(app.screen, WorkloadScreen) and app.screen.view is v)
            screen = app.screen
            table_id = f"#{view.prefix}-table"
            await wait_for(pilot, lambda s=screen, t=table_id: any(x.columns for x in s.query(t).results(DataTable)))
            assert all(screen.query_one(f"#{f.id}") is not None for f in view.fields)
            table = screen.query_one(f"#{view.prefix}-table")
            assert [str(c.label) for c in table.columns.values()] == list(view.table_headers)
