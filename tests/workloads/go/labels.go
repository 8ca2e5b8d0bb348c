// A CPU-bound goroutine running burn() under the pprof labels
// route=/api, beside an unlabelled one running spin(), for the goroutine
// labels on fgbpf's samples (tests/go.rs). With -cpuprofile FILE, Go's
// own CPU profiler samples the same process for -seconds N after
// "ready" and writes its profile (with its labels) to FILE.
//
// Usage: labels [-cpuprofile FILE -seconds N]
//
// Says "ready PID" once both run, then runs until killed. Build: go build
// -o labels labels.go (standard library only).
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"os"
	"runtime/pprof"
	"sync/atomic"
	"time"
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

//go:noinline
func spin(running chan<- struct{}) {
	close(running)
	x := uint64(3)
	for {
		for i := 0; i < 1000000; i++ {
			x = x*2862933555777941757 + 3037000493
		}
		atomic.StoreUint64(&sink, x)
	}
}

func main() {
	cpuprofile := flag.String("cpuprofile", "", "write Go's own CPU profile here")
	seconds := flag.Int("seconds", 3, "how long Go's own CPU profile samples")
	flag.Parse()
	labelled, plain := make(chan struct{}), make(chan struct{})
	go pprof.Do(context.Background(), pprof.Labels("route", "/api"), func(context.Context) {
		burn(labelled)
	})
	go spin(plain)
	<-labelled
	<-plain
	var f *os.File
	if *cpuprofile != "" {
		var err error
		if f, err = os.Create(*cpuprofile); err != nil {
			panic(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			panic(err)
		}
	}
	out := bufio.NewWriter(os.Stdout)
	fmt.Fprintf(out, "ready %d\n", os.Getpid())
	out.Flush()
	if f != nil {
		time.Sleep(time.Duration(*seconds) * time.Second)
		pprof.StopCPUProfile()
		f.Close()
		fmt.Fprintln(out, "profiled")
		out.Flush()
	}
	select {}
}
