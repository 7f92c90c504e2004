"""tilelint.server: everything that talks to the outside — the language server
(the only code that knows LSP) and the command-line interface."""
