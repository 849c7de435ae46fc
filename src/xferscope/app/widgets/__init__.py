"""The console's panels: each shows one part of what the engines and telemetry measured."""
