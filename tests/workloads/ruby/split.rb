# fifty, thirty and twenty do the same loop 5, 3 and 2 times per round,
# for SECONDS (ARGV[0]), after saying "ready": 50/30/20 of the CPU time.
# A round lasts ~20 ms, ten periods of a 499 Hz sampler, and its three
# calls come in a random order, so that each call gets its share of the
# samples whatever their phase (a 1 ms round in a fixed order beat against
# the 2 ms period: thirty read 27.0% in a CI run).
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
  spin(1_000_000)
end

def thirty
  spin(600_000)
end

def twenty
  spin(400_000)
end

deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + Float(ARGV[0] || 10)
puts "ready"
$stdout.flush
order = [0, 1, 2]
while Process.clock_gettime(Process::CLOCK_MONOTONIC) < deadline
  order.shuffle.each do |m|
    case m
    when 0 then fifty
    when 1 then thirty
    else twenty
    end
  end
end
