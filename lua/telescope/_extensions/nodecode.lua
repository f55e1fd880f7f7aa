-- :Telescope nodecode [recall|sessions]  (or require('telescope').extensions.nodecode.recall())
-- With telescope installed, nodecode's pickers use it on their own
-- (picker.backend = 'auto'); this extension only adds the :Telescope entries.
return require('telescope').register_extension({
  exports = {
    nodecode = function(opts)
      require('nodecode.ui.picker').recall(opts and opts.query)
    end,
    recall = function(opts)
      require('nodecode.ui.picker').recall(opts and opts.query)
    end,
    sessions = function()
      require('nodecode.actions').sessions('')
    end,
  },
  health = function()
    vim.health.ok('nodecode telescope extension loaded')
  end,
})
