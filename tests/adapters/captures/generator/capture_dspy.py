"""Capture a DSPy ``ReAct`` agent with OpenInference: ``python capture_dspy.py SCENARIO OUTDIR``.

Needs dspy, openinference-instrumentation-dspy and the OpenTelemetry SDK (a throwaway
environment). ``dspy.LM`` (through LiteLLM) talks to `fake_openai`, which answers DSPy's
ChatAdapter prompts through `fake_openai.CHAT_HOOK`: ReAct does not use the model's native
tool calls, the model writes ``next_thought`` / ``next_tool_name`` / ``next_tool_args`` as
``[[ ## field ## ]]`` text, then ``finish``, then an extract step writes ``reasoning`` /
``answer``. S3 calls ``get_weather``; S1 finishes at once.

The ground truth is DSPy's conversation as the model saw and answered it: the system prompt
of the first request (DSPy's, around the signature's instructions), the question, the tool
call the model wrote (name and arguments; DSPy gives it no call id), what the tool returned,
and the ``answer`` field the model wrote. ``finish`` is ReAct's own step, not a tool call.
"""

from __future__ import annotations

import json
import os
import re
import sys
from typing import Any

import fake_openai
import groundtruth

NOTES = (
    "`ReAct.forward` (CHAIN, input.value = JSON {question}, output.value = JSON of the Prediction: "
    "trajectory, reasoning, answer) -> `Predict(StringSignature).forward` / `ChatAdapter.__call__` / "
    "`ChainOfThought.forward` ... (CHAIN) -> `LM.__call__` (LLM, llm.input_messages = DSPy's "
    "`[[ ## field ## ]]` prompts, one per model request) and TOOL spans `get_weather.__call__` / "
    "`finish.__call__` (tool.name, input.value = arguments JSON, output.value = the result; no call id). "
    "No AGENT span. The model's tool choice is text (next_tool_name / next_tool_args), never a native "
    "tool call; the final answer is the extract step's `answer` field."
)
PACKAGES = ["dspy", "litellm", "openinference-instrumentation-dspy", "openinference-instrumentation",
            "openinference-semantic-conventions"]
THOUGHT = "I need the current weather in Paris."
FIELD = re.compile(r"\[\[ ## (\w+) ## \]\]\n(.*?)(?=\n\n\[\[ ## |\Z)", re.DOTALL)


def _fields(**values: str) -> str:
    return "\n\n".join(f"[[ ## {k} ## ]]\n{v}" for k, v in values.items()) + "\n\n[[ ## completed ## ]]"


def answer_dspy(body: dict[str, Any]) -> dict[str, Any] | None:
    """DSPy's ChatAdapter prompts, answered: a ReAct step (tool or ``finish``), or the extract step."""
    msgs = body.get("messages", [])
    system = "\n".join(m.get("content") or "" for m in msgs if m.get("role") == "system")
    user = fake_openai.last_user(msgs)
    question = fake_openai.question(msgs)
    if "`next_tool_name`" in system:
        if "get_weather" in system and "weather" in question and "observation_0" not in user:
            text = _fields(next_thought=THOUGHT, next_tool_name="get_weather", next_tool_args=fake_openai.ARGUMENTS)
        else:
            text = _fields(next_thought="I can answer now.", next_tool_name="finish", next_tool_args="{}")
    elif "`answer`" in system:
        text = _fields(reasoning="The trajectory has what is needed.",
                       answer=fake_openai.ANSWERS.get(question, "OK."))
    else:
        return None
    return {"role": "assistant", "content": text}


def expected(scenario: str) -> dict[str, Any]:
    """The ground truth, from what the fake server saw and answered and what the tool returned."""
    truth = groundtruth.expected(scenario)  # system, input, llm_calls as sent; output rebuilt below
    output: list[dict[str, Any]] = []
    results = list(groundtruth.TOOL_RESULTS)
    for call in truth["llm_calls"]:
        fields = dict(FIELD.findall(call["response"][0]["content"]))
        name = fields.get("next_tool_name")
        if name and name != "finish":
            args = fields["next_tool_args"]
            output.append({"role": "assistant", "content": "", "tool_calls": [
                {"id": None, "type": "function", "name": name, "arguments": json.loads(args),
                 "arguments_json": args}]})
            tool, result = results.pop(0)
            assert tool == name, (tool, name)
            output.append({"role": "tool", "tool_call_id": None, "name": name, "content": result})
        if "answer" in fields:
            output.append({"role": "assistant", "content": fields["answer"], "tool_calls": []})
    truth["output"] = output
    truth["final_output"] = output[-1]["content"]
    truth["not_in_trace"] = {"tool_call_ids": "DSPy's tool calls have no id: the model writes the tool's name "
                                              "and arguments as text"}
    return truth


def main(scenario: str, outdir: str) -> None:
    os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    base = fake_openai.start()
    fake_openai.CHAT_HOOK = answer_dspy
    provider, exporter = groundtruth.start_tracing("gen-dspy")
    from openinference.instrumentation.dspy import DSPyInstrumentor

    DSPyInstrumentor().instrument(tracer_provider=provider)
    import dspy

    lm = dspy.LM("openai/gpt-4o-mini", api_base=base, api_key="sk-test", temperature=0, cache=False)
    dspy.configure(lm=lm, adapter=dspy.ChatAdapter())
    signature = dspy.Signature("question -> answer", groundtruth.SYSTEM)
    agent = dspy.ReAct(signature, tools=[groundtruth.get_weather] if scenario == "S3" else [], max_iters=4)
    agent(question=groundtruth.PROMPTS[scenario])
    groundtruth.write_capture(provider, exporter, outdir, scenario, expected(scenario), PACKAGES, NOTES)


if __name__ == "__main__":
    main(*sys.argv[1:3])
