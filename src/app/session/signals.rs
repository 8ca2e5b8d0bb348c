//! Ctrl-C and SIGTERM end the capture and still write every output; a
//! second Ctrl-C exits at once.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

#[derive(Clone)]
pub struct StopFlag(Arc<AtomicUsize>);

impl StopFlag {
    /// Installs the handler; call once, before the capture starts.
    pub fn install() -> Result<Self, String> {
        let hits = Arc::new(AtomicUsize::new(0));
        let h = hits.clone();
        ctrlc::set_handler(move || {
            if h.fetch_add(1, Ordering::SeqCst) >= 1 {
                eprintln!("\nfgbpf: interrupted again, exiting without writing outputs");
                std::process::exit(130);
            }
        })
        .map_err(|e| format!("cannot install the Ctrl-C handler: {e}"))?;
        Ok(StopFlag(hits))
    }

    pub fn stopped(&self) -> bool {
        self.0.load(Ordering::SeqCst) > 0
    }
}
