-- nvim-lspconfig style config for Neovim 0.11+: put this directory on
-- 'runtimepath' (or copy this file to ~/.config/nvim/lsp/) and call
--   vim.lsp.enable("tilelint")
-- Change the command with vim.lsp.config("tilelint", { cmd = { ... } }).
return {
  cmd = { "tilelint", "server" },
  filetypes = { "python" },
  root_markers = { "pyproject.toml", "setup.cfg", "setup.py", ".git" },
  settings = { tilelint = {} },
}
