"""Text from elsewhere (a data file's pickle, a checkpoint's keys or sidecar, an exception about them) made safe
for a terminal line: every control character a terminal would act on is shown as an escape (``\\x1b``, ``\\x07``,
``\\x9b``, ``\\u202e``), and the text is cut to a bound, so a hostile file can neither move the cursor, clear the
screen, set the window title, reorder the line (bidi overrides) nor flood stderr.

What is replaced is what ddpctl's ``joboutput.visible`` replaces (ddp_train never imports ddpctl): C0 controls
(U+0000-U+001F, a tab included), DEL, C1 controls (U+0080-U+009F), the bidi embeddings, overrides, isolates and
marks, and the line and paragraph separators. Backslashes are kept as they are.
"""

from __future__ import annotations

import re

LIMIT = 200  # characters of foreign text kept in one error line

_BIDI = (0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A), 0x2028, 0x2029)
_TABLE = {c: (f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}")
          for c in (*range(0x00, 0x20), 0x7F, *range(0x80, 0xA0), *_BIDI)}
_ANY = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]")


def visible(text: object) -> str:
    """``text`` (``str()`` of it) with its control characters shown as escapes."""
    s = text if isinstance(text, str) else str(text)
    return s.translate(_TABLE) if _ANY.search(s) else s


def bounded(text: object, limit: int = LIMIT) -> str:
    """:func:`visible` of ``text``, cut to ``limit`` characters of the original with a note of how many more."""
    s = text if isinstance(text, str) else str(text)
    if len(s) <= limit:
        return visible(s)
    return f"{visible(s[:limit])}... ({len(s) - limit} more characters)"
