"""Example scorer module for the container deployments (mounted at /etc/tracescore)."""

from scorers import create_scorer
from scorers.utils import get_assistant_message

answer_length = (
    create_scorer(
        id="answer-length",
        description="1 when the agent's final answer is between 1 and 500 characters",
        type="agent",
        version="1",
    )
    .generate_score(lambda run: 1.0 if 0 < len(get_assistant_message(run.output) or "") <= 500 else 0.0)
    .generate_reason(lambda score: "answer length within bounds" if score else "answer empty or too long")
)
