"""Built-in scorers: ports of Mastra's prebuilt scorers, each a factory returning a `Scorer`.

Every factory builds a normal agent scorer (``create_scorer(..., type="agent")``; the
conversation scorers below are ``type="conversation"``), so runs
accept agent messages as well as plain strings (a string input is one user message, a
string output one assistant message). Step results are pydantic models (JSON objects),
never bare lists or numbers; scores are rounded to two decimals. All scores are 0-1
(times ``scale`` where a factory has one); higher is better except for `hallucination`,
`bias` and `toxicity`.

* Code-based: `completeness`, `content_similarity`, `keyword_coverage`,
  `textual_difference`, `tone_consistency`, `tool_call_accuracy_code`, and the
  micro-assertions in `checks`. Their NLP data ships with PyPI packages (``afinn``,
  ``stop-words``, ``simplemma``); nothing is downloaded at run time.
* LLM-judged: `answer_relevancy`, `answer_similarity`, `faithfulness`, `hallucination`,
  `context_recall`, `context_precision`, `context_relevance`, `noise_sensitivity`,
  `prompt_alignment`, `tool_call_accuracy_llm`, `rubric`, `multi_turn_judge`,
  `summarization`, `bias`, `toxicity`. `tool_call_accuracy` is either tool-call scorer
  (LLM-judged when given a ``judge``). Each takes a ``judge`` (a `Judge`, a dict of its
  fields, or a model string) and brings default judge instructions; litellm is imported
  only when a judge call runs. A run that lacks what the scorer needs (no answer, no
  context, no ground truth, no rubric) is `not_scorable` before any judge call, except
  where the factory documents an error (answer similarity's required ground truth,
  prompt alignment's prompts).
* Conversation scorers (LLM-judged, ``type="conversation"``: they score a whole session, a
  `ConversationRun`): `conversation_completeness`, `user_frustration`,
  `knowledge_retention`, `role_adherence`; all 0-1, higher is better.

Example:
    >>> from scorers.builtin import checks, content_similarity
    >>> content_similarity().run_sync(input="Hello world", output="hello world!").score
    0.95
    >>> checks.includes("world").run_sync(input="Hi", output="Hello world").score
    1.0
"""

from scorers.builtin import checks
from scorers.builtin._keywords import (
    completeness,
    element_covered,
    extract_elements,
    extract_keywords,
    keyword_coverage,
)
from scorers.builtin._llm_alignment import prompt_alignment, tool_call_accuracy_llm
from scorers.builtin._llm_answer import answer_relevancy, answer_similarity
from scorers.builtin._llm_claims import context_recall, faithfulness, hallucination
from scorers.builtin._llm_context import context_precision, context_relevance, noise_sensitivity
from scorers.builtin._llm_conversation import (
    conversation_completeness,
    knowledge_retention,
    role_adherence,
    user_frustration,
)
from scorers.builtin._llm_opinions import bias, toxicity
from scorers.builtin._llm_rubric import multi_turn_judge, parse_rubric, rubric
from scorers.builtin._llm_summarization import summarization
from scorers.builtin._similarity import content_similarity, dice_similarity, textual_difference
from scorers.builtin._tone import Sentiment, analyze_sentiment, tone_consistency
from scorers.builtin._tool_calls import tool_call_accuracy, tool_call_accuracy_code

__all__ = [
    # code-based scorers
    "completeness",
    "content_similarity",
    "keyword_coverage",
    "textual_difference",
    "tone_consistency",
    "tool_call_accuracy",
    "tool_call_accuracy_code",
    "checks",
    # LLM-judged scorers
    "answer_relevancy",
    "answer_similarity",
    "faithfulness",
    "hallucination",
    "context_recall",
    "context_precision",
    "context_relevance",
    "noise_sensitivity",
    "prompt_alignment",
    "tool_call_accuracy_llm",
    "rubric",
    "multi_turn_judge",
    "summarization",
    "bias",
    "toxicity",
    # conversation scorers (LLM-judged)
    "conversation_completeness",
    "user_frustration",
    "knowledge_retention",
    "role_adherence",
    # NLP helpers
    "analyze_sentiment",
    "dice_similarity",
    "element_covered",
    "extract_elements",
    "extract_keywords",
    "parse_rubric",
    "Sentiment",
]
