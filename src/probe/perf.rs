//! Software cpu-clock perf events, one per online CPU, that drive the
//! on-CPU sampler. Hardware cycle events are missing on many VMs.

use std::fs;
use std::io;
use std::os::fd::RawFd;

use libbpf_rs::libbpf_sys;

use super::CaptureError;

/// CPUs listed in `/sys/devices/system/cpu/online` (e.g. `0-3,6`).
pub fn online_cpus() -> Result<Vec<u32>, CaptureError> {
    let text = fs::read_to_string("/sys/devices/system/cpu/online")
        .map_err(|e| CaptureError::new(format!("reading /sys/devices/system/cpu/online: {e}")))?;
    parse_cpu_list(text.trim()).ok_or_else(|| {
        CaptureError::new(format!(
            "unexpected CPU list {:?} in /sys/devices/system/cpu/online",
            text.trim()
        ))
    })
}

pub(crate) fn parse_cpu_list(list: &str) -> Option<Vec<u32>> {
    let mut cpus = Vec::new();
    for part in list.split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (u32, u32) = (a.parse().ok()?, b.parse().ok()?);
                if a > b {
                    return None;
                }
                cpus.extend(a..=b);
            }
            None => cpus.push(part.parse().ok()?),
        }
    }
    Some(cpus)
}

/// Opens a cpu-clock event sampling at `hz` on `cpu` for every task.
/// `Ok(None)` when the CPU went offline meanwhile (ENODEV).
pub fn open_cpu_clock(cpu: u32, hz: u64) -> Result<Option<RawFd>, CaptureError> {
    let mut attr = libbpf_sys::perf_event_attr {
        type_: libbpf_sys::PERF_TYPE_SOFTWARE,
        size: std::mem::size_of::<libbpf_sys::perf_event_attr>() as u32,
        config: libbpf_sys::PERF_COUNT_SW_CPU_CLOCK as u64,
        ..Default::default()
    };
    attr.__bindgen_anon_1.sample_freq = hz;
    attr.set_freq(1);
    // SAFETY: attr is a valid, fully initialised perf_event_attr.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_perf_event_open,
            &attr as *const libbpf_sys::perf_event_attr,
            -1 as libc::pid_t,
            cpu as libc::c_int,
            -1 as libc::c_int,
            libbpf_sys::PERF_FLAG_FD_CLOEXEC as libc::c_ulong,
        )
    };
    if fd >= 0 {
        return Ok(Some(fd as RawFd));
    }
    let err = io::Error::last_os_error();
    match err.raw_os_error() {
        Some(libc::ENODEV) => Ok(None),
        Some(libc::EACCES) | Some(libc::EPERM) => Err(CaptureError::new(format!(
            "opening a cpu-clock perf event on CPU {cpu}: {err} (run as root, or grant CAP_PERFMON; check /proc/sys/kernel/perf_event_paranoid)"
        ))),
        Some(libc::EINVAL) => Err(CaptureError::new(format!(
            "opening a cpu-clock perf event at {hz} Hz on CPU {cpu}: {err} (the rate may exceed /proc/sys/kernel/perf_event_max_sample_rate; lower -F)"
        ))),
        _ => Err(CaptureError::new(format!("opening a cpu-clock perf event on CPU {cpu}: {err}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::parse_cpu_list;

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpu_list("0"), Some(vec![0]));
        assert_eq!(parse_cpu_list("0-3,6"), Some(vec![0, 1, 2, 3, 6]));
        assert_eq!(parse_cpu_list("0-1,4-5"), Some(vec![0, 1, 4, 5]));
        assert_eq!(parse_cpu_list("3-1"), None);
        assert_eq!(parse_cpu_list("x"), None);
    }
}
