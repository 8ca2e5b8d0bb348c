# Two Ractors busy in methods of their own for SECONDS (ARGV[0]), each on
# a thread of its own with an execution context of its own. tests/ruby.rs:
# each Ractor's thread is walked from its own context.
Warning[:experimental] = false

def ractor_a(deadline)
  x = 0
  x += 1 while Process.clock_gettime(Process::CLOCK_MONOTONIC) < deadline
  x
end

def ractor_b(deadline)
  y = 0
  y += 2 while Process.clock_gettime(Process::CLOCK_MONOTONIC) < deadline
  y
end

deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + Float(ARGV[0] || 10)
a = Ractor.new(deadline) { |d| ractor_a(d) }
b = Ractor.new(deadline) { |d| ractor_b(d) }
puts "ready"
$stdout.flush
a.take
b.take
