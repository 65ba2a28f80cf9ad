"""The collector's folder tree is its architecture: imports run one way, down the data path.

Layers, top to bottom (a module may import its own folder and any lower layer):

    commands, cli                      the command line
    service                            the only place that wires the parts
    receive, assemble, work, export    the stages (never each other)
    store                              interface and split; backends sqlite, redis (never each other)
    common (types, errors, metrics, ...), config, status

Every import is read from the source (lazy imports inside functions included), so an
arrow that runs back up fails here however it is written.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest
from repo_paths import REPO

COLLECTOR = REPO / "collector"

LAYERS: dict[str, int] = {
    "collector.cli": 4, "collector.commands": 4,
    "collector.service": 3,
    "collector.receive": 2, "collector.assemble": 2, "collector.work": 2, "collector.export": 2,
    "collector.store": 1,
    "collector.config": 0, "collector.status": 0, "collector.common": 0,
}
STORE_BACKENDS = ("collector.store.sqlite", "collector.store.redis")
MAX_LINES = 400


@dataclass(frozen=True)
class Arrow:
    """One import: ``source`` imports ``target`` at ``line``."""

    source: str
    target: str
    line: int

    def __str__(self) -> str:
        return f"{self.source} -> {self.target} (line {self.line})"


def module_name(path: Path) -> str:
    """The dotted name of a source file of the repository."""
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def is_module(name: str) -> bool:
    """Whether a dotted name is a module or package of the repository."""
    base = REPO.joinpath(*name.split("."))
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def imports_of(path: Path) -> list[Arrow]:
    """Every import statement of a file, resolved to the module (or submodule) it loads."""
    source = module_name(path)
    package = source if path.name == "__init__.py" else source.rpartition(".")[0]
    arrows = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            arrows += [Arrow(source, alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                arrows.append(Arrow(source, sub if is_module(sub) else base, node.lineno))
    return arrows


def layer_of(name: str) -> tuple[str, int] | None:
    """The folder (its dotted prefix in `LAYERS`) and layer of a collector module."""
    for prefix, layer in sorted(LAYERS.items(), key=lambda item: -len(item[0])):
        if name == prefix or name.startswith(prefix + "."):
            return prefix, layer
    return None


def backend_of(name: str) -> str | None:
    return next((b for b in STORE_BACKENDS if name == b or name.startswith(b + ".")), None)


def wrong_way(arrow: Arrow) -> str | None:
    """Why an import between two collector modules runs against the layers (None: it does not)."""
    source, target = layer_of(arrow.source), layer_of(arrow.target)
    if source is None or target is None:
        return None
    (source_folder, source_layer), (target_folder, target_layer) = source, target
    if target_layer > source_layer:
        return "runs back up"
    if source_layer == 2 and target_layer == 2 and source_folder != target_folder:
        return "one stage reaches into another"
    source_backend, target_backend = backend_of(arrow.source), backend_of(arrow.target)
    if source_backend and target_backend and source_backend != target_backend:
        return "one store backend imports the other"
    if target_backend and not source_backend and source_layer == 1:
        return "the store interface imports a backend"
    return None


def all_arrows(package: str) -> list[Arrow]:
    return [arrow for path in sorted((REPO / package).rglob("*.py")) for arrow in imports_of(path)]


def test_every_collector_module_has_a_layer() -> None:
    unplaced = [module_name(p) for p in COLLECTOR.rglob("*.py")
                if module_name(p) != "collector" and layer_of(module_name(p)) is None]
    assert unplaced == [], f"modules outside every layer of {__name__}.LAYERS: {unplaced}"


def test_imports_run_down_the_data_path() -> None:
    problems = [f"{arrow}: {why}" for arrow in all_arrows("collector") if (why := wrong_way(arrow))]
    assert problems == [], "\n".join(problems)


@pytest.mark.parametrize(("package", "forbidden"), [
    ("scorers", ("adapters", "collector")),
    ("adapters", ("collector",)),
])
def test_libraries_never_import_the_daemon(package: str, forbidden: tuple[str, ...]) -> None:
    problems = [str(arrow) for arrow in all_arrows(package)
                if arrow.target.split(".")[0] in forbidden]
    assert problems == [], "\n".join(problems)


@pytest.mark.parametrize(("arrow", "why"), [
    (Arrow("collector.store.sqlite.store", "collector.work.registry", 1), "runs back up"),
    (Arrow("collector.assemble.assembler", "collector.work.registry", 1), "one stage reaches into another"),
    (Arrow("collector.store.redis.store", "collector.store.sqlite.store", 1), "one store backend imports the other"),
    (Arrow("collector.store.interface", "collector.store.sqlite", 1), "the store interface imports a backend"),
    (Arrow("collector.common.types", "collector.store.interface", 1), "runs back up"),
    (Arrow("collector.service", "collector.store.redis", 1), None),
    (Arrow("collector.store.redis.store", "collector.store.interface", 1), None),
    (Arrow("collector.receive.grpc", "collector.receive.http", 1), None),
])
def test_the_rule_tells_wrong_arrows_from_right_ones(arrow: Arrow, why: str | None) -> None:
    assert wrong_way(arrow) == why


def test_submodule_and_lazy_imports_are_read() -> None:
    names = {arrow.target for arrow in imports_of(COLLECTOR / "store" / "redis" / "buffer.py")}
    assert "collector.store.redis.scripts" in names  # from collector.store.redis import scripts
    lazy = {arrow.target for arrow in imports_of(COLLECTOR / "commands" / "serve.py")}
    assert "collector.service" in lazy  # imported inside run(), still an arrow


def test_each_folder_says_what_it_does_and_hands_on() -> None:
    silent = [str(init.relative_to(REPO)) for init in COLLECTOR.rglob("__init__.py")
              if init.parent != COLLECTOR and not ast.get_docstring(ast.parse(init.read_text()))]
    assert silent == []


def test_no_collector_module_is_over_400_lines() -> None:
    long = {str(p.relative_to(REPO)): n for p in COLLECTOR.rglob("*.py")
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert long == {}
