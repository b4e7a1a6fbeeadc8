"""The package's shape, pinned: no import cycles, no arrow that runs up the layers, no private
name borrowed from another package, and functions that stay small.

Which imports count: every ``import`` and ``from ... import`` of a ``synopsis`` module in
``src/synopsis``, at module level and inside functions (a function-level import still runs,
later), relative ones resolved. Imports under ``if TYPE_CHECKING:`` do not count: they never
run. ``from package import name`` counts as an import of ``package.name`` when that is a
module, else of ``package``. Importing ``a.b`` also runs ``a/__init__``, but that implicit
edge does not count (a package's ``__init__`` imports its own modules by design).

Module size is a guideline, not a rule: modules over :data:`GUIDE_MODULE_LINES` are listed
in the test run's summary (``tests/conftest.py``), so a module that grows is seen and split by
concept, never packed to fit.
"""

from __future__ import annotations

import ast
import functools
from dataclasses import dataclass
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "synopsis"
GUIDE_MODULE_LINES = 600
MAX_FUNCTION_LINES = 60

#: Top-level private modules (or packages, with all they hold) that several packages share by
#: design (internal plumbing, not API): the flow drivers, the marker tags, script ranges (CJK),
#: the options-or-keywords rule, window chunking, and the SQL plumbing of the stores and the
#: server's tables.
SHARED_INTERNALS = frozenset(
    {
        "synopsis._flow",
        "synopsis._markers",
        "synopsis._scripts",
        "synopsis._options",
        "synopsis._chunking",
        "synopsis._sql",
        "synopsis._lazy",
    }
)

#: The layers, bottom first. A module may import its own group and the layers below it; two
#: groups of one layer never import each other. Groups are module prefixes (the longest one
#: that matches decides); in the foundation, modules may use each other (acyclically).
LAYERS: tuple[tuple[str, ...], ...] = (
    (
        *sorted(SHARED_INTERNALS),
        "synopsis.errors",
        "synopsis.messages",
        "synopsis.tokens",
        "synopsis.events",
        "synopsis.embeddings",
        "synopsis.prompts",
        "synopsis.telemetry",
    ),
    ("synopsis.convert", "synopsis.redact"),
    ("synopsis.validation",),
    ("synopsis.transcripts", "synopsis.models", "synopsis.memory"),
    ("synopsis.summarizer", "synopsis.testing"),
    ("synopsis.compaction", "synopsis.session"),
    ("synopsis", "synopsis.config"),
    ("synopsis.adapters",),
    ("synopsis.server",),
    ("synopsis.cli",),
)
FOUNDATION = 0

#: Private names of memory/ that other packages still use, and the one arrow up the layers (the
#: server's default memory key lives in the CLI): house-memory promotes the names to public ones
#: of synopsis.memory and moves the key into memory/.
# removed when house-memory lands
TEMPORARY_PRIVATE = frozenset(
    {
        ("synopsis.memory._checks", "MAX_LIMIT"),
        ("synopsis.memory._checks", "MAX_TTL_SECONDS"),
        ("synopsis.memory._checks", "check_tenant"),
        ("synopsis.memory._checks", "prepare_put"),
        ("synopsis.memory._kinds", "AGENTS_ITEM_KIND"),
        ("synopsis.memory._kinds", "AGENTS_SESSION_KIND"),
        ("synopsis.memory._kinds", "KindFilter"),
        ("synopsis.memory._kinds", "MAX_FILTER_KINDS"),
        ("synopsis.memory._kinds", "check_kind_filter"),
        ("synopsis.memory._types", "normalize_tags"),
        ("synopsis.memory._types", "validate_tenant"),
    }
)
# removed when house-memory lands
TEMPORARY_UPWARD = frozenset({("synopsis.server.api", "synopsis.cli.memory")})


@dataclass(frozen=True, slots=True)
class Import:
    """``importer`` imports ``module`` (``name`` from it, for ``from module import name``)."""

    importer: str
    module: str
    name: str | None
    line: int

    def __str__(self) -> str:
        what = f"{self.module}.{self.name}" if self.name else self.module
        return f"{self.importer}:{self.line} imports {what}"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@functools.cache
def modules() -> dict[str, Path]:
    return {module_name(path): path for path in sorted(SRC.rglob("*.py"))}


def _type_checking_only(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _runtime_nodes(node: ast.AST) -> list[ast.AST]:
    """Every node under ``node`` except the bodies of ``if TYPE_CHECKING:`` blocks."""
    found: list[ast.AST] = []
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.If) and _type_checking_only(child):
            for other in child.orelse:
                found += [other, *_runtime_nodes(other)]
            continue
        found += [child, *_runtime_nodes(child)]
    return found


