// Allocates 50/30/20 of its bytes from fifty(), thirty() and twenty(),
// each with the same mix of sizes (16 B to 1 MiB), about 350 MB a second,
// and keeps the last 512 blocks alive. Serves net/http/pprof on a port of
// 127.0.0.1 so that Go's own heap profile can be fetched while it runs
// (tests/alloc.rs).
//
// Usage: heap
//
// Says "ready PID PORT" once serving, then allocates until killed. Build:
// go build -o heap heap.go (standard library only).
package main

import (
	"fmt"
	"net"
	"net/http"
	_ "net/http/pprof"
	"os"
	"time"
)

var sizes = []int{16, 100, 1000, 10000, 100000, 1 << 20}

// The last blocks allocated, kept alive.
var ring [512][]byte
var next int

func keep(b []byte) {
	b[0] = 1
	ring[next%len(ring)] = b
	next++
}

//go:noinline
func fifty(i int) {
	for k := 0; k < 5; k++ {
		keep(make([]byte, sizes[(i+k)%len(sizes)]))
	}
}

//go:noinline
func thirty(i int) {
	for k := 0; k < 3; k++ {
		keep(make([]byte, sizes[(i+k)%len(sizes)]))
	}
}

// Inlined into twenty (Go's heap profile lists it as a frame of its own).
func block(n int) []byte {
	return make([]byte, n)
}

//go:noinline
func twenty(i int) {
	for k := 0; k < 2; k++ {
		keep(block(sizes[(i+k)%len(sizes)]))
	}
}

func main() {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	go http.Serve(ln, nil)
	fmt.Printf("ready %d %d\n", os.Getpid(), ln.Addr().(*net.TCPAddr).Port)
	for i := 0; ; i++ {
		// Each function meets every size as often: i walks them, and
		// 5, 3 and 2 blocks per call make the bytes 50/30/20.
		fifty(i)
		thirty(i)
		twenty(i)
		time.Sleep(5 * time.Millisecond)
	}
}
