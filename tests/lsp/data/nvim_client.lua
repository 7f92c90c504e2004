-- Headless Neovim as a real LSP client for tests/test_neovim.py.
-- Environment: TL_CMD (JSON list: the server command), TL_FILE (file to open),
-- TL_OUT (where to write the JSON result), TL_HOVER_LINE / TL_HOVER_COL (0-based).
-- Optional: TL_NO_DIAG_WAIT=1 (a file without findings: do not wait for them),
-- TL_HOVERS (JSON list of [line, col]): each hover is also rendered the way
-- Neovim shows it (open_floating_preview with markdown) and the float's lines
-- and width are recorded in result.rendered.
local cmd = vim.fn.json_decode(os.getenv("TL_CMD"))
local file = os.getenv("TL_FILE")
local out = os.getenv("TL_OUT")
local result = { diagnostics = {}, hover = vim.NIL, error = vim.NIL }

local function finish()
  local fh = io.open(out, "w")
  fh:write(vim.fn.json_encode(result))
  fh:close()
  vim.cmd("qa!")
end

local ok, err = pcall(function()
  local client_id = vim.lsp.start_client({
    name = "tilelint",
    cmd = cmd,
    root_dir = vim.fn.fnamemodify(file, ":h"),
  })
  assert(client_id, "start_client failed")
  vim.cmd("edit " .. vim.fn.fnameescape(file))
  local buf = vim.api.nvim_get_current_buf()
  vim.lsp.buf_attach_client(buf, client_id)
  if os.getenv("TL_NO_DIAG_WAIT") ~= "1" then
    vim.wait(30000, function() return #vim.diagnostic.get(buf) > 0 end, 50)
  end
  for _, d in ipairs(vim.diagnostic.get(buf)) do
    local code = d.code
    if code == nil and d.user_data and d.user_data.lsp then code = d.user_data.lsp.code end
    table.insert(result.diagnostics, {
      lnum = d.lnum, col = d.col, end_lnum = d.end_lnum, end_col = d.end_col,
      severity = d.severity, message = d.message, source = d.source, code = code,
    })
  end
  local params = {
    textDocument = { uri = vim.uri_from_bufnr(buf) },
    position = { line = tonumber(os.getenv("TL_HOVER_LINE")), character = tonumber(os.getenv("TL_HOVER_COL")) },
  }
  local responses = vim.lsp.buf_request_sync(buf, "textDocument/hover", params, 30000)
  if responses then
    for _, r in pairs(responses) do
      if r.result and r.result.contents then
        local c = r.result.contents
        result.hover = type(c) == "table" and (c.value or c) or c
      end
    end
  end
  local hovers = os.getenv("TL_HOVERS")
  if hovers then
    vim.o.columns = 240
    vim.o.lines = 400
    result.rendered = {}
    for _, pos in ipairs(vim.fn.json_decode(hovers)) do
      local p = { textDocument = { uri = vim.uri_from_bufnr(buf) },
                  position = { line = pos[1], character = pos[2] } }
      local rs = vim.lsp.buf_request_sync(buf, "textDocument/hover", p, 30000) or {}
      local entry = { markdown = vim.NIL, lines = {}, width = 0 }
      for _, r in pairs(rs) do
        if r.result and r.result.contents then
          entry.markdown = r.result.contents.value
          local md = vim.lsp.util.convert_input_to_markdown_lines(r.result.contents)
          local fbuf, fwin = vim.lsp.util.open_floating_preview(md, "markdown", { max_width = 200 })
          entry.lines = vim.api.nvim_buf_get_lines(fbuf, 0, -1, false)
          entry.width = vim.api.nvim_win_get_width(fwin)
          vim.api.nvim_win_close(fwin, true)
        end
      end
      table.insert(result.rendered, entry)
    end
  end
  vim.lsp.stop_client(client_id)
end)
if not ok then result.error = tostring(err) end
finish()
