-- reqres helper: mutator / inspector edge cases. backend via tcplog 11211 -> 25100
local CT = {}
local function out(s) CT[#CT+1] = s end
local function show(...)
    local t = {n = select("#", ...), ...}
    local p = {}
    for i = 1, t.n do
        local v = t[i]
        if type(v) == "string" then p[#p+1] = '"' .. v:gsub("\r", "\\r"):gsub("\n", "\\n") .. '"' elseif type(v) == "userdata" then p[#p+1] = "userdata" else p[#p+1] = type(v) .. ":" .. tostring(v) end
    end
    return "n=" .. t.n .. " {" .. table.concat(p, ", ") .. "}"
end
local function try(f, ...)
    local function pack(...) return {n = select("#", ...), ...} end
    local r = pack(pcall(f, ...))
    if r[1] then return "ok " .. show(unpack(r, 2, r.n)) end
    return "ERR " .. (string.gsub(tostring(r[2]), "^[^:]*:%d+: ", ""))
end
function mcp_config_pools()
    return mcp.pool({ mcp.backend("logged", "127.0.0.1", 11211) })
end
function mcp_config_routes(p)
    local fg = mcp.funcgen_new()
    local h = fg:new_handle(p)
    local h2 = fg:new_handle(p)
    local RQ, RS = mcp.req_mutator_new, mcp.res_mutator_new
    local IQ, IS = mcp.req_inspector_new, mcp.res_inspector_new
    out("ctor bogus " .. try(RQ, {t="bogus"}))
    out("ctor incompatible " .. try(RQ, {t="rescodeset", val="HD"}))
    out("ctor res incompatible " .. try(RS, {t="cmdset", cmd="mg"}))
    out("ctor cmdset nocmd " .. try(RQ, {t="cmdset"}))
    out("ctor cmdset long " .. try(RQ, {t="cmdset", cmd=string.rep("x", 21)}))
    out("ctor cmdset 20 " .. try(RQ, {t="cmdset", cmd=string.rep("x", 20)}))
    out("ctor keyset noval " .. try(RQ, {t="keyset"}))
    out("ctor keyset empty " .. try(RQ, {t="keyset", val=""}))
    out("ctor cmdcopy noidx " .. try(RQ, {t="cmdcopy"}))
    out("ctor cmdcopy idx0 " .. try(RQ, {t="cmdcopy", idx=0}))
    out("ctor cmdcopy idxstr " .. try(RQ, {t="cmdcopy", idx="x"}))
    out("ctor cmdcopy idx1.5 " .. try(RQ, {t="cmdcopy", idx=1.5}))
    out("ctor flagset noflag " .. try(RQ, {t="flagset"}))
    out("ctor flagset ab " .. try(RQ, {t="flagset", flag="ab"}))
    out("ctor flagset 1 " .. try(RQ, {t="flagset", flag="1"}))
    out("ctor flagset valtable " .. try(RQ, {t="flagset", flag="T", val={}}))
    out("ctor flagcopy noidx " .. try(RQ, {t="flagcopy", flag="T"}))
    out("ctor flagcopy noflag " .. try(RQ, {t="flagcopy", idx=1}))
    out("ctor flagcopyall noidx " .. try(RQ, {t="flagcopyall"}))
    out("ctor valcopy noidx " .. try(RQ, {t="valcopy"}))
    out("ctor keycopy noidx " .. try(RQ, {t="keycopy"}))
    out("ctor reserr nocode " .. try(RS, {t="reserr"}))
    out("ctor reserr badcode " .. try(RS, {t="reserr", code="bad"}))
    out("ctor reserr emptymsg " .. try(RS, {t="reserr", code="server", msg=""}))
    out("ctor rescodeset noval " .. try(RS, {t="rescodeset"}))
    out("ctor rescodeset empty " .. try(RS, {t="rescodeset", val=""}))
    out("ctor rescodecopy noidx " .. try(RS, {t="rescodecopy"}))
    out("ctor resnull " .. try(RS, {t="resnull"}))
    out("ctor none " .. try(RQ))
    out("ctor string " .. try(RQ, "x"))
    out("ctor tnum " .. try(RQ, {t=5}))
    out("ctor ttable " .. try(RQ, {t={}}))
    out("ctor second bad " .. try(RQ, {t="cmdset", cmd="mg"}, {t="nope"}))
    out("ins bogus " .. try(IQ, {t="bogus"}))
    out("ins res sepkey " .. try(IS, {t="sepkey"}))
    out("ins hasflag noflag " .. try(IQ, {t="hasflag"}))
    out("ins hasflag ab " .. try(IQ, {t="hasflag", flag="ab"}))
    out("ins hasflag 1 " .. try(IQ, {t="hasflag", flag="1"}))
    out("ins keyis nostr " .. try(IQ, {t="keyis"}))
    out("ins keyis empty " .. try(IQ, {t="keyis", str=""}))
    out("ins flagis nostr " .. try(IQ, {t="flagis", flag="O"}))
    out("ins sepkey sep2 " .. try(IQ, {t="sepkey", sep="ab"}))
    out("ins sepkey posstr " .. try(IQ, {t="sepkey", pos="x"}))
    out("ins sepkey map5 " .. try(IQ, {t="sepkey", map=5}))
    out("ins sepkey default " .. try(IQ, {t="sepkey"}))
    out("ins none " .. try(IQ))
    out("ins string " .. try(IQ, "x"))
    local m = {
        cmdcopy = RQ({t="cmdcopy", idx=1}, {t="keyset", val="m/k"}, {t="flagset", flag="v"}),
        msval = RQ({t="cmdset", cmd="ms"}, {t="keycopy", idx=1}, {t="valcopy", idx=1}, {t="flagset", flag="T", val=0}),
        msstr = RQ({t="cmdset", cmd="ms"}, {t="keyset", val="m/k"}, {t="valcopy", idx=1}),
        simple = RQ({t="cmdset", cmd="mg"}, {t="keyset", val="m/k"}, {t="flagset", flag="v"}, {t="flagset", flag="N", val=30}, {t="flagset", flag="F", val=1.5}),
        flagcopy = RQ({t="cmdset", cmd="mg"}, {t="keyset", val="m/k"}, {t="flagcopy", flag="T", idx=1}, {t="flagset", flag="v"}),
        flagcopyall = RQ({t="cmdset", cmd="mg"}, {t="keyset", val="m/k"}, {t="flagcopyall", idx=1}),
        bad = RQ({t="cmdset", cmd="zz"}, {t="keyset", val="m/k"}),
        nokey = RQ({t="cmdset", cmd="mg"}),
        keycopy = RQ({t="cmdset", cmd="mg"}, {t="keycopy", idx=1}),
        resnull = RS({t="resnull", idx=1}),
        resnull0 = RS({t="resnull"}),
        reserr = RS({t="reserr", code="client", msg="no good"}),
        reserr_e = RS({t="reserr", code="error", msg="hm"}),
        rescodecopy = RS({t="rescodecopy", idx=1}, {t="flagcopy", flag="t", idx=1}),
        resfca = RS({t="rescodeset", val="HD"}, {t="flagcopyall", idx=1}),
        resbad = RS({t="rescodeset", val="XX"}),
        resbad2 = RS({t="rescodeset", val="STORED"}),
        resok = RS({t="rescodeset", val="HD"}, {t="flagset", flag="t", val="5"}),
        resval = RS({t="rescodeset", val="VA"}, {t="valcopy", idx=1}, {t="flagset", flag="f", val=3}),
        resflagcopy = RS({t="rescodeset", val="HD"}, {t="flagcopy", flag="O", idx=1}),
        onlycopy = RQ({t="flagcopy", flag="T", idx=1}),
    }
    local ins = {
        req = IQ({t="hasflag", flag="v"}, {t="flagtoken", flag="v"}, {t="flagint", flag="v"}, {t="flagis", flag="v", str="x"}, {t="flagtoken", flag="N"}, {t="flagint", flag="N"}),
        res = IS({t="hasflag", flag="f"}),
        res2 = IS({t="flagtoken", flag="f"}, {t="flagint", flag="f"}, {t="flagis", flag="f", str="5"}),
        sep1 = IQ({t="sepkey"}),
        sep3 = IQ({t="sepkey", pos=3}),
        sep0 = IQ({t="sepkey", pos=0}),
        sepc = IQ({t="sepkey", sep=":", pos=2}),
        begin = IQ({t="keybegin", str="m/key"}, {t="keyis", str="m/key"}),
        none = IQ(),
    }
    fg:ready({ n = "mut", u = 2, f = function(rctx)
        local nreq = rctx:request_new()
        local nres = rctx:response_new()
        return function(r)
            local k = r:key()
            local case = string.match(k, "^m/([^/]+)") or k; if string.find(k, "ins") or string.find(k, "key") then case = "ins" end
            local M = {}
            local function log(s) M[#M+1] = s end
            out("== " .. k .. " :: " .. r:raw_line()); if k == "ctor" then return "SERVER_ERROR " .. table.concat(CT, " | ") .. "\r\n" end
            if case == "cmdcopy" then
                log(try(m.cmdcopy, nreq, r)) ; log(show(nreq:raw_line()))
                return rctx:enqueue_and_wait(nreq, h)
            elseif case == "cmdcopys" then
                log(try(m.cmdcopy, nreq, "md")) ; log(show(nreq:raw_line()))
                return rctx:enqueue_and_wait(nreq, h)
            elseif case == "msval" then
                log(try(m.msval, nreq, r)) ; log(show(nreq:raw_line(), nreq:raw_value()))
                log("again " .. try(m.msval, nreq, r))
                return rctx:enqueue_and_wait(nreq, h)
            elseif case == "msstr" then
                log(try(m.msstr, nreq, "hello\r\n")) ; log(show(nreq:raw_line(), nreq:raw_value()))
                log("num " .. try(m.msstr, nreq, 5))
                log("nocrlf " .. try(m.msstr, nreq, "x"))
                return rctx:enqueue_and_wait(nreq, h)
            elseif case == "simple" then
                log(try(m.simple, nreq)); log(show(nreq:raw_line()))
                log("again " .. try(m.simple, nreq)); log(show(nreq:raw_line()))
                log("on client req " .. try(m.simple, r)); log(show(r:raw_line(), r:key()))
                return rctx:enqueue_and_wait(nreq, h)
            elseif case == "flagcopy" then
                log("nil " .. try(m.flagcopy, nreq, nil) .. " " .. nreq:raw_line())
                log("true " .. try(m.flagcopy, nreq, true) .. " " .. nreq:raw_line())
                log("false " .. try(m.flagcopy, nreq, false) .. " " .. nreq:raw_line())
                log("str " .. try(m.flagcopy, nreq, "77") .. " " .. nreq:raw_line())
                log("emptystr " .. try(m.flagcopy, nreq, "") .. " " .. nreq:raw_line())
                log("num " .. try(m.flagcopy, nreq, 5) .. " " .. nreq:raw_line())
                log("req " .. try(m.flagcopy, nreq, r) .. " " .. nreq:raw_line())
                local tr = mcp.request("get m/x\r\n")
                log("textreq " .. try(m.flagcopy, nreq, tr) .. " " .. nreq:raw_line())
                log("table " .. try(m.flagcopy, nreq, {}) .. " " .. nreq:raw_line())
                local res = rctx:enqueue_and_wait(mcp.request("mg m/k v t T99\r\n"), h)
                log("res " .. show(res:raw_string()) .. try(m.flagcopy, nreq, res) .. " " .. nreq:raw_line())
                log("noargs " .. try(m.flagcopy, nreq) .. " " .. nreq:raw_line())
            elseif case == "fca" then
                log("str " .. try(m.flagcopyall, nreq, "T30 v   q") .. " " .. show(nreq:raw_line()))
                log("req " .. try(m.flagcopyall, nreq, r) .. " " .. nreq:raw_line())
                local res = rctx:enqueue_and_wait(mcp.request("mg m/k v t f k\r\n"), h)
                log("res " .. show(res:raw_string()) .. try(m.flagcopyall, nreq, res) .. " " .. show(nreq:raw_line()))
                log("resfca " .. try(m.resfca, nres, res) .. " " .. show(nres:raw_string()))
                return nres
            elseif case == "bad" then
                log("bad " .. try(m.bad, nreq) .. " " .. show(nreq:raw_line()))
                log("nokey " .. try(m.nokey, nreq) .. " " .. show(nreq:raw_line()))
                log("keycopy res " .. try(m.keycopy, nreq, rctx:enqueue_and_wait(mcp.request("mg m/k v\r\n"), h)) .. " " .. show(nreq:raw_line()))
                log("keycopy str " .. try(m.keycopy, nreq, "m/zz") .. " " .. show(nreq:raw_line()))
                log("keycopy num " .. try(m.keycopy, nreq, 12) .. " " .. show(nreq:raw_line()))
                log("wrong obj " .. try(m.simple, nres))
                log("string obj " .. try(m.simple, "x"))
                log("res mut on req " .. try(m.resok, nreq))
                log("onlycopy missing " .. try(m.onlycopy, nreq, nil))
            elseif case == "resnull" then
                for _, line in ipairs({"mg a v\r\n", "ms a 1\r\n", "md a\r\n", "ma a\r\n", "get a\r\n", "gets a\r\n", "gat 1 a\r\n", "set a 0 0 1\r\n", "cas a 0 0 1 1\r\n", "incr a 1\r\n", "touch a 1\r\n", "delete a\r\n", "me a\r\n"}) do
                    local rr = (line:sub(1,2) == "ms" or line:sub(1,3) == "set" or line:sub(1,3) == "cas") and mcp.request(line, "x\r\n") or mcp.request(line)
                    local ok = try(m.resnull, nres, rr)
                    log("resnull " .. line:sub(1, -3) .. " " .. ok .. " " .. show(nres:raw_string()) .. " code " .. nres:code() .. " ok " .. tostring(nres:ok()) .. " hit " .. tostring(nres:hit()))
                    nres:close()
                end
                log("resnull0 " .. try(m.resnull0, nres) .. " " .. show(nres:raw_string()))
                log("resnull str " .. try(m.resnull, nres, "mg") .. " " .. show(nres:raw_string()))
                log("resnull client " .. try(m.resnull, nres, r) .. " " .. show(nres:raw_string()))
                return nres
            elseif case == "reserr" then
                log("reserr " .. try(m.reserr, nres) .. " " .. show(nres:raw_string()) .. " code " .. nres:code() .. " ok " .. tostring(nres:ok()))
                log("again " .. try(m.reserr, nres))
                return nres
            elseif case == "reserre" then
                log("reserr_e " .. try(m.reserr_e, nres) .. " " .. show(nres:raw_string()) .. " code " .. nres:code())
                return nres
            elseif case == "rescc" then
                local res = rctx:enqueue_and_wait(mcp.request("mg m/k v t\r\n"), h)
                local tres = rctx:enqueue_and_wait(mcp.request("get m/k\r\n"), h2)
                log("text " .. try(m.rescodecopy, nres, tres) .. " " .. show(nres:raw_string()))
                log("str1 " .. try(m.rescodecopy, nres, "H") .. " " .. show(nres:raw_string()))
                nres:close() log("meta " .. try(m.rescodecopy, nres, res) .. " " .. show(nres:raw_string(), nres:line(), nres:code(), nres:vlen()))
                return nres
            elseif case == "resbad" then
                log("XX " .. try(m.resbad, nres) .. " " .. show(nres:raw_string()))
                nres:close()
                log("STORED " .. try(m.resbad2, nres) .. " " .. show(nres:raw_string(), nres:code(), nres:line()))
                return nres
            elseif case == "resok" then
                log("resok " .. try(m.resok, nres) .. " " .. show(nres:raw_string(), nres:code(), nres:line(), nres:ok(), nres:hit(), nres:vlen()))
                return nres
            elseif case == "resval" then
                log("resval " .. try(m.resval, nres, "hello\r\n") .. " " .. show(nres:raw_string(), nres:code(), nres:line(), nres:vlen()))
                return nres
            elseif case == "resvalreq" then
                log("resval from req " .. try(m.resval, nres, r) .. " " .. show(nres:raw_string()))
                return nres
            elseif case == "resvalres" then
                local res = rctx:enqueue_and_wait(mcp.request("mg m/k v\r\n"), h)
                log("resval from res " .. try(m.resval, nres, res) .. " " .. show(nres:raw_string()))
                return nres
            elseif case == "resfc" then
                log("resflagcopy req " .. try(m.resflagcopy, nres, r) .. " " .. show(nres:raw_string()))
                return nres
            elseif case == "ins" then
                log("req " .. try(ins.req, r))
                log("sep1 " .. try(ins.sep1, r) .. " sep3 " .. try(ins.sep3, r) .. " sep0 " .. try(ins.sep0, r) .. " sepc " .. try(ins.sepc, r))
                log("begin " .. try(ins.begin, r))
                log("none " .. try(ins.none, r))
                log("wrong " .. try(ins.req, nres) .. " str " .. try(ins.req, "x"))
                local res = rctx:enqueue_and_wait(mcp.request("mg m/k v f\r\n"), h)
                local tres = rctx:enqueue_and_wait(mcp.request("get m/k\r\n"), h2)
                log("res meta " .. try(ins.res, res) .. " " .. try(ins.res2, res))
                log("res text " .. try(ins.res, tres) .. " " .. try(ins.res2, tres))
                
            end
            return "SERVER_ERROR " .. table.concat(M, " | ") .. "\r\n"
        end
    end })
    mcp.attach(mcp.CMD_ANY_STORAGE, fg)
end
