"""The command palette (ctrl+p): every console action by name."""

from __future__ import annotations

from functools import partial

from textual.command import DiscoveryHit, Hit, Hits, Provider

#: (name, what it does, app action)
ACTIONS = (
    ("Start runs", "Run the setup's paths one after another", "start"),
    ("Stop run", "Stop the run in progress; what it measured is kept", "stop"),
    ("Restart", "Run the last setup again with the same settings", "restart"),
    ("Pause display", "Freeze the live panels (the run goes on)", "pause"),
    ("Export CSV snapshot", "Write the time series and summaries of this session's runs", "export"),
    ("Show setup", "Choose GPU, target, paths and sizes", "show('setup')"),
    ("Show live view", "Panels of the run in progress", "show('live')"),
    ("Show comparison", "Runs and saved results side by side", "show('compare')"),
    ("Show grid", "A profile's points as they finish: median and spread over repetitions", "show('grid')"),
    ("Show memory sweep", "Latency against bandwidth, point by point", "show('memory')"),
    ("Show saturation", "Knee searches: throughput against concurrency, and which ceiling binds", "show('saturation')"),
    ("Save setup as profile", "Write the setup as a TOML profile", "save_profile"),
    ("Open profile", "Load a bundled or saved profile into the setup", "open_profile"),
    ("Open saved results", "Add results from a JSON file to the comparison", "open_results"),
    ("Help", "Keys and what the figures mean", "help"),
)


class ConsoleCommands(Provider):
    def _actions(self):
        for name, help_text, action in ACTIONS:
            yield name, help_text, partial(self.app.run_action, action)

    async def discover(self) -> Hits:
        for name, help_text, run in self._actions():
            yield DiscoveryHit(name, run, help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for name, help_text, run in self._actions():
            score = matcher.match(name)
            if score > 0:
                yield Hit(score, matcher.highlight(name), run, help=help_text)