def _imports_of(importer: str) -> list[Import]:
    path = modules()[importer]
    package = importer if path.name == "__init__.py" else importer.rpartition(".")[0]
    found: list[Import] = []
    for node in _runtime_nodes(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [Import(importer, a.name, None, node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            found += [Import(importer, base, a.name, node.lineno) for a in node.names]
    return [i for i in found if i.module == "synopsis" or i.module.startswith("synopsis.")]


def target(imported: Import) -> str:
    """The module an import runs: ``package.name`` when that is a module, else ``module``."""
    submodule = f"{imported.module}.{imported.name}"
    return submodule if submodule in modules() else imported.module


@functools.cache
def graph() -> dict[str, list[Import]]:
    return {name: _imports_of(name) for name in modules()}


def cycles() -> list[list[str]]:
    """The import cycles: strongly connected groups of more than one module (Tarjan)."""
    edges = {
        m: sorted({target(i) for i in found} & modules().keys()) for m, found in graph().items()
    }
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for other in edges[node]:
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            group = []
            while (member := stack.pop()) != node:
                group.append(member)
            if group or node in edges[node]:
                found.append(sorted([node, *group]))

    for node in edges:
        if node not in index:
            visit(node)
    return found


def group_of(module: str) -> tuple[int, str]:
    """(layer, group prefix) of ``module``: the longest prefix in :data:`LAYERS` it has."""
    matches = [
        (len(prefix), layer, prefix)
        for layer, prefixes in enumerate(LAYERS)
        for prefix in prefixes
        if module == prefix or (prefix != "synopsis" and module.startswith(prefix + "."))
    ]
    assert matches, f"{module} is in no layer: add it to LAYERS"
    _, layer, prefix = max(matches)
    return layer, prefix


def package_of(module: str) -> str:
    """``synopsis.<subpackage>`` for a module in a subpackage, else ``synopsis``."""
    parts = module.split(".")
    top = ".".join(parts[:2])
    return top if len(parts) > 1 and modules()[top].name == "__init__.py" else "synopsis"


def _shared(module: str) -> bool:
    return any(module == s or module.startswith(s + ".") for s in SHARED_INTERNALS)


def is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


# --- rules -----------------------------------------------------------------------------------


def test_the_rules_see_the_imports_they_guard() -> None:
    """The parser finds module-level, function-level and relative imports, and skips
    ``TYPE_CHECKING`` blocks (so a test of the rules cannot pass by seeing nothing)."""
    imports = {str(i).split(":")[0] + " " + target(i) for i in graph()["synopsis.session.memory"]}
    assert "synopsis.session.memory synopsis._flow" in imports
    lazy = {target(i) for i in graph()["synopsis.validation"]}
    assert "synopsis.convert" in lazy  # imported inside a function
    typing_only = {target(i) for i in graph()["synopsis.compaction.clear"]}
    assert "synopsis.compaction.archive" not in typing_only  # only under TYPE_CHECKING
    assert len(graph()) == len(modules()) > 100


def test_no_import_cycles() -> None:
    """No two modules of src/synopsis import each other, directly or through others."""
    assert cycles() == []


def test_every_module_has_a_layer() -> None:
    for module in modules():
        group_of(module)


def test_nothing_imports_upward() -> None:
    """A module imports only its own group and lower layers (see :data:`LAYERS`): memory/ and
    models/ never import compaction, session, server, adapters or cli; the server never
    imports the cli; compaction and session never import each other."""
    offenders = []
    for imports in graph().values():
        for imported in imports:
            importer, imported_module = imported.importer, target(imported)
            if (importer, imported_module) in TEMPORARY_UPWARD:
                continue
            (low, mine), (high, theirs) = group_of(importer), group_of(imported_module)
            upward = high > low
            sideways = high == low and mine != theirs and low != FOUNDATION
            if upward or sideways:
                offenders.append(str(imported))
    assert offenders == []


def test_no_private_name_crosses_a_package() -> None:
    """No module imports another package's private module (a path part starting with ``_``)
    or private name, except the shared internals in :data:`SHARED_INTERNALS`."""
    offenders = []
    for imports in graph().values():
        for imported in imports:
            module = target(imported)
            if package_of(module) == package_of(imported.importer) or _shared(module):
                continue
            name = imported.name if module == imported.module else None
            private_module = any(is_private(part) for part in module.split("."))
            if not (private_module or (name is not None and is_private(name))):
                continue
            if (module, name) in TEMPORARY_PRIVATE:
                continue
            offenders.append(str(imported))
    assert offenders == []


@pytest.mark.parametrize("path", modules().values(), ids=lambda p: str(p.relative_to(SRC)))
def test_functions_stay_small(path: Path) -> None:
    """No function over 60 lines."""
    long = [
        f"{node.name} ({node.end_lineno - node.lineno + 1} lines)"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and (node.end_lineno or 0) - node.lineno + 1 > MAX_FUNCTION_LINES
    ]
    assert not long


def module_sizes() -> list[tuple[int, str]]:
    """(lines, module) of the modules over the guideline, largest first."""
    sizes = [
        (len(path.read_text(encoding="utf-8").splitlines()), str(path.relative_to(SRC)))
        for path in modules().values()
    ]
    return sorted((size for size in sizes if size[0] > GUIDE_MODULE_LINES), reverse=True)


def test_the_temporary_allowances_are_still_needed() -> None:
    """Each temporary entry is an import that exists and breaks its rule: once house-memory's
    promotions land, this fails until the allowlists go."""
    imports = [i for found in graph().values() for i in found]
    privately = {(target(i), i.name if target(i) == i.module else None) for i in imports}
    assert privately >= TEMPORARY_PRIVATE
    for importer, imported in TEMPORARY_UPWARD:
        assert any(i.importer == importer and target(i) == imported for i in imports)
        assert group_of(importer)[0] < group_of(imported)[0]
