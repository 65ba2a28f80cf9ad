"""tracescore scorers: a Pythonic port of Mastra's createScorer (placeholder, filled by the engine)."""

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

__all__ = [
    "FilePart",
    "Message",
    "OtherPart",
    "ReasoningPart",
    "ScorerRunInputForAgent",
    "ScorerRunOutputForAgent",
    "TextPart",
    "ToolCall",
    "ToolCallPart",
    "ToolResultPart",
]
