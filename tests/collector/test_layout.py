"""The collector's folder tree is its architecture: imports run one way, down the data path.

Layers, top to bottom (a module may import its own folder and any lower layer):

    commands, cli                      the command line
    service                            the only place that wires the parts
    receive, assemble, work, export    the stages (never each other)
    store                              interface and split; backends sqlite, redis (never each other)
    config, status                     the configuration and the status snapshots
    common                             what all of them share (types, errors, metrics, ...): imports
                                       nothing else of the collector

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

COMMON, SETTINGS, STORE, STAGES, SERVICE, CLI = range(6)
LAYERS: dict[str, int] = {
    "collector.cli": CLI, "collector.commands": CLI,
    "collector.service": SERVICE,
    "collector.receive": STAGES, "collector.assemble": STAGES, "collector.work": STAGES, "collector.export": STAGES,
    "collector.store": STORE,
    "collector.config": SETTINGS, "collector.status": SETTINGS,
    "collector.common": COMMON,
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
    if source_layer == STAGES and target_layer == STAGES and source_folder != target_folder:
        return "one stage reaches into another"
    source_backend, target_backend = backend_of(arrow.source), backend_of(arrow.target)
    if source_backend and target_backend and source_backend != target_backend:
        return "one store backend imports the other"
    if target_backend and not source_backend and source_layer == STORE:
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
    (Arrow("collector.common.errors", "collector.config.checks", 1), "runs back up"),
    (Arrow("collector.common.metrics", "collector.status.snapshot", 1), "runs back up"),
    (Arrow("collector.config.load", "collector.common.errors", 1), None),
    (Arrow("collector.common.session_types", "collector.common.types", 1), None),
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


def two_file_circles(arrows: list[Arrow]) -> list[tuple[str, str]]:
    """Each pair of collector modules that import each other (a package and the modules inside
    it are one thing, not a circle: the ``__init__`` of a folder re-exports its modules).

    Example:
        >>> two_file_circles([Arrow("collector.a.x", "collector.a.y", 1), Arrow("collector.a.y", "collector.a.x", 9),
        ...                   Arrow("collector.a", "collector.a.x", 1), Arrow("collector.a.x", "collector.a", 2)])
        [('collector.a.x', 'collector.a.y')]
    """
    edges = {(a.source, a.target) for a in arrows
             if a.target.startswith("collector.") and not a.target.startswith(a.source + ".")
             and not a.source.startswith(a.target + ".") and a.source != a.target}
    return sorted({(s, t) for s, t in edges if (t, s) in edges and s < t})


def test_no_two_collector_modules_import_each_other() -> None:
    """A circle means what both need lives in the wrong one of them (issue 41: commands/score ↔
    score_from, store/sqlite/buffer ↔ forward): move it where it belongs, never behind a lazy import
    (lazy and TYPE_CHECKING imports are read as arrows too)."""
    assert two_file_circles(all_arrows("collector")) == []


def test_the_top_level_holds_only_the_entry_points() -> None:
    """The top level is the package, the command line and the wiring (issue 41 bounds it at 10
    modules): shared types and helpers live in `collector.common`, the rest in the stage folders."""
    top = sorted(p.name for p in COLLECTOR.glob("*.py"))
    assert top == ["__init__.py", "cli.py", "service.py"]
