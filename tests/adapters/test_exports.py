"""The public surface of `adapters` is exactly its flat ``__all__``."""

import adapters


def test_all_names_exist_and_are_documented() -> None:
    for name in adapters.__all__:
        obj = getattr(adapters, name)
        assert obj.__doc__ or name == "SKIP_REASONS", name


def test_no_public_name_is_missing_from_all() -> None:
    public = {n for n in vars(adapters) if not n.startswith("_")}
    modules = {"adk", "genai", "openinference", "traceloop", "vercel", "mastra", "pydantic_ai", "otlp_files", "haystack",
               "langfuse", "mlflow"}
    assert public - set(adapters.__all__) - modules <= {"Iterable"}
