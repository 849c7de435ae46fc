"""The console's screens: setup, live view, comparison, memory sweep, help."""
