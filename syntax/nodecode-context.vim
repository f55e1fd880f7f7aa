" nodecode's context.txt: the export line, message headers, [[note]] lines.
if exists('b:current_syntax')
  finish
endif

syntax match nodecodeExport /\%1l^\[\[export \S\+ \d\+ [a-z0-9]\{4,8}\]\]$/
syntax match nodecodeHeader /^\[\[m:[a-z0-9]\{4,8} \d\+ \l\+\]\]$/
syntax match nodecodeNote /^\[\[note\]\]\s*$/

highlight default link nodecodeExport NodecodeExport
highlight default link nodecodeHeader NodecodeHeader
highlight default link nodecodeNote NodecodeNote

let b:current_syntax = 'nodecode-context'
