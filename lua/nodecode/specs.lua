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
  { type = 'function', name = 'NodecodeModels', sync = true, opts = vim.empty_dict() },
  { type = 'function', name = 'NodecodeUseModel', sync = true, opts = vim.empty_dict() },
  { type = 'function', name = 'NodecodeStop', sync = false, opts = vim.empty_dict() },
  { type = 'function', name = 'NodecodeBlob', sync = true, opts = vim.empty_dict() },
  { type = 'function', name = 'NodecodeBudget', sync = true, opts = vim.empty_dict() },
  { type = 'function', name = 'NodecodeContext', sync = true, opts = vim.empty_dict() },
  { type = 'function', name = 'NodecodeContinue', sync = true, opts = vim.empty_dict() },
  { type = 'function', name = 'NodecodeDescribe', sync = true, opts = vim.empty_dict() },
  { type = 'function', name = 'NodecodeEvict', sync = true, opts = vim.empty_dict() },
  { type = 'function', name = 'NodecodeFork', sync = true, opts = vim.empty_dict() },
  { type = 'function', name = 'NodecodeRecall', sync = true, opts = vim.empty_dict() },
  { type = 'function', name = 'NodecodeRecallEntry', sync = true, opts = vim.empty_dict() },
  { type = 'function', name = 'NodecodeRedo', sync = true, opts = vim.empty_dict() },
  { type = 'function', name = 'NodecodeRemoved', sync = true, opts = vim.empty_dict() },
  { type = 'function', name = 'NodecodeRewind', sync = true, opts = vim.empty_dict() },
  { type = 'function', name = 'NodecodeSessions', sync = true, opts = vim.empty_dict() },
  { type = 'function', name = 'NodecodeStatus', sync = true, opts = vim.empty_dict() },
  { type = 'function', name = 'NodecodeTree', sync = true, opts = vim.empty_dict() },
  { type = 'function', name = 'NodecodeTurnMessages', sync = true, opts = vim.empty_dict() },
  { type = 'function', name = 'NodecodeUndo', sync = true, opts = vim.empty_dict() },
  { type = 'function', name = 'NodecodeUseSession', sync = true, opts = vim.empty_dict() },
  { type = 'function', name = 'NodecodeValidate', sync = true, opts = vim.empty_dict() },
}
