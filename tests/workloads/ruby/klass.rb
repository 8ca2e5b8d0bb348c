# A method of a class in a module, a block in it run by Integer#times, and
# a class method, busy for SECONDS (ARGV[0]). tests/ruby.rs: each named
# with its class, as Ruby's profiling API names them.
module Jobs
  class Worker
    def self.crunch(deadline)
      x = 0
      x += 1 while Process.clock_gettime(Process::CLOCK_MONOTONIC) < deadline
      x
    end

    def run(deadline)
      1.times { Worker.crunch(deadline) }
    end
  end
end

deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + Float(ARGV[0] || 10)
puts "ready"
$stdout.flush
Jobs::Worker.new.run(deadline)
