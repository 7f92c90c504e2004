"""Which top-level chunks of a file can change what the analysis finds.

``frontend.parse_module`` hands every chunk to libcst, which costs most of
``check``'s time, yet most chunks of a real file (reference programs, test
helpers, plotting) hold nothing a kernel reads.  This module finds, from
CPython's ``ast`` of the whole file (already built to split it), a superset
of the chunks the analysis of its kernels reads, so the others need no libcst
parse.

The walk is the one ``host.kernel_inputs`` does per kernel on chunk models
(the host's replay test checks that those inputs decide a kernel's result),
done here once for all kernels together and on ``ast`` nodes, where every
name set is a superset of the one the chunk model gives:

* seeds: the chunks that can define a kernel or a macro (a function, at any
  depth, decorated with a name ending in ``prim_func``, ``macro``, ``jit`` or
  ``lazy_jit``: the only places ``frontend._Builder`` builds them); the names
  they need are every word of their text (comments included:
  ``# tilelint: bind``);
* a needed name pulls in the chunks that define it (functions, classes,
  methods: with every name their definition mentions) or assign it at module
  level (with the names the assignment reads);
* a callee (a seed's functions and classes, the names a seed mentions that a
  chunk defines, a needed class, a calling function) pulls in the chunks that
  call it, with the names the call's arguments mention; the functions around
  such a call become frames;
* a frame adds the names its statements read to compute needed names
  (assignments to them, mutations, every test and loop), its decorators and
  parameters; the module-level frame also pulls in the chunks whose
  module-level statements test or loop or assign a needed name, and any frame
  pulls in the chunks that declare command-line arguments.

Pure: no I/O, nothing imported from the analysis.
"""

from __future__ import annotations

import ast
import bisect
import re
from typing import Dict, List, Optional, Sequence, Set, Tuple

_WORD = re.compile(r"[^\W\d]\w*")
_NEWLINE = re.compile("\n")
# The last parts of the decorators under which the frontend finds kernels
# and macros (``T.prim_func``, ``T.macro``, ``tilelang.jit``, ``lazy_jit``).
SEED_WORDS = frozenset({"prim_func", "macro", "jit", "lazy_jit"})
_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)
_TESTS = (ast.If, ast.For, ast.AsyncFor, ast.While, ast.Try, ast.With, ast.AsyncWith)
_VIA = ("compile", "get_tir", "get_kernel_source")


def names(node: object) -> Set[str]:
    """Every identifier under ``node`` (a node or a list of them)."""
    out: Set[str] = set()
    stack: List[object] = list(node) if isinstance(node, list) else [node]
    while stack:
        n = stack.pop()
        if isinstance(n, ast.Name):
            out.add(n.id)
            continue
        if isinstance(n, ast.Attribute):
            out.add(n.attr)
        elif isinstance(n, ast.arg):
            out.add(n.arg)
        elif isinstance(n, ast.keyword):
            if n.arg:
                out.add(n.arg)
        elif isinstance(n, _DEFS):
            out.add(n.name)
        elif isinstance(n, ast.alias):
            out.add((n.asname or n.name).split(".")[0])
        if isinstance(n, ast.AST):
            stack.extend(ast.iter_child_nodes(n))
    return out


def _dotted(e: ast.expr) -> Optional[str]:
    parts: List[str] = []
    while isinstance(e, ast.Attribute):
        parts.append(e.attr)
        e = e.value
    if not isinstance(e, ast.Name):
        return None
    parts.append(e.id)
    return ".".join(reversed(parts))


def _seed_decorator(d: ast.expr) -> bool:
    """A decorator under which the frontend can find a kernel (its dotted
    name, called or not, ends in one of SEED_WORDS)."""
    if isinstance(d, ast.Call):
        d = d.func
    name = _dotted(d)
    return name is not None and name.split(".")[-1] in SEED_WORDS


def _call_keys(call: ast.Call) -> Set[str]:
    """The names under which a call site is filed (its callee, whole and last part)."""
    out: Set[str] = set()
    func = call.func
    if isinstance(func, ast.Attribute) and func.attr in _VIA and isinstance(func.value, ast.Name):
        out.add(func.value.id)
    d = _dotted(func)
    if d is not None:
        out.update((d, d.split(".")[-1]))
        if d in ("functools.partial", "partial") and call.args:
            first = _dotted(call.args[0])
            if first is not None:
                out.update((first, first.split(".")[-1]))
    return out


