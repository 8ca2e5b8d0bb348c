//! `fgbpf top`: the live view. It records as `fgbpf wall` does (on-CPU
//! samples and off-CPU time, same scoping options), and after each drain
//! that ends a refresh interval it names what was recorded and shows it:
//! on a terminal, the screens of [`crate::format::top::tui`] with keys
//! ([`view`]); otherwise one table per interval on stdout. `w` writes what
//! has been seen as a `wall` capture directory, the same files, so that
//! `report`, `diff` and `flamegraph` read it.

mod view;

use std::io::{self, IsTerminal, Write};
use std::time::Duration;

use ratatui::crossterm::event::{self, Event, KeyEventKind};
use ratatui::DefaultTerminal;

use super::capture::{default_dir, start};
use super::record;
use super::recording::Recording;
use super::session::window::EndReason;
use super::summary;
use super::views::Views;
use super::CliError;
use crate::cli::TopArgs;
use crate::format::files::{self, OutDir};
use crate::format::top::{plain, tui};
use crate::probe::Probe;
use crate::analysis::top::Side;
use crate::symbolize::Symbolizer;
use view::{losses_line, Action, View};

/// Runs `fgbpf top` until `q`, Ctrl-C, `-d`, or the targets or command
/// end; returns the `-- COMMAND`'s exit status.
pub fn run(args: &TopArgs) -> Result<Option<i32>, CliError> {
    // Checked before anything starts.
    let rec = Recording::check(&args.capture, &args.maps, Some(&args.sampling), Some(&args.blocks), None)?;
    let mut live = start(&rec)?;
    // A refresh cannot wait for a server's files (up to DEBUGINFOD_TIMEOUT
    // each); a capture asks them at its end.
    if live.symbolizer.stop_fetching() {
        summary::say(format_args!(
            "DEBUGINFOD_URLS is set, but fgbpf top does not ask its servers (a refresh would wait for them): stripped binaries are named by address here; fgbpf oncpu, offcpu and wall fetch their symbols at the end of the capture"
        ));
    }
    let side = match args.off_cpu {
        true => Side::OffCpu,
        false => Side::OnCpu,
    };
    let mut top = Top {
        rec: &rec,
        args,
        view: View::new(side, args.interval),
        target: live.prepared.target.clone(),
        whole_system: live.prepared.targets.whole_system(),
        started_at: live.started_at.clone(),
        terminal: None,
        stdin_tty: io::stdin().is_terminal(),
    };
    // --otlp-interval: streamed as recorded.
    let mut stream = live.stream(&rec);
    if io::stdout().is_terminal() {
        let terminal = ratatui::try_init()
            .map_err(|e| CliError::failed(format!("cannot set up the terminal: {e}")))?;
        top.terminal = Some(terminal);
        // What is said meanwhile (a receiver that fails, a capture's
        // warnings) is shown in the view's status line and printed after.
        if io::stderr().is_terminal() {
            summary::defer();
        }
    }
    let end = {
        let (mut window, recorder, symbolizer) = live.window(&args.capture);
        let mut steps = window.begin();
        let end = loop {
            if let Some(end) = window.step(&mut steps, recorder, symbolizer) {
                break end;
            }
            if let Some(s) = stream.as_mut() {
                s.step(recorder, symbolizer);
            }
            if let Some(end) = top.turn(recorder, symbolizer) {
                break end;
            }
        };
        window.end(recorder, symbolizer);
        end
    };
    if top.terminal.take().is_some() {
        ratatui::restore();
        summary::print_deferred();
    }
    // The view is gone with the terminal's alternate screen: say why when
    // the user did not end it.
    if end == EndReason::TargetsGone {
        summary::say(format_args!("every target has exited: fgbpf top ended (w in the view writes a capture)"));
    }
    let (elapsed, status) = live.close(&args.capture, end);
    if let Some(mut s) = stream {
        s.last(&mut live.recorder, &mut live.symbolizer, elapsed);
        s.close();
    }
    Ok(status)
}

struct Top<'a> {
    rec: &'a Recording<'a>,
    args: &'a TopArgs,
    view: View,
    target: String,
    whole_system: bool,
    started_at: String,
    terminal: Option<DefaultTerminal>,
    /// Whether the keys come from stdin (crossterm reads /dev/tty else),
    /// whose hang-up ends the view.
    stdin_tty: bool,
}

