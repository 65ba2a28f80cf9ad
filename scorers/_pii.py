"""`PIIRedactor`: an input processor that keeps personal data and secrets on the machine."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

Messages = list[dict[str, Any]]

_API_KEY = re.compile(
    r"\b(?:sk-(?:proj-|ant-)?[A-Za-z0-9_\-]{16,}|AKIA[0-9A-Z]{16}|gh[pousr]_[A-Za-z0-9]{30,}"
    r"|github_pat_[A-Za-z0-9_]{30,}|xox[abprs]-[A-Za-z0-9-]{10,}|AIza[0-9A-Za-z_\-]{35}"
    r"|sk_(?:live|test)_[A-Za-z0-9]{16,}|hf_[A-Za-z0-9]{30,})"
    r"|(?<=Bearer )[A-Za-z0-9._\-]{20,}"
)
_EMAIL = re.compile(r"\b[A-Za-z0-9._%+\-]+@[A-Za-z0-9\-]+(?:\.[A-Za-z0-9\-]+)*\.[A-Za-z]{2,}\b")
_CARD = re.compile(r"(?<![\d-])(?:\d[ -]?){12,18}\d(?![\d-])")
_PHONE = re.compile(
    # Not inside a longer token: no word char, "+" or "d." before; no word char or ".d" after
    # (so IP addresses and version numbers stay as they are).
    r"(?<![\w+])(?<!\d\.)(?:\+\d{1,3}[ .\-]?)?(?:\(\d{2,4}\)[ .\-]?|\d{2,4}[ .\-])\d{3,4}[ .\-]?\d{3,4}"
    r"(?!\w|\.\d)"
    r"|(?<![\w+])\+\d{8,14}(?!\w|\.\d)"
)


def _luhn(digits: str) -> bool:
    total = 0
    for index, char in enumerate(reversed(digits)):
        number = int(char)
        if index % 2 == 1:
            number = number * 2 - 9 if number > 4 else number * 2
        total += number
    return total % 10 == 0


class PIIRedactor:
    """Input processor that replaces personal data and secrets before text leaves the machine.

    Redacts, in this order: API keys (OpenAI, Anthropic, AWS, GitHub, Slack, Google,
    Stripe, Hugging Face, bearer tokens) as ``[API_KEY]``; card numbers (13-19 digits
    passing the Luhn check) as ``[CARD]``; emails as ``[EMAIL]``; phone numbers as
    ``[PHONE]``. Every message's text content is redacted, system messages included.

    Args:
        kinds: the kinds to redact, among "api_key", "card", "email", "phone".

    Example:
        >>> PIIRedactor().redact("Mail jane.doe@example.com or call +1 415-555-0100, "
        ...                      "card 4111 1111 1111 1111, key sk-abcdefghijklmnopqrstuv")
        'Mail [EMAIL] or call [PHONE], card [CARD], key [API_KEY]'
    """

    KINDS = ("api_key", "card", "email", "phone")

    def __init__(self, kinds: Sequence[str] = KINDS) -> None:
        unknown = set(kinds) - set(self.KINDS)
        if unknown:
            raise ValueError(f"unknown PII kinds {sorted(unknown)}; choose among {self.KINDS}")
        self.kinds = tuple(k for k in self.KINDS if k in kinds)

    def __repr__(self) -> str:
        return f"PIIRedactor(kinds={self.kinds!r})"

    def redact(self, text: str) -> str:
        """Return ``text`` with the configured kinds replaced by placeholders.

        Example:
            >>> PIIRedactor(kinds=["email"]).redact("a@b.io, 4111111111111111")
            '[EMAIL], 4111111111111111'
        """
        if "api_key" in self.kinds:
            text = _API_KEY.sub("[API_KEY]", text)
        if "card" in self.kinds:
            text = _CARD.sub(
                lambda m: "[CARD]" if _luhn(re.sub(r"\D", "", m.group())) else m.group(), text
            )
        if "email" in self.kinds:
            text = _EMAIL.sub("[EMAIL]", text)
        if "phone" in self.kinds:
            text = _PHONE.sub("[PHONE]", text)
        return text

    def process_input(self, messages: Messages) -> Messages:
        """Redact the text of every message (string content and text parts).

        Example:
            >>> PIIRedactor().process_input([{"role": "user", "content": "me@x.org"}])
            [{'role': 'user', 'content': '[EMAIL]'}]
        """
        out: Messages = []
        for message in messages:
            content = message.get("content")
            if isinstance(content, str):
                message = {**message, "content": self.redact(content)}
            elif isinstance(content, list):
                parts = [
                    {**p, "text": self.redact(p["text"])}
                    if isinstance(p, dict) and isinstance(p.get("text"), str) else p
                    for p in content
                ]
                message = {**message, "content": parts}
            out.append(message)
        return out
