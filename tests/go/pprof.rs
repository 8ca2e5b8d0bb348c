//! Go's own profiles in their text form (`/debug/pprof/...?debug=1`), read
//! as tests/go.rs compares them with fgbpf's goroutine view; checked on
//! real text from Go 1.19.8.

use std::collections::BTreeSet;

use super::{LOCKERS, NAPPERS, WAITERS};

/// One record of a pprof profile in its text form (`?debug=1`): the
/// numbers before ` @ ` (a goroutine count; cycles then count in the
/// block profile) and the functions of its frames, leaf first. Go leaves
/// the runtime's own frames out of the leaf end (runtime.gopark,
/// runtime.chanrecv1) and runtime.goexit out of the root end.
#[derive(Debug, PartialEq)]
pub struct PprofRecord {
    pub numbers: Vec<u64>,
    pub funcs: Vec<String>,
}

/// Parses pprof's debug=1 text: a record is a line `NUMBERS @ 0xPC ...`
/// then lines `#\t0xPC\tFUNC+0xOFF\t[\t...]FILE:LINE` (tab-aligned), or
/// `#\t0xPC` alone for a PC without a function, and perhaps a
/// `# labels: {...}` line; headers (`goroutine profile: total 15`, `---
/// contention:`, `cycles/second=...`) and blank lines come between.
pub fn parse_pprof_debug1(text: &str) -> Vec<PprofRecord> {
    let mut records: Vec<PprofRecord> = Vec::new();
    for line in text.lines() {
        if let Some(frame) = line.strip_prefix("#\t") {
            let mut fields = frame.split('\t').filter(|f| !f.is_empty());
            let pc = fields.next().unwrap_or_default();
            assert!(pc.starts_with("0x"), "no PC in frame line {line:?}");
            let record = records.last_mut().unwrap_or_else(|| panic!("frame line {line:?} before any record"));
            if let Some(func) = fields.next() {
                let name = func.rsplit_once("+0x").map_or(func, |(name, _)| name);
                record.funcs.push(name.to_string());
            }
        } else if line.starts_with('#') {
            // `# labels: {"route":"/api"}`: the goroutines' labels.
        } else if let Some((numbers, pcs)) = line.split_once(" @ ") {
            assert!(pcs.split_whitespace().all(|pc| pc.starts_with("0x")), "bad record line {line:?}");
            let numbers = numbers
                .split_whitespace()
                .map(|n| n.parse().unwrap_or_else(|_| panic!("bad record line {line:?}")))
                .collect();
            records.push(PprofRecord { numbers, funcs: Vec::new() });
        }
    }
    records
}

/// Goroutines whose stack has `func`, in a goroutine profile.
pub fn pprof_goroutines_with(records: &[PprofRecord], func: &str) -> u64 {
    records
        .iter()
        .filter(|r| r.funcs.iter().any(|f| f == func))
        .map(|r| r.numbers[0])
        .sum()
}

/// The `main.*` functions of a profile's stacks.
pub fn pprof_main_funcs(records: &[PprofRecord]) -> BTreeSet<String> {
    records
        .iter()
        .flat_map(|r| r.funcs.iter())
        .filter(|f| f.starts_with("main."))
        .cloned()
        .collect()
}

/// Real debug=1 text as Go 1.19.8 serves it, read as tests/go.rs
/// reads it: no BPF, no root, no Go needed.
#[test]
fn pprof_debug1_text_is_parsed() {
    let goroutines = parse_pprof_debug1(GOROUTINE_DEBUG1);
    assert_eq!(goroutines.iter().map(|r| r.numbers[0]).sum::<u64>(), 15, "goroutine profile: total 15");
    assert_eq!(goroutines.len(), 9);
    assert_eq!(
        goroutines[0],
        PprofRecord { numbers: vec![4], funcs: vec!["main.waiter".to_string()] }
    );
    assert_eq!(
        goroutines[1].funcs,
        ["sync.runtime_SemacquireMutex", "sync.(*Mutex).lockSlow", "sync.(*Mutex).Lock", "main.locker"]
    );
    assert_eq!(pprof_goroutines_with(&goroutines, "main.waiter"), WAITERS);
    assert_eq!(pprof_goroutines_with(&goroutines, "main.napper"), NAPPERS);
    assert_eq!(pprof_goroutines_with(&goroutines, "main.locker"), LOCKERS);
    assert_eq!(pprof_goroutines_with(&goroutines, "main.holder"), 1);
    // A goroutine not yet started: its only PC is runtime.goexit's, left
    // out.
    assert_eq!(goroutines[8], PprofRecord { numbers: vec![1], funcs: vec![] });
    assert_eq!(
        pprof_main_funcs(&goroutines).into_iter().collect::<Vec<_>>(),
        ["main.holder", "main.locker", "main.main", "main.napper", "main.spinner", "main.ticks", "main.waiter"]
    );

    let block = parse_pprof_debug1(BLOCK_DEBUG1);
    assert_eq!(block.len(), 3);
    assert_eq!(block[0].numbers, [3894911565, 15], "cycles, then count");
    assert_eq!(block[0].funcs, ["runtime.chanrecv1", "main.ticks", "main.main", "runtime.main"]);
    assert_eq!(
        pprof_main_funcs(&block).into_iter().collect::<Vec<_>>(),
        ["main.main", "main.ticks"]
    );

    let labeled = parse_pprof_debug1(LABELED_DEBUG1);
    assert_eq!(labeled.len(), 2);
    assert_eq!(labeled[1].funcs, ["main.labeled", "main.main.func1", "runtime/pprof.Do"]);
}

