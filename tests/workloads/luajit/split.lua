-- A 50/30/20 split between three functions, in rounds of fixed work
-- (tests/luajit.rs). Argument: seconds. Says the rounds run at the end
-- (scripts/bench/reference_cost.py).
local function spin(n)
  local x = 0
  for i = 1, n do x = (x + i) % 1000003 end
  return x
end

function fifty() return spin(500000) end
function thirty() return spin(300000) end
function twenty() return spin(200000) end

io.stdout:setvbuf("no")
local seconds = tonumber(arg[1]) or 30
local untilt = os.time() + seconds
print("ready")
local rounds = 0
while os.time() < untilt do
  fifty()
  thirty()
  twenty()
  rounds = rounds + 1
end
print("rounds " .. rounds)
