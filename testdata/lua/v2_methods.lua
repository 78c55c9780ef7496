-- Request and response methods of memcached's V2 proxy, for lua/mutate_test.go:
-- the key c/CASE/... picks what the handler does; most cases answer a
-- SERVER_ERROR line reporting what the methods returned, "|"-separated.
local function fmt(v)
  if type(v) == "string" then return '"' .. v:gsub("\r", "\\r"):gsub("\n", "\\n") .. '"' end
  return tostring(v)
end
local function show(...)
  local n = select("#", ...)
  local p = {}
  for i = 1, n do p[i] = fmt((select(i, ...))) end
  return table.concat(p, ",")
end
local function try(f, ...)
  local r = { pcall(f, ...) }
  if r[1] then return show(unpack(r, 2, table.maxn(r))) end
  return "ERR " .. (string.gsub(tostring(r[2]), "^[^:]*:%d+: ", ""))
end
function mcp_config_pools()
  return mcp.pool({ mcp.backend("b", "127.0.0.1", 11211) })
end
function mcp_config_routes(p)
  local fg = mcp.funcgen_new()
  local h, h2, h3 = fg:new_handle(p), fg:new_handle(p), fg:new_handle(p)
  fg:ready({ n = "t", u = 2, f = function(rctx)
    local nreq, nres = rctx:request_new(), rctx:response_new()
    local third = try(rctx.request_new, rctx)
    return function(r)
      local k = r:key()
      local case = string.match(k, "^c/([^/]+)") or k
      local M = {}
      local function log(s) M[#M + 1] = s end
      if case == "meth" then
        log(show(r:raw_line()) .. ";" .. show(r:raw_value()))
        local ti = {}
        for i = 0, r:ntokens() + 1 do ti[#ti + 1] = fmt(r:token_int(i)) end
        log(table.concat(ti, " "))
        for _, f in ipairs({ "N", "T", "O", "v", "X" }) do log(f .. "=" .. try(r.flag_token_int, r, f)) end
        log(try(r.token_int, r) .. ";" .. try(r.flag_token_int, r, "") .. ";" .. try(r.flag_token_int, r, "1"))
      elseif case == "fadd" then
        log(try(r.flag_add, r, "T", 30) .. try(r.flag_add, r, "T", "5") .. try(r.flag_add, r, "v") .. try(r.flag_add, r, "O", "str"))
        log(try(r.flag_add, r, "ab", "x"))
        log(try(r.flag_add, r, "1", "x"))
        log(try(r.flag_add, r, "Z", {}))
        log(try(r.flag_add, r, "F", 1.5))
        log(r:raw_line())
      elseif case == "fset" then
        log(try(r.flag_set, r, "T", 99) .. try(r.flag_set, r, "N") .. try(r.flag_set, r, "O", "xy"))
        log(r:raw_line())
      elseif case == "frep" then
        log(try(r.flag_replace, r, "T", "N", 7) .. try(r.flag_replace, r, "X", "Y") .. try(r.flag_replace, r, "v", "f"))
        log(r:raw_line())
      elseif case == "fdel" then
        log(try(r.flag_del, r, "T") .. try(r.flag_del, r, "T") .. try(r.flag_del, r, "v"))
        log(r:raw_line() .. ";" .. r:ntokens())
      elseif case == "text" then
        log(try(r.has_flag, r, "T") .. try(r.flag_token_int, r, "T") .. try(r.flag_del, r, "T") .. try(r.flag_set, r, "T", 30))
        log(r:raw_line())
      elseif case == "match" then
        local req = mcp.request("mg c/match/x v k O123\r\n")
        local res = rctx:enqueue_and_wait(req, h)
        log(try(req.match_res, req, res))
        log(try(req.match_res, mcp.request("mg c/match/y v O123\r\n"), res))
        log(try(req.match_res, mcp.request("mg c/match/x v O999\r\n"), res))
        local plain = mcp.request("mg c/match/x v\r\n")
        log(try(req.match_res, plain, res))
        local res2 = rctx:enqueue_and_wait(mcp.request("mg c/match/x v\r\n"), h2)
        log(try(req.match_res, req, res2) .. ";" .. try(req.match_res, plain, res2))
        local res3 = rctx:enqueue_and_wait(mcp.request("get c/match/x\r\n"), h3)
        log(try(req.match_res, req, res3) .. ";" .. try(req.match_res, plain, res3))
        log(try(req.match_res, req, plain))
      elseif case == "resm" then
        local res = rctx:enqueue_and_wait(mcp.request("mg c/resm/x v f t s k O55\r\n"), h)
        log(show(res:raw_string()))
        log(try(res.flag_blank, res, "f") .. show(res:raw_string(), res:line()))
        log(try(res.flag_blank, res, "f") .. try(res.flag_blank, res, "O") .. show(res:raw_string()))
        log(try(res.flag_blank, res, "Z") .. ";" .. try(res.flag_blank, res, "ab") .. ";" .. try(res.flag_blank, res, "1"))
        local tres = rctx:enqueue_and_wait(mcp.request("get c/resm/x\r\n"), h2)
        log(try(tres.flag_blank, tres, "f"))
        log(try(res.close, res) .. ";" .. show(res:raw_string(), res:ok(), res:code(), res:line()))
        if string.find(k, "ret") then return res end
      elseif case == "blankret" then
        local res = rctx:enqueue_and_wait(mcp.request("mg c/resm/x v f t k\r\n"), h)
        res:flag_blank("f")
        return res
      elseif case == "newobj" then
        log(third .. ";" .. try(rctx.request_new, rctx))
        log(show(nreq:key(), nreq:command(), nres:raw_string(), nres:ok(), nres:code()))
        if string.find(k, "retres") then return nres end
        if string.find(k, "sendreq") then return rctx:enqueue_and_wait(nreq, h) end
      else
        return nil
      end
      if string.find(k, "/send") then return rctx:enqueue_and_wait(r, h) end
      return "SERVER_ERROR " .. table.concat(M, "|") .. "\r\n"
    end
  end })
  mcp.attach(mcp.CMD_ANY_STORAGE, fg)
end
