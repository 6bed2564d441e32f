-- :RagweedSearch [words]  search the ragweedd index; Enter on a hit opens it at its place
-- :RagweedAsk [question]  an answer with its cited sources; Enter on a [N] opens that source
-- With ! the hits (an answer's sources) go to the other of the picker and the quickfix list.
if vim.g.loaded_ragweed then return end
vim.g.loaded_ragweed = 1

vim.api.nvim_create_user_command("RagweedSearch", function(o)
  require("ragweed").search(o.args, { flip = o.bang })
end, { nargs = "*", bang = true, desc = "ragweed: search the index" })

vim.api.nvim_create_user_command("RagweedAsk", function(o)
  require("ragweed").ask(o.args, { flip = o.bang })
end, { nargs = "*", bang = true, desc = "ragweed: ask the index a question" })
