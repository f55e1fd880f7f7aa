-- The remote functions of rplugin/python3/nodecode_nvim, as
-- remote#host#RegisterPlugin wants them. Must equal the @pynvim decorators
-- there (tests/nvim/test_registration.py compares them).
-- `opts` must be a dict, not `{}` (which would arrive in Vimscript as a list).

---@class nodecode.RemoteSpec
---@field type 'function'|'command'|'autocmd'
---@field name string
---@field sync boolean|'urgent'
---@field opts table

---@type nodecode.RemoteSpec[]
return {
  { type = 'function', name = 'NodecodeApproval', sync = true, opts = vim.empty_dict() },
  { type = 'function', name = 'NodecodeAsk', sync = true, opts = vim.empty_dict() },
  { type = 'function', name = 'NodecodeInfo', sync = true, opts = vim.empty_dict() },
  { type = 'function', name = 'NodecodeMessages', sync = true, opts = vim.empty_dict() },
  { type = 'function', name = 'NodecodeStop', sync = false, opts = vim.empty_dict() },
}
