"""Rules: the registry of diagnostic codes and the checks that report them.

- :mod:`.registry`: :class:`Rule` and :data:`RULES` (code, name, severity,
  documentation), :func:`diagnostic` to build a finding of a code.
- :mod:`.checks`: the pipeline checks on a planned loop
  (:func:`validate_loop`, TL101–TL111, TL114; :func:`outside_uses`, TL115)
  and the diagnostics for the
  errors planning returns as data (:func:`planning_diagnostic`, TL104,
  TL108, TL112).
- :mod:`.edits`: the text edits of their quick fixes.

The rest of the code imports these names from here.
"""

from .checks import outside_uses, planning_diagnostic, tl104, tl108, tl112, tl114, validate_loop
from .edits import remove_argument_edit, renumber_order_fix, renumbered_orders
from .registry import RULES, RULES_BY_CODE, Rule, diagnostic, get_rule

__all__ = [
    "RULES", "RULES_BY_CODE", "Rule", "diagnostic", "get_rule", "outside_uses",
    "planning_diagnostic",
    "remove_argument_edit", "renumber_order_fix", "renumbered_orders", "tl104", "tl108",
    "tl112", "tl114", "validate_loop",
]
