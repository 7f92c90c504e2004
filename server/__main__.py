"""``python -m tilelint.server``: the language server (see ``lsp_main``)."""

import sys

from .lsp_main import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
