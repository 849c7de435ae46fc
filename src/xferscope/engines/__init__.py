"""Transfer paths. Pure, thread-safe, no UI imports. ``registry`` maps path names to engines."""
