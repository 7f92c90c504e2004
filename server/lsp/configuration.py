"""``workspace/didChangeConfiguration`` and pulling ``workspace/configuration``
(section ``tilelint``)."""

from __future__ import annotations

import logging

from lsprotocol import types as lsp

METHOD = lsp.WORKSPACE_DID_CHANGE_CONFIGURATION
log = logging.getLogger(__name__)


async def pull(ls) -> bool:
    """Ask the client for the ``tilelint`` section; True when it answered."""
    if not ls.capability("workspace.configuration"):
        return False
    try:
        result = await ls.workspace_configuration_async(lsp.ConfigurationParams(
            items=[lsp.ConfigurationItem(section="tilelint")]))
    except Exception:
        log.exception("workspace/configuration failed")
        return False
    value = result[0] if isinstance(result, (list, tuple)) and result else None
    new = dict(value) if isinstance(value, dict) else {}
    if new != ls.client_options:
        ls.client_options = new
        ls.configuration_changed()
    return True


async def handler(ls, params: lsp.DidChangeConfigurationParams) -> None:
    if await pull(ls):
        return
    value = params.settings
    if isinstance(value, dict):
        section = value.get("tilelint", value)
        ls.client_options = dict(section) if isinstance(section, dict) else {}
        ls.configuration_changed()
