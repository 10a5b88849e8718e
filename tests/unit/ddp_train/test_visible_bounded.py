"""ddp_train.visible.bounded: foreign text made safe for a terminal line (controls escaped, cut to a bound)."""

from __future__ import annotations

from ddp_train.visible import bounded, visible


def test_controls_are_escaped_and_plain_text_is_kept():
    assert visible("plain text, tab-free \\x1b") == "plain text, tab-free \\x1b"
    assert visible("\x1b]0;t\x07\x1b[2J\t\n\x7f\x9b\u202e\u2028é") == \
        "\\x1b]0;t\\x07\\x1b[2J\\x09\\x0a\\x7f\\x9b\\u202e\\u2028é"
    assert visible(KeyError("\x1b")) == "'\\x1b'"


def test_bounded_cuts_the_original_text_and_says_how_much_more():
    assert bounded("x" * 200) == "x" * 200
    assert bounded("\x1b" + "x" * 250) == "\\x1b" + "x" * 199 + "... (51 more characters)"
    assert bounded("abcdef", 3) == "abc... (3 more characters)"
