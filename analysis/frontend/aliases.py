"""Import aliases: the names under which a file reaches ``tilelang.language``
and ``tilelang``, and whether it is written for the tilelang-ascend fork.
Read from the whole text with regular expressions (no parse), so the engine
can re-read them cheaply when an import line changes."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import List, Tuple

_LANG_IMPORT = re.compile(
    r"^\s*import\s+tilelang\.(?P<asc>ascend\.)?language\s+as\s+(?P<alias>\w+)", re.M)
_LANG_FROM = re.compile(
    r"^\s*from\s+tilelang(?P<asc>\.ascend)?\s+import\s+(?:.*,\s*)?language\s+as\s+(?P<alias>\w+)", re.M)
_LANG_FROM_PLAIN = re.compile(
    r"^\s*from\s+tilelang(?P<asc>\.ascend)?\s+import\s+(?:[^#\n]*,\s*)?language\s*(?:,|$|#)", re.M)
_TL_IMPORT = re.compile(r"^\s*import\s+tilelang(?:\s+as\s+(?P<alias>\w+))?\s*$", re.M)
_IMPORTS_TILELANG = re.compile(r"^\s*(?:import|from)\s+tilelang\b", re.M)
# The tilelang-ascend fork's dialect (not in tilelang 0.1.15): ``T.Kernel(...,
# is_npu=True)``, ``target="npuir"``, and upper-case/UB allocators reached
# through ``tilelang.language`` (0.1.15 has none of them; its own Ascend
# dialect is ``tilelang.ascend.language`` with ``alloc_l1``/``alloc_shared``).
# Each pattern begins with its literal (a leading ``\b`` would make the regex
# engine try every position of the file: ~4 ms on 3,000 lines); the word
# boundary before ``is_npu`` and ``target`` is checked by _npu_fork.
_NPU_WORDS = (re.compile(r"is_npu\s*=\s*True\b"), re.compile(r"target\s*=\s*[\'\"]npuir[\'\"]"))
_NPU_ALLOC = re.compile(r"\.alloc_(?:L1|L0A|L0B|L0C|ub|UB)\s*\(")


def _npu_fork(source: str) -> bool:
    """Does ``source`` use the tilelang-ascend fork's dialect (``\bis_npu=True``,
    ``\btarget="npuir"``, ``.alloc_L1(``...)?"""
    if _NPU_ALLOC.search(source):
        return True
    for rx in _NPU_WORDS:
        for m in rx.finditer(source):
            before = source[m.start() - 1] if m.start() else " "
            if not (before.isalnum() or before == "_"):
                return True
    return False


@dataclass(frozen=True)
class Aliases:
    """Names under which the file reaches ``tilelang.language`` and ``tilelang``."""

    lang: Tuple[str, ...] = ("T",)  # aliases of tilelang.language (normalised to "T")
    tilelang: Tuple[str, ...] = ("tilelang",)
    ascend: bool = False
    imports_tilelang: bool = False
    npu_fork: bool = False  # the tilelang-ascend fork's dialect (kernels: dialect "npu")


def find_aliases(source: str) -> Aliases:
    lang: List[str] = []
    ascend = False
    for rx in (_LANG_IMPORT, _LANG_FROM):
        for m in rx.finditer(source):
            lang.append(m.group("alias"))
            ascend = ascend or bool(m.group("asc"))
    for m in _LANG_FROM_PLAIN.finditer(source):
        lang.append("language")
        ascend = ascend or bool(m.group("asc"))
    tl = ["tilelang"]
    for m in _TL_IMPORT.finditer(source):
        if m.group("alias"):
            tl.append(m.group("alias"))
    if not lang:
        lang = ["T"]
    return Aliases(tuple(dict.fromkeys(lang)), tuple(dict.fromkeys(tl)), ascend,
                   bool(_IMPORTS_TILELANG.search(source)),
                   npu_fork=not ascend and _npu_fork(source))
