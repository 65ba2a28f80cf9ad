"""LLM-judged conversation scorers (SPEC §7): completeness, user frustration, knowledge
retention and role adherence of a whole session.

Each factory builds a conversation scorer (``type="conversation"``): it runs on a
`ConversationRun` (or a list of turns) and reads its transcript, ``run.conversation``.
Every score is 0-1 (times ``scale`` where the factory has one), higher is better.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Literal

from pydantic import field_validator

from scorers._builder import Scorer
from scorers._run import NotScorable, not_scorable
from scorers.builtin._common import JudgeOption, numbered
from scorers.builtin._llm_common import (
    JudgeSchema,
    Statements,
    Verdict,
    Verdicts,
    builder,
    count,
    prompt,
    reason_prompt,
    scaled,
    verdict_lines,
)
from scorers.utils import get_combined_system_prompt


def transcript(run: Any, number_assistant: bool = False) -> str:
    """The conversation as ``role: text`` lines (``assistant #n:`` when ``number_assistant``).

    Example:
        >>> from scorers import ConversationRun
        >>> from scorers.utils import make_agent_run
        >>> convo = ConversationRun.from_turns([make_agent_run("Hi", "Hello!"), make_agent_run("Bye", "Ciao.")])
        >>> print(transcript(convo, number_assistant=True))
        user: Hi
        assistant #1: Hello!
        user: Bye
        assistant #2: Ciao.
    """
    lines, n = [], 0
    for entry in run.conversation:
        role = entry["role"]
        if role == "assistant" and number_assistant:
            n += 1
            role = f"assistant #{n}"
        lines.append(f"{role}: {entry['content']}")
    return "\n".join(lines)


def _texts(run: Any, role: str) -> list[str]:
    return [e["content"] for e in run.conversation if e["role"] == role and e["content"]]


def _unscorable(run: Any) -> NotScorable | None:
    """Why a conversation cannot be judged: no user message, or no assistant answer."""
    if not _texts(run, "user"):
        return not_scorable("the conversation has no user message")
    if not _texts(run, "assistant"):
        return not_scorable("the conversation has no assistant message")
    return None


def _share_kept(verdicts: Sequence[Verdict], messages: int, broken: str) -> float:
    """The share of ``messages`` whose verdict (in order) is not ``broken``; a message the
    judge gave no verdict counts as kept, extra verdicts are ignored."""
    return 1 - count(list(verdicts)[:messages], broken) / messages


def _flagged(verdicts: Sequence[Verdict], messages: int, broken: str) -> list[str]:
    return [f"assistant #{i}" + (f" ({v.reason})" if v.reason else "")
            for i, v in enumerate(list(verdicts)[:messages], 1) if v.verdict == broken]  # fmt: skip


def _per_assistant_message(broken: str, scale: float, flagged_prefix: str, none_flagged: str
                           ) -> tuple[Callable[[Any, Any], float], Callable[[Any, Any], str]]:
    """The generate_score and generate_reason steps of a scorer whose judge gives each assistant
    message a verdict: the share of messages not ``broken`` times ``scale``; the reason names
    the flagged messages (``flagged_prefix``) or says ``none_flagged``."""

    def score(run: Any, results: Any) -> float:
        messages = len(_texts(run, "assistant"))
        return scaled(_share_kept(results.analyze_step_result.verdicts, messages, broken), scale)

    def reason(run: Any, results: Any) -> str:
        flagged = _flagged(results.analyze_step_result.verdicts, len(_texts(run, "assistant")), broken)
        return flagged_prefix + "; ".join(flagged) if flagged else none_flagged

    return score, reason


def conversation_completeness(judge: JudgeOption, *, scale: float = 1.0,
                              id: str = "conversation-completeness") -> Scorer[Any, Any]:  # fmt: skip
    """The share of the user's requests that the conversation answered: higher is better.

    Steps: preprocess (judge) lists the requests the user made across the conversation
    (`Statements`); analyze (judge) gives each request a verdict on the whole transcript,
    "yes" when the agent answered or fulfilled it, "no" when it did not ("unsure" counts as
    not answered, as does a request the judge gives no verdict); score = yes / requests
    times ``scale``, rounded to two decimals (0 to ``scale``); generate_reason (judge)
    explains it. A conversation without a user message or an assistant answer, or in which
    the judge finds no request, is not scorable (a share of no requests means nothing).

    Args:
        judge: a `Judge`, a dict of its fields, or a model string.
        scale: the score of a conversation that answered every request.
        id: the scorer id.

    Example:
        >>> scorer = conversation_completeness("openai/gpt-4o-mini")
        >>> (scorer.id, scorer.type, [s["name"] for s in scorer.get_steps()])
        ('conversation-completeness', 'conversation', ['preprocess', 'analyze', 'generate_score', 'generate_reason'])
    """

    def extract(run: Any) -> Any:
        missing = _unscorable(run)
        if missing is not None:
            return missing
        return (
            "Extract the requests the user made in this conversation: each question asked, "
            "task given or goal stated, one statement per request, merged when the user repeats "
            'one. Return {"statements": [...]}.\n\n'
            f"User messages:\n{numbered(_texts(run, 'user'))}"
        )

    def judge_requests(run: Any, results: Any) -> Any:
        requests = results.preprocess_step_result.statements
        if not requests:
            return not_scorable("the user made no request")
        return (
            "Judge whether the assistant answered each of the user's requests by the end of the "
            'conversation: "yes" when it answered or fulfilled it, "no" when it did not, "unsure" '
            "when the conversation does not tell. One verdict per request, in order, with a short "
            'reason. Return {"verdicts": [{"verdict": ..., "reason": ...}]}.\n\n'
            f"Requests:\n{numbered(requests)}\n\nConversation:\n{transcript(run)}"
        )

    def score(results: Any) -> float:
        requests = results.preprocess_step_result.statements
        answered = count(results.analyze_step_result.verdicts[: len(requests)], "yes")
        return scaled(answered / len(requests), scale)

    def reason(results: Any, score: float) -> str:
        return reason_prompt("conversation completeness", scale, f"Score: {score}\nVerdicts:\n" + verdict_lines(
            results.analyze_step_result.verdicts, results.preprocess_step_result.statements))

    return (
        builder(id, "Conversation Completeness", "Share of the user's requests the conversation answered", judge,
                "You are a careful evaluator of conversations between a user and an assistant: you check "
                "what the user asked for against what the assistant delivered.", scale, type="conversation")
        .preprocess(prompt("Extract the user's requests", extract, Statements))
        .analyze(prompt("Judge whether each request was answered", judge_requests, Verdicts))
        .generate_score(score)
        .generate_reason(prompt("Explain the conversation completeness score", reason))
    )  # fmt: skip


class Frustration(JudgeSchema):
    """The judge's reading of the user's frustration over the conversation (case-insensitive)."""

    frustration: Literal["none", "resolved", "unresolved"]
    reason: str = ""

    _normalise = field_validator("frustration", mode="before")(
        lambda cls, v: v.strip().lower() if isinstance(v, str) else v)


FRUSTRATION_SCORES = {"none": 1.0, "resolved": 0.5, "unresolved": 0.0}
"""The score of each frustration level."""


def user_frustration(judge: JudgeOption, *, id: str = "user-frustration") -> Scorer[Any, Any]:
    """Whether the user got frustrated, and whether the agent resolved it: higher is better.

    Steps: analyze (judge) reads the transcript and answers one level (`Frustration`):
    "none" (the user never showed frustration), "resolved" (they did, by repeating
    themselves, complaining or showing annoyance, and the agent had resolved it by the end)
    or "unresolved" (still frustrated at the end); score = 1, 0.5 or 0; generate_reason
    (code) is the judge's reason. A conversation without a user message or an assistant
    answer is not scorable.

    Args:
        judge: a `Judge`, a dict of its fields, or a model string.
        id: the scorer id.

    Example:
        >>> (FRUSTRATION_SCORES, user_frustration("openai/gpt-4o-mini").type)
        ({'none': 1.0, 'resolved': 0.5, 'unresolved': 0.0}, 'conversation')
    """

    def judge_frustration(run: Any) -> Any:
        missing = _unscorable(run)
        if missing is not None:
            return missing
        return (
            "Judge the user's frustration over this conversation. Answer \"none\" when the user "
            'never shows frustration; "resolved" when the user shows frustration (repeats a '
            "request, complains, corrects the assistant again, expresses annoyance) and the "
            'assistant has resolved it by the end; "unresolved" when the user is still frustrated '
            'at the end. Return {"frustration": ..., "reason": "..."}.\n\n'
            f"Conversation:\n{transcript(run)}"
        )

    return (
        builder(id, "User Frustration", "Whether the user got frustrated (1 none, 0.5 resolved, 0 unresolved)",
                judge, "You are an attentive evaluator of user experience in conversations with an assistant.",
                type="conversation")
        .analyze(prompt("Judge the user's frustration", judge_frustration, Frustration))
        .generate_score(lambda results: FRUSTRATION_SCORES[results.analyze_step_result.frustration])
        .generate_reason(lambda results: results.analyze_step_result.reason)
    )  # fmt: skip


def knowledge_retention(judge: JudgeOption, *, scale: float = 1.0,
                        id: str = "knowledge-retention") -> Scorer[Any, Any]:  # fmt: skip
    """The share of assistant messages that keep what the user said earlier: higher is better.

    Steps: analyze (judge) reads the transcript, assistant messages numbered, and gives each
    assistant message a verdict (`Verdicts`, in order): "yes" when it forgets something the
    user said earlier (asks for it again, ignores it) or contradicts it, "no" otherwise;
    score = (assistant messages - yes) / assistant messages times ``scale``, rounded to two
    decimals (0 to ``scale``; a message the judge gives no verdict counts as keeping what it
    was told, extra verdicts are ignored); generate_reason (code) names the messages that
    forgot. A conversation without a user message or an assistant answer is not scorable.

    Args:
        judge: a `Judge`, a dict of its fields, or a model string.
        scale: the score of a conversation in which no message forgets.
        id: the scorer id.

    Example:
        >>> knowledge_retention("openai/gpt-4o-mini", scale=10).get_steps()[0]["description"]
        'Judge each assistant message for forgotten knowledge'
    """

    def judge_messages(run: Any) -> Any:
        missing = _unscorable(run)
        if missing is not None:
            return missing
        return (
            "Judge each assistant message for knowledge retention: \"yes\" when it forgets "
            "something the user said earlier in the conversation (asks for it again, ignores it) "
            'or contradicts it, "no" otherwise. One verdict per assistant message (#1, #2, ...), '
            'in order, with a short reason. Return {"verdicts": [{"verdict": ..., "reason": ...}]}.\n\n'
            f"Conversation:\n{transcript(run, number_assistant=True)}"
        )

    score, reason = _per_assistant_message("yes", scale, "Forgot or contradicted what the user said: ",
                                           "No assistant message forgot or contradicted what the user said.")

    return (
        builder(id, "Knowledge Retention", "Share of assistant messages that keep what the user said", judge,
                "You are a meticulous evaluator of conversations: you track what the user has told the "
                "assistant and notice when the assistant forgets or contradicts it.", scale, type="conversation")
        .analyze(prompt("Judge each assistant message for forgotten knowledge", judge_messages, Verdicts))
        .generate_score(score)
        .generate_reason(reason)
    )  # fmt: skip


def role_adherence(judge: JudgeOption, *, role: str | None = None, scale: float = 1.0,
                   id: str = "role-adherence") -> Scorer[Any, Any]:  # fmt: skip
    """The share of assistant messages that keep the agent's role: higher is better.

    The role is ``role`` when given, else the conversation's system prompt (the first
    turn's system messages, `get_combined_system_prompt`). Steps: analyze (judge) reads the
    role and the transcript, assistant messages numbered, and gives each assistant message a
    verdict (`Verdicts`, in order): "yes" when it stays in the role (persona, tone, scope,
    rules), "no" when it breaks it; score = (assistant messages - no) / assistant messages
    times ``scale``, rounded to two decimals (0 to ``scale``; "unsure" or no verdict counts
    as kept, extra verdicts are ignored); generate_reason (code) names the messages that
    broke the role. A conversation without a role, a user message or an assistant answer is
    not scorable.

    Args:
        judge: a `Judge`, a dict of its fields, or a model string.
        role: the role the agent must keep (default: its system prompt).
        scale: the score of a conversation that never breaks the role.
        id: the scorer id.

    Example:
        >>> role_adherence("openai/gpt-4o-mini", role="A pirate who only talks about ships").description
        "Share of assistant messages that keep the agent's role"
    """

    def judge_messages(run: Any) -> Any:
        the_role = role if role and role.strip() else get_combined_system_prompt(run.input)
        if not the_role.strip():
            return not_scorable("no role: the conversation has no system prompt and none was given")
        missing = _unscorable(run)
        if missing is not None:
            return missing
        return (
            "Judge whether each assistant message keeps the assistant's role below: \"yes\" when "
            'it stays in the role (persona, tone, scope and rules), "no" when it breaks it. One '
            "verdict per assistant message (#1, #2, ...), in order, with a short reason. Return "
            '{"verdicts": [{"verdict": ..., "reason": ...}]}.\n\n'
            f"Role:\n{the_role}\n\nConversation:\n{transcript(run, number_assistant=True)}"
        )

    score, reason = _per_assistant_message("no", scale, "Broke the role: ", "Every assistant message kept the role.")

    return (
        builder(id, "Role Adherence", "Share of assistant messages that keep the agent's role", judge,
                "You are a strict evaluator of role-play and persona consistency in conversations.", scale,
                type="conversation")
        .analyze(prompt("Judge each assistant message for role adherence", judge_messages, Verdicts))
        .generate_score(score)
        .generate_reason(reason)
    )  # fmt: skip
