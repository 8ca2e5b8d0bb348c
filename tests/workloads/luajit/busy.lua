-- A busy chain three functions deep: the main chunk calls outer, which
-- calls inner, which spins (tests/luajit.rs). Argument: seconds.
function inner(untilt)
  local x = 0
  while os.time() < untilt do
    for i = 1, 1000000 do x = (x + i) % 1000003 end
  end
  return x
end

function outer(untilt)
  local r = inner(untilt)
  return r
end

io.stdout:setvbuf("no")
local seconds = tonumber(arg[1]) or 30
print("ready")
outer(os.time() + seconds)
