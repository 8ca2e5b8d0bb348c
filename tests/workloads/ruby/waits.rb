# Two threads that spend SECONDS (ARGV[0]) waiting, again and again: one in
# IO#read on a pipe, called from wait_input; one in Mutex#lock on a mutex
# the main thread holds while it sleeps, called from contend. The main
# thread writes a byte every 20 ms and holds the mutex through its sleeps.
# tests/ruby.rs: each waiter's off-CPU time is under its Ruby caller and
# the C method it called.
def wait_input(io)
  io.read(1)
end

def contend(mutex)
  mutex.lock
  mutex.unlock
end

deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + Float(ARGV[0] || 10)
r, w = IO.pipe
mutex = Mutex.new
Thread.new { loop { wait_input(r) } }
Thread.new { loop { contend(mutex); sleep 0.001 } }
puts "ready"
$stdout.flush
while Process.clock_gettime(Process::CLOCK_MONOTONIC) < deadline
  mutex.synchronize { sleep 0.02 }
  w.write("x")
end
