//! The built-in demo workload profiled by `fgbpf demo`: named threads with
//! a known mix of computing and waiting, built with frame pointers.

use std::hint::black_box;
use std::thread;
use std::time::{Duration, Instant};

#[inline(never)]
fn parse_records(seed: u64) -> u64 {
    let mut h = seed;
    for i in 0..20_000u64 {
        h = black_box(h.rotate_left(5) ^ i).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
    h
}

#[inline(never)]
fn checksum(seed: u64) -> u64 {
    let mut h = seed;
    for i in 0..10_000u64 {
        h = black_box(h ^ (i << 7))
            .wrapping_add(0xDEAD_BEEF)
            .rotate_right(3);
    }
    h
}

#[inline(never)]
fn handle_request(seed: u64) -> u64 {
    // Two thirds parsing, one third checksumming.
    checksum(parse_records(seed))
}

#[inline(never)]
fn compress_block(seed: u64) -> u64 {
    let mut h = seed;
    for i in 0..30_000u64 {
        h = black_box(h.wrapping_mul(31).wrapping_add(i)) ^ (h >> 17);
    }
    h
}

#[inline(never)]
fn wait_for_work(d: Duration) {
    thread::sleep(d);
}

/// Runs the demo threads for `seconds`.
pub fn run(seconds: f64) {
    let until = Instant::now() + Duration::from_secs_f64(seconds);
    let spawn = |name: &str, body: fn(Instant)| {
        thread::Builder::new()
            .name(name.into())
            .spawn(move || body(until))
            .expect("spawning a demo thread")
    };
    let workers = [
        spawn("ingest", |until| {
            let mut h = 1;
            while Instant::now() < until {
                h = handle_request(h);
            }
            black_box(h);
        }),
        spawn("compress", |until| {
            let mut h = 2;
            while Instant::now() < until {
                // Busy a quarter of the time, waiting the rest.
                let busy = Instant::now() + Duration::from_millis(10);
                while Instant::now() < busy {
                    h = compress_block(h);
                }
                wait_for_work(Duration::from_millis(30));
            }
            black_box(h);
        }),
        spawn("idle-waiter", |until| {
            while Instant::now() < until {
                wait_for_work(Duration::from_millis(100));
            }
        }),
    ];
    for w in workers {
        let _ = w.join();
    }
}
