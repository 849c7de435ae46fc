"""The setup's split field: a request of the block size as parallel sub-requests (``--split``), run on the
real host engine and shown with both sizes; a split the path cannot take is refused beside the field."""

from __future__ import annotations

from tui_helpers import Messages, held_text, make_app, retype, until_shown, wait_for

from xferscope.app.messages import RunFinished, SetupRefused
from xferscope.app.setup_model import FormValues
from xferscope.spec import RunSpec


async def test_a_split_run_reads_in_sub_requests_and_shows_both_sizes(direct_dir):
    app = make_app(direct_dir, duration="0.4", size="8M", bs="64K")
    msgs = Messages()
    async with app.run_test(size=(100, 40), message_hook=msgs) as pilot:
        await retype(pilot, "#split", "16K")
        await pilot.press("escape", "r")
        await wait_for(pilot, lambda: msgs.of(RunFinished), timeout=60)
        text = await until_shown(pilot, "64K/16K")
    record = msgs.of(RunFinished)[-1].record
    assert record.spec.block_size == 64 << 10 and record.spec.split == 16 << 10
    result = record.result
    assert result is not None and result.error is None and result.bytes > 0
    assert "64K/16K" in text, text


async def test_a_split_the_path_cannot_take_is_refused_beside_the_field(direct_dir):
    app = make_app(direct_dir, iodepth="4")
    msgs = Messages()
    async with app.run_test(size=(100, 40), message_hook=msgs) as pilot:
        await retype(pilot, "#split", "256K")
        await pilot.press("escape", "r")
        await wait_for(pilot, lambda: msgs.of(SetupRefused))
        await wait_for(pilot, lambda: "one request at a time" in held_text(app, "#error-split"))
    refused = msgs.of(SetupRefused)[-1]
    assert refused.where == "split" and "one request at a time" in refused.reason


def test_a_profile_with_a_split_shows_it_in_the_form():
    spec = RunSpec(path="cufile", block_size=16 << 20, split=4 << 20)
    assert FormValues.from_spec(spec, ["cufile"]).split == "4M"
    assert FormValues.from_spec(RunSpec(), ["host"]).split == ""
