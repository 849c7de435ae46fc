"""The Textual console. Nothing outside this package imports it, so headless runs never load Textual."""
