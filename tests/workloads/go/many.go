// N goroutines, each parked for good in parked() on a receive from its
// own channel, for fgbpf's goroutine view at scale (tests/go.rs).
//
// Usage: many N
//
// Says "ready PID" once all N are parked (as the runtime's goroutine
// profile shows them), then runs until killed, its main goroutine asleep
// [sleep]: with every goroutine blocked and no timer pending, the runtime
// would end the program ("all goroutines are asleep - deadlock!").
// Build: go build -o many many.go (standard library only).
package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"time"
)

var started sync.WaitGroup

//go:noinline
func parked() {
	ch := make(chan struct{}) // its own; nobody ever sends on it
	started.Done()
	<-ch
}

// parkedCount is how many goroutines the runtime's goroutine profile
// shows parked in parked(): the largest record of its aggregated text
// (debug=1, "COUNT @ PCs" then "#\tPC\tFUNC+OFF\tFILE:LINE" lines) that
// names it. Parked goroutines all have the same stack, so one record; a
// goroutine not yet at its receive has another.
func parkedCount() int {
	var buf bytes.Buffer
	pprof.Lookup("goroutine").WriteTo(&buf, 1)
	most, count := 0, 0
	for _, line := range strings.Split(buf.String(), "\n") {
		if head := strings.SplitN(line, " @ ", 2); len(head) == 2 {
			count, _ = strconv.Atoi(head[0])
		} else if strings.Contains(line, "\tmain.parked+") && count > most {
			most = count
		}
	}
	return most
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: many N")
		os.Exit(2)
	}
	n, err := strconv.Atoi(os.Args[1])
	if err != nil || n < 0 {
		fmt.Fprintln(os.Stderr, "many: N is a count of goroutines:", os.Args[1])
		os.Exit(2)
	}
	started.Add(n)
	for i := 0; i < n; i++ {
		go parked()
	}
	started.Wait()
	deadline := time.Now().Add(30 * time.Second)
	for parkedCount() != n {
		if time.Now().After(deadline) {
			fmt.Fprintf(os.Stderr, "many: %d of %d goroutines parked after 30 s\n", parkedCount(), n)
			os.Exit(1)
		}
		time.Sleep(10 * time.Millisecond)
	}
	out := bufio.NewWriter(os.Stdout)
	fmt.Fprintf(out, "ready %d\n", os.Getpid())
	out.Flush()
	// A pending timer, so that the runtime does not take every goroutine
	// parked for a deadlock and end the program.
	for {
		time.Sleep(time.Hour)
	}
}
