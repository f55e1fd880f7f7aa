-- The cost of ui/transcript.lua's running turn: what its requests cost so
-- far, as virtual text beside its reply's `## nodecode` header (money when the
-- model has a price, else its tokens only). M.install gives the buffer writer
-- (T) and the list writer (L) their methods for it.

local M = {}

local ns_cost = vim.api.nvim_create_namespace('nodecode_cost')

--- `$0.0123` under a dollar, `$4.56` from one on (as the host writes money).
---@param x number
---@return string
local function money(x)
  return x >= 1 and ('$%.2f'):format(x) or ('$%.4f'):format(x)
end

---@param n integer
---@return string
local function thousands(n)
  local s = tostring(math.floor(n))
  return (s:reverse():gsub('(%d%d%d)', '%1,'):reverse():gsub('^,', ''))
end

--- Draw the costs a list writer kept (`costs`, by 0-based row) in `buf`.
---@param buf integer
---@param costs table<integer, string>
function M.draw(buf, costs)
  for row, text in pairs(costs) do
    vim.api.nvim_buf_set_extmark(buf, ns_cost, row, 0, {
      virt_text = { { '  ' .. text, 'NodecodeTokens' } },
      virt_text_pos = 'eol',
    })
  end
end

---@param T table the buffer writer's class
---@param L table the list writer's class
function M.install(T, L)
  --- What the turn's requests cost so far, beside its reply's header: money when
  --- the model has a price, else its tokens only.
  ---@return string?
  function T:spent_text()
    local s = self.spent
    if not s then
      return nil
    end
    local n = ('%d request%s'):format(s.requests, s.requests == 1 and '' or 's')
    if s.priced == 0 then
      return ('%s in · %s out · %s'):format(thousands(s.input), thousands(s.output), n)
    end
    local unpriced = s.requests - s.priced
    return money(s.dollars)
      .. ' · '
      .. n
      .. (unpriced > 0 and (' (%d without a price)'):format(unpriced) or '')
  end

  ---@param row integer (0-based) the header's line
  ---@return integer
  function T:cost_mark(row)
    return vim.api.nvim_buf_set_extmark(self.buf, ns_cost, row, 0, {})
  end

  function L:cost_mark(row)
    return row -- drawn when the lines are put in the buffer (T:prepend)
  end

  function L:draw_spent()
    local text = self:spent_text()
    if self.header and text then
      self.costs = self.costs or {}
      self.costs[self.header] = text
    end
  end

  function T:draw_spent()
    local text = self:spent_text()
    if not (self.header and text) then
      return
    end
    local row = vim.api.nvim_buf_get_extmark_by_id(self.buf, ns_cost, self.header, {})[1]
    if row then
      vim.api.nvim_buf_set_extmark(self.buf, ns_cost, row, 0, {
        id = self.header,
        virt_text = { { '  ' .. text, 'NodecodeTokens' } },
        virt_text_pos = 'eol',
      })
    end
  end

  --- A request of the running turn ended ({cost?, usage {prompt, output}}).
  ---@param ev table
  function T:request_done(ev)
    local s = self.spent or { dollars = 0, priced = 0, requests = 0, input = 0, output = 0 }
    s.requests = s.requests + 1
    if type(ev.cost) == 'number' then
      s.dollars, s.priced = s.dollars + ev.cost, s.priced + 1
    end
    local usage = type(ev.usage) == 'table' and ev.usage or {}
    s.input = s.input + (tonumber(usage.prompt) or 0)
    s.output = s.output + (tonumber(usage.output) or 0)
    self.spent = s
    self:draw_spent()
  end
end

return M
