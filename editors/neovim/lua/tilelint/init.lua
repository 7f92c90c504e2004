-- tilelint for Neovim: the tilelint language server for Python buffers.
--
-- Neovim 0.11+:
--   require("tilelint").setup()            -- vim.lsp.config + vim.lsp.enable
-- or, with this directory on 'runtimepath', lsp/tilelint.lua is picked up by
--   vim.lsp.enable("tilelint")
-- Neovim 0.8–0.10: setup() falls back to vim.lsp.start on each Python buffer
-- (0.7: vim.lsp.start_client + buf_attach_client).
--
-- Options (all optional):
--   cmd        = { "tilelint", "server" }   -- or { "/venv/bin/python", "-m", "tilelint.server.cli", "server" }
--   target     = "sm_90"                     -- else [tool.tilelint] target, else sm_80
--   settings   = { tilelint = { ... } }     -- sent on workspace/configuration
--   root_markers = { "pyproject.toml", ".git" }
local M = {}

M.defaults = {
  cmd = { "tilelint", "server" },
  filetypes = { "python" },
  root_markers = { "pyproject.toml", "setup.cfg", "setup.py", ".git" },
  target = nil,
  settings = nil,
}

local function merged(opts)
  opts = vim.tbl_deep_extend("force", {}, M.defaults, opts or {})
  local tl = vim.tbl_deep_extend("force", {}, (opts.settings or {}).tilelint or {})
  if opts.target then
    tl.target = opts.target
  end
  opts.settings = { tilelint = tl }
  return opts
end

--- A config table for vim.lsp.config (0.11+) or vim.lsp.start (0.8+).
function M.config(opts)
  opts = merged(opts)
  return {
    name = "tilelint",
    cmd = opts.cmd,
    filetypes = opts.filetypes,
    root_markers = opts.root_markers,
    settings = opts.settings,
    init_options = opts.settings.tilelint,
  }
end

local function find_root(bufnr, markers)
  local path = vim.api.nvim_buf_get_name(bufnr)
  if path == "" then
    return vim.loop.cwd()
  end
  local dir = vim.fn.fnamemodify(path, ":p:h")
  local cur = dir
  while true do
    for _, m in ipairs(markers) do
      local cand = cur .. "/" .. m
      if vim.fn.filereadable(cand) == 1 or vim.fn.isdirectory(cand) == 1 then
        return cur
      end
    end
    local parent = vim.fn.fnamemodify(cur, ":h")
    if parent == cur then
      return dir
    end
    cur = parent
  end
end

--- Start the server for Python buffers.
function M.setup(opts)
  local cfg = M.config(opts)
  if vim.fn.executable(cfg.cmd[1]) ~= 1 then
    vim.notify("tilelint: '" .. cfg.cmd[1] .. "' is not executable; install tilelint from "
      .. "a checkout (pip install /path/to/tilelint) or pass cmd = {...} to setup()",
      vim.log.levels.WARN)
  end
  if vim.lsp.config and vim.lsp.enable then
    -- Neovim 0.11+
    vim.lsp.config("tilelint", cfg)
    vim.lsp.enable("tilelint")
    return
  end
  -- Neovim 0.7–0.10
  local client_id = nil
  local group = vim.api.nvim_create_augroup("tilelint", { clear = true })
  vim.api.nvim_create_autocmd("FileType", {
    group = group,
    pattern = cfg.filetypes,
    callback = function(args)
      local client_cfg = {
        name = cfg.name,
        cmd = cfg.cmd,
        root_dir = find_root(args.buf, cfg.root_markers),
        settings = cfg.settings,
        init_options = cfg.init_options,
      }
      if vim.lsp.start then
        vim.lsp.start(client_cfg, { bufnr = args.buf })
        return
      end
      -- 0.7: one client for the session, attached to each Python buffer.
      if client_id == nil or vim.lsp.get_client_by_id(client_id) == nil then
        client_id = vim.lsp.start_client(client_cfg)
      end
      if client_id then
        vim.lsp.buf_attach_client(args.buf, client_id)
      end
    end,
  })
end

return M
