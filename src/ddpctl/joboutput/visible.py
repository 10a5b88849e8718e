"""Job-provided text made safe to print: every control character a terminal would act on is shown as an escape
instead (``\\x1b``, ``\\x07``, ``\\x9b``, ``\\u202e``), so what a job printed can neither move the cursor, clear
the screen, set the window title, write the clipboard, ring the bell nor reorder a line (bidi overrides).

What is replaced: C0 controls (U+0000-U+001F; a tab too, except where ``tab=True`` keeps it), DEL (U+007F), C1
controls (U+0080-U+009F), the bidi embeddings, overrides, isolates and marks (U+061C, U+200E, U+200F,
U+202A-U+202E, U+2066-U+2069) and the line and paragraph separators (U+2028, U+2029). Backslashes are kept as
they are: a job can print the text ``\\x1b`` itself, and it then looks the same (the bytes are what
``ddpctl logs --raw`` gives). Linear in the text; text with nothing to replace comes back as it is.
"""

from __future__ import annotations

import re

_BIDI = (0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A), 0x2028, 0x2029)


def _escape(code: int) -> str:
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


_TABLE = {c: _escape(c) for c in (*range(0x00, 0x20), 0x7F, *range(0x80, 0xA0), *_BIDI)}
_TABLE_TAB = {c: v for c, v in _TABLE.items() if c != 0x09}
_ANY = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]")


def visible(text: object, *, tab: bool = False) -> str:
    """``text`` (``str()`` of it) with its control characters shown as escapes; ``tab``: a tab stays a tab."""
    s = text if isinstance(text, str) else str(text)
    if not _ANY.search(s):
        return s
    return s.translate(_TABLE_TAB if tab else _TABLE)


def has_control(text: str, *, tab: bool = False) -> bool:
    """Does ``text`` hold a character :func:`visible` would replace?"""
    found = _ANY.search(text.replace("\t", "") if tab else text)
    return found is not None
