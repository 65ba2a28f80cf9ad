"""Building scorers: create_scorer options, the immutable builder, step definitions (SPEC §1.1)."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from scorers import (
    Judge,
    PromptStep,
    Scorer,
    ScorerDefinitionError,
    ScorerRunInputForAgent,
    ScorerRunOutputForAgent,
    create_scorer,
)


class Verdict(BaseModel):
    relevant: bool


def prompt(run: Any) -> str:
    return "judge this"


def base(**kw: Any) -> Scorer[Any, Any]:
    return create_scorer(id="s1", description="a scorer", **kw)


# -- create_scorer -------------------------------------------------------------------------


@pytest.mark.parametrize("bad_id", [None, ""])
def test_missing_id_is_a_definition_error(bad_id: Any) -> None:
    with pytest.raises(ScorerDefinitionError, match="Scorers must have an ID field"):
        create_scorer(id=bad_id, description="d")


def test_id_omitted_entirely_is_a_definition_error() -> None:
    with pytest.raises(ScorerDefinitionError, match="must have an ID"):
        create_scorer(description="d")


@pytest.mark.parametrize("bad", [None, ""])
def test_missing_description_names_the_scorer(bad: Any) -> None:
    with pytest.raises(ScorerDefinitionError, match='Scorer "quality" must have a description'):
        create_scorer(id="quality", description=bad)


def test_introspection_defaults() -> None:
    scorer = create_scorer(id="quality", description="Scores quality")
    assert (scorer.id, scorer.name, scorer.description) == ("quality", "quality", "Scores quality")
    assert (scorer.type, scorer.judge, scorer.version) == (None, None, None)
    assert scorer.get_steps() == []


def test_introspection_with_every_option() -> None:
    judge = Judge(model="openai/gpt-4o-mini", instructions="Be strict")
    scorer = create_scorer(
        id="quality", description="d", name="Quality", type="agent", judge=judge, version="3"
    )
    assert (scorer.name, scorer.type, scorer.judge, scorer.version) == (
        "Quality",
        "agent",
        judge,
        "3",
    )
    assert scorer.input_type is ScorerRunInputForAgent
    assert scorer.output_type is ScorerRunOutputForAgent


def test_judge_given_as_dict_becomes_a_judge() -> None:
    scorer = base(judge={"model": "openai/gpt-4o-mini", "instructions": "x"})
    assert isinstance(scorer.judge, Judge) and scorer.judge.model == "openai/gpt-4o-mini"


def test_invalid_judge_dict_is_a_definition_error() -> None:
    with pytest.raises(ScorerDefinitionError, match='Scorer "s1": invalid judge: .*temperature'):
        base(judge={"model": "m", "temperature": 0.2})
    with pytest.raises(ScorerDefinitionError, match='Scorer "s1": judge must be a Judge'):
        base(judge="openai/gpt-4o-mini")


def test_int_version_is_kept_as_string() -> None:
    assert base(version=2).version == "2"  # type: ignore[arg-type]


def test_unknown_type_is_rejected() -> None:
    with pytest.raises(ScorerDefinitionError, match='type must be "agent", "conversation" or None'):
        base(type="trajectory")


def test_agent_type_with_custom_types_is_rejected() -> None:
    with pytest.raises(ScorerDefinitionError, match="not both"):
        create_scorer(id="s", description="d", type="agent", input_type=Verdict)  # type: ignore[call-overload]


def test_non_callable_prepare_run_is_rejected() -> None:
    with pytest.raises(ScorerDefinitionError, match="prepare_run must be callable"):
        base(prepare_run="nope")


def test_untypeable_input_type_is_rejected() -> None:
    with pytest.raises(ScorerDefinitionError, match="input_type must be a type pydantic"):
        base(input_type=object())


# -- builder -------------------------------------------------------------------------------


def test_step_methods_return_new_scorers_and_never_mutate() -> None:
    template = base().analyze(lambda run: {"n": 1})
    a = template.generate_score(lambda: 1.0)
    b = template.generate_score(lambda: 0.0)
    assert [s["name"] for s in template.get_steps()] == ["analyze"]
    assert a is not template and b is not a
    assert a.run_sync(output="x").score == 1.0
    assert b.run_sync(output="x").score == 0.0


def test_get_steps_lists_canonical_order_whatever_the_chaining_order() -> None:
    scorer = (
        base()
        .generate_reason(lambda: "why")
        .generate_score(lambda: 1.0)
        .analyze(description="Judge relevance", output_schema=Verdict, create_prompt=prompt)
        .preprocess(lambda run: run)
    )
    assert scorer.get_steps() == [
        {"name": "preprocess", "type": "function", "description": None},
        {"name": "analyze", "type": "prompt", "description": "Judge relevance"},
        {"name": "generate_score", "type": "function", "description": None},
        {"name": "generate_reason", "type": "function", "description": None},
    ]


@pytest.mark.parametrize("step", ["preprocess", "analyze", "generate_score", "generate_reason"])
def test_defining_a_step_twice_is_a_definition_error(step: str) -> None:
    once = getattr(base(), step)(lambda: 1.0)
    with pytest.raises(ScorerDefinitionError, match=f'step "{step}" is already defined'):
        getattr(once, step)(lambda: 1.0)


def test_step_method_without_anything_is_a_definition_error() -> None:
    with pytest.raises(ScorerDefinitionError, match='Scorer "s1": Step "analyze": give a function'):
        base().analyze()


def test_function_and_prompt_keywords_together_is_a_definition_error() -> None:
    with pytest.raises(ScorerDefinitionError, match="not both"):
        base().analyze(lambda run: 1, description="x")


def test_repr_names_id_and_steps() -> None:
    assert repr(base().generate_score(lambda: 1)) == (
        "Scorer(id='s1', name='s1', steps=['generate_score'])"
    )


# -- function step signatures --------------------------------------------------------------


def test_unknown_required_parameter_is_named() -> None:
    def step(run: Any, foo: Any) -> float:
        return 1.0

    with pytest.raises(ScorerDefinitionError, match='unknown required parameter "foo"'):
        base().generate_score(step)


def test_unknown_optional_parameter_is_allowed() -> None:
    def step(run: Any, threshold: float = 0.5) -> float:
        return threshold

    assert base().generate_score(step).run_sync(output="x").score == 0.5


@pytest.mark.parametrize("step", ["preprocess", "analyze", "generate_score"])
def test_score_parameter_outside_generate_reason_is_rejected(step: str) -> None:
    with pytest.raises(ScorerDefinitionError, match='declares "score"'):
        getattr(base(), step)(lambda run, score: 1.0)


def test_score_parameter_with_default_is_still_rejected_outside_reason() -> None:
    with pytest.raises(ScorerDefinitionError, match='declares "score"'):
        base().analyze(lambda run, score=None: 1.0)


def test_generate_reason_may_declare_score() -> None:
    scorer = base().generate_score(lambda: 2).generate_reason(lambda run, results, score: score)
    assert scorer.run_sync().reason == 2.0


def test_required_positional_only_parameter_is_rejected() -> None:
    def step(run: Any, /) -> float:
        return 1.0

    with pytest.raises(ScorerDefinitionError, match='positional-only parameter "run"'):
        base().generate_score(step)


def test_non_callable_step_is_rejected() -> None:
    with pytest.raises(ScorerDefinitionError, match="must be callable"):
        base().generate_score(42)  # type: ignore[arg-type]


def test_uninspectable_callable_is_rejected() -> None:
    class Weird:
        __signature__ = "not a signature"

        def __call__(self) -> float:
            return 1.0

    with pytest.raises(ScorerDefinitionError, match="cannot inspect the signature"):
        base().generate_score(Weird())


# -- prompt steps --------------------------------------------------------------------------


@pytest.mark.parametrize("step", ["preprocess", "analyze"])
def test_prompt_preprocess_and_analyze_need_an_output_schema(step: str) -> None:
    with pytest.raises(ScorerDefinitionError, match=f"prompt-mode {step} needs an output_schema"):
        getattr(base(), step)(description="d", create_prompt=prompt)


def test_prompt_step_accepts_a_json_schema_dict() -> None:
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}}
    scorer = base().analyze(description="d", output_schema=schema, create_prompt=prompt)
    assert scorer.get_steps()[0]["type"] == "prompt"


def test_prompt_step_object_is_accepted() -> None:
    step = PromptStep(description="Relevance", output_schema=Verdict, create_prompt=prompt)
    assert base().analyze(step).get_steps() == [
        {"name": "analyze", "type": "prompt", "description": "Relevance"}
    ]


def test_prompt_step_given_as_dict_is_accepted() -> None:
    fields = {"description": "Score it", "create_prompt": prompt}
    assert base().generate_score(fields).get_steps()[0]["type"] == "prompt"


def test_prompt_keywords_need_create_prompt() -> None:
    with pytest.raises(ScorerDefinitionError, match="needs create_prompt"):
        base().analyze(description="d", output_schema=Verdict)


def test_prompt_keywords_need_a_description() -> None:
    with pytest.raises(ScorerDefinitionError, match="needs a description"):
        base().generate_score(create_prompt=prompt)


def test_prompt_step_rejects_bad_fields() -> None:
    with pytest.raises(ScorerDefinitionError, match="non-empty description"):
        PromptStep(description=" ", create_prompt=prompt)
    with pytest.raises(ScorerDefinitionError, match="create_prompt must be a callable"):
        PromptStep(description="d", create_prompt="text")  # type: ignore[arg-type]
    with pytest.raises(ScorerDefinitionError, match="output_schema must be a pydantic model"):
        PromptStep(description="d", create_prompt=prompt, output_schema=int)  # type: ignore[arg-type]
    with pytest.raises(ScorerDefinitionError, match="judge must be a Judge"):
        PromptStep(description="d", create_prompt=prompt, judge="gpt")  # type: ignore[arg-type]
    with pytest.raises(ScorerDefinitionError, match="calculate_score must be callable"):
        PromptStep(description="d", create_prompt=prompt, calculate_score=1)  # type: ignore[arg-type]


def test_prompt_step_judge_dict_becomes_a_judge() -> None:
    step = PromptStep(description="d", create_prompt=prompt, judge={"instructions": "x"})  # type: ignore[arg-type]
    assert isinstance(step.judge, Judge) and step.judge.instructions == "x"


def test_calculate_score_only_on_generate_score() -> None:
    with pytest.raises(ScorerDefinitionError, match="calculate_score is only for generate_score"):
        base().analyze(PromptStep("d", prompt, Verdict, calculate_score=lambda: 1.0))


def test_generate_reason_prompt_takes_no_output_schema() -> None:
    with pytest.raises(ScorerDefinitionError, match="takes no output_schema"):
        base().generate_reason(description="d", create_prompt=prompt, output_schema=Verdict)


def test_generate_score_output_schema_needs_calculate_score() -> None:
    with pytest.raises(ScorerDefinitionError, match="output_schema needs calculate_score"):
        base().generate_score(description="d", create_prompt=prompt, output_schema=Verdict)


def test_generate_score_with_calculate_score_is_accepted() -> None:
    scorer = base().generate_score(
        description="d",
        create_prompt=prompt,
        output_schema=Verdict,
        calculate_score=lambda judge_output: float(judge_output.relevant),
    )
    assert scorer.get_steps()[0]["type"] == "prompt"


def test_create_prompt_signature_is_checked_at_definition() -> None:
    with pytest.raises(
        ScorerDefinitionError, match='create_prompt .* unknown required parameter "x"'
    ):
        base().generate_score(description="d", create_prompt=lambda run, x: "p")


def test_calculate_score_signature_is_checked_at_definition() -> None:
    with pytest.raises(
        ScorerDefinitionError, match='calculate_score .* unknown required parameter "y"'
    ):
        base().generate_score(
            description="d", create_prompt=prompt, calculate_score=lambda judge_output, y: 1
        )


def test_create_prompt_of_generate_reason_may_declare_score() -> None:
    scorer = base().generate_reason(description="d", create_prompt=lambda score: f"{score}")
    assert scorer.get_steps()[0]["name"] == "generate_reason"


def test_unknown_prompt_field_in_dict_is_rejected() -> None:
    with pytest.raises(ScorerDefinitionError, match="unknown prompt field"):
        base().generate_score({"description": "d", "create_prompt": prompt, "model": "x"})