def _targets(st: ast.stmt) -> Set[str]:
    if isinstance(st, ast.Assign):
        return names(list(st.targets))
    if isinstance(st, (ast.AnnAssign, ast.AugAssign)):
        return names(st.target)
    return set()


def _base(st: ast.stmt) -> Optional[str]:
    """``x`` for a statement ``x.method(...)`` (it may mutate ``x``)."""
    if isinstance(st, ast.Expr) and isinstance(st.value, ast.Call):
        d = _dotted(st.value.func)
        if d is not None and "." in d:
            return d.split(".")[0]
    return None


def _is_word_char(c: str) -> bool:
    return c.isalnum() or c == "_"


class _Lines:
    """The words of line ranges of the file (1-based, inclusive)."""

    def __init__(self, lines: Sequence[str]) -> None:
        self.lines = lines

    def words(self, first: int, last: int) -> Set[str]:
        return set(_WORD.findall("".join(self.lines[first - 1:last])))

    def call_words(self, first: int, last: int, callee: str) -> Set[str]:
        """The words of a statement that mentions ``callee``, without the
        callee itself when its one mention is a call (``callee(``): what
        the statement reads besides the function it calls."""
        text = "".join(self.lines[first - 1:last])
        found = _WORD.findall(text)
        if found.count(callee) == 1 and re.search(
                r"(?<!\w)" + re.escape(callee) + r"\s*\(", text):
            return set(found) - {callee}
        return set(found)

    def of(self, node: ast.stmt) -> Set[str]:
        """The words of a statement's lines (a superset of the names in it)."""
        first = node.lineno
        for dec in getattr(node, "decorator_list", ()):
            first = min(first, dec.lineno)
        return self.words(first, node.end_lineno or node.lineno)

    def head(self, node: ast.stmt, name: str = "") -> Set[str]:
        """The words of a statement's lines up to its body (a compound
        statement's test, iterator, target; a def's decorators and parameters:
        without the def's ``name`` when that is its one mention there)."""
        first = node.lineno
        for dec in getattr(node, "decorator_list", ()):
            first = min(first, dec.lineno)
        found = _WORD.findall("".join(self.lines[first - 1:_head_end(node)]))
        if name and found.count(name) == 1:
            return set(found) - {name}
        return set(found)


def _head_end(node: ast.stmt) -> int:
    body = getattr(node, "body", None)
    if isinstance(body, list) and body and isinstance(body[0], ast.stmt):
        return max(node.lineno, body[0].lineno - 1)
    return node.end_lineno or node.lineno


def _children(st: ast.stmt) -> List[ast.stmt]:
    """The statements directly under a compound statement."""
    out: List[ast.stmt] = []
    for field in ("body", "orelse", "finalbody"):
        v = getattr(st, field, None)
        if isinstance(v, list):
            out.extend(x for x in v if isinstance(x, ast.stmt))
    for h in getattr(st, "handlers", ()):
        out.extend(h.body)
    for c in getattr(st, "cases", ()):
        out.extend(c.body)
    return out


