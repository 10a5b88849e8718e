"""Text from elsewhere (what a rank printed, an exception's message, a file or thread name) made safe to print:
every control character a terminal would act on is shown as an escape (``\\x1b``, ``\\x07``, ``\\x9b``,
``\\u202e``), so it can neither move the cursor, clear the screen, set the window title, ring the bell nor reorder
a line (bidi overrides); ``limit`` bounds its length.

What is replaced: C0 controls (U+0000-U+001F; a tab too, except where ``tab=True`` keeps it), DEL (U+007F), C1
controls (U+0080-U+009F), the bidi embeddings, overrides, isolates and marks (U+061C, U+200E, U+200F,
U+202A-U+202E, U+2066-U+2069) and the line and paragraph separators (U+2028, U+2029). Backslashes are kept: text
already made visible comes back as it is. ddpctl's reader of these lines applies the same rule
(``ddpctl.joboutput.visible``; the two packages share no code, only the text).
"""

from __future__ import annotations

import re

_BIDI = (0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A), 0x2028, 0x2029)


def _escape(code: int) -> str:
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


_TABLE = {c: _escape(c) for c in (*range(0x00, 0x20), 0x7F, *range(0x80, 0xA0), *_BIDI)}
_TABLE_TAB = {c: v for c, v in _TABLE.items() if c != 0x09}
_ANY = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]")
MORE = "..."  # the end of a text cut at its limit


def visible(text: object, *, tab: bool = False, limit: int | None = None) -> str:
    """``text`` (``str()`` of it) with its control characters shown as escapes; ``tab``: a tab stays a tab;
    ``limit`` (more than 3): at most that many characters, cut between escapes (never inside one), ending in
    ``...`` where cut. Linear in the text (in ``limit`` when given); text with nothing to do comes back as it is."""
    s = text if isinstance(text, str) else str(text)
    table = _TABLE_TAB if tab else _TABLE
    head = s if limit is None else s[:limit + 1]  # escaping only lengthens: nothing past it can show
    shown = head.translate(table) if _ANY.search(head) else head
    if limit is None or len(shown) <= limit:
        return shown
    out, used = [], len(MORE)
    for ch in head:
        piece = table.get(ord(ch), ch)
        if used + len(piece) > limit:
            break
        out.append(piece)
        used += len(piece)
    return "".join(out) + MORE


LIMIT = 200  # characters of foreign text kept in one error line by bounded()


def bounded(text: object, limit: int = LIMIT) -> str:
    """:func:`visible` of ``text`` cut to ``limit`` characters of the original, saying how many more there were
    (for error lines that quote a file: a pickle's names, a checkpoint's keys, a path)."""
    s = text if isinstance(text, str) else str(text)
    if len(s) <= limit:
        return visible(s)
    return f"{visible(s[:limit])}... ({len(s) - limit} more characters)"
