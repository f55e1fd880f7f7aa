-- :Telescope nodecode [recall|sessions] [telescope options, theme=…]
-- (or require('telescope').extensions.nodecode.recall(opts)). With telescope
-- installed nodecode's pickers use it on their own (picker.backend = 'auto');
-- this extension adds the :Telescope entries and takes
-- setup{ extensions = { nodecode = { …picker options, theme = … } } }.
return require('telescope').register_extension({
  setup = function(ext_config)
    require('nodecode.ui.telescope_picker').config = ext_config or {}
  end,
  exports = {
    nodecode = function(opts)
      require('nodecode.ui.picker').recall(opts and opts.query, opts)
    end,
    recall = function(opts)
      require('nodecode.ui.picker').recall(opts and opts.query, opts)
    end,
    sessions = function(opts)
      require('nodecode.actions').sessions('', opts)
    end,
  },
  health = function()
    vim.health.ok('nodecode telescope extension loaded')
  end,
})
