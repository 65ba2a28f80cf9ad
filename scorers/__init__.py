"""tracescore scorers: a Pythonic port of Mastra's ``createScorer``.

Build a scorer with `create_scorer`, add steps (preprocess, analyze, generate_score,
generate_reason; each a function or an LLM-judge `PromptStep`), then ``await
scorer.run(...)`` (or ``scorer.run_sync(...)``) to get a `ScorerResult`. Importing this
package never imports litellm: that happens on the first judge call.

Example:
    >>> from scorers import create_scorer
    >>> scorer = create_scorer(id="non-empty", description="1 when the agent answered").generate_score(
    ...     lambda run: 1.0 if run.output else 0.0)
    >>> scorer.run_sync(input="Hi", output="Hello!").score
    1.0
"""

from scorers._agent_types import (
    FilePart,
    Message,
    OtherPart,
    ReasoningPart,
    ScorerRunInputForAgent,
    ScorerRunOutputForAgent,
    TextPart,
    ToolCall,
    ToolCallPart,
    ToolResultPart,
)
from scorers._builder import Scorer
from scorers._conversation import ConversationRun
from scorers._create import create_scorer
from scorers._filter_run import RunFilter, filter_run
from scorers._judge import set_judge_concurrency
from scorers._judge_types import Judge, JudgeExecution, JudgeStepRecord, JudgeUsage, merge_judges
from scorers._pii import PIIRedactor
from scorers._processors import StreamErrorRetryProcessor
from scorers._rate_limit import set_judge_rate_limit
from scorers._run import NotScorable, ScorerResult, ScorerRun, StepResults, not_scorable
from scorers._steps import PromptStep
from scorers.errors import (
    JudgeCredentialsError,
    JudgeError,
    JudgeOutputError,
    ScorerDefinitionError,
    ScorerError,
    ScorerInputError,
    ScorerRunError,
)

__all__ = [
    # builder
    "create_scorer",
    "Scorer",
    # run / result
    "ScorerRun",
    "ConversationRun",
    "ScorerResult",
    "StepResults",
    "NotScorable",
    "not_scorable",
    # steps
    "PromptStep",
    # judge
    "Judge",
    "JudgeExecution",
    "JudgeStepRecord",
    "JudgeUsage",
    "merge_judges",
    "set_judge_concurrency",
    "set_judge_rate_limit",
    "StreamErrorRetryProcessor",
    "PIIRedactor",
    # agent types
    "Message",
    "ScorerRunInputForAgent",
    "ScorerRunOutputForAgent",
    "ToolCall",
    "TextPart",
    "ReasoningPart",
    "ToolCallPart",
    "ToolResultPart",
    "FilePart",
    "OtherPart",
    # helpers (more in scorers.utils)
    "filter_run",
    "RunFilter",
    # errors
    "ScorerError",
    "ScorerDefinitionError",
    "ScorerInputError",
    "ScorerRunError",
    "JudgeError",
    "JudgeOutputError",
    "JudgeCredentialsError",
]
