"""tilelint's language server: one LSP handler per module, the document store
(``documents``), the conversion to LSP types (``convert``) and the hover text
builders (``hover_text``).  ``app.create_server()`` wires them together."""
