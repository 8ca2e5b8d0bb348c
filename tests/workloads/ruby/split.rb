# fifty, thirty and twenty do the same loop 5, 3 and 2 times per round,
# for SECONDS (ARGV[0]), after saying "ready": 50/30/20 of the CPU time.
def spin(n)
  s = 0
  i = 0
  while i < n
    s += i & 7
    i += 1
  end
  s
end

def fifty
  spin(50_000)
end

def thirty
  spin(30_000)
end

def twenty
  spin(20_000)
end

deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + Float(ARGV[0] || 10)
puts "ready"
$stdout.flush
while Process.clock_gettime(Process::CLOCK_MONOTONIC) < deadline
  fifty
  thirty
  twenty
end
