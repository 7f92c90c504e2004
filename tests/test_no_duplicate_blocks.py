"""No block of six or more lines is repeated inside product code (analysis/ and
server/; tests and fixtures aside).

Our own small detector: every Python file is read as lines with white space
folded; blank lines and comment lines are dropped, and so are the lines of
import statements and of docstrings (found with ``ast``).  Imports are left
out because a list of names imported from ``model`` is not logic that a helper
could share (a re-export module would only hide where each name comes from);
docstrings because they are prose.  Every window of six consecutive remaining
lines is hashed; a window that stands in two places (two files, or two places
of one file) is a copy that should be one helper.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path
from typing import Dict, Iterable, List, Set, Tuple

ROOT = Path(__file__).resolve().parent.parent
PRODUCT = ("analysis", "server")
WINDOW = 6


def _skipped_lines(text: str) -> Set[int]:
    """1-based lines of import statements and docstrings."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return set()
    out: Set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            out.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                out.update(range(body[0].lineno, (body[0].end_lineno or body[0].lineno) + 1))
    return out


def code_lines(text: str) -> List[Tuple[int, str]]:
    """(line number, line with white space folded) of the lines that count."""
    skip = _skipped_lines(text)
    out = []
    for i, raw in enumerate(text.splitlines(), start=1):
        line = " ".join(raw.split())
        if not line or line.startswith("#") or i in skip:
            continue
        out.append((i, line))
    return out


def repeated_windows(files: Iterable[Tuple[str, str]], window: int = WINDOW
                     ) -> List[List[Tuple[str, int]]]:
    """Every run of ``window`` or more counted lines that stands in more than
    one place, as its places (file, first line).  A longer copy is one run: a
    window whose places all continue the previous window's places is not
    reported again."""
    places: Dict[Tuple[str, ...], List[Tuple[str, int]]] = defaultdict(list)
    first_line: Dict[Tuple[str, int], int] = {}
    for name, text in files:
        lines = code_lines(text)
        for k in range(len(lines) - window + 1):
            key = tuple(t for _, t in lines[k:k + window])
            places[key].append((name, k))
            first_line[(name, k)] = lines[k][0]
    repeated = {tuple(where) for where in places.values() if len(where) > 1}
    out = []
    for where in sorted(repeated):
        if tuple((name, k - 1) for name, k in where) in repeated:
            continue  # the same copy, one line further
        out.append([(name, first_line[(name, k)]) for name, k in where])
    return out


def product_files() -> List[Tuple[str, str]]:
    out = []
    for top in PRODUCT:
        for path in sorted((ROOT / top).rglob("*.py")):
            out.append((str(path.relative_to(ROOT)), path.read_text(encoding="utf-8")))
    return out


def test_no_block_of_six_lines_is_repeated():
    dups = repeated_windows(product_files())
    assert not dups, "repeated blocks of six lines (make them one helper):\n" + "\n".join(
        " ~ ".join(f"{f}:{ln}" for f, ln in where) for where in dups)


def test_detector_finds_a_planted_copy():
    body = "\n".join(f"    x{i} = compute({i}, y)  # step {i}" for i in range(6))
    a = f'"""Doc."""\nimport os\n\n\ndef f(y):\n{body}\n    return x5\n'
    b = f"from os import path\n\n\ndef g(y):\n    # the same steps\n{body}\n\n    return x0\n"
    assert repeated_windows([("a.py", a), ("b.py", b)]) == [[("a.py", 6), ("b.py", 6)]]
    # Five shared lines are not a block; imports and docstrings never count.
    five = "\n".join(body.splitlines()[:5])
    assert repeated_windows([("a.py", f"def f(y):\n{five}\n    a = 1\n"),
                             ("b.py", f"def g(y):\n{five}\n    b = 2\n")]) == []
    imports = "from .model import (\n" + "".join(f"    N{i},\n" for i in range(8)) + ")\n"
    assert repeated_windows([("a.py", imports), ("b.py", imports)]) == []