impl Top<'_> {
    /// Reads the keys, and refreshes after the drain that ends an
    /// interval; `Some` when the user quits or stdout is gone.
    fn turn(&mut self, recorder: &mut Probe, symbolizer: &mut Symbolizer) -> Option<EndReason> {
        let mut redraw = false;
        if self.terminal.is_some() {
            // A bounded number per turn, so that a flood of input never
            // starves the drain; a terminal that fails (hung up, closed)
            // ends the capture, as its SIGHUP does.
            if self.stdin_tty && hung_up() {
                return Some(EndReason::Interrupted);
            }
            for _ in 0..64 {
                match event::poll(Duration::ZERO) {
                    Ok(true) => {}
                    Ok(false) => break,
                    Err(_) => return Some(EndReason::Interrupted),
                }
                let key = match event::read() {
                    Ok(Event::Key(key)) => key,
                    Ok(_) => {
                        redraw = true;
                        continue;
                    }
                    Err(_) => return Some(EndReason::Interrupted),
                };
                if key.kind != KeyEventKind::Press {
                    continue;
                }
                match self.view.key(key) {
                    Action::Quit => return Some(EndReason::Interrupted),
                    Action::Write => {
                        self.write(recorder, symbolizer);
                        redraw = true;
                    }
                    Action::Redraw => redraw = true,
                    Action::Nothing => {}
                }
            }
        }
        // A side switched to is read at once, at the time shown.
        let missing = self.view.side_missing();
        let due = recorder.drained_through().and_then(|t| {
            if missing && self.view.paused {
                return Some(self.view.through);
            }
            let next = self.view.views.is_none() || t >= self.view.through + self.view.interval;
            (missing || (!self.view.paused && next)).then_some(t)
        });
        if let Some(line) = summary::newest_deferred() {
            // Shown until a key clears it, as the view's own messages are.
            self.view.status = line;
            redraw = true;
        }
        if let Some(through) = due {
            let views = self.read(recorder, symbolizer, through, false);
            self.view.update(views, through, self.view.wants_both());
            redraw = true;
            if self.terminal.is_none() && self.print().is_err() {
                // stdout closed (`| head`): nothing more to say.
                return Some(EndReason::Interrupted);
            }
        }
        if redraw {
            self.draw();
        }
        None
    }

    /// Everything recorded so far, named: every view for a capture
    /// directory (`whole`), both sides for the thread table, else the side
    /// shown only (naming the other side too each second would cost as
    /// much again).
    fn read(&self, recorder: &mut Probe, symbolizer: &mut Symbolizer, through: Duration, whole: bool) -> Views {
        let recorded = recorder.snapshot();
        let mut wanted = self.rec.wanted();
        if !whole {
            wanted.wakers = false;
        }
        if !whole && !self.view.wants_both() {
            match self.view.side {
                Side::OnCpu => wanted.offcpu = false,
                Side::OffCpu => wanted.frequency = None,
            }
        }
        Views::build(wanted, recorded, symbolizer, &self.target, through)
    }

    fn losses(&self) -> String {
        self.view.views.as_ref().map_or_else(String::new, |v| losses_line(&v.losses(true, true)))
    }

    fn draw(&mut self) {
        let losses = self.losses();
        let screen = self.view.screen(&self.target, self.args.sampling.frequency, losses);
        if let Some(t) = self.terminal.as_mut() {
            // A terminal that cannot be drawn on is left as it is; the
            // capture goes on until q or Ctrl-C.
            let _ = t.draw(|f| tui::draw(f, &screen));
        }
    }

    fn print(&self) -> io::Result<()> {
        let screen = self.view.screen(&self.target, self.args.sampling.frequency, self.losses());
        let mut out = io::stdout().lock();
        plain::write(&screen, &mut out)?;
        out.flush()
    }

    /// Writes what has been seen since the start as a capture directory:
    /// `-o DIR` (then DIR-2, DIR-3 at later presses) or a fresh
    /// `fgbpf-top-TIME`.
    fn write(&mut self, recorder: &mut Probe, symbolizer: &mut Symbolizer) {
        let through = recorder.drained_through().unwrap_or_default();
        let views = self.read(recorder, symbolizer, through, true);
        let outputs = self.rec.outputs();
        let names: Vec<&str> = outputs.iter().map(String::as_str).collect();
        let base = self.args.capture.output.clone().unwrap_or_else(|| default_dir("top"));
        let written = files::prepare_dir(OutDir::Fresh(&base), &names)
            .map_err(CliError::failed)
            .and_then(|dir| {
                record::write(self.rec, views, &dir, &self.target, self.whole_system, (&self.started_at, None))
                    .map(|_| dir)
            });
        self.view.status = match written {
            Ok(dir) => format!("wrote {:.1} s to {}/", through.as_secs_f64(), dir.display()),
            Err(e) => format!("could not write: {e}"),
        };
        // What writing said (the timeline's cap) would hide where it went.
        if summary::newest_deferred().is_some() {
            self.view.status.push_str(" (notes printed when the view ends)");
        }
    }
}

/// Whether the terminal on stdin hung up or closed (an ssh session
/// dropped). crossterm's reader spins on the end of input it then reads,
/// so this is asked first.
fn hung_up() -> bool {
    let mut fd = libc::pollfd {
        fd: libc::STDIN_FILENO,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd, no wait.
    let n = unsafe { libc::poll(&mut fd, 1, 0) };
    n > 0 && fd.revents & (libc::POLLHUP | libc::POLLERR | libc::POLLNVAL) != 0
}
