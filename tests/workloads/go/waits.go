// Goroutines waiting in each of Go's usual ways, for fgbpf's goroutine
// view (tests/go.rs):
//
//	4 waiter()  blocked forever on <-never, a channel nobody sends to [chan receive]
//	2 napper()  in a loop of time.Sleep(50 ms)                        [sleep]
//	1 holder()  holding mu, then blocked in select{}                  [select (no cases)]
//	3 locker()  blocked in mu.Lock()                                  [semacquire] (Go 1.19)
//	1 spinner() burning CPU                                           running / runnable
//
// and the main goroutine in ticks(), receiving from a 100 ms ticker: a
// wait that ends, ten times a second, so that a block profile (-block)
// has a main.* stack to show (the other waits never end, and the block
// profile records a wait when it ends; sleeps not at all).
//
// Usage: waits [-pprof ADDR] [-block]
//
// With -pprof it serves net/http/pprof on ADDR (127.0.0.1:0 for any free
// port) and says "pprof http://HOST:PORT" first. It says "ready PID" once
// every goroutine is in place (parked where it waits), then runs until
// killed. Build: go build -o waits waits.go (standard library only).
package main

import (
	"bufio"
	"flag"
	"fmt"
	"net"
	"net/http"
	_ "net/http/pprof"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// How many goroutines of each kind: tests/go.rs counts on these.
const (
	waiters = 4
	nappers = 2
	lockers = 3
)

var (
	never = make(chan int)      // nobody ever sends on it
	held  = make(chan struct{}) // closed once holder has mu
	mu    sync.Mutex
	sink  uint64
)

//go:noinline
func waiter() {
	<-never
}

//go:noinline
func napper() {
	for {
		time.Sleep(50 * time.Millisecond)
	}
}

//go:noinline
func holder() {
	mu.Lock()
	close(held)
	select {}
}

//go:noinline
func locker() {
	mu.Lock()
	mu.Unlock()
}

//go:noinline
func spinner() {
	x := uint64(1)
	for {
		for i := 0; i < 1000000; i++ {
			x = x*6364136223846793005 + 1442695040888963407
		}
		atomic.StoreUint64(&sink, x)
	}
}

//go:noinline
func ticks() {
	t := time.NewTicker(100 * time.Millisecond)
	for {
		<-t.C
	}
}

// parked reports whether every goroutine is where it waits, from the
// runtime's own dump of all goroutines ("goroutine 7 [chan receive]:").
func parked() bool {
	buf := make([]byte, 1<<20)
	n := runtime.Stack(buf, true)
	found := map[string]int{}
	for _, g := range strings.Split(string(buf[:n]), "\n\n") {
		header := strings.SplitN(g, "\n", 2)[0]
		open, end := strings.Index(header, "["), strings.Index(header, "]")
		if open < 0 || end < open {
			continue
		}
		state := strings.SplitN(header[open+1:end], ",", 2)[0]
		waiting := state != "running" && state != "runnable" && state != "syscall"
		for _, line := range strings.Split(g, "\n") {
			for _, fn := range []string{"waiter", "napper", "holder", "locker", "spinner"} {
				if strings.HasPrefix(line, "main."+fn+"(") && (waiting || fn == "napper" || fn == "spinner") {
					found[fn]++
				}
			}
		}
	}
	return found["waiter"] == waiters && found["napper"] == nappers && found["holder"] == 1 &&
		found["locker"] == lockers && found["spinner"] == 1
}

func main() {
	addr := flag.String("pprof", "", "serve net/http/pprof on `ADDR` (host:port; port 0 for any)")
	block := flag.Bool("block", false, "record every blocking event (runtime.SetBlockProfileRate(1))")
	flag.Parse()
	out := bufio.NewWriter(os.Stdout)
	if *block {
		runtime.SetBlockProfileRate(1)
	}
	if *addr != "" {
		ln, err := net.Listen("tcp", *addr)
		if err != nil {
			fmt.Fprintln(os.Stderr, "waits:", err)
			os.Exit(1)
		}
		go http.Serve(ln, nil)
		fmt.Fprintf(out, "pprof http://%s\n", ln.Addr())
		out.Flush()
	}
	for i := 0; i < waiters; i++ {
		go waiter()
	}
	for i := 0; i < nappers; i++ {
		go napper()
	}
	go holder()
	<-held
	for i := 0; i < lockers; i++ {
		go locker()
	}
	go spinner()
	deadline := time.Now().Add(20 * time.Second)
	for !parked() {
		if time.Now().After(deadline) {
			fmt.Fprintln(os.Stderr, "waits: the goroutines are not in place after 20 s")
			os.Exit(1)
		}
		time.Sleep(10 * time.Millisecond)
	}
	fmt.Fprintf(out, "ready %d\n", os.Getpid())
	out.Flush()
	ticks()
}