def _frame_names(stmts: Sequence[ast.stmt], need: Set[str], lines: _Lines) -> bool:
    """Grow ``need`` with what ``stmts`` read to compute it (see the module doc)."""
    grew = False
    for st in stmts:
        add: Set[str] = set()
        inner: List[Sequence[ast.stmt]] = []
        if isinstance(st, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            if st.value is not None and not _targets(st).isdisjoint(need):
                add = lines.of(st)
        elif isinstance(st, ast.Expr):
            base = _base(st)
            if base is not None and base in need:
                add = lines.of(st)
        elif isinstance(st, (ast.If, ast.While, ast.For, ast.AsyncFor)):
            add = lines.head(st)
            inner = [st.body, st.orelse]
        elif isinstance(st, (ast.With, ast.AsyncWith)):
            inner = [st.body]
        elif isinstance(st, ast.Try):
            inner = [st.body, st.orelse, st.finalbody]
            inner.extend(h.body for h in st.handlers)
        if add and not need.issuperset(add):
            need.update(add)
            grew = True
        for body in inner:
            if _frame_names(body, need, lines):
                grew = True
    return grew


# A statement of a chunk: (its own first and last line, depth, enclosing
# functions, enclosing classes).
_Place = Tuple[int, int, int, Tuple[str, ...], Tuple[str, ...], ast.stmt]


class _Chunk:
    """What the walk asks of one chunk, computed on first use."""

    def __init__(self, nodes: Sequence[ast.stmt], text: str, first_line: int,
                 lines: _Lines) -> None:
        self.nodes = nodes
        self.text = text
        self.first_line = first_line
        self.lines = lines
        self._defs: Optional[Dict[str, List[ast.stmt]]] = None
        self._places: List[_Place] = []
        self.seed = False  # a def decorated prim_func, macro, jit or lazy_jit
        self._at: Optional[Dict[int, _Place]] = None
        self._breaks: List[int] = []
        self.classes: Set[str] = set()
        self.consts: Dict[str, Set[str]] = {}
        self.top: List[ast.stmt] = []
        self.always = False
        self.writes: Set[str] = set()
        for st in nodes:
            if not isinstance(st, _DEFS):
                self.module_stmt(st)

    @property
    def defs(self) -> Dict[str, List[ast.stmt]]:
        if self._defs is None:
            self._defs = {}
            stack: List[Tuple[ast.stmt, int, Tuple[str, ...], Tuple[str, ...]]] = \
                [(n, 0, (), ()) for n in self.nodes]
            while stack:
                n, depth, funcs, classes = stack.pop()
                if isinstance(n, _DEFS):
                    self._defs.setdefault(n.name, []).append(n)
                    if not self.seed:
                        self.seed = any(_seed_decorator(d) for d in n.decorator_list)
                    first = min([n.lineno] + [d.lineno for d in n.decorator_list])
                    self._places.append((first, _head_end(n), depth, funcs, classes, n))
                    if isinstance(n, ast.ClassDef):
                        self.classes.add(n.name)
                        inner = (funcs, classes + (n.name,))
                    else:
                        inner = (funcs + (n.name,), classes)
                    stack.extend((c, depth + 1, *inner) for c in n.body)
                    continue
                kids = _children(n)
                self._places.append((n.lineno, _head_end(n) if kids else
                                     (n.end_lineno or n.lineno), depth, funcs, classes, n))
                stack.extend((c, depth + 1, funcs, classes) for c in kids)
        return self._defs

    def mentions(self, word: str) -> List[Tuple[Set[str], Tuple[str, ...], Tuple[str, ...]]]:
        """Where the chunk mentions ``word`` (a superset of its call sites of
        ``word``): the words of the statement there, its functions, its classes."""
        if self._at is None:
            _ = self.defs
            at: Dict[int, _Place] = {}
            # The innermost statement owning each line: deeper ones overwrite.
            for p in sorted(self._places, key=lambda p: p[2]):
                for line in range(p[0], p[1] + 1):
                    at[line] = p
            self._at = at
            self._breaks = [m.start() for m in _NEWLINE.finditer(self.text)]
        out = []
        seen: Set[int] = set()
        text = self.text
        end = len(word)
        pos = text.find(word)
        while pos >= 0:
            hit = pos
            pos = text.find(word, pos + 1)
            if (hit and _is_word_char(text[hit - 1])) or \
                    (hit + end < len(text) and _is_word_char(text[hit + end])):
                continue
            line = self.first_line + bisect.bisect_left(self._breaks, hit)
            best = self._at.get(line)
            if best is None or id(best) in seen:  # a comment or blank line; a repeat
                continue
            seen.add(id(best))
            out.append((self.lines.call_words(best[0], best[1], word), best[3], best[4]))
        return out

    def module_stmt(self, st: ast.stmt) -> None:
        """A module-level statement: the module frame's statements and writes,
        and the module constants (assignments, also under ``if``/``with``/``try``)."""
        self.top.append(st)
        if isinstance(st, _TESTS) or isinstance(st, ast.Return):
            self.always = True
        self.writes |= _targets(st)
        base = _base(st)
        if base is not None:
            self.writes.add(base)
        stack: List[ast.stmt] = [st]
        while stack:
            s = stack.pop()
            if isinstance(s, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                targets = _targets(s)
                if targets:
                    reads = self.lines.of(s)
                    for t in targets:
                        self.consts.setdefault(t, set()).update(reads)
            elif not isinstance(s, _DEFS):
                stack.extend(_children(s))


def relevant_chunks(texts: Sequence[str], firsts: Sequence[int], lines: Sequence[str],
                    nodes: Sequence[Sequence[ast.stmt]]) -> Set[int]:
    """The indices of the chunks (their texts, first lines and top-level
    ``ast`` statements; ``lines`` the file's) whose models can change the
    analysis of the file's kernels."""
    walk = _Relevance(texts, firsts, lines, nodes)
    if not walk.relevant:
        return walk.relevant
    while True:
        walk.follow_names()
        walk.follow_callees()
        before = len(walk.need)
        walk.follow_frames()
        if len(walk.need) == before and walk.settled():
            return walk.relevant


class _Relevance:
    """The fixpoint behind :func:`relevant_chunks`: from the chunks that hold
    kernels, the names they need, the chunks defining or calling them, and
    the statements of the calling functions that compute what they pass."""

    def __init__(self, texts: Sequence[str], firsts: Sequence[int], lines: Sequence[str],
                 nodes: Sequence[Sequence[ast.stmt]]) -> None:
        self.texts = texts
        self.firsts = firsts
        self.nodes = nodes
        self.words = [frozenset(_WORD.findall(t)) for t in texts]
        self.src = _Lines(lines)
        self.infos: Dict[int, _Chunk] = {}
        self.index: Dict[str, List[int]] = {}
        for i, w in enumerate(self.words):
            for x in w:
                self.index.setdefault(x, []).append(i)
        seeds = [i for i, w in enumerate(self.words)
                 if not SEED_WORDS.isdisjoint(w) and self.info(i).defs is not None
                 and self.info(i).seed]
        self.relevant: Set[int] = set(seeds)
        self.need: Set[str] = set()
        self.callees: List[str] = []
        for i in seeds:
            self.need |= self.words[i]
            self.callees.extend(self.info(i).defs)
        self.callees.extend(n for n in self.need
                            if any(n in self.info(i).defs for i in self.having(n)))
        self.done: Set[str] = set()
        self.searched: Set[str] = set()
        self.frames: Set[Optional[str]] = set()
        self.framed: Dict[Optional[str], int] = {}
        self.tops = [i for i in range(len(texts)) if self.info(i).top] if seeds else []

    def info(self, i: int) -> _Chunk:
        hit = self.infos.get(i)
        if hit is None:
            hit = self.infos[i] = _Chunk(self.nodes[i], self.texts[i], self.firsts[i], self.src)
        return hit

    def having(self, n: str) -> Sequence[int]:
        return self.index.get(n, ())

    def settled(self) -> bool:
        return not (self.need - self.done) and all(n in self.searched for n in self.callees)

    def follow_names(self) -> None:
        """The chunks assigning or defining a needed name, and what they read."""
        for n in list(self.need - self.done):
            self.done.add(n)
            for i in self.having(n):
                c = self.info(i)
                if n in c.consts:
                    self.relevant.add(i)
                    self.need |= c.consts[n]
                if n in c.defs:
                    self.relevant.add(i)
                    for d in c.defs[n]:
                        self.need |= self.src.of(d)
                    if n in c.classes and n not in self.searched:
                        self.callees.append(n)

    def follow_callees(self) -> None:
        """The chunks mentioning a callee (its call sites), what they pass, and
        the functions they sit in (the list grows while it is walked)."""
        for n in self.callees:
            if n in self.searched:
                continue
            self.searched.add(n)
            for i in self.having(n):
                for reads, funcs, classes in self.info(i).mentions(n):
                    self.relevant.add(i)
                    self.need |= reads
                    self.callees.extend(c for c in classes if c not in self.searched)
                    self.callees.extend(f for f in funcs if f not in self.searched)
                    self.frames.update(funcs or (None,))

    def follow_frames(self) -> None:
        """In each calling function (None: the module's own statements), the
        statements that compute the needed names; argparse defaults too."""
        need, src = self.need, self.src
        for f in list(self.frames):
            if self.framed.get(f) == len(need):
                continue
            if f is None:
                for i in self.tops:
                    c = self.info(i)
                    if c.always or not c.writes.isdisjoint(need):
                        self.relevant.add(i)
                stmts = [st for i in self.tops for st in self.info(i).top]
                while _frame_names(stmts, need, src):
                    pass
            else:
                for i in self.having(f):
                    for d in self.info(i).defs.get(f, ()):
                        if isinstance(d, _FUNCS):
                            self.relevant.add(i)
                            need |= src.head(d, d.name)
                            while _frame_names(d.body, need, src):
                                pass
            self.framed[f] = len(need)
        if self.frames:
            for i in self.having("add_argument"):
                for reads, _funcs, _classes in self.info(i).mentions("add_argument"):
                    self.relevant.add(i)
                    need |= reads
