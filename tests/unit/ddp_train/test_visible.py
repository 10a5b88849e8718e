"""ddp_train.visible: text from elsewhere (a rank's output, an exception's message) made safe to print: control
characters as escapes, tabs kept where asked, a bound that never cuts inside an escape. The same rule as ddpctl's
reader of the launcher's lines (the packages share no code: compared here, character by character)."""

from __future__ import annotations

from ddp_train.visible import MORE, visible
from ddpctl.joboutput.visible import visible as ddpctl_visible


def test_control_characters_become_escapes_and_tabs_stay_where_asked():
    assert visible("\x1b]0;pwned\x07\x1b[2J") == "\\x1b]0;pwned\\x07\\x1b[2J"
    assert visible("a\tb\r\n\x00\x7f\x9b\u202e\u2028") == "a\\x09b\\x0d\\x0a\\x00\\x7f\\x9b\\u202e\\u2028"
    assert visible("a\tb", tab=True) == "a\tb"
    plain = "ordinary text, é and 中文 and a backslash \\x1b"
    assert visible(plain) is plain  # nothing to do: the text itself
    assert visible(visible("\x1b")) == "\\x1b"  # made visible once is made visible for good
    assert visible(ValueError("x\x1by")) == "x\\x1by"


def test_the_same_rule_as_ddpctls_reader():
    text = "".join(chr(c) for c in range(0x3000))
    assert visible(text) == ddpctl_visible(text)
    assert visible(text, tab=True) == ddpctl_visible(text, tab=True)


def test_the_bound_cuts_between_escapes_and_says_so():
    assert visible("x" * 40, limit=40) == "x" * 40
    assert visible("x" * 41, limit=40) == "x" * 37 + MORE
    cut = visible("\x1b" * 100, limit=40)
    assert cut == "\\x1b" * 9 + MORE and len(cut) <= 40
    assert visible("ab\x1b", limit=5) == "ab..."  # the escape (4 characters) does not fit whole: left out
    long = visible("\x1b]0;pwned\x07" + "A" * 5000, limit=400)
    assert len(long) <= 400 and long.startswith("\\x1b]0;pwned\\x07AAA") and long.endswith(MORE)