/// pprof's debug=1 text of a goroutine under pprof.Do labels (Go 1.19.8):
/// a `# labels:` line before its frames.
const LABELED_DEBUG1: &str = "goroutine profile: total 2
1 @ 0x42d196 0x45c7a5 0x4ab075 0x4aae8d 0x4a7deb 0x4b4e3f 0x437192 0x461121
#\t0x45c7a4\truntime/pprof.runtime_goroutineProfileWithLabels+0x24\t/usr/lib/go-1.19/src/runtime/mprof.go:846
#\t0x4ab074\truntime/pprof.writeRuntimeProfile+0xb4\t\t\t/usr/lib/go-1.19/src/runtime/pprof/pprof.go:723
#\t0x4aae8c\truntime/pprof.writeGoroutine+0x4c\t\t\t/usr/lib/go-1.19/src/runtime/pprof/pprof.go:683
#\t0x4a7dea\truntime/pprof.(*Profile).WriteTo+0x14a\t\t\t/usr/lib/go-1.19/src/runtime/pprof/pprof.go:330
#\t0x4b4e3e\tmain.main+0x25e\t\t\t\t\t\t/tmp/gotest/lab/lab.go:18
#\t0x437191\truntime.main+0x211\t\t\t\t\t/usr/lib/go-1.19/src/runtime/proc.go:250

1 @ 0x437556 0x40619b 0x405cd8 0x4b4b85 0x4b4bb7 0x4b4563 0x461121
# labels: {\"route\":\"/api\"}
#\t0x4b4b84\tmain.labeled+0x24\t/tmp/gotest/lab/lab.go:13
#\t0x4b4bb6\tmain.main.func1+0x16\t/tmp/gotest/lab/lab.go:16
#\t0x4b4562\truntime/pprof.Do+0xa2\t/usr/lib/go-1.19/src/runtime/pprof/runtime.go:40

";

/// `/debug/pprof/goroutine?debug=1` of `waits -pprof 127.0.0.1:0 -block`,
/// as Go 1.19.8 (Debian's golang-go) served it.
const GOROUTINE_DEBUG1: &str = "goroutine profile: total 15
4 @ 0x43b2f6 0x407e5b 0x407998 0x674105 0x46b261
#\t0x674104\tmain.waiter+0x24\t/work/main/tests/workloads/go/waits.go:54

3 @ 0x43b2f6 0x44c1be 0x44c195 0x467425 0x471805 0x6741f9 0x6741d5 0x46b261
#\t0x467424\tsync.runtime_SemacquireMutex+0x24\t/usr/lib/go-1.19/src/runtime/sema.go:77
#\t0x471804\tsync.(*Mutex).lockSlow+0x164\t\t/usr/lib/go-1.19/src/sync/mutex.go:171
#\t0x6741f8\tsync.(*Mutex).Lock+0x38\t\t\t/usr/lib/go-1.19/src/sync/mutex.go:90
#\t0x6741d4\tmain.locker+0x14\t\t\t/work/main/tests/workloads/go/waits.go:73

2 @ 0x43b2f6 0x4680d5 0x67413e 0x46b261
#\t0x4680d4\ttime.Sleep+0x134\t/usr/lib/go-1.19/src/runtime/time.go:195
#\t0x67413d\tmain.napper+0x1d\t/work/main/tests/workloads/go/waits.go:60

1 @ 0x4308f6 0x465785 0x666495 0x6662ad 0x66320b 0x6723e5 0x672f7e 0x61ffaf 0x621949 0x622c2c 0x61ed07 0x46b261
#\t0x465784\truntime/pprof.runtime_goroutineProfileWithLabels+0x24\t/usr/lib/go-1.19/src/runtime/mprof.go:846
#\t0x666494\truntime/pprof.writeRuntimeProfile+0xb4\t\t\t/usr/lib/go-1.19/src/runtime/pprof/pprof.go:723
#\t0x6662ac\truntime/pprof.writeGoroutine+0x4c\t\t\t/usr/lib/go-1.19/src/runtime/pprof/pprof.go:683
#\t0x66320a\truntime/pprof.(*Profile).WriteTo+0x14a\t\t\t/usr/lib/go-1.19/src/runtime/pprof/pprof.go:330
#\t0x6723e4\tnet/http/pprof.handler.ServeHTTP+0x4a4\t\t\t/usr/lib/go-1.19/src/net/http/pprof/pprof.go:253
#\t0x672f7d\tnet/http/pprof.Index+0x13d\t\t\t\t/usr/lib/go-1.19/src/net/http/pprof/pprof.go:371
#\t0x61ffae\tnet/http.HandlerFunc.ServeHTTP+0x2e\t\t\t/usr/lib/go-1.19/src/net/http/server.go:2109
#\t0x621948\tnet/http.(*ServeMux).ServeHTTP+0x148\t\t\t/usr/lib/go-1.19/src/net/http/server.go:2487
#\t0x622c2b\tnet/http.serverHandler.ServeHTTP+0x30b\t\t\t/usr/lib/go-1.19/src/net/http/server.go:2947
#\t0x61ed06\tnet/http.(*conn).serve+0x606\t\t\t\t/usr/lib/go-1.19/src/net/http/server.go:1991

