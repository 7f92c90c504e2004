-- Headless Neovim using the shipped Lua module (editors/neovim) the way a user
-- would: require("tilelint").setup{...}, then open a Python file.
-- Environment: TL_RTP (the editors/neovim directory), TL_CMD, TL_FILE, TL_OUT.
local result = { diagnostics = {}, error = vim.NIL, clients = 0 }
local out = os.getenv("TL_OUT")

local ok, err = pcall(function()
  vim.opt.runtimepath:prepend(os.getenv("TL_RTP"))
  vim.cmd("filetype on")
  require("tilelint").setup({ cmd = vim.fn.json_decode(os.getenv("TL_CMD")), target = "sm_80" })
  vim.cmd("edit " .. vim.fn.fnameescape(os.getenv("TL_FILE")))
  local buf = vim.api.nvim_get_current_buf()
  vim.wait(30000, function() return #vim.diagnostic.get(buf) > 0 end, 50)
  result.clients = #vim.lsp.get_active_clients({ bufnr = buf })
  for _, d in ipairs(vim.diagnostic.get(buf)) do
    local code = d.code
    if code == nil and d.user_data and d.user_data.lsp then code = d.user_data.lsp.code end
    table.insert(result.diagnostics, { lnum = d.lnum, code = code, source = d.source })
  end
end)
if not ok then result.error = tostring(err) end
local fh = io.open(out, "w")
fh:write(vim.fn.json_encode(result))
fh:close()
vim.cmd("qa!")
