"""What a console form's fields hold, read from the text typed: one message for every form."""

from __future__ import annotations

from xferscope.errors import SpecError


def whole_number(text: str, field: str) -> int:
    """``text`` as a whole number; SpecError naming ``field`` (the form shows it beside its control) otherwise."""
    try:
        return int(str(text).strip())
    except ValueError:
        raise SpecError(field, f"not a whole number: {text!r}") from None
