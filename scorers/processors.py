"""Judge processors: hooks around a judge call (Mastra's processors, for the judge only).

Three roles, each a one-method protocol; one object may play several roles, and a
processor that lacks a role's method is skipped for that role. Methods may be plain or
``async``.

- `InputProcessor.process_input(messages) -> messages`: runs once per judge execution,
  before the first request (e.g. `PIIRedactor`, so personal data never leaves the
  machine). ``messages`` are chat messages ``{"role", "content"}``.
- `OutputProcessor.process_output_result(result) -> result`: runs once per judge
  execution, on the reply that was kept (`JudgeReply`), after it was parsed and validated
  (Mastra's order): it may rewrite a plain-text reply (a reason) or a structured step's
  parsed ``object``, and rewriting the text of a structured reply cannot break its parse.
- `ErrorProcessor.process_api_error(error, retry_count) -> RetryDecision | None`: asked
  when a judge request fails with a provider or network error (never for a reply that
  does not parse). The first processor returning ``RetryDecision(retry=True)`` wins;
  the judge then waits ``delay_ms`` and sends the failed request again, while the
  judge's ``effective_max_processor_retries`` budget lasts. ``retry_count`` is the
  number of processor retries already made in this judge execution. As in Mastra, the
  processors are still asked about the failure that finds the budget spent
  (``retry_count`` equal to the budget), and a retry answer then is ignored: with a budget
  of 2 they are asked with 0, 1 and 2, and 3 requests are sent.

`StreamErrorRetryProcessor` ports Mastra's decision rules; `is_bad_request_error` and
`is_connection_reset_error` are opt-in matchers for it.
"""

from scorers._pii import PIIRedactor
from scorers._processors import (
    ErrorProcessor,
    InputProcessor,
    JudgeReply,
    OutputProcessor,
    RetryDecision,
    RetryMatcher,
    StreamErrorRetryProcessor,
    is_bad_request_error,
    is_connection_reset_error,
    is_provider_retryable,
    is_terminal_auth_error,
)

__all__ = [
    # protocols and the values they exchange
    "InputProcessor",
    "OutputProcessor",
    "ErrorProcessor",
    "JudgeReply",
    "RetryDecision",
    # processors
    "PIIRedactor",
    "StreamErrorRetryProcessor",
    "RetryMatcher",
    # matchers and predicates
    "is_bad_request_error",
    "is_connection_reset_error",
    "is_provider_retryable",
    "is_terminal_auth_error",
]
