"""Frontend: a libcst parse of a kernel file into the immutable kernel model.

Mirrors what tilelang's script parser hands to the passes: the kernels of the
file, their allocations, and for every loop the statement sequence the
pipeline passes schedule.  The file is never imported or executed.

The file is split into top-level statements ("chunks") which are parsed one by
one, so a syntax error only costs the chunk it sits in (TL001 there, the rest
still analysed) and an editor can re-parse just the chunk that changed.

Modules, each depending only on the ones above it:

- :mod:`.aliases`: the file's import aliases of ``tilelang.language``/``tilelang``
  and the tilelang-ascend fork check (regular expressions, no parse).
- :mod:`.chunks`: newlines, source lines, the size limit (TL003) and the split
  into top-level chunks (CPython's tree, or the tokenizer).
- :mod:`.syntax`: TL001 diagnostics for text that does not parse.
- :mod:`.positions`: node positions from libcst's code generation, and
  :class:`ChunkTree` (a chunk's text, tree, positions and leaves).
- :mod:`.walk`: the child nodes that hold code, calls under a node.
- :mod:`.expressions`: :class:`~.expressions.ExprBuilder`, libcst expression
  → model ``Expr``, spans, labels and dotted names.
- :mod:`.macros`: macro statements renamed and substituted at a call site.
- :mod:`.accesses`, :mod:`.calls`, :mod:`.statements`: the builders of kernel
  code (buffer accesses; call statements with operand roles; blocks, loops,
  assignments and allocations), each extending the one before.
- :mod:`.facts`: what the value resolver reads outside kernels (constants,
  call sites, argparse defaults, function summaries, iterator helpers).
- :mod:`.kernels`: kernel discovery (:class:`~.kernels.ChunkBuilder` composes
  the statement builder and the module facts) and :class:`ChunkModel`.
- :mod:`.linking`: macros and iterator helpers linked across chunks.
- :mod:`.parse`: :func:`parse_module`, :func:`parse_chunk`, :func:`combine`.
- :mod:`.reparse`: an edit inside one token, or one simple statement line, re-uses
  the chunk's old tree.

The rest of tilelint imports these names from here.
"""

from .aliases import Aliases, find_aliases
from .chunks import (
    CLAUSE_KEYWORDS,
    MAX_SOURCE_BYTES,
    Chunk,
    TokenScan,
    ast_tree,
    chunks_at,
    fallback_starts,
    first_word,
    normalise_newlines,
    parsed_scan,
    scan_tokens,
    source_lines,
    split_chunks,
    too_large,
)
from .facts import IterHelper
from .kernels import KERNEL_LAUNCHES, ChunkBuilder, ChunkModel
from .parse import combine, parse_chunk, parse_chunk_tree, parse_module
from .positions import ChunkTree, Leaves, fast_positions
from .reparse import patch_line, patch_tree, reparse_line, reparse_token
from .walk import calls_in, code_children

__all__ = [
    "CLAUSE_KEYWORDS", "KERNEL_LAUNCHES", "MAX_SOURCE_BYTES", "Aliases", "Chunk", "ast_tree", "ChunkBuilder",
    "ChunkModel", "ChunkTree", "IterHelper", "Leaves", "TokenScan", "calls_in", "chunks_at",
    "code_children", "combine", "fallback_starts", "fast_positions", "find_aliases",
    "first_word", "normalise_newlines", "parse_chunk", "parse_chunk_tree", "parse_module",
    "parsed_scan", "patch_line", "patch_tree", "reparse_line", "reparse_token", "scan_tokens",
    "source_lines", "split_chunks", "too_large",
]
