"""Numbers in a text, normalised so that the source's and the output's can be
compared across locales ("1,000" / "1.000" / "1 000"; "4.5" / "4,5")."""
from __future__ import annotations

import re
from collections import Counter

# Digits may touch letters: "8pm", "12th", "£10m", "1990s", "COVID-19" hold
# numbers too (the output's "20 Uhr", "12.", "10 Mio." are compared with them).
# A clock time ("10:00", "23:30") is one number.
NUMBER_PATTERN = r"\d{1,2}:\d{2}(?!\d)|\d+(?:[ \u00a0\u202f]\d{3})*(?:[.,]\d+)*"
_NUMBER = re.compile(rf"(?<![\d.,:])(?:{NUMBER_PATTERN})(?!\d)")


def canonical(token: str) -> str:
    """A separator followed by exactly three digits, with no other kind of
    separator after it, groups thousands; the last separator otherwise is
    the decimal point. Returns the value as a plain string ("1000", "4.5";
    a clock time "9:05")."""
    if ":" in token:
        hours, minutes = token.split(":")
        return f"{int(hours)}:{minutes}"
    digits = re.sub(r"[ \u00a0\u202f]", "", token)
    separators = [m.start() for m in re.finditer(r"[.,]", digits)]
    if not separators:
        return str(int(digits))
    last = separators[-1]
    kinds = {digits[i] for i in separators}
    decimal = len(kinds) == 2 or len(digits) - last - 1 != 3
    if decimal:
        whole = re.sub(r"[.,]", "", digits[:last])
        return f"{int(whole or 0)}.{digits[last + 1:]}".rstrip("0").rstrip(".")
    return str(int(re.sub(r"[.,]", "", digits)))


def numbers_in(text: str) -> Counter:
    return Counter(canonical(match.group()) for match in _NUMBER.finditer(text))


def tokens_with_numbers(text: str) -> list[str]:
    return [match.group() for match in _NUMBER.finditer(text)]


# Numbers listed per entry and side, at most (number_mismatch itself is always exact).
MAX_DIFFERENCES = 20


def number_differences(source: str, output: str) -> dict[str, list]:
    """Where the output's numbers differ from the source's (number_mismatch_rate):
    `unmatched`, the [start, end) spans of output numbers the source has no
    (further) copy of, the later copies of a value first; `missing`, the source
    values (canonical) the output does not reproduce, in source order. Both
    empty exactly when numbers_in(source) == numbers_in(output)."""
    available = numbers_in(source)
    unmatched = []
    for match in _NUMBER.finditer(output):
        value = canonical(match.group())
        if available[value] > 0:
            available[value] -= 1
        else:
            unmatched.append(list(match.span()))
    produced = numbers_in(output)
    missing = []
    for match in _NUMBER.finditer(source):
        value = canonical(match.group())
        if produced[value] > 0:
            produced[value] -= 1
        else:
            missing.append(value)
    return {"unmatched": unmatched[:MAX_DIFFERENCES], "missing": missing[:MAX_DIFFERENCES]}
