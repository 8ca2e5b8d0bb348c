-- Waits under their callers (tests/luajit.rs): nap sleeps in nanosleep,
-- slow_read blocks reading a socket no one writes (50 ms, its receive
-- timeout), both through the FFI, in turn. Argument: seconds.
local ffi = require("ffi")
ffi.cdef[[
struct timespec { long tv_sec; long tv_nsec; };
int nanosleep(const struct timespec *req, struct timespec *rem);
int socketpair(int domain, int type, int protocol, int fds[2]);
int setsockopt(int fd, int level, int name, const void *value, unsigned int len);
long read(int fd, void *buf, unsigned long n);
]]

local ts = ffi.new("struct timespec", 0, 50000000)
function nap()
  ffi.C.nanosleep(ts, nil)
end

local fds = ffi.new("int[2]")
-- AF_UNIX, SOCK_STREAM; SOL_SOCKET, SO_RCVTIMEO.
assert(ffi.C.socketpair(1, 1, 0, fds) == 0)
local tv = ffi.new("struct timespec", 0, 50000)
assert(ffi.C.setsockopt(fds[0], 1, 20, tv, 16) == 0)
local buf = ffi.new("char[16]")
function slow_read()
  ffi.C.read(fds[0], buf, 16)
end

io.stdout:setvbuf("no")
local seconds = tonumber(arg[1]) or 30
local untilt = os.time() + seconds
print("ready")
while os.time() < untilt do
  nap()
  slow_read()
end
