"""Parsing: a whole file (:func:`parse_module`) or one chunk
(:func:`parse_chunk`, :func:`parse_chunk_tree`) into the model; syntax errors
become TL001 per chunk, and the chunk models are combined into the module."""

from __future__ import annotations

import ast
import bisect
from functools import lru_cache
from typing import Iterable, List, Optional, Tuple

import libcst as cst

from .. import relevance
from ..model import (
    CallSite,
    Diagnostic,
    Expr,
    FuncDef,
    FuncStmt,
    Kernel,
    Macro,
    Module,
    Param,
    Span,
)
from .aliases import Aliases, find_aliases
from .chunks import (
    ast_tree,
    chunks_at,
    normalise_newlines,
    note_parsed,
    parsed_whole,
    source_lines,
    split_chunks,
    too_large,
    tree_ends,
    tree_starts,
)
from .facts import IterHelper
from .kernels import ChunkModel, build_model, too_deep
from .linking import link_kernel, needs_link
from .positions import ChunkTree, fast_positions
from .syntax import ast_problem, compile_only, error_diagnostic, nul_span, syntax_problem

_NO_MODEL = ChunkModel()


def parse_module(source: str) -> Module:
    """Parse a whole file into a :class:`Module`.  Never raises."""
    big = too_large(source)
    if big is not None:
        return Module(problems=(big,))
    try:
        source = normalise_newlines(source)
        aliases = find_aliases(source)
        tree = ast_tree(source)
        if tree is None:
            chunks = split_chunks(source)
            models = [parse_chunk(c.text, c.start_line, aliases) for c in chunks]
            return combine(models, aliases)
        # The file parses: the chunks are cut at the statements of CPython's
        # tree, and only those the analysis can read get a libcst model (the
        # others have nothing a kernel reads; see relevance.py).
        starts = tree_starts(tree)
        ends = tree_ends(tree)
        chunks = chunks_at(source_lines(source), starts, ends)
        note_parsed(chunks, starts, ends)
        firsts = [c.start_line for c in chunks]
        nodes: List[List[ast.stmt]] = [[] for _ in chunks]
        for node, first in zip(tree.body, starts, strict=True):
            nodes[bisect.bisect_right(firsts, first + 1) - 1].append(node)
        try:
            keep: Optional[set] = relevance.relevant_chunks(
                [c.text for c in chunks], firsts, source_lines(source), nodes)
        except RecursionError:
            keep = None
        models = [parse_chunk(c.text, c.start_line, aliases) if keep is None or i in keep
                  else _NO_MODEL
                  for i, c in enumerate(chunks)]
        return combine(models, aliases)
    except RecursionError:
        return Module(problems=(error_diagnostic("TL001", Span(1, 0, 1, 0),
                                         "the file nests too deeply to analyse"),))


def combine(models: Iterable[ChunkModel], aliases: Aliases) -> Module:
    kernels: List[Kernel] = []
    constants: List[Tuple[str, Expr]] = []
    calls: List[CallSite] = []
    functions: List[Tuple[str, Tuple[Param, ...]]] = []
    macros: List[Macro] = []
    problems: List[Diagnostic] = []
    defs: List[FuncDef] = []
    argp: List[Tuple[str, Expr]] = []
    toplevel: List[FuncStmt] = []
    helpers: List[IterHelper] = []
    for m in models:
        kernels.extend(m.kernels)
        constants.extend(m.constants)
        calls.extend(m.call_sites)
        functions.extend(m.functions)
        macros.extend(m.macros)
        problems.extend(m.problems)
        defs.extend(m.defs)
        argp.extend(m.argparse)
        toplevel.extend(m.toplevel)
        helpers.extend(m.iter_helpers)
    if macros or helpers:
        mtuple = tuple(macros)
        htuple = tuple(helpers)
        kernels = [link_kernel(k, mtuple, htuple) if needs_link(k, mtuple, htuple) else k
                   for k in kernels]
    fork = [k for k in kernels if k.dialect == "npu"]
    if fork:  # TL004 once per file: nothing in it is modelled
        problems.append(Diagnostic(
            code="TL004", severity="information", span=fork[0].kernel_span or fork[0].name_span,
            kernel=fork[0].name,
            message="this file is written for the tilelang-ascend fork (`T.Kernel(..., "
                    "is_npu=True)`, `T.alloc_L1`/`T.alloc_ub`, `target=\"npuir\"`), which "
                    "tilelang 0.1.15 does not have; tilelint does not model that dialect, so "
                    f"none of its {len(fork)} kernel(s) is checked"))
    return Module(tuple(kernels), tuple(constants), tuple(calls), tuple(functions),
                  tuple(macros), aliases.imports_tilelang, tuple(problems),
                  defs=tuple(defs), argparse=tuple(argp), toplevel=tuple(toplevel))


@lru_cache(maxsize=4096)
def parse_chunk(text: str, start_line: int, aliases: Aliases) -> ChunkModel:
    """Parse one top-level statement.  Cached by its text, position and aliases."""
    return parse_chunk_tree(text, start_line, aliases, keep=False)[0]


def parse_chunk_tree(text: str, start_line: int, aliases: Aliases, keep: bool = True
                     ) -> Tuple[ChunkModel, Optional["ChunkTree"]]:
    """:func:`parse_chunk`, uncached, with the libcst tree it was built from
    (None when the text did not get one), for :func:`reparse_token`; with
    ``keep`` False the tree has no leaves (nothing to re-parse from)."""
    # CPython's parser first (compile-only, nothing runs): it rejects what it
    # cannot compile fast and with a good message, and it guards libcst, whose
    # native parser overflows the C stack (SIGSEGV) on ~1,300 nested brackets.
    try:
        if not parsed_whole(text):
            compile_only(text)
    except SyntaxError as err:
        return ChunkModel(problems=(ast_problem(text, start_line, err),)), None
    except (RecursionError, MemoryError):
        return ChunkModel(problems=(error_diagnostic(
            "TL001", Span(start_line, 0, start_line, 1),
            "this statement nests too deeply to parse"),)), None
    except ValueError:  # NUL bytes (SyntaxError on newer Pythons)
        return ChunkModel(problems=(error_diagnostic(
            "TL001", nul_span(text, start_line), "the source contains a NUL byte"),)), None
    try:
        module = cst.parse_module(text)
    except cst.ParserSyntaxError as exc:
        return ChunkModel(problems=(syntax_problem(text, start_line, exc),)), None
    except RecursionError:
        return ChunkModel(problems=(error_diagnostic(
            "TL001", Span(start_line, 0, start_line, 1),
            "this statement nests too deeply to parse"),)), None
    try:
        positions, leaves = fast_positions(module, keep)
    except RecursionError:
        return too_deep(start_line), None
    tree = ChunkTree(text, module, positions, leaves)
    return build_model(tree, start_line, aliases), tree
