

def test_no_tool_errors_sees_mastras_is_error_flag() -> None:
    from scorers.builtin.checks import no_tool_errors, tool_errors

    output = [{"role": "assistant", "content": {"format": 2, "parts": [
        {"type": "tool-invocation", "toolInvocation": {
            "state": "result", "toolCallId": "c1", "toolName": "search", "args": {},
            "result": "quota exceeded", "isError": True}}]}}]
    assert tool_errors(output) == ["search"]
    assert no_tool_errors().run_sync(input="q", output=output).score == 0.0
