// A CPU-bound goroutine running burn() under the pprof labels
// route=/api, for goroutine labels in fgbpf's views (not yet tested).
//
// Usage: labels
//
// Says "ready PID" once burn() runs under its labels, then runs until
// killed. Build: go build -o labels labels.go (standard library only).
package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"runtime/pprof"
	"sync/atomic"
)

var sink uint64

//go:noinline
func burn(running chan<- struct{}) {
	close(running)
	x := uint64(1)
	for {
		for i := 0; i < 1000000; i++ {
			x = x*6364136223846793005 + 1442695040888963407
		}
		atomic.StoreUint64(&sink, x)
	}
}

func main() {
	running := make(chan struct{})
	go pprof.Do(context.Background(), pprof.Labels("route", "/api"), func(context.Context) {
		burn(running)
	})
	<-running
	out := bufio.NewWriter(os.Stdout)
	fmt.Fprintf(out, "ready %d\n", os.Getpid())
	out.Flush()
	select {}
}