1 @ 0x439a1f 0x46c89b 0x67426c 0x46b261
#\t0x67426b\tmain.spinner+0x2b\t/work/main/tests/workloads/go/waits.go:82

1 @ 0x43b2f6 0x407e5b 0x407998 0x6742d0 0x674e3a 0x43af32 0x46b261
#\t0x6742cf\tmain.ticks+0x2f\t\t/work/main/tests/workloads/go/waits.go:92
#\t0x674e39\tmain.main+0x4f9\t\t/work/main/tests/workloads/go/waits.go:162
#\t0x43af31\truntime.main+0x211\t/usr/lib/go-1.19/src/runtime/proc.go:250

1 @ 0x43b2f6 0x433e17 0x465c29 0x4ba912 0x4bbfb4 0x4bbfa1 0x4e7695 0x4f8b48 0x4f7e7d 0x6230c5 0x622174 0x46b261
#\t0x465c28\tinternal/poll.runtime_pollWait+0x88\t\t/usr/lib/go-1.19/src/runtime/netpoll.go:305
#\t0x4ba911\tinternal/poll.(*pollDesc).wait+0x31\t\t/usr/lib/go-1.19/src/internal/poll/fd_poll_runtime.go:84
#\t0x4bbfb3\tinternal/poll.(*pollDesc).waitRead+0x233\t/usr/lib/go-1.19/src/internal/poll/fd_poll_runtime.go:89
#\t0x4bbfa0\tinternal/poll.(*FD).Accept+0x220\t\t/usr/lib/go-1.19/src/internal/poll/fd_unix.go:614
#\t0x4e7694\tnet.(*netFD).accept+0x34\t\t\t/usr/lib/go-1.19/src/net/fd_unix.go:172
#\t0x4f8b47\tnet.(*TCPListener).accept+0x27\t\t\t/usr/lib/go-1.19/src/net/tcpsock_posix.go:142
#\t0x4f7e7c\tnet.(*TCPListener).Accept+0x3c\t\t\t/usr/lib/go-1.19/src/net/tcpsock.go:288
#\t0x6230c4\tnet/http.(*Server).Serve+0x384\t\t\t/usr/lib/go-1.19/src/net/http/server.go:3070
#\t0x622173\tnet/http.Serve+0x73\t\t\t\t/usr/lib/go-1.19/src/net/http/server.go:2568

1 @ 0x43b2f6 0x44a92c 0x67419e 0x46b261
#\t0x67419d\tmain.holder+0x3d\t/work/main/tests/workloads/go/waits.go:68

1 @ 0x46b261

";

/// `/debug/pprof/block?debug=1` of the same process, a second later.
const BLOCK_DEBUG1: &str = "--- contention:
cycles/second=2596125417
3894911565 15 @ 0x407998 0x6742d0 0x674e3a 0x43af32 0x46b261
#\t0x407997\truntime.chanrecv1+0x17\t/usr/lib/go-1.19/src/runtime/chan.go:442
#\t0x6742cf\tmain.ticks+0x2f\t\t/work/main/tests/workloads/go/waits.go:92
#\t0x674e39\tmain.main+0x4f9\t\t/work/main/tests/workloads/go/waits.go:162
#\t0x43af31\truntime.main+0x211\t/usr/lib/go-1.19/src/runtime/proc.go:250

54678 2 @ 0x47020c 0x618cb5 0x61e08a 0x61ed4a 0x46b261
#\t0x47020b\tsync.(*Cond).Wait+0x8b\t\t\t\t/usr/lib/go-1.19/src/sync/cond.go:70
#\t0x618cb4\tnet/http.(*connReader).abortPendingRead+0xb4\t/usr/lib/go-1.19/src/net/http/server.go:726
#\t0x61e089\tnet/http.(*response).finishRequest+0x89\t\t/usr/lib/go-1.19/src/net/http/server.go:1658
#\t0x61ed49\tnet/http.(*conn).serve+0x649\t\t\t/usr/lib/go-1.19/src/net/http/server.go:1997

2132 1 @ 0x407998 0x674cc5 0x43af32 0x46b261
#\t0x407997\truntime.chanrecv1+0x17\t/usr/lib/go-1.19/src/runtime/chan.go:442
#\t0x674cc4\tmain.main+0x384\t\t/work/main/tests/workloads/go/waits.go:147
#\t0x43af31\truntime.main+0x211\t/usr/lib/go-1.19/src/runtime/proc.go:250

";
